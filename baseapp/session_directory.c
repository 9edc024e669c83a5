/* session_directory.c -- claims and releases of an account's session entry
 * (session_directory.h). Fire and forget: a claim lost with Redis is
 * repaired by the next login's claim, and a stale entry only makes a login
 * try this baseapp first. */
#include "session_directory.h"

#include <inttypes.h>
#include <stdio.h>

#include "redis_keys.h"

void session_directory_claim(const session_directory *directory, const char *account) {
    char key[REDIS_KEY_MAX], holder[24];
    redis_key_session(key, directory->cluster_name, account);
    snprintf(holder, sizeof holder, "%" PRIu64, directory->self->process_id);
    redis_client_command(directory->redis, NULL, NULL, "SET %s %s", key, holder);
}

/* Deletes the entry only while it still names this baseapp: another may
 * hold the account's client by now. */
static const char SESSION_DIRECTORY_RELEASE_SCRIPT[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

void session_directory_release(const session_directory *directory, const char *account) {
    char key[REDIS_KEY_MAX], holder[24];
    redis_key_session(key, directory->cluster_name, account);
    snprintf(holder, sizeof holder, "%" PRIu64, directory->self->process_id);
    redis_client_command(directory->redis, NULL, NULL, "EVAL %s 1 %s %s", SESSION_DIRECTORY_RELEASE_SCRIPT, key,
                         holder);
}
