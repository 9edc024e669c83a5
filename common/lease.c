/* lease.c -- taking, renewing and giving up the cluster's balancer lease in
 * Redis, with a fence that grows with every new holder (lease.h). */
#include "lease.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "redis_keys.h"

/* KEYS[1] the lease, KEYS[2] the fence counter; ARGV[1] the holder id,
 * ARGV[2] the TTL in ms. Returns {fence, holder}: our fence when we hold it
 * (taken now or renewed), else 0 and the holder. */
const char LEASE_ACQUIRE_SCRIPT[] = "local current = redis.call('GET', KEYS[1])\n"
                                    "if current then\n"
                                    "  local holder, fence = string.match(current, '^(%d+):(%d+)$')\n"
                                    "  if holder == ARGV[1] then\n"
                                    "    redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
                                    "    return {tonumber(fence), tonumber(holder)}\n"
                                    "  end\n"
                                    "  if holder then return {0, tonumber(holder)} end\n"
                                    "end\n"
                                    /* Free, or holding something that is not "<holder>:<fence>": that is
     * left alone (nobody leads until an operator deletes it). */
                                    "if current then return {0, 0} end\n"
                                    "local fence = redis.call('INCR', KEYS[2])\n"
                                    "redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'NX', 'PX', ARGV[2])\n"
                                    "return {fence, tonumber(ARGV[1])}\n";

/* KEYS[1] the lease; ARGV[1] "<holder>:<fence>". Deletes it if it is ours. */
const char LEASE_RELEASE_SCRIPT[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end\n"
    "return 0\n";

/* KEYS[1] the lease, KEYS[2] the holder's registry hash; ARGV[1] the
 * holder id, ARGV[2] the registry TTL in ms, ARGV[3] how long the hash must
 * have gone without a renewal. Returns 1 deleted (or free already), 0 held
 * by another, -1 the holder renewed its hash since (or it has no TTL). */
const char LEASE_TAKE_BACK_SCRIPT[] =
    "local current = redis.call('GET', KEYS[1])\n"
    "if not current then return 1 end\n"
    "if string.match(current, '^(%d+):%d+$') ~= ARGV[1] then return 0 end\n"
    "local pttl = redis.call('PTTL', KEYS[2])\n"
    "if pttl == -1 then return -1 end\n"
    "if pttl >= 0 and tonumber(ARGV[2]) - pttl < tonumber(ARGV[3]) then return -1 end\n"
    "redis.call('DEL', KEYS[1])\n"
    "return 1\n";

/* A request in flight holds a ticket; lease_free clears the ticket's
 * lease, so a late reply finds nobody and just frees it. */
typedef struct lease_ticket {
    lease *owner;
    uint64_t sent_us;
} lease_ticket;

struct lease {
    redis_client *redis;
    char key[REDIS_KEY_MAX], fence_key[REDIS_KEY_MAX];
    uint64_t holder_id;
    uint64_t ttl_ms;
    lease_change_callback on_change;
    void *user_data;
    lease_ticket *in_flight;
    uint64_t fence;         /* ours while held, else 0 */
    uint64_t held_until_us; /* the last renewal's request time + ttl */
    uint64_t holder_seen;
    bool released;
    struct lease_take_back_request *take_back; /* in flight, or NULL */
};

/* A take-back in flight; lease_free clears its lease as for a ticket. */
typedef struct lease_take_back_request {
    lease *owner;
    uint64_t holder_id;
    lease_take_back_callback done;
    void *context;
} lease_take_back_request;

lease *lease_create(redis_client *redis, const char *cluster, uint64_t holder_id, uint64_t ttl_ms,
                    lease_change_callback on_change, void *user_data) {
    lease *l = xcalloc(1, sizeof *l);
    l->redis = redis;
    redis_key_balancer_lease(l->key, cluster);
    redis_key_balancer_fence(l->fence_key, cluster);
    l->holder_id = holder_id;
    l->ttl_ms = ttl_ms;
    l->on_change = on_change;
    l->user_data = user_data;
    return l;
}

void lease_free(lease *l) {
    if (!l) return;
    if (l->in_flight) l->in_flight->owner = NULL;
    if (l->take_back) l->take_back->owner = NULL;
    free(l);
}

static void lease_set_fence(lease *l, uint64_t fence) {
    if (fence == l->fence) return;
    uint64_t before = l->fence;
    l->fence = fence;
    if (fence)
        log_info("balancer lease taken (fence %" PRIu64 ")", fence);
    else
        log_info("balancer lease %" PRIu64 " lost", before);
    if (l->on_change) l->on_change(l, fence, l->user_data);
}

/* Deletes the key if it still holds our holder id and `fence`. */
static void lease_send_release(lease *l, uint64_t fence) {
    if (!redis_client_is_connected(l->redis)) return;
    char value[48];
    snprintf(value, sizeof value, "%" PRIu64 ":%" PRIu64, l->holder_id, fence);
    const char *argv[] = {"EVAL", LEASE_RELEASE_SCRIPT, "1", l->key, value};
    size_t lengths[5];
    for (int i = 0; i < 5; i++) lengths[i] = strlen(argv[i]);
    redis_client_command_argv(l->redis, NULL, NULL, 5, argv, lengths);
}

static void lease_on_reply(redis_client *redis, redisReply *reply, void *user_data) {
    lease_ticket *ticket = user_data;
    lease *l = ticket->owner;
    (void)redis;
    if (!l) {
        free(ticket);
        return;
    }
    l->in_flight = NULL;
    uint64_t sent_us = ticket->sent_us;
    free(ticket);
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER || reply->element[1]->type != REDIS_REPLY_INTEGER) {
        if (reply && reply->type == REDIS_REPLY_ERROR) log_warn("balancer lease: Redis: %s", reply->str);
        return; /* held_until_us runs out by itself */
    }
    l->holder_seen = (uint64_t)reply->element[1]->integer;
    uint64_t fence = (uint64_t)reply->element[0]->integer;
    if (l->released) {
        /* Given up while this request was out, and it took the lease
         * after all: let it go at once rather than when it expires. */
        if (fence) lease_send_release(l, fence);
        return;
    }
    if (fence) l->held_until_us = sent_us + l->ttl_ms * 1000;
    lease_set_fence(l, fence);
}

