/* base_event.h -- game events on the baseapp (include/tessera/game.h,
 * "game events"): cluster events to every client and every process, user
 * messages to a base's own client, and the broadcasts that arrive. */
#ifndef TESSERA_BASE_EVENT_H
#define TESSERA_BASE_EVENT_H

#include <stdint.h>

#include "baseapp.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"

/* Sends a coded event to one client, outside any view update. */
void base_event_to_client(client_link *link, const Tessera__Client__GameEvent *event);
/* Sends a coded cluster event to every client here in the world, and to
 * every other baseapp and every cellapp (their listeners; the baseapps'
 * clients). This baseapp's listeners are the caller's to call. */
void base_event_fire_everyone(baseapp *app, const Tessera__Client__GameEvent *event);
/* A GameEventBroadcast from process `from`: to the clients here and the
 * listeners. */
void base_event_on_broadcast(baseapp *app, uint64_t from, const Tessera__Cluster__GameEventBroadcast *broadcast);

#endif
