/* registry.c -- this process's entry in the Redis registry: takes a process
 * id, renews the entry (its lease) with a TTL unless the process was
 * declared dead, publishes its numbers, reads the other entries and the dead
 * set to tell the owner who holds a lease, whose lapsed and who is dead, and
 * writes the lease holder's death decisions. It does not connect to peers;
 * the owner does that with what it is told. */
#include "registry.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "redis_keys.h"

struct registry {
    uv_loop_t *loop;
    redis_client *redis;
    uv_timer_t heartbeat_timer;
    registry_options options;
    char cluster_name[64];
    char role[16];
    char host[64];
    char client_host[64];
    uint64_t process_id;
    uint64_t started_ms;
    int registering;         /* INCR in flight */
    int revoked;             /* a renewal was refused: this process was declared dead */
    uint64_t lease_until_us; /* monotonic: the lease holds until then at the latest (0: not held) */
    int discovery_in_flight; /* one peer scan at a time */
    int freeing;
    unsigned pending; /* Redis callbacks that still reference us */
    registry_stat stats[REGISTRY_MAX_STATS];
    size_t stat_count;
};

/* One scan of P processes: collects the HGETALL answers until all are in. */
typedef struct registry_scan {
    registry *reg;
    registry_peer *peers;
    size_t expected, answered, live;
    uint64_t *lapsed;
    size_t lapsed_count;
    uint64_t *dead;
    size_t dead_count;
    int failed; /* a reply was lost: the picture is incomplete, report nothing */
} registry_scan;

/* A renewal in flight: when it was sent bounds the lease it grants. */
typedef struct registry_renewal {
    registry *reg;
    uint64_t sent_us;
} registry_renewal;

/* How long a death stays in P dead: far longer than any process takes to
 * notice it (a stalled one learns at its next renewal), short enough that
 * the set stays small. */
#define REGISTRY_DEAD_KEEP_MS ((uint64_t)3600 * 1000)

/* The renewal: refused (0) for an id declared dead, else the hash, its TTL
 * and the set membership in one step (1). KEYS: the hash, P processes,
 * P dead. ARGV: the id, the TTL, then field/value pairs. */
static const char REGISTRY_RENEW_SCRIPT[] = "if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end\n"
                                            "redis.call('HSET', KEYS[1], unpack(ARGV, 3))\n"
                                            "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
                                            "redis.call('SADD', KEYS[2], ARGV[1])\n"
                                            "return 1\n";

/* A death decision: only while the caller's lease is the current one (-1
 * otherwise), once (0 when the id was dead already). KEYS: P balancer_lease,
 * P dead, P processes, the dead process's hash. ARGV: the caller's lease
 * value, the id, now in wall ms, the oldest death to keep (wall ms). */
static const char REGISTRY_DECLARE_SCRIPT[] = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end\n"
                                              "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])\n"
                                              "if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 0 end\n"
                                              "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])\n"
                                              "redis.call('SREM', KEYS[3], ARGV[2])\n"
                                              "redis.call('DEL', KEYS[4])\n"
                                              "return 1\n";

typedef struct registry_scan_item {
    registry_scan *scan;
    uint64_t process_id;
} registry_scan_item;

static void registry_heartbeat(registry *reg);

static void registry_release_closed(uv_handle_t *handle) {
    registry *reg = handle->data;
    reg->heartbeat_timer.data = NULL;
    if (reg->pending == 0) free(reg);
}

/* Called when a Redis callback finishes; frees a registry whose owner has
 * already let go once the last callback is done. */
static int registry_callback_done(registry *reg) {
    reg->pending--;
    if (!reg->freeing) return 0;
    if (reg->pending == 0 && reg->heartbeat_timer.data == NULL) free(reg);
    return 1;
}

static int registry_command(registry *reg, redis_reply_callback callback, void *user_data, int argc,
                            const char **argv) {
    if (redis_client_command_argv(reg->redis, callback, user_data, argc, argv, NULL) != 0) return -1;
    reg->pending++;
    return 0;
}

static void registry_on_heartbeat_timer(uv_timer_t *timer) { registry_heartbeat(timer->data); }

