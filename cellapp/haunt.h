/* haunt.h -- where each real's ghosts live, and the ghost protocol's
 * sending side and its effects (haunt.c): the haunts of every real kept up
 * to date each tick, its ghost creates, updates and deletes queued in the
 * outbox, and the ghost messages that other cellapps' reals send, applied
 * to the ghosts here once the incarnation books let them through
 * (ghost_inbox.c).
 */
#ifndef TESSERA_HAUNT_H
#define TESSERA_HAUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell.h"
#include "cell_load.h"
#include "cellapp_counters.h"
#include "cellapp_settings.h"
#include "cluster.pb-c.h"
#include "ghost_order.h"
#include "outbox.h"
#include "peer_set.h"
#include "process_self.h"
#include "spaces.h"

typedef struct haunts haunts;

/* What the haunts borrow (each outlives them). */
typedef struct haunts_context {
    const haunt_config *config;
    cell_shared *shared; /* the definitions and the packer's schema */
    spaces *spaces;
    outbox *outbox;
    peer_set *peers;
    ghost_order *ghost_order; /* the incarnation books: a deleted ghost is forgotten there */
    cell_load *load;          /* ghost churn is transient load */
    cellapp_counters *counters;
    const process_self *self;
} haunts_context;

haunts *haunt_create(const haunts_context *context);
/* Frees the per-peer buffers of moves. NULL is a no-op. */
void haunt_free(haunts *h);

/* Once per tick, after the witnesses: brings every real's haunts up to
 * date (creates, keeps, deletes ghosts) and queues its ghost update. */
void haunt_tick(haunts *h, cell *c);
/* Queues a ghost message for cellapp `peer`, in order after everything
 * queued for it before. */
void haunt_send(haunts *h, uint64_t peer, const Tessera__Cluster__GhostMessage *message);
/* Queues the delete of `entity`'s ghost on `peer` (destroyed: the entity
 * is gone, not only out of reach). */
void haunt_send_delete(haunts *h, const cell_entity *entity, uint64_t peer, bool destroyed);
/* Queues a ghost create of `entity` (a real) for `peer` and adds it to the
 * haunts. */
void haunt_add(haunts *h, cell_entity *entity, uint64_t peer);
/* Queues the delete of every ghost of a real that is being destroyed. */
void haunt_destroyed(haunts *h, cell_entity *entity);
/* Applies one ghost message from cellapp `peer` that the incarnation books
 * let through: creates, updates, deletes a ghost or names its next real. */
void haunt_apply(haunts *h, uint64_t peer, const Tessera__Cluster__GhostMessage *message);
/* Cellapp `peer` is gone: its ghosts here that the books did not release
 * are dropped (with `drop_ghosts`; else they wait for their reals to be
 * restored, restore.h), and it leaves every haunt list. */
void haunt_peer_down(haunts *h, uint64_t peer, bool drop_ghosts);
/* Counts reals with no ghost anywhere (the interior), reals and ghosts. */
void haunt_count(const haunts *h, size_t *interior_reals, size_t *reals, size_t *ghosts);

#endif
