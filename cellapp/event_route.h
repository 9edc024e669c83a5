/* event_route.h -- where a game event fired on this cellapp goes, and what
 * this cellapp does with one that arrives (include/tessera/game.h, "game
 * events"): the clients that see its source (the source's witness, its
 * observers here, and through its ghosts those elsewhere), every client in
 * a space (this cellapp's cell of it, and every other cellapp's), every
 * client of the cluster (through the baseapps), the listeners of every
 * process and no client (SERVERS), or chosen clients (a user message,
 * through the mailbox to each recipient's real).
 *
 * The fields arrive coded (common/game_event.h); the listeners are the
 * game's, reached through its hooks for events from elsewhere. */
#ifndef TESSERA_EVENT_ROUTE_H
#define TESSERA_EVENT_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include <tessera/game.h>

#include "cell.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "game_hooks.h"
#include "mailbox.h"
#include "peer_set.h"
#include "spaces.h"

typedef struct event_route event_route;

/* What the routes borrow (each outlives them). */
typedef struct event_route_context {
    const entity_def_registry *definitions;
    const game_hooks *hooks; /* event_heard */
    spaces *spaces;
    peer_set *peers;
    mailbox *mailbox;
} event_route_context;

event_route *event_route_create(const event_route_context *context);
void event_route_free(event_route *route);

/* Sends a coded firing on to the clients and processes of `scope` (not to
 * this cellapp's listeners: the caller has called them). `source` may be
 * NULL for SERVER, EVERYONE and SERVERS; SPACE and VIEWERS need a real. */
void event_route_fire(event_route *route, cell_entity *source, tessera_event_scope scope,
                      const Tessera__Client__GameEvent *event);

/* A user message to the clients of `recipients`: returns how many went on
 * (queued here, or sent toward their reals' cellapps). */
size_t event_route_send(event_route *route, const Tessera__Client__GameEvent *event, const uint64_t *recipients,
                        size_t count);

/* A GameEventBroadcast from process `from`. */
void event_route_on_broadcast(event_route *route, uint64_t from, const Tessera__Cluster__GameEventBroadcast *broadcast);

/* A user message (CellMessage's event) for the real `recipient`. */
void event_route_on_message(event_route *route, cell_entity *recipient, const Tessera__Client__GameEvent *event);

#endif
