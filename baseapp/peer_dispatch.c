/* peer_dispatch.c -- what other processes send this baseapp, handed to the
 * module that owns it: entity calls and their failures to base_call.c, game
 * event broadcasts to base_event.c and giveClientTo offers and answers to
 * handover.c (from any process); from cellapps, their answers to cell part
 * creation to base_life.c, moves of cell parts to cell_link.c, client
 * streams and drops to proxy.c, backups to persistence.c, failed messages
 * to the mailbox; from baseapps, base backups to base_backup.c, which also
 * hears of a baseapp's death. Frames are dispatched as they arrive. It
 * owns nothing. */
#include "peer_dispatch.h"

#include <inttypes.h>

#include "baseapp.h"
#include "log.h"

void peer_dispatch_on_message(peer_set *set, uint64_t process_id, peer_role role,
                              const Tessera__Cluster__PeerMessage *message, void *user_data) {
    baseapp *app = user_data;
    (void)set;
    if (app->runtime.self.stopping) return;
    /* From any process. */
    switch (message->body_case) {
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_BASE_CALL:
            base_call_on_call(app->calls, message->base_call);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_ENTITY_CALL_FAILED:
            base_call_on_failed(app->calls, message->entity_call_failed);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_GAME_EVENT:
            base_event_on_broadcast(&app->events, process_id, message->game_event);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_HANDOVER_OFFER:
            handover_on_offer(app->handovers, process_id, message->handover_offer);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_HANDOVER_ANSWER:
            handover_on_answer(app->handovers, message->handover_answer);
            return;
        default:
            break;
    }
    if (role == PEER_ROLE_BASEAPP) {
        switch (message->body_case) {
            case TESSERA__CLUSTER__PEER_MESSAGE__BODY_BASE_BACKUPS:
                base_backups_on_backups(app->backups, process_id, message->base_backups);
                return;
            case TESSERA__CLUSTER__PEER_MESSAGE__BODY_BASE_BACKUP_DROP:
                base_backups_on_drop(app->backups, process_id, message->base_backup_drop);
                return;
            default:
                break;
        }
    }
    if (role != PEER_ROLE_CELLAPP) {
        log_warn("%s %" PRIu64 " sent a message a baseapp takes only from cellapps (%d): ignored", peer_role_name(role),
                 process_id, (int)message->body_case);
        return;
    }
    switch (message->body_case) {
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_ENTITY_CREATED: {
            const Tessera__Cluster__CellEntityCreated *reply = message->cell_entity_created;
            base_entity *base = cell_links_on_created(app->cells, process_id, reply);
            if (base) base_life_on_cell_created(app->life, base, process_id, reply);
            return;
        }
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_TO_CLIENT:
            proxy_on_client_messages(app->players, process_id, message->to_client);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_HANDOFF:
            cell_links_on_handoff(app->cells, process_id, message->cell_handoff);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_ADDRESS:
            cell_links_on_address(app->cells, process_id, message->cell_address);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_MESSAGE_FAILED:
            mailbox_on_failed(app->mailbox, message->cell_message_failed);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_DROP_CLIENT:
            proxy_on_drop_client(app->players, process_id, message->drop_client);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_SNAPSHOT: {
            base_entity *base = base_entities_find(app->bases, message->cell_snapshot->entity_id);
            if (base_entity_is_live(base)) base_entity_keep_backup(base, message->cell_snapshot);
            return;
        }
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_BACKUP: {
            base_entity *base = base_entities_find(app->bases, message->cell_backup->entity_id);
            if (base) persistence_on_backup(app->store, base, message->cell_backup);
            return;
        }
        default:
            log_warn("cellapp %" PRIu64 " sent a message this baseapp does not handle (%d): ignored", process_id,
                     (int)message->body_case);
            return;
    }
}

void peer_dispatch_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data) {
    (void)set;
    (void)process_id;
    (void)role;
    (void)user_data;
}

void peer_dispatch_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason,
                                void *user_data) {
    (void)set;
    (void)process_id;
    (void)role;
    (void)reason;
    (void)user_data;
    /* Nothing is given up on a lost link: the cellapp may be only busy or
     * cut off for a moment. Messages to its cell parts fail back through
     * the mailbox; the cluster decides when it is dead. */
}

void peer_dispatch_on_peer_dead(peer_set *set, uint64_t process_id, peer_role role, const char *reason,
                                void *user_data) {
    baseapp *app = user_data;
    (void)set;
    if (app->runtime.self.stopping) return;
    if (role == PEER_ROLE_BASEAPP) {
        /* Its bases whose backups are held here come back here. */
        base_backups_on_baseapp_dead(app->backups, process_id);
        handovers_on_baseapp_dead(app->handovers, process_id);
        return;
    }
    if (role != PEER_ROLE_CELLAPP) return;
    cell_links_on_cellapp_down(app->cells, process_id, reason);
}
