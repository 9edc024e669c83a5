/* cell_link.c -- the baseapp's side of its cellapps: choosing where a new
 * player's cell entity goes, turning the cellapps' answers and view batches
 * into client traffic, and dropping the players whose cell was lost when a
 * cellapp goes away. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base_event.h"
#include "baseapp.h"
#include "clock.h"
#include "log.h"

/* The registry's load (reals per cellapp) is a heartbeat old; entities
 * sent since then are added so that a burst of logins spreads out instead
 * of all landing on whichever cellapp looked emptiest a second ago. */
uint64_t cell_link_choose(baseapp *app) {
    size_t cursor = 0;
    uint64_t cellapp_id, best = 0;
    int64_t best_load = 0;
    while ((cellapp_id = peer_set_next_up(app->peers, PEER_ROLE_CELLAPP, &cursor)) != 0) {
        int64_t load = peer_set_load(app->peers, cellapp_id) +
                       (int64_t)(uintptr_t)id_map_get(&app->cellapp_assignments, cellapp_id);
        if (!best || load < best_load) {
            best = cellapp_id;
            best_load = load;
        }
    }
    if (best) {
        uintptr_t assigned = (uintptr_t)id_map_get(&app->cellapp_assignments, best);
        id_map_put(&app->cellapp_assignments, best, (void *)(assigned + 1));
    }
    return best;
}

void cell_link_on_registry(baseapp *app) {
    id_map_close(&app->cellapp_assignments);
    id_map_init(&app->cellapp_assignments);
}

int cell_link_send(proxy *player, Tessera__Cluster__CellMessage *message) {
    if (!player->cell.cellapp_id || !player->entity_id || !player->app->mailbox) return -1;
    message->entity_id = player->entity_id;
    mailbox_send_cell(player->app->mailbox, message, player->cell.cellapp_id, clock_monotonic_us() / 1000);
    return 0;
}

/* Destroys a cell part that nobody will use (its base went while it was
 * being made), at the cellapp that made it. */
static void cell_link_destroy_orphan(baseapp *app, uint64_t cellapp_id, uint64_t entity_id) {
    Tessera__Cluster__DestroyCellEntity destroy = TESSERA__CLUSTER__DESTROY_CELL_ENTITY__INIT;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.entity_id = entity_id;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_DESTROY;
    message.destroy = &destroy;
    mailbox_send_cell(app->mailbox, &message, cellapp_id, clock_monotonic_us() / 1000);
}

static void cell_link_on_created(baseapp *app, uint64_t cellapp_id, const Tessera__Cluster__CellEntityCreated *reply) {
    proxy *player = proxy_find_by_entity(app, reply->entity_id);
    /* The cellapp asked may have passed the request to the one whose cell
     * holds the spawn point: the answer comes from where the real is. */
    if (!player || (player->state == PROXY_DESTROYING && player->cell.incarnation == 0)) {
        /* The base went while the cell part was being made: undo it. */
        if (reply->ok) cell_link_destroy_orphan(app, cellapp_id, reply->entity_id);
        return;
    }
    proxy_on_cell_ready(player, cellapp_id, reply);
}

static bool cell_link_is_up(uint64_t cellapp_id, void *context) {
    return peer_set_is_up(((baseapp *)context)->peers, cellapp_id);
}

/* Hands the client what its address lets through now (dropped while no
 * client is in the world through it). */
static void cell_link_release(proxy *player) {
    size_t length;
    uint8_t *payload;
    while ((payload = cell_address_next(&player->cell, &length)) != NULL) {
        if (player->link && player->link->state == CLIENT_LINK_IN_WORLD)
            channel_send(player->link->ch, payload, length);
        free(payload);
    }
}

