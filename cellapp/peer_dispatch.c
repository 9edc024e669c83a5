/* peer_dispatch.c -- what other processes send this cellapp, handed to the
 * module that owns it: entity creation to reals.c, messages to cell parts to
 * cell_message.c, ghosts and offloads (in incarnation order) to
 * ghost_inbox.c, acknowledgements to offload.c, layouts applied to
 * spaces.c, game event broadcasts to event_route.c, failures to the
 * mailboxes; and peers that come and go, in the order their modules must
 * hear it. Nothing here runs in the tick: frames are dispatched as they
 * arrive, between ticks. */
#include "peer_dispatch.h"

#include <inttypes.h>

#include "clock.h"
#include "log.h"

/* One frame of another cellapp's tick, item by item, in order. */
static void peer_dispatch_cell_batch(cellapp *app, uint64_t peer, const Tessera__Cluster__CellBatch *batch) {
    for (size_t i = 0; i < batch->n_items; i++) {
        const ProtobufCBinaryData *bytes = &batch->items[i];
        Tessera__Cluster__CellItem *item = tessera__cluster__cell_item__unpack(NULL, bytes->len, bytes->data);
        if (!item) {
            log_warn("cellapp %" PRIu64 " sent an item that is not a CellItem: ignored", peer);
            continue;
        }
        switch (item->body_case) {
            case TESSERA__CLUSTER__CELL_ITEM__BODY_GHOST: {
                /* Making and unmaking ghosts is the transient cost of reals
             * moving about; updating them is steady work. */
                bool churn = item->ghost->body_case == TESSERA__CLUSTER__GHOST_MESSAGE__BODY_CREATE ||
                             item->ghost->body_case == TESSERA__CLUSTER__GHOST_MESSAGE__BODY_DELETE;
                uint64_t began = churn ? cell_load_transient_begin() : 0;
                ghost_inbox_on_message(app->ghost_inbox, peer, item->ghost, bytes->data, bytes->len);
                if (churn) cell_load_transient_end(app->load, began);
                break;
            }
            case TESSERA__CLUSTER__CELL_ITEM__BODY_OFFLOAD: {
                uint64_t began = cell_load_transient_begin();
                ghost_inbox_on_offload(app->ghost_inbox, peer, item->offload, bytes->data, bytes->len);
                cell_load_transient_end(app->load, began);
                break;
            }
            case TESSERA__CLUSTER__CELL_ITEM__BODY_OFFLOAD_ACK:
                offload_on_ack(app->offloads, peer, item->offload_ack);
                break;
            case TESSERA__CLUSTER__CELL_ITEM__BODY_MESSAGE:
                cell_message_on_message(app->messages, peer, PEER_ROLE_CELLAPP, item->message);
                break;
            case TESSERA__CLUSTER__CELL_ITEM__BODY_CREATE:
                reals_on_create(app->reals, peer, item->create);
                break;
            case TESSERA__CLUSTER__CELL_ITEM__BODY_FAILED:
                mailbox_on_failed(app->mailbox, item->failed);
                break;
            case TESSERA__CLUSTER__CELL_ITEM__BODY_GHOST_MOVES:
                ghost_inbox_on_moves(app->ghost_inbox, peer, item->ghost_moves);
                break;
            case TESSERA__CLUSTER__CELL_ITEM__BODY_LAYOUT_APPLIED:
                spaces_on_layout_applied(app->spaces, peer, item->layout_applied);
                break;
            default:
                log_warn("cellapp %" PRIu64 " sent an empty item: ignored", peer);
                break;
        }
        tessera__cluster__cell_item__free_unpacked(item, NULL);
    }
    /* Acknowledgements (and whatever else this queued for the sender) go
     * at once rather than with our next tick: an offload's sender waits for
     * its acknowledgement, and nothing queued for it depends on our tick. */
    outbox_flush_cellapp(app->outbox, peer);
}