registry *registry_create(uv_loop_t *loop, redis_client *redis, const registry_options *options) {
    registry *reg = xcalloc(1, sizeof *reg);
    reg->loop = loop;
    reg->redis = redis;
    reg->options = *options;
    snprintf(reg->cluster_name, sizeof reg->cluster_name, "%s", options->cluster_name);
    snprintf(reg->role, sizeof reg->role, "%s", options->role);
    snprintf(reg->host, sizeof reg->host, "%s", options->host);
    snprintf(reg->client_host, sizeof reg->client_host, "%s", options->client_host ? options->client_host : "");
    reg->options.cluster_name = reg->cluster_name;
    reg->options.role = reg->role;
    reg->options.host = reg->host;
    reg->started_ms = clock_wall_us() / 1000;
    uv_timer_init(loop, &reg->heartbeat_timer);
    reg->heartbeat_timer.data = reg;
    return reg;
}

void registry_free(registry *reg) {
    if (!reg || reg->freeing) return;
    reg->freeing = 1;
    uv_timer_stop(&reg->heartbeat_timer);
    if (reg->process_id && !reg->revoked && redis_client_is_connected(reg->redis)) {
        /* Leave at once rather than after the TTL: peers notice a clean
         * shutdown on their next heartbeat. */
        char key[REDIS_KEY_MAX], set_key[REDIS_KEY_MAX], id[24];
        redis_key_process(key, reg->cluster_name, reg->process_id);
        redis_key_processes(set_key, reg->cluster_name);
        snprintf(id, sizeof id, "%" PRIu64, reg->process_id);
        redis_client_command(reg->redis, NULL, NULL, "DEL %s", key);
        redis_client_command(reg->redis, NULL, NULL, "SREM %s %s", set_key, id);
    }
    uv_close((uv_handle_t *)&reg->heartbeat_timer, registry_release_closed);
}

void registry_set_stat(registry *reg, const char *name, int64_t value) {
    for (size_t i = 0; i < reg->stat_count; i++) {
        if (strcmp(reg->stats[i].name, name) == 0) {
            reg->stats[i].value = value;
            return;
        }
    }
    if (reg->stat_count == REGISTRY_MAX_STATS) log_panic("registry: more than %d stats", REGISTRY_MAX_STATS);
    snprintf(reg->stats[reg->stat_count].name, sizeof reg->stats[0].name, "%s", name);
    reg->stats[reg->stat_count].value = value;
    reg->stat_count++;
}

uint64_t registry_process_id(const registry *reg) { return reg->process_id; }

bool registry_lease_valid(const registry *reg, uint64_t now_us) {
    return reg && !reg->revoked && reg->lease_until_us && now_us < reg->lease_until_us;
}

static void registry_on_registered(redis_client *redis, redisReply *reply, void *user_data) {
    registry *reg = user_data;
    (void)redis;
    if (registry_callback_done(reg)) return;
    reg->registering = 0;
    if (!reply || reply->type != REDIS_REPLY_INTEGER || reply->integer <= 0) {
        log_warn("registry: could not take a process id (%s); retrying", reply ? reply->str : "no connection");
        return;
    }
    reg->process_id = (uint64_t)reply->integer;
    log_set_identity(reg->role, reg->process_id);
    log_info("registry: registered as %s %" PRIu64 " at %s:%d", reg->role, reg->process_id, reg->host,
             reg->options.port);
    if (reg->options.on_registered) reg->options.on_registered(reg, reg->process_id, reg->options.user_data);
    registry_heartbeat(reg);
}

static void registry_scan_free(registry_scan *scan) {
    free(scan->peers);
    free(scan->lapsed);
    free(scan->dead);
    free(scan);
}

static void registry_finish_scan(registry_scan *scan) {
    registry *reg = scan->reg;
    reg->discovery_in_flight = 0;
    if (!reg->freeing && !scan->failed && reg->options.on_peers) {
        registry_view view = {scan->peers, scan->live, scan->lapsed, scan->lapsed_count, scan->dead, scan->dead_count};
        reg->options.on_peers(reg, &view, reg->options.user_data);
    }
    registry_scan_free(scan);
}

/* One answer of the scan is in: the scan ends with the last. */
static void registry_scan_answered(registry_scan *scan, int freeing) {
    scan->answered++;
    if (scan->answered < scan->expected) return;
    if (freeing)
        registry_scan_free(scan);
    else
        registry_finish_scan(scan);
}

