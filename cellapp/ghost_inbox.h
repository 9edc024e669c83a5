/* ghost_inbox.h -- what other cellapps send about their reals, taken in the
 * order of each real's incarnations (ghost_inbox.c): ghost messages, ghost
 * moves and offloads are offered to the incarnation books (ghost_order.h)
 * and applied now (haunt_apply, offload_apply), held until an earlier
 * real's last message arrives and then replayed from their bytes, or
 * dropped as stale.
 */
#ifndef TESSERA_GHOST_INBOX_H
#define TESSERA_GHOST_INBOX_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.pb-c.h"
#include "ghost_order.h"
#include "haunt.h"
#include "offload.h"
#include "process_self.h"
#include "spaces.h"

typedef struct ghost_inbox ghost_inbox;

/* What the inbox borrows (each outlives it). */
typedef struct ghost_inbox_context {
    ghost_order *ghost_order;
    haunts *haunts;
    offloads *offloads;
    spaces *spaces;
    const process_self *self;
} ghost_inbox_context;

ghost_inbox *ghost_inbox_create(const ghost_inbox_context *context);
void ghost_inbox_free(ghost_inbox *inbox);

/* A GhostMessage from cellapp `peer` (encoded in `item`, kept if held). */
void ghost_inbox_on_message(ghost_inbox *inbox, uint64_t peer, const Tessera__Cluster__GhostMessage *message,
                            const uint8_t *item, size_t item_length);
/* A GhostMoves from cellapp `peer`: each entry as a GhostUpdate. */
void ghost_inbox_on_moves(ghost_inbox *inbox, uint64_t peer, const Tessera__Cluster__GhostMoves *moves);
/* An Offload from `peer`, encoded in `item` (kept if the books hold it). */
void ghost_inbox_on_offload(ghost_inbox *inbox, uint64_t peer, const Tessera__Cluster__Offload *offload,
                            const uint8_t *item, size_t item_length);
/* Cellapp `peer` is gone: what the books held behind its reals is
 * replayed (or its ghosts dropped, or with `keep_orphans` kept as orphans
 * for their reals' restore) as they allow. Call before haunt_peer_down,
 * after offload_peer_down. */
void ghost_inbox_peer_down(ghost_inbox *inbox, uint64_t peer, bool keep_orphans);
/* The payload free function for the incarnation books: a held item. */
void ghost_inbox_free_held(void *payload, void *context);

#endif