void peer_dispatch_on_message(peer_set *set, uint64_t process_id, peer_role role,
                              const Tessera__Cluster__PeerMessage *message, void *user_data) {
    cellapp *app = user_data;
    (void)set;
    if (app->runtime.self.stopping) return;
    switch (message->body_case) {
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CREATE_CELL_ENTITY:
            if (role == PEER_ROLE_BASEAPP && message->create_cell_entity->baseapp_id == process_id)
                reals_on_create(app->reals, process_id, message->create_cell_entity);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_MESSAGE:
            cell_message_on_message(app->messages, process_id, role, message->cell_message);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_MESSAGE_FAILED:
            mailbox_on_failed(app->mailbox, message->cell_message_failed);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_ENTITY_CALL_FAILED:
            base_route_on_failed(app->bases, message->entity_call_failed);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_GAME_EVENT:
            event_route_on_broadcast(app->events, process_id, message->game_event);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_RESTORE_CELL_ENTITY:
            restores_on_request(app->restores, process_id, message->restore_cell_entity);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_BATCH:
            if (role == PEER_ROLE_CELLAPP) peer_dispatch_cell_batch(app, process_id, message->cell_batch);
            return;
        default:
            log_warn("%s %" PRIu64 " sent a message this cellapp does not handle (%d): ignored", peer_role_name(role),
                     process_id, (int)message->body_case);
            return;
    }
}

/* What this cellapp and another held of each other, forgotten: what was in
 * flight to it comes back (as the directory allows), and our reals forget
 * their ghosts there. Its ghosts here go when it is back (its reals make
 * them again), or, when it is dead, wait for their reals to be restored
 * (restore.c). */
static void peer_dispatch_forget_cellapp(cellapp *app, uint64_t process_id, bool dead) {
    spaces_peer_down(app->spaces, process_id);
    /* First take back what was in flight to it, then see to its ghosts. */
    offload_peer_down(app->offloads, process_id);
    if (dead) {
        ghost_inbox_peer_down(app->ghost_inbox, process_id, true);
        haunt_peer_down(app->haunts, process_id, false);
        restores_on_cellapp_dead(app->restores, process_id);
    } else {
        haunt_peer_down(app->haunts, process_id, true);
    }
}

void peer_dispatch_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data) {
    cellapp *app = user_data;
    if (role != PEER_ROLE_CELLAPP || app->runtime.self.stopping) return;
    /* A link back after one was lost, the process not declared dead: what
     * either side sent meanwhile is gone, so both start their ghosts and
     * offloads with each other afresh. */
    if (peer_set_returning(set, process_id)) {
        log_info("cellapp %" PRIu64 " is back: ghosts and offloads with it start afresh", process_id);
        peer_dispatch_forget_cellapp(app, process_id, false);
    }
    /* It learns our layouts; once it says which it has, reals near its
     * cells give it ghosts. */
    spaces_announce(app->spaces, process_id);
}

void peer_dispatch_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason,
                                void *user_data) {
    cellapp *app = user_data;
    (void)set;
    (void)role;
    (void)reason;
    /* What was queued for it cannot go. Nothing it owns is taken over: it
     * may be only busy or cut off for a moment; the cluster decides when
     * it is dead (peer_dispatch_on_peer_dead). */
    outbox_drop_peer(app->outbox, process_id);
}

void peer_dispatch_on_peer_dead(peer_set *set, uint64_t process_id, peer_role role, const char *reason,
                                void *user_data) {
    cellapp *app = user_data;
    (void)set;
    (void)reason;
    if (app->runtime.self.stopping) return;
    outbox_drop_peer(app->outbox, process_id);
    if (role == PEER_ROLE_CELLAPP) {
        peer_dispatch_forget_cellapp(app, process_id, true);
        balancer_poke(app->balancer); /* its cells go to the others now */
        return;
    }
    /* The baseapp held these entities' bases and clients. Its backup
     * holders bring the bases back on other baseapps (BaseMoved); until
     * then, or base_restore_wait_ms, the cell entities wait without a
     * client. */
    size_t waiting = reals_lose_bases_of(app->reals, process_id, clock_monotonic_us());
    if (waiting)
        log_info("%zu entities of dead baseapp %" PRIu64 " wait for their bases to be restored", waiting, process_id);
}
