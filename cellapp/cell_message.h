/* cell_message.h -- messages to entities' cell parts (proto/cluster.proto,
 * CellMessage), wherever the real is (cell_message.c): delivered here in
 * each stream's order, forwarded to the real when this cellapp holds only
 * its ghost or remembers where it went, or failed back to the sender; what
 * they do once delivered (a client's move, a method call, destroy, a new
 * client, a backup, congestion, an event, an entity I/O input); and the
 * calls game code makes to cell and client methods.
 */
#ifndef TESSERA_CELL_MESSAGE_H
#define TESSERA_CELL_MESSAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "cell.h"
#include "cellapp_counters.h"
#include "cellapp_settings.h"
#include "cluster.pb-c.h"
#include "event_route.h"
#include "game_hooks.h"
#include "ghost_route.h"
#include "io_route.h"
#include "mailbox.h"
#include "outbox.h"
#include "peer_set.h"
#include "process_self.h"
#include "reals.h"
#include "spaces.h"

typedef struct cell_messages cell_messages;

/* What message delivery borrows (each outlives it). */
typedef struct cell_messages_context {
    const cellapp_settings *settings; /* movement, cell_stream_gap_ms */
    const game_hooks *hooks;          /* call, moved, witness */
    spaces *spaces;
    outbox *outbox;
    peer_set *peers;
    mailbox *mailbox;
    ghost_route *route;
    reals *reals;
    event_route *events;
    io_route *io;
    cellapp_counters *counters;
    const process_self *self;
} cell_messages_context;

cell_messages *cell_message_create(const cell_messages_context *context);
void cell_message_free(cell_messages *messages);

/* A CellMessage from `peer` (a baseapp, or a cellapp forwarding): delivers
 * it in its stream's order to the real here, forwards it to the real
 * elsewhere, or fails it back to its sender. */
void cell_message_on_message(cell_messages *messages, uint64_t peer, peer_role role,
                             const Tessera__Cluster__CellMessage *message);
/* Delivers held messages whose gap waited too long (every tick). */
void cell_message_tick(cell_messages *messages, cell *c);
/* Runs cell method `method` of `target` with `args` (a state of its
 * args_class) on behalf of `caller_id` (0: the server): here when the
 * target is a real here, else through the mailbox. */
void cell_message_call(cell_messages *messages, cell_entity *target, const entity_def_method *method,
                       uint64_t caller_id, const entity_state *args);
/* Calls client method `method` of `entity` on its own client only, or on
 * every client that sees it (its own included), across cellapps. */
void cell_message_call_client(cell_entity *entity, const entity_def_method *method, const entity_state *args,
                              bool every_observer);

#endif