static void cell_link_forward(baseapp *app, uint64_t cellapp_id, const Tessera__Cluster__ToClientBatch *batch) {
    for (size_t i = 0; i < batch->n_messages; i++) {
        const Tessera__Cluster__ToClient *item = batch->messages[i];
        proxy *player = proxy_find_by_entity(app, item->entity_id);
        /* A stale entity (the base went this tick) is normal; so is a
         * message for a client that has gone, or for an earlier one
         * (another binding). */
        if (!player || player->state != PROXY_LIVE) continue;
        if (item->binding != player->client_binding || !player->link || player->link->state != CLIENT_LINK_IN_WORLD) {
            app->client_messages_unbound++;
            continue;
        }
        client_link *link = player->link;
        switch (cell_address_on_client_message(&player->cell, cellapp_id, item->incarnation, item->payload.data,
                                               item->payload.len)) {
            case CELL_ADDRESS_DELIVER:
                channel_send(link->ch, item->payload.data, item->payload.len);
                break;
            case CELL_ADDRESS_HELD:
                app->client_messages_held++;
                break;
            case CELL_ADDRESS_STALE:
                app->client_messages_stale++;
                log_debug("entity %" PRIu64 ": a client message of incarnation %u from cellapp %" PRIu64
                          " after its stream ended: dropped",
                          item->entity_id, item->incarnation, cellapp_id);
                break;
            case CELL_ADDRESS_OVERFLOW:
                client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                                 "its cell moved and the new one's messages piled up (%d held)", CELL_ADDRESS_MAX_HELD);
                continue;
        }
        cell_link_check_congestion(player);
    }
}

static void cell_link_on_handoff(baseapp *app, uint64_t cellapp_id, const Tessera__Cluster__CellHandoff *handoff) {
    proxy *player = proxy_find_by_entity(app, handoff->entity_id);
    if (!player || player->state != PROXY_LIVE) return;
    cell_address_on_handoff(&player->cell, cellapp_id, handoff->incarnation, handoff->next_cellapp_id);
    cell_address_check(&player->cell, cell_link_is_up, app, clock_monotonic_us());
    cell_link_release(player);
}

static void cell_link_on_address(baseapp *app, uint64_t cellapp_id, const Tessera__Cluster__CellAddress *address) {
    proxy *player = proxy_find_by_entity(app, address->entity_id);
    if (!player || player->state != PROXY_LIVE) return;
    if (cell_address_on_address(&player->cell, cellapp_id, address->incarnation))
        log_debug("entity %" PRIu64 ": its cell is on cellapp %" PRIu64 " now (incarnation %u)", address->entity_id,
                  cellapp_id, address->incarnation);
    cell_link_release(player);
}

void cell_link_check_congestion(proxy *player) {
    baseapp *app = player->app;
    client_link *link = player->link;
    if (!link || link->state != CLIENT_LINK_IN_WORLD || player->state != PROXY_LIVE) return;
    size_t queued = channel_queued_bytes(link->ch);
    size_t threshold = (size_t)app->settings.client_congestion_bytes;
    bool congested = link->congested ? queued > threshold / 2 : queued > threshold;
    if (congested == link->congested) return;
    link->congested = congested;
    if (congested) {
        app->congested_clients++;
        app->congestion_events++;
    } else {
        app->congested_clients--;
    }
    log_debug("entity %" PRIu64 " (account '%s'): %s (%zu bytes queued)", player->entity_id, player->account,
              congested ? "congested: its cell holds its updates" : "drained: updates resume", queued);
    Tessera__Cluster__ClientCongestion notice = TESSERA__CLUSTER__CLIENT_CONGESTION__INIT;
    notice.congested = congested;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CONGESTION;
    message.congestion = &notice;
    cell_link_send(player, &message);
}

void cell_link_check_all_congestion(baseapp *app) {
    uint32_t cursor = 0;
    client_link *link;
    while ((link = entity_list_next(app->links, &cursor, NULL)) != NULL)
        if (link->congested && link->proxy) cell_link_check_congestion(link->proxy);
}