void lease_tick(lease *l, uint64_t now_us) {
    if (l->fence && now_us >= l->held_until_us) lease_set_fence(l, 0);
    if (l->released || l->in_flight || !l->holder_id || !redis_client_is_connected(l->redis)) return;
    char holder[24], ttl[24];
    snprintf(holder, sizeof holder, "%" PRIu64, l->holder_id);
    snprintf(ttl, sizeof ttl, "%" PRIu64, l->ttl_ms);
    const char *argv[] = {"EVAL", LEASE_ACQUIRE_SCRIPT, "2", l->key, l->fence_key, holder, ttl};
    size_t lengths[7];
    for (int i = 0; i < 7; i++) lengths[i] = strlen(argv[i]);
    lease_ticket *ticket = xmalloc(sizeof *ticket);
    ticket->owner = l;
    ticket->sent_us = now_us;
    if (redis_client_command_argv(l->redis, lease_on_reply, ticket, 7, argv, lengths) != 0) {
        free(ticket);
        return;
    }
    l->in_flight = ticket;
}

static void lease_on_take_back(redis_client *redis, redisReply *reply, void *user_data) {
    lease_take_back_request *request = user_data;
    lease *l = request->owner;
    (void)redis;
    int result = reply && reply->type == REDIS_REPLY_INTEGER ? (reply->integer > 0 ? 1 : 0) : -1;
    if (reply && reply->type == REDIS_REPLY_ERROR) log_warn("balancer lease take-back: Redis: %s", reply->str);
    if (result == 1)
        log_warn("balancer lease taken back from process %" PRIu64
                 ": its connections reset and it renewed nothing since",
                 request->holder_id);
    if (l) {
        l->take_back = NULL;
        /* Ask now rather than at the next period: the cells of the dead
         * holder are waiting for a decider. */
        if (result == 1) lease_tick(l, clock_monotonic_us());
    }
    if (l && request->done) request->done(result, request->context);
    free(request);
}

int lease_take_back(lease *l, uint64_t holder_id, const char *holder_registry_key, uint64_t registry_ttl_ms,
                    uint64_t quiet_ms, lease_take_back_callback done, void *context) {
    if (l->take_back || l->released || !holder_id || !redis_client_is_connected(l->redis)) return -1;
    char holder[24], ttl[24], quiet[24];
    snprintf(holder, sizeof holder, "%" PRIu64, holder_id);
    snprintf(ttl, sizeof ttl, "%" PRIu64, registry_ttl_ms);
    snprintf(quiet, sizeof quiet, "%" PRIu64, quiet_ms);
    const char *argv[] = {"EVAL", LEASE_TAKE_BACK_SCRIPT, "2", l->key, holder_registry_key, holder, ttl, quiet};
    size_t lengths[8];
    for (int i = 0; i < 8; i++) lengths[i] = strlen(argv[i]);
    lease_take_back_request *request = xmalloc(sizeof *request);
    *request = (lease_take_back_request){l, holder_id, done, context};
    if (redis_client_command_argv(l->redis, lease_on_take_back, request, 8, argv, lengths) != 0) {
        free(request);
        return -1;
    }
    l->take_back = request;
    return 0;
}

uint64_t lease_fence(const lease *l, uint64_t now_us) { return l->fence && now_us < l->held_until_us ? l->fence : 0; }

uint64_t lease_holder(const lease *l) { return l->holder_seen; }

void lease_release(lease *l) {
    if (l->released) return;
    l->released = true;
    if (l->fence) lease_send_release(l, l->fence);
    lease_set_fence(l, 0);
}