/* A port as the registry stores it (decimal, 1..65535), or 0 when the field
 * holds anything else: a peer without a usable port is left out, as one
 * with no port field is. */
static int registry_port(const char *text) {
    char *end;
    errno = 0;
    long port = strtol(text, &end, 10);
    return end != text && *end == '\0' && errno == 0 && port > 0 && port <= 65535 ? (int)port : 0;
}

static void registry_parse_peer(registry_scan *scan, uint64_t process_id, redisReply *reply) {
    registry_peer peer;
    memset(&peer, 0, sizeof peer);
    peer.process_id = process_id;
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        redisReply *field = reply->element[i], *value = reply->element[i + 1];
        if (field->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING) continue;
        if (strcmp(field->str, "role") == 0)
            snprintf(peer.role, sizeof peer.role, "%s", value->str);
        else if (strcmp(field->str, "host") == 0)
            snprintf(peer.host, sizeof peer.host, "%s", value->str);
        else if (strcmp(field->str, "port") == 0)
            peer.port = registry_port(value->str);
        else if (strcmp(field->str, "load") == 0)
            peer.load = strtoll(value->str, NULL, 10);
        else if (strcmp(field->str, "client_host") == 0)
            snprintf(peer.client_host, sizeof peer.client_host, "%s", value->str);
        else if (strcmp(field->str, "client_port") == 0)
            peer.client_port = registry_port(value->str);
        else if (strcmp(field->str, "websocket_port") == 0)
            peer.websocket_port = registry_port(value->str);
        else if (strcmp(field->str, "draining") == 0)
            peer.draining = strtoll(value->str, NULL, 10) != 0;
    }
    if (peer.role[0] && peer.host[0] && peer.port > 0) scan->peers[scan->live++] = peer;
}

static void registry_on_peer_hash(redis_client *redis, redisReply *reply, void *user_data) {
    registry_scan_item *item = user_data;
    registry_scan *scan = item->scan;
    registry *reg = scan->reg;
    (void)redis;
    int freeing = registry_callback_done(reg);
    if (!reply || reply->type != REDIS_REPLY_ARRAY) scan->failed = 1;
    if (!freeing && reply && reply->type == REDIS_REPLY_ARRAY) {
        if (reply->elements == 0)
            scan->lapsed[scan->lapsed_count++] = item->process_id; /* its lease lapsed: not renewed for the TTL */
        else
            registry_parse_peer(scan, item->process_id, reply);
    }
    free(item);
    registry_scan_answered(scan, freeing);
}

static void registry_on_dead(redis_client *redis, redisReply *reply, void *user_data) {
    registry_scan *scan = user_data;
    registry *reg = scan->reg;
    (void)redis;
    int freeing = registry_callback_done(reg);
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        scan->failed = 1;
    } else if (!freeing) {
        scan->dead = xcalloc(reply->elements + 1, sizeof *scan->dead);
        for (size_t i = 0; i < reply->elements; i++) {
            const redisReply *member = reply->element[i];
            uint64_t id = member->type == REDIS_REPLY_STRING ? strtoull(member->str, NULL, 10) : 0;
            if (id) scan->dead[scan->dead_count++] = id;
        }
        /* This process itself declared dead: its next renewal is refused
         * too, but it need not wait for it. */
        for (size_t i = 0; i < scan->dead_count; i++)
            if (scan->dead[i] == reg->process_id && !reg->revoked) {
                reg->revoked = 1;
                reg->lease_until_us = 0;
                log_warn("registry: %s %" PRIu64 " has been declared dead by the cluster", reg->role, reg->process_id);
                if (reg->options.on_revoked) reg->options.on_revoked(reg, reg->options.user_data);
            }
    }
    registry_scan_answered(scan, freeing);
}

