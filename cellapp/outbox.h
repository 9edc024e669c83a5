/* outbox.h -- what one tick sends, gathered per peer and sent at the tick's
 * end as one frame each (outbox.c): client payloads per baseapp, and
 * everything for another cellapp (ghost messages, offloads, forwarded
 * CellMessages). Order within a peer is the order of appending.
 */
#ifndef TESSERA_OUTBOX_H
#define TESSERA_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "cell.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "peer_set.h"

typedef struct outbox outbox;

/* An empty outbox sending through `peers` (borrowed; it outlives the
 * outbox). */
outbox *outbox_create(peer_set *peers);
/* Frees what is still queued, unsent. NULL is a no-op. */
void outbox_free(outbox *box);

/* Queues a client payload for the client of `entity` (a real with a base),
 * stamped with its incarnation and client binding. `payload` is copied
 * into the queue (the caller keeps it). */
void outbox_to_client(outbox *box, const cell_entity *entity, const uint8_t *payload, size_t length);
/* Packs `message` and queues it for the client of `entity`; nothing for a
 * ghost or a real without a base. */
void outbox_message_to_client(outbox *box, const cell_entity *entity, const Tessera__Client__ServerToClient *message);
/* Appends one CellItem (encoded now) for cellapp `peer`. */
void outbox_to_cellapp(outbox *box, uint64_t peer, const Tessera__Cluster__CellItem *item);
/* Bytes `outbox_to_cellapp` appended for `peer` since the last flush. */
size_t outbox_cellapp_bytes(const outbox *box, uint64_t peer);
/* Sends every baseapp its client messages (one ToClientBatch each). */
void outbox_flush_clients(outbox *box);
/* Sends every cellapp its items (one CellBatch each). */
void outbox_flush_cellapps(outbox *box);
/* Sends what is queued for cellapp `peer` now, ahead of the tick (the
 * order of its items is kept). */
void outbox_flush_cellapp(outbox *box, uint64_t peer);
/* Forgets what was queued for a peer that went away. */
void outbox_drop_peer(outbox *box, uint64_t peer);

#endif
