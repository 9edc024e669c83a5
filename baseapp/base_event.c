/* base_event.c -- owns the paths of game events on the baseapp: a cluster
 * event (scope EVERYONE) goes from here to every other baseapp and every
 * cellapp, and each baseapp hands it to every client it has in the world
 * (ServerToClient.event, outside any view update: clients without a space
 * hear it too); a user message from a base goes to its own client. The
 * listeners are base_game.c's. */
#include "base_event.h"

#include <inttypes.h>
#include <stdio.h>

#include "base_game.h"
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
static void base_event_to_clients(baseapp *app, const Tessera__Client__GameEvent *event) {
    uint32_t cursor = 0;
    client_link *link;
    while ((link = entity_list_next(app->links, &cursor, NULL)) != NULL)
        if (link->state == CLIENT_LINK_IN_WORLD) base_event_to_client(link, event);
}

void base_event_fire_everyone(baseapp *app, const Tessera__Client__GameEvent *event) {
    base_event_to_clients(app, event);
    Tessera__Cluster__GameEventBroadcast broadcast = TESSERA__CLUSTER__GAME_EVENT_BROADCAST__INIT;
    broadcast.space_name = "";
    broadcast.event = (Tessera__Client__GameEvent *)event;
    for (int r = 0; r < 2; r++) {
        peer_role role = r == 0 ? PEER_ROLE_BASEAPP : PEER_ROLE_CELLAPP;
        size_t cursor = 0;
        uint64_t peer;
        while ((peer = peer_set_next_up(app->peers, role, &cursor)) != 0)
            if (peer_send_game_event(app->peers, peer, &broadcast) != 0)
                log_info("game event %u: %s %" PRIu64 " went down before it was sent", event->event_id,
                         peer_role_name(role), peer);
    }
}

void base_event_on_broadcast(baseapp *app, uint64_t from, const Tessera__Cluster__GameEventBroadcast *broadcast) {
    if (!broadcast->event) return;
    if (broadcast->space_name && broadcast->space_name[0]) {
        log_warn("process %" PRIu64 ": a space's game event sent to a baseapp: ignored", from);
        return;
    }
    const entity_def_method *event;
    char why[160];
    entity_state *fields = game_event_decode(app->definitions, broadcast->event, &event, why, sizeof why);
    if (!fields) {
        log_warn("process %" PRIu64 ": a game event broadcast refused: %s", from, why);
        return;
    }
    base_event_to_clients(app, broadcast->event);
    base_game_event_heard(app->game, event, broadcast->event->source_id, fields);
    entity_state_free(fields);
}
