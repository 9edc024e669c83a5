/* spaces.h -- the spaces this cellapp knows and its cells in them
 * (spaces.c): the layouts polled from Redis and applied whole at the start
 * of a tick, the cell of each space this cellapp holds, and which layouts
 * the other cellapps say they applied.
 */
#ifndef TESSERA_SPACES_H
#define TESSERA_SPACES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell.h"
#include "cluster.pb-c.h"
#include "outbox.h"
#include "peer_set.h"
#include "process_self.h"
#include "redis_client.h"
#include "space_layout.h"

typedef struct spaces spaces;

/* What the spaces borrow (each outlives them): Redis for the layouts,
 * the peers (who is up) and the outbox (LayoutApplied to them), what every
 * cell shares, and who this process is. */
typedef struct spaces_context {
    redis_client *redis;
    const char *cluster_name;
    peer_set *peers;
    outbox *outbox;
    cell_shared *shared;
    const process_self *self;
} spaces_context;

spaces *spaces_create(const spaces_context *context);
/* Frees every space and cell (shutdown). NULL is a no-op. */
void spaces_free(spaces *s);

/* Starts a poll of the layout epochs (one at a time), every tick. */
void spaces_poll(spaces *s);
/* Applies layouts fetched since the last tick, whole: creates, resizes
 * and marks cells. Call at the start of a tick. */
void spaces_apply_pending(spaces *s);
/* The cell of space `name` here, or NULL. With `create`, makes one (with
 * no region) when the space is known but has no cell here. */
cell *spaces_cell(spaces *s, const char *name, bool create);
/* The layout of space `name`, or NULL if unknown. */
const space_layout *spaces_layout(const spaces *s, const char *name);
/* Iterates the cells: *cursor = 0 to start; NULL at the end. */
cell *spaces_next_cell(const spaces *s, size_t *cursor);
/* Iterates the applied layouts likewise. */
const space_layout *spaces_next_layout(const spaces *s, size_t *cursor);
/* Likewise, but a layout fetched and not yet applied (waiting for a cellapp
 * it names to be up, say) instead of the applied one: what the balancer
 * must build on, or its writes would be older than what Redis holds. */
const space_layout *spaces_next_newest_layout(const spaces *s, size_t *cursor);
/* The entity with this id in any cell here, or NULL. */
cell_entity *spaces_find_entity(const spaces *s, uint64_t entity_id);
/* The reals in every cell here (max_entities counts them). */
size_t spaces_real_count(const spaces *s);
/* Drops cells with no region and no entities left. */
void spaces_reap(spaces *s);
/* Tells cellapp `peer` (0: every one) which layouts this cellapp applied. */
void spaces_announce(spaces *s, uint64_t peer);
/* A peer says it applied a layout. */
void spaces_on_layout_applied(spaces *s, uint64_t peer, const Tessera__Cluster__LayoutApplied *applied);
/* The epoch of space `name` that `peer` has applied, 0 if none. */
uint64_t spaces_peer_epoch(const spaces *s, uint64_t peer, const char *name);
/* The latest epoch of space `name` any up peer has applied (0: none). */
uint64_t spaces_newest_peer_epoch(const spaces *s, const char *name);
/* Cellapp `peer` is gone: what it applied is forgotten. */
void spaces_peer_down(spaces *s, uint64_t peer);

#endif