static void registry_on_members(redis_client *redis, redisReply *reply, void *user_data) {
    registry *reg = user_data;
    (void)redis;
    if (registry_callback_done(reg)) return;
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        reg->discovery_in_flight = 0;
        return;
    }
    registry_scan *scan = xcalloc(1, sizeof *scan);
    scan->reg = reg;
    scan->peers = xcalloc(reply->elements + 1, sizeof *scan->peers);
    scan->lapsed = xcalloc(reply->elements + 1, sizeof *scan->lapsed);
    char key[REDIS_KEY_MAX];
    for (size_t i = 0; i < reply->elements; i++) {
        redisReply *member = reply->element[i];
        if (member->type != REDIS_REPLY_STRING) continue;
        uint64_t id = strtoull(member->str, NULL, 10);
        if (id == 0 || id == reg->process_id) continue;
        redis_key_process(key, reg->cluster_name, id);
        registry_scan_item *item = xmalloc(sizeof *item);
        item->scan = scan;
        item->process_id = id;
        const char *argv[] = {"HGETALL", key};
        scan->expected++;
        if (registry_command(reg, registry_on_peer_hash, item, 2, argv) != 0) {
            scan->expected--;
            free(item);
        }
    }
    /* The deaths of the last hour. */
    char dead_key[REDIS_KEY_MAX], oldest[24];
    redis_key_dead(dead_key, reg->cluster_name);
    uint64_t now_ms = clock_wall_us() / 1000;
    snprintf(oldest, sizeof oldest, "%" PRIu64, now_ms > REGISTRY_DEAD_KEEP_MS ? now_ms - REGISTRY_DEAD_KEEP_MS : 0);
    const char *dead_argv[] = {"ZRANGEBYSCORE", dead_key, oldest, "+inf"};
    scan->expected++;
    if (registry_command(reg, registry_on_dead, scan, 4, dead_argv) != 0) {
        scan->expected--;
        scan->failed = 1;
    }
    if (scan->expected == 0) registry_finish_scan(scan);
}

static void registry_on_renewed(redis_client *redis, redisReply *reply, void *user_data) {
    registry_renewal *renewal = user_data;
    registry *reg = renewal->reg;
    uint64_t sent_us = renewal->sent_us;
    (void)redis;
    free(renewal);
    if (registry_callback_done(reg)) return;
    if (!reply || reply->type != REDIS_REPLY_INTEGER) {
        if (reply && reply->type == REDIS_REPLY_ERROR) log_warn("registry: heartbeat write failed: %s", reply->str);
        return;
    }
    if (reply->integer == 1) {
        uint64_t until = sent_us + (uint64_t)reg->options.ttl_ms * 1000;
        if (!reg->revoked && until > reg->lease_until_us) reg->lease_until_us = until;
        return;
    }
    if (reg->revoked) return;
    reg->revoked = 1;
    reg->lease_until_us = 0;
    log_warn("registry: %s %" PRIu64 " has been declared dead by the cluster: its lease is refused", reg->role,
             reg->process_id);
    if (reg->options.on_revoked) reg->options.on_revoked(reg, reg->options.user_data);
}

/* Writes this process's hash, renews its TTL, and starts a peer scan. */
static void registry_heartbeat(registry *reg) {
    if (reg->freeing) return;
    uv_timer_start(&reg->heartbeat_timer, registry_on_heartbeat_timer, reg->options.heartbeat_ms, 0);
    if (!redis_client_is_connected(reg->redis)) return;
    if (reg->process_id == 0) {
        if (reg->registering) return;
        char key[REDIS_KEY_MAX];
        redis_key_next_process_id(key, reg->cluster_name);
        const char *argv[] = {"INCR", key};
        if (registry_command(reg, registry_on_registered, reg, 2, argv) == 0) reg->registering = 1;
        return;
    }

    if (reg->revoked) return;
    char key[REDIS_KEY_MAX], set_key[REDIS_KEY_MAX], dead_key[REDIS_KEY_MAX], id[24], port[16], pid[16], started[24],
        ttl[16];
    char values[REGISTRY_MAX_STATS][24];
    redis_key_process(key, reg->cluster_name, reg->process_id);
    redis_key_processes(set_key, reg->cluster_name);
    redis_key_dead(dead_key, reg->cluster_name);
    snprintf(id, sizeof id, "%" PRIu64, reg->process_id);
    snprintf(port, sizeof port, "%d", reg->options.port);
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    snprintf(started, sizeof started, "%" PRIu64, reg->started_ms);
    snprintf(ttl, sizeof ttl, "%u", reg->options.ttl_ms);

    const char *argv[8 + 2 * (6 + REGISTRY_MAX_STATS)];
    int argc = 0;
    argv[argc++] = "EVAL";
    argv[argc++] = REGISTRY_RENEW_SCRIPT;
    argv[argc++] = "3";
    argv[argc++] = key;
    argv[argc++] = set_key;
    argv[argc++] = dead_key;
    argv[argc++] = id;
    argv[argc++] = ttl;
    argv[argc++] = "role";
    argv[argc++] = reg->role;
    argv[argc++] = "host";
    argv[argc++] = reg->host;
    argv[argc++] = "port";
    argv[argc++] = port;
    argv[argc++] = "pid";
    argv[argc++] = pid;
    argv[argc++] = "started_ms";
    argv[argc++] = started;
    if (reg->options.client_host) {
        argv[argc++] = "client_host";
        argv[argc++] = reg->client_host;
    }
    for (size_t i = 0; i < reg->stat_count; i++) {
        snprintf(values[i], sizeof values[i], "%" PRId64, reg->stats[i].value);
        argv[argc++] = reg->stats[i].name;
        argv[argc++] = values[i];
    }
    /* One script, so the hash never exists without its TTL and a dead id
     * never renews. */
    registry_renewal *renewal = xmalloc(sizeof *renewal);
    *renewal = (registry_renewal){reg, clock_monotonic_us()};
    if (registry_command(reg, registry_on_renewed, renewal, argc, argv) != 0) free(renewal);

    if (!reg->discovery_in_flight) {
        const char *members[] = {"SMEMBERS", set_key};
        if (registry_command(reg, registry_on_members, reg, 2, members) == 0) reg->discovery_in_flight = 1;
    }
}

