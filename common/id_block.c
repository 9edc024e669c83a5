/* id_block.c -- hands out entity ids from blocks reserved in Redis, and
 * keeps the next block coming before the current one runs out. */
#include "id_block.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "redis_keys.h"

typedef struct id_fetch id_fetch;

typedef struct id_range {
    uint64_t next, end; /* [next, end) */
} id_range;

struct id_block {
    redis_client *redis;
    char key[REDIS_KEY_MAX];
    uint64_t block_size;
    id_range current, spare;
    int fetching;
    id_fetch *in_flight; /* the pending INCRBY's record; detached by id_block_free */
};

struct id_fetch {
    id_block *ids; /* NULL once the owner freed the block */
};

id_block *id_block_create(redis_client *redis, const char *cluster_name, uint64_t block_size) {
    id_block *ids = xcalloc(1, sizeof *ids);
    ids->redis = redis;
    ids->block_size = block_size ? block_size : 1;
    redis_key_next_entity_id(ids->key, cluster_name);
    return ids;
}

void id_block_free(id_block *ids) {
    if (!ids) return;
    /* A late reply finds its record detached and is ignored. */
    if (ids->in_flight) ids->in_flight->ids = NULL;
    free(ids);
}

uint64_t id_block_available(const id_block *ids) {
    return (ids->current.end - ids->current.next) + (ids->spare.end - ids->spare.next);
}

static void id_block_on_reply(redis_client *redis, redisReply *reply, void *user_data) {
    id_fetch *fetch = user_data;
    id_block *ids = fetch->ids;
    (void)redis;
    free(fetch);
    if (!ids) return;
    ids->in_flight = NULL;
    ids->fetching = 0;
    if (!reply || reply->type != REDIS_REPLY_INTEGER || reply->integer < (long long)ids->block_size) {
        log_warn("entity ids: INCRBY %s failed (%s)", ids->key, reply && reply->str ? reply->str : "no reply");
        return;
    }
    id_range range = {(uint64_t)reply->integer - ids->block_size + 1, (uint64_t)reply->integer + 1};
    if (ids->current.next == ids->current.end)
        ids->current = range;
    else
        ids->spare = range;
    log_debug("entity ids: reserved [%" PRIu64 ", %" PRIu64 ")", range.next, range.end);
}

void id_block_refill(id_block *ids) {
    if (ids->fetching || ids->spare.next != ids->spare.end) return;
    if (ids->current.end - ids->current.next >= ids->block_size / 2 && ids->current.next != ids->current.end) return;
    id_fetch *fetch = xmalloc(sizeof *fetch);
    fetch->ids = ids;
    char amount[24];
    snprintf(amount, sizeof amount, "%" PRIu64, ids->block_size);
    if (redis_client_command(ids->redis, id_block_on_reply, fetch, "INCRBY %s %s", ids->key, amount) != 0) {
        free(fetch);
        return;
    }
    ids->fetching = 1;
    ids->in_flight = fetch;
}

int id_block_take(id_block *ids, uint64_t *out) {
    if (ids->current.next == ids->current.end) {
        ids->current = ids->spare;
        ids->spare.next = ids->spare.end = 0;
    }
    if (ids->current.next == ids->current.end) {
        id_block_refill(ids);
        return -1;
    }
    *out = ids->current.next++;
    id_block_refill(ids);
    return 0;
}
