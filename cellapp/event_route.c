/* event_route.c -- owns the paths of game events on the cellapp
 * (event_route.h): queueing them on witnesses, handing viewers' events to
 * the source's ghosts, broadcasting space and cluster events (and the
 * servers-only ones, for the peers' listeners alone) to the peers,
 * and taking in what the peers broadcast or the mailbox delivers.
 *
 * A witness holds a queued event until its next update, which writes it
 * after the stream and the calls (proto/client.proto: ViewUpdate.events),
 * so a viewers' event about an entity always follows that entity's ENTER.
 * Clients of no space hear cluster events from their baseapp. */
#include "event_route.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "game_event.h"
#include "log.h"
#include "method_call.h"
#include "peer_message.h"
#include "witness.h"

struct event_route {
    event_route_context context;
};

event_route *event_route_create(const event_route_context *context) {
    event_route *route = xcalloc(1, sizeof *route);
    route->context = *context;
    return route;
}

void event_route_free(event_route *route) { free(route); }

/* Every real with a client in this cellapp's cell of `space`. */
static void event_route_to_space_here(event_route *route, const char *space, const Tessera__Client__GameEvent *event) {
    cell *c = spaces_cell(route->context.spaces, space, false);
    if (!c) return;
    for (size_t i = 0; i < c->count; i++) {
        cell_entity *entity = c->by_index[i];
        if (entity->kind == CELL_ENTITY_REAL && cell_entity_witness(entity) && !entity->destroyed)
            witness_queue_event(cell_entity_witness(entity), event->source_id, event->event_id, event->args.data,
                                event->args.len, false);
    }
}

/* A broadcast to every up peer of `role`; `servers_only`: for their
 * listeners, not their clients. */
static void event_route_to_peers(event_route *route, peer_role role, const char *space,
                                 const Tessera__Client__GameEvent *event, bool servers_only) {
    Tessera__Cluster__GameEventBroadcast broadcast = TESSERA__CLUSTER__GAME_EVENT_BROADCAST__INIT;
    broadcast.space_name = (char *)(space ? space : "");
    broadcast.event = (Tessera__Client__GameEvent *)event;
    broadcast.servers_only = servers_only;
    size_t cursor = 0;
    uint64_t peer;
    while ((peer = peer_set_next_up(route->context.peers, role, &cursor)) != 0) {
        if (peer_send_game_event(route->context.peers, peer, &broadcast) != 0)
            log_info("game event %u: %s %" PRIu64 " went down before it was sent", event->event_id,
                     peer_role_name(role), peer);
    }
}

void event_route_fire(event_route *route, cell_entity *source, tessera_event_scope scope,
                      const Tessera__Client__GameEvent *event) {
    switch (scope) {
        case TESSERA_EVENT_SERVER:
            return;
        case TESSERA_EVENT_VIEWERS:
            if (!source) return;
            /* Its own client is among its observers: it sees itself. */
            witness_queue_event_for_observers(source, event->event_id, event->args.data, event->args.len);
            /* Viewers in other cells see a ghost: the event goes with it. */
            if (source->real && source->real->haunt_count)
                cell_queue_broadcast_event(source, event->event_id, event->args.data, event->args.len);
            return;
        case TESSERA_EVENT_SPACE:
            if (!source) return;
            event_route_to_space_here(route, source->home->space_name, event);
            event_route_to_peers(route, PEER_ROLE_CELLAPP, source->home->space_name, event, false);
            return;
        case TESSERA_EVENT_EVERYONE:
        case TESSERA_EVENT_SERVERS:
            /* The cellapps' clients hear cluster events from their
             * baseapps, which leave them out of a SERVERS one. */
            event_route_to_peers(route, PEER_ROLE_CELLAPP, "", event, scope == TESSERA_EVENT_SERVERS);
            event_route_to_peers(route, PEER_ROLE_BASEAPP, "", event, scope == TESSERA_EVENT_SERVERS);
            return;
    }
}

size_t event_route_send(event_route *route, const Tessera__Client__GameEvent *event, const uint64_t *recipients,
                        size_t count) {
    size_t sent = 0;
    for (size_t i = 0; i < count; i++) {
        if (!recipients[i]) continue;
        cell_entity *entity = spaces_find_entity(route->context.spaces, recipients[i]);
        if (entity && entity->kind == CELL_ENTITY_REAL) {
            if (!cell_entity_witness(entity)) continue;
            witness_queue_event(cell_entity_witness(entity), event->source_id, event->event_id, event->args.data,
                                event->args.len, false);
            sent++;
            continue;
        }
        /* Its real is elsewhere: the mailbox finds it (a ghost here knows
         * its cellapp; otherwise the cell directory does). */
        Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
        message.entity_id = recipients[i];
        message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_EVENT;
        message.event = (Tessera__Client__GameEvent *)event;
        if (mailbox_send_cell(route->context.mailbox, &message, entity ? entity->owner_cellapp : 0,
                              clock_monotonic_us() / 1000) != 0)
            sent++;
    }
    return sent;
}

void event_route_on_broadcast(event_route *route, uint64_t from,
                              const Tessera__Cluster__GameEventBroadcast *broadcast) {
    if (!broadcast->event) return;
    const entity_def_method *event;
    char why[160];
    entity_state *fields = game_event_decode(route->context.definitions, broadcast->event, &event, why, sizeof why);
    if (!fields) {
        log_warn("process %" PRIu64 ": a game event broadcast refused: %s", from, why);
        return;
    }
    const char *space = broadcast->space_name ? broadcast->space_name : "";
    if (space[0] && broadcast->servers_only) {
        log_warn("process %" PRIu64 ": a game event for the servers only, sent to space '%s': ignored", from, space);
        entity_state_free(fields);
        return;
    }
    if (space[0]) {
        /* A space's event: only where the space has a cell here. */
        if (!spaces_cell(route->context.spaces, space, false)) {
            entity_state_free(fields);
            return;
        }
        event_route_to_space_here(route, space, broadcast->event);
    }
    route->context.hooks->event_heard(route->context.hooks->host, event, broadcast->event->source_id, fields);
    entity_state_free(fields);
}

void event_route_on_message(event_route *route, cell_entity *recipient, const Tessera__Client__GameEvent *event) {
    const entity_def_method *declared = entity_def_registry_event(route->context.definitions, event->event_id);
    if (!declared || method_call_check(declared, event->args.data, event->args.len) != 0) {
        log_warn("entity %" PRIu64 ": a user message of event %u with fields that are not its declared types: "
                 "dropped",
                 recipient->id, event->event_id);
        return;
    }
    if (!cell_entity_witness(recipient)) {
        log_debug("entity %" PRIu64 ": a user message '%s' for an entity without a client: dropped", recipient->id,
                  declared->name);
        return;
    }
    witness_queue_event(cell_entity_witness(recipient), event->source_id, event->event_id, event->args.data,
                        event->args.len, false);
}
