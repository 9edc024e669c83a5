/* base_event.c -- owns the paths of game events on the baseapp: a cluster
 * event (scope EVERYONE) goes from here to every other baseapp and every
 * cellapp, and each baseapp hands it to every client it has in the world
 * (ServerToClient.event, outside any view update: clients without a space
 * hear it too); a servers-only one (scope SERVERS) goes the same way to
 * the listeners alone; a user message from a base goes to its own client.
 * The listeners are the game's (the event_heard hook). It owns no state. */
#include "base_event.h"

#include <inttypes.h>
#include <stdio.h>

#include "game_event.h"
#include "log.h"
#include "peer_message.h"

void base_event_to_client(client_link *link, const Tessera__Client__GameEvent *event) {
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_EVENT;
    message.event = (Tessera__Client__GameEvent *)event;
    client_link_send(link, &message);
}

/* Every client in the world here. */
static void base_event_to_clients(const base_events *events, const Tessera__Client__GameEvent *event) {
    uint32_t cursor = 0;
    client_link *link;
    while ((link = client_links_next(events->links, &cursor)) != NULL)
        if (link->state == CLIENT_LINK_IN_WORLD) base_event_to_client(link, event);
}

void base_event_fire_cluster(const base_events *events, const Tessera__Client__GameEvent *event, bool to_clients) {
    if (to_clients) base_event_to_clients(events, event);
    Tessera__Cluster__GameEventBroadcast broadcast = TESSERA__CLUSTER__GAME_EVENT_BROADCAST__INIT;
    broadcast.space_name = "";
    broadcast.event = (Tessera__Client__GameEvent *)event;
    broadcast.servers_only = !to_clients;
    for (int r = 0; r < 2; r++) {
        peer_role role = r == 0 ? PEER_ROLE_BASEAPP : PEER_ROLE_CELLAPP;
        size_t cursor = 0;
        uint64_t peer;
        while ((peer = peer_set_next_up(events->peers, role, &cursor)) != 0)
            if (peer_send_game_event(events->peers, peer, &broadcast) != 0)
                log_info("game event %u: %s %" PRIu64 " went down before it was sent", event->event_id,
                         peer_role_name(role), peer);
    }
}

void base_event_on_broadcast(const base_events *events, uint64_t from,
                             const Tessera__Cluster__GameEventBroadcast *broadcast) {
    if (!broadcast->event) return;
    if (broadcast->space_name && broadcast->space_name[0]) {
        log_warn("process %" PRIu64 ": a space's game event sent to a baseapp: ignored", from);
        return;
    }
    const entity_def_method *event;
    char why[160];
    entity_state *fields = game_event_decode(events->definitions, broadcast->event, &event, why, sizeof why);
    if (!fields) {
        log_warn("process %" PRIu64 ": a game event broadcast refused: %s", from, why);
        return;
    }
    if (!broadcast->servers_only) base_event_to_clients(events, broadcast->event);
    base_hooks_event_heard(events->hooks, event, broadcast->event->source_id, fields);
    entity_state_free(fields);
}