void cell_link_on_message(peer_set *set, uint64_t process_id, peer_role role,
                          const Tessera__Cluster__PeerMessage *message, void *user_data) {
    baseapp *app = user_data;
    (void)set;
    if (app->shutting_down) return;
    /* Entity calls come from any process. */
    if (message->body_case == TESSERA__CLUSTER__PEER_MESSAGE__BODY_BASE_CALL) {
        base_call_on_call(app, message->base_call);
        return;
    }
    if (message->body_case == TESSERA__CLUSTER__PEER_MESSAGE__BODY_ENTITY_CALL_FAILED) {
        base_mailbox_on_failed(app->bases, message->entity_call_failed);
        return;
    }
    if (message->body_case == TESSERA__CLUSTER__PEER_MESSAGE__BODY_GAME_EVENT) {
        base_event_on_broadcast(app, process_id, message->game_event);
        return;
    }
    if (message->body_case == TESSERA__CLUSTER__PEER_MESSAGE__BODY_HANDOVER_OFFER) {
        handover_on_offer(app, process_id, message->handover_offer);
        return;
    }
    if (message->body_case == TESSERA__CLUSTER__PEER_MESSAGE__BODY_HANDOVER_ANSWER) {
        handover_on_answer(app, message->handover_answer);
        return;
    }
    if (role != PEER_ROLE_CELLAPP) {
        log_warn("%s %" PRIu64 " sent a message a baseapp takes only from cellapps (%d): ignored", peer_role_name(role),
                 process_id, (int)message->body_case);
        return;
    }
    switch (message->body_case) {
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_ENTITY_CREATED:
            cell_link_on_created(app, process_id, message->cell_entity_created);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_TO_CLIENT:
            cell_link_forward(app, process_id, message->to_client);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_HANDOFF:
            cell_link_on_handoff(app, process_id, message->cell_handoff);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_ADDRESS:
            cell_link_on_address(app, process_id, message->cell_address);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_MESSAGE_FAILED:
            mailbox_on_failed(app->mailbox, message->cell_message_failed);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_DROP_CLIENT: {
            const Tessera__Cluster__DropClient *drop = message->drop_client;
            proxy *player = proxy_find_by_entity(app, drop->entity_id);
            if (player && player->state == PROXY_LIVE && player->link &&
                (player->cell.cellapp_id == process_id || player->cell.stream_cellapp == process_id))
                client_link_fail(player->link, drop->code, "%s", drop->reason ? drop->reason : "dropped by its cell");
            return;
        }
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_BACKUP: {
            proxy *player = proxy_find_by_entity(app, message->cell_backup->entity_id);
            if (player) persistence_on_backup(player, message->cell_backup);
            return;
        }
        default:
            log_warn("cellapp %" PRIu64 " sent a message this baseapp does not handle (%d): ignored", process_id,
                     (int)message->body_case);
            return;
    }
}

void cell_link_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data) {
    (void)set;
    (void)process_id;
    (void)role;
    (void)user_data;
}

void cell_link_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data) {
    baseapp *app = user_data;
    (void)set;
    if (role != PEER_ROLE_CELLAPP) return;
    /* A cell part that was on that cellapp may have been on its way out
     * (the cellapp it left takes it back) or is gone with it: the client
     * waits cell_lost_grace_ms for its real to turn up elsewhere. A client
     * still being created there is told at once. */
    size_t waiting = 0, dropped = 0;
    uint32_t cursor = 0;
    proxy *player;
    uint64_t now_us = clock_monotonic_us();
    while ((player = entity_list_next(app->proxies, &cursor, NULL)) != NULL) {
        if (player->state == PROXY_CREATING_CELL && player->cell.cellapp_id == process_id) {
            cell_address_clear(&player->cell);
            if (player->link)
                client_link_fail(player->link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                                 "cellapp %" PRIu64 " creating your entity is gone (%s); log in again", process_id,
                                 reason);
            proxy_destroy(player, false, "the cellapp making its cell part went away");
            dropped++;
            continue;
        }
        if (player->state != PROXY_LIVE) continue;
        if (cell_address_check(&player->cell, cell_link_is_up, app, now_us)) waiting++;
        cell_link_release(player);
    }
    id_map_remove(&app->cellapp_assignments, process_id);
    log_warn("cellapp %" PRIu64 " gone: %zu players wait for their cells to be taken back, %zu dropped, %zu cellapps "
             "left",
             process_id, waiting, dropped, peer_set_count_up(app->peers, PEER_ROLE_CELLAPP));
}

void cell_link_sweep(baseapp *app) {
    uint64_t now_us = clock_monotonic_us();
    uint64_t grace_us = (uint64_t)app->settings.cell_lost_grace_ms * 1000u;
    uint32_t cursor = 0;
    proxy *player;
    while ((player = entity_list_next(app->proxies, &cursor, NULL)) != NULL) {
        if (player->state != PROXY_LIVE || !player->cell.lost_since_us) continue;
        if (!cell_address_check(&player->cell, cell_link_is_up, app, now_us)) {
            cell_link_release(player);
            continue;
        }
        if (now_us - player->cell.lost_since_us < grace_us) continue;
        uint64_t cellapp = player->cell.cellapp_id;
        cell_address_clear(&player->cell);
        if (player->link)
            client_link_fail(player->link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                             "cellapp %" PRIu64 " holding your entity is gone, and no other took it; log in again",
                             cellapp);
        /* What it last backed up is written: progress since is lost with
         * the cellapp. */
        proxy_destroy(player, true, "its cell part was lost with its cellapp");
    }
}
