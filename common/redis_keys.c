/* redis_keys.c -- formats the cluster's Redis key names (the list and what
 * each key holds are in redis_keys.h). */
#include "redis_keys.h"

#include <inttypes.h>
#include <stdio.h>

static char *redis_key(char *out, const char *cluster, const char *suffix) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:%s", cluster, suffix);
    return out;
}

char *redis_key_next_process_id(char *out, const char *cluster) { return redis_key(out, cluster, "next_process_id"); }
char *redis_key_processes(char *out, const char *cluster) { return redis_key(out, cluster, "processes"); }
char *redis_key_dead(char *out, const char *cluster) { return redis_key(out, cluster, "dead"); }
char *redis_key_next_entity_id(char *out, const char *cluster) { return redis_key(out, cluster, "next_entity_id"); }
char *redis_key_spaces(char *out, const char *cluster) { return redis_key(out, cluster, "spaces"); }
char *redis_key_cell_directory(char *out, const char *cluster) { return redis_key(out, cluster, "cell_directory"); }
char *redis_key_balancer_lease(char *out, const char *cluster) { return redis_key(out, cluster, "balancer_lease"); }
char *redis_key_balancer_fence(char *out, const char *cluster) { return redis_key(out, cluster, "balancer_fence"); }
char *redis_key_cell_loads(char *out, const char *cluster) { return redis_key(out, cluster, "cell_loads"); }

char *redis_key_cell_backups(char *out, const char *cluster, uint64_t cellapp_id) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:cell_backups:%" PRIu64, cluster, cellapp_id);
    return out;
}

char *redis_key_process(char *out, const char *cluster, uint64_t process_id) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:process:%" PRIu64, cluster, process_id);
    return out;
}

char *redis_key_account(char *out, const char *cluster, const char *account) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:account:%s", cluster, account);
    return out;
}

char *redis_key_stored_entity(char *out, const char *cluster, const char *class_name, const char *name) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:entity:%s:%s", cluster, class_name, name);
    return out;
}

char *redis_key_base_directory(char *out, const char *cluster) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:base_directory", cluster);
    return out;
}

char *redis_key_globals(char *out, const char *cluster) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:globals", cluster);
    return out;
}

char *redis_key_session(char *out, const char *cluster, const char *account) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:session:%s", cluster, account);
    return out;
}

char *redis_key_login_token(char *out, const char *cluster, const char *token) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:login_token:%s", cluster, token);
    return out;
}

char *redis_key_space(char *out, const char *cluster, const char *space_name) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:space:%s", cluster, space_name);
    return out;
}

char *redis_key_space_map(char *out, const char *cluster, const char *space_name) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:space_map:%s", cluster, space_name);
    return out;
}

char *redis_key_entity_name(char *out, const char *cluster, const char *name) {
    snprintf(out, REDIS_KEY_MAX, "tessera:%s:entity_name:%s", cluster, name);
    return out;
}
