/* base_event.h -- game events on the baseapp (include/tessera/game.h, "game
 * events"): cluster events to every client and every process (or to every
 * process only: the SERVERS scope), user messages to a base's own client,
 * and the broadcasts that arrive. */
#ifndef TESSERA_BASE_EVENT_H
#define TESSERA_BASE_EVENT_H

#include <stdbool.h>
#include <stdint.h>

#include "base_hooks.h"
#include "client.pb-c.h"
#include "client_link.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "peer_set.h"

typedef struct base_events {
    const entity_def_registry *definitions;
    client_links *links;
    peer_set *peers;
    const base_hooks *hooks; /* the listeners */
} base_events;

/* Sends a coded event to one client, outside any view update. */
void base_event_to_client(client_link *link, const Tessera__Client__GameEvent *event);
/* Sends a coded cluster event to every other baseapp and every cellapp
 * (their listeners), and, when `to_clients` (scope EVERYONE, not SERVERS),
 * to every client here in the world and the other baseapps' clients. This
 * baseapp's listeners are the caller's to call. */
void base_event_fire_cluster(const base_events *events, const Tessera__Client__GameEvent *event, bool to_clients);
/* A GameEventBroadcast from process `from`: to the clients here and the
 * listeners. */
void base_event_on_broadcast(const base_events *events, uint64_t from,
                             const Tessera__Cluster__GameEventBroadcast *broadcast);

#endif
