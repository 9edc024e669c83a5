/* id_block.h -- cluster-unique 64-bit entity ids, taken from Redis in blocks.
 *
 * INCRBY P next_entity_id <block> reserves ids (v - block, v] for this
 * process; ids are never reused, even across restarts, because the counter
 * only grows. The next block is fetched when half of the current one is
 * spent, so a login never waits on Redis for an id in the common case.
 */
#ifndef TESSERA_ID_BLOCK_H
#define TESSERA_ID_BLOCK_H

#include <stdint.h>

#include "redis_client.h"

typedef struct id_block id_block;

id_block *id_block_create(redis_client *redis, const char *cluster_name, uint64_t block_size);
/* Safe with a fetch in flight: the reply is dropped. */
void id_block_free(id_block *ids);

/* Asks Redis for a block if fewer than half are left and none is on its way.
 * Call after connecting and from time to time. */
void id_block_refill(id_block *ids);

/* Takes the next id into *out. Returns 0, or -1 when the block is empty
 * (Redis has not answered yet): try again later. */
int id_block_take(id_block *ids, uint64_t *out);

/* Ids available without asking Redis. */
uint64_t id_block_available(const id_block *ids);

#endif
