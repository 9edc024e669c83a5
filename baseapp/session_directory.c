/* session_directory.c -- claims and releases of an account's session entry
 * (session_directory.h): the compare-and-set script that keeps one life
 * per account, and the release that only deletes its own entry. */
#include "session_directory.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "redis_keys.h"

/* The claim. KEYS: the session entry, P processes, P dead. ARGV: the
 * claimant's id, now in wall ms, how long a dead holder's accounts wait
 * for their restore (0: not at all), the holder this claim replaces in
 * any case ("0": none). Returns {1, the new value} when
 * claimed, or {0, the holder's value, 1 if it is dead and restoring}. */
static const char SESSION_DIRECTORY_CLAIM_SCRIPT[] =
    "local value = redis.call('GET', KEYS[1])\n"
    "local claims = 0\n"
    "if value then\n"
    "  local holder, count = string.match(value, '^(%d+):?(%d*)$')\n"
    "  claims = tonumber(count) or 0\n"
    "  if holder and holder ~= ARGV[1] and holder ~= ARGV[4] then\n"
    "    local died = redis.call('ZSCORE', KEYS[3], holder)\n"
    "    if died then\n"
    "      if tonumber(died) > tonumber(ARGV[2]) - tonumber(ARGV[3]) then return {0, value, 1} end\n"
    "    elseif redis.call('SISMEMBER', KEYS[2], holder) == 1 then\n"
    "      return {0, value, 0}\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local claimed = ARGV[1] .. ':' .. (claims + 1)\n"
    "redis.call('SET', KEYS[1], claimed)\n"
    "return {1, claimed}\n";

typedef struct session_claim {
    char account[128];
    session_claim_done done;
    void *user_data;
} session_claim;

uint64_t session_directory_holder(const char *value) { return value ? strtoull(value, NULL, 10) : 0; }

static void session_directory_on_claim(redis_client *redis, redisReply *reply, void *user_data) {
    session_claim *claim = user_data;
    (void)redis;
    session_claim_result result = {0};
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER || reply->element[1]->type != REDIS_REPLY_STRING) {
        result.failed = true;
    } else {
        const char *value = reply->element[1]->str;
        result.claimed = reply->element[0]->integer == 1;
        result.holder = session_directory_holder(value);
        const char *colon = strchr(value, ':');
        result.incarnation = colon ? strtoull(colon + 1, NULL, 10) : 0;
        result.holder_restoring = !result.claimed && reply->elements >= 3 &&
                                  reply->element[2]->type == REDIS_REPLY_INTEGER && reply->element[2]->integer == 1;
    }
    if (claim->done) {
        claim->done(&result, claim->user_data);
    } else if (result.failed) {
        log_warn("account '%s': its session entry could not be claimed (Redis did not answer)", claim->account);
    } else if (!result.claimed) {
        log_warn("account '%s': its session entry names baseapp %" PRIu64 "%s; not claimed", claim->account,
                 result.holder, result.holder_restoring ? " (dead, its sessions being restored)" : "");
    }
    free(claim);
}

int session_directory_claim(const session_directory *directory, const char *account, session_claim_kind kind,
                            uint64_t claimant, uint64_t from, session_claim_done done, void *user_data) {
    char key[REDIS_KEY_MAX], processes[REDIS_KEY_MAX], dead[REDIS_KEY_MAX], self[24], now[24], window[24], replaced[24];
    redis_key_session(key, directory->cluster_name, account);
    redis_key_processes(processes, directory->cluster_name);
    redis_key_dead(dead, directory->cluster_name);
    snprintf(self, sizeof self, "%" PRIu64, claimant ? claimant : directory->self->process_id);
    snprintf(now, sizeof now, "%" PRIu64, clock_wall_us() / 1000);
    snprintf(window, sizeof window, "%d", kind == SESSION_CLAIM_RESTORE ? 0 : SESSION_DIRECTORY_RESTORE_WINDOW_MS);
    snprintf(replaced, sizeof replaced, "%" PRIu64, from);
    session_claim *claim = xcalloc(1, sizeof *claim);
    snprintf(claim->account, sizeof claim->account, "%s", account);
    claim->done = done;
    claim->user_data = user_data;
    const char *argv[] = {"EVAL",  SESSION_DIRECTORY_CLAIM_SCRIPT, "3", key, processes, dead, self, now, window,
                          replaced};
    if (redis_client_command_argv(directory->redis, session_directory_on_claim, claim, 10, argv, NULL) != 0) {
        free(claim);
        return -1;
    }
    return 0;
}

/* Deletes the entry only while it still names this baseapp: another may
 * hold the account's client by now. */
static const char SESSION_DIRECTORY_RELEASE_SCRIPT[] =
    "local value = redis.call('GET', KEYS[1])\n"
    "if value and string.match(value, '^(%d+)') == ARGV[1] then return redis.call('DEL', KEYS[1]) end\n"
    "return 0\n";

void session_directory_release(const session_directory *directory, const char *account) {
    char key[REDIS_KEY_MAX], holder[24];
    redis_key_session(key, directory->cluster_name, account);
    snprintf(holder, sizeof holder, "%" PRIu64, directory->self->process_id);
    redis_client_command(directory->redis, NULL, NULL, "EVAL %s 1 %s %s", SESSION_DIRECTORY_RELEASE_SCRIPT, key,
                         holder);
}