void registry_on_redis_state(registry *reg, int connected) {
    if (connected) {
        reg->discovery_in_flight = 0;
        reg->registering = 0;
        registry_heartbeat(reg);
    }
}

/* ---- death decisions ------------------------------------------------------------ */

typedef struct registry_declaration {
    registry *reg;
    uint64_t process_id;
    registry_declared_callback done;
    void *context;
} registry_declaration;

static void registry_on_declared(redis_client *redis, redisReply *reply, void *user_data) {
    registry_declaration *declaration = user_data;
    registry *reg = declaration->reg;
    (void)redis;
    int freeing = registry_callback_done(reg);
    bool declared = reply && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    if (reply && reply->type == REDIS_REPLY_INTEGER && reply->integer < 0)
        log_warn("registry: process %" PRIu64 " not declared dead: the balancer lease moved on",
                 declaration->process_id);
    /* Called even while the registry is being freed (not declared then),
     * so that the caller's context is released. */
    if (declaration->done) declaration->done(declaration->process_id, declared && !freeing, declaration->context);
    free(declaration);
}

int registry_declare_dead(registry *reg, uint64_t process_id, const char *lease_value, registry_declared_callback done,
                          void *context) {
    if (!redis_client_is_connected(reg->redis)) return -1;
    char lease_key[REDIS_KEY_MAX], dead_key[REDIS_KEY_MAX], set_key[REDIS_KEY_MAX], key[REDIS_KEY_MAX];
    char id[24], now[24], oldest[24];
    redis_key_balancer_lease(lease_key, reg->cluster_name);
    redis_key_dead(dead_key, reg->cluster_name);
    redis_key_processes(set_key, reg->cluster_name);
    redis_key_process(key, reg->cluster_name, process_id);
    uint64_t now_ms = clock_wall_us() / 1000;
    snprintf(id, sizeof id, "%" PRIu64, process_id);
    snprintf(now, sizeof now, "%" PRIu64, now_ms);
    snprintf(oldest, sizeof oldest, "%" PRIu64, now_ms > REGISTRY_DEAD_KEEP_MS ? now_ms - REGISTRY_DEAD_KEEP_MS : 0);
    const char *argv[] = {"EVAL", REGISTRY_DECLARE_SCRIPT, "4", lease_key, dead_key, set_key, key, lease_value, id, now,
                          oldest};
    registry_declaration *declaration = xmalloc(sizeof *declaration);
    *declaration = (registry_declaration){reg, process_id, done, context};
    if (registry_command(reg, registry_on_declared, declaration, (int)(sizeof argv / sizeof argv[0]), argv) != 0) {
        free(declaration);
        return -1;
    }
    return 0;
}
