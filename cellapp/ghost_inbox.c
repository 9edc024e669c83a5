/* ghost_inbox.c -- what other cellapps send about their reals, in the order
 * of each real's incarnations.
 *
 * A real that moves between cellapps changes incarnation; its ghost
 * messages from the old cellapp and the new one travel on different
 * channels and may cross. Every GhostMessage, every entry of a GhostMoves
 * and every Offload is offered to the incarnation books (ghost_order.h)
 * first: applied now, held (its CellItem's bytes kept) until the earlier
 * real's last message has arrived, then replayed in order, or dropped as
 * stale. Ghost messages are applied by haunt.c, offloads by offload.c; this
 * file owns only the order.
 */
#include "ghost_inbox.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"

struct ghost_inbox {
    ghost_inbox_context context;
};

ghost_inbox *ghost_inbox_create(const ghost_inbox_context *context) {
    ghost_inbox *inbox = xcalloc(1, sizeof *inbox);
    inbox->context = *context;
    return inbox;
}

void ghost_inbox_free(ghost_inbox *inbox) { free(inbox); }

static void ghost_inbox_release(ghost_inbox *inbox, uint64_t entity_id);

void ghost_inbox_free_held(void *payload, void *context) {
    (void)context;
    free(payload);
}

static ghost_order_kind ghost_inbox_kind_of(const Tessera__Cluster__GhostMessage *message) {
    switch (message->body_case) {
        case TESSERA__CLUSTER__GHOST_MESSAGE__BODY_CREATE:
            return GHOST_ORDER_CREATE;
        case TESSERA__CLUSTER__GHOST_MESSAGE__BODY_DELETE:
            return GHOST_ORDER_DELETE;
        case TESSERA__CLUSTER__GHOST_MESSAGE__BODY_SET_REAL:
            return GHOST_ORDER_SET_REAL;
        default:
            return GHOST_ORDER_UPDATE;
    }
}

/* A held item, as the books keep it: the encoded CellItem and its sender. */
typedef struct ghost_inbox_item {
    uint64_t peer;
    size_t length;
    uint8_t bytes[];
} ghost_inbox_item;

static void *ghost_inbox_hold_item(uint64_t peer, const uint8_t *item, size_t length) {
    ghost_inbox_item *held = xmalloc(sizeof *held + (length ? length : 1));
    held->peer = peer;
    held->length = length;
    if (length) memcpy(held->bytes, item, length);
    return held;
}

void ghost_inbox_on_message(ghost_inbox *inbox, uint64_t peer, const Tessera__Cluster__GhostMessage *message,
                            const uint8_t *item, size_t item_length) {
    if (message->body_case == TESSERA__CLUSTER__GHOST_MESSAGE__BODY__NOT_SET || message->entity_id == 0 ||
        (message->body_case == TESSERA__CLUSTER__GHOST_MESSAGE__BODY_SET_REAL && !message->set_real->next_cellapp_id)) {
        log_warn("cellapp %" PRIu64 " sent an empty or malformed ghost message: ignored", peer);
        return;
    }
    ghost_order_message book = {
        ghost_inbox_kind_of(message), peer, message->incarnation,
        message->body_case == TESSERA__CLUSTER__GHOST_MESSAGE__BODY_SET_REAL ? message->set_real->next_cellapp_id : 0,
        NULL};
    switch (ghost_order_offer(inbox->context.ghost_order, message->entity_id, &book, clock_monotonic_us())) {
        case GHOST_ORDER_APPLY:
            haunt_apply(inbox->context.haunts, peer, message);
            ghost_inbox_release(inbox, message->entity_id);
            break;
        case GHOST_ORDER_HOLD:
            ghost_order_hold_payload(inbox->context.ghost_order, message->entity_id,
                                     ghost_inbox_hold_item(peer, item, item_length));
            log_debug("entity %" PRIu64 ": %s of incarnation %u from cellapp %" PRIu64 " held for an earlier real",
                      message->entity_id, ghost_order_kind_name(book.kind), message->incarnation, peer);
            break;
        case GHOST_ORDER_STALE:
            log_debug("entity %" PRIu64 ": stale %s of incarnation %u from cellapp %" PRIu64 ": dropped",
                      message->entity_id, ghost_order_kind_name(book.kind), message->incarnation, peer);
            break;
    }
}

void ghost_inbox_on_moves(ghost_inbox *inbox, uint64_t peer, const Tessera__Cluster__GhostMoves *moves) {
    size_t n = moves->n_entity_id;
    if (moves->n_incarnation != n || moves->n_move_count != n || moves->n_x != n || moves->n_y != n ||
        moves->n_z != n || moves->n_yaw != n) {
        log_warn("cellapp %" PRIu64 " sent ghost moves whose arrays differ in length: ignored", peer);
        return;
    }
    uint64_t now_us = clock_monotonic_us();
    for (size_t i = 0; i < n; i++) {
        uint64_t id = moves->entity_id[i];
        ghost_order_message book = {GHOST_ORDER_UPDATE, peer, moves->incarnation[i], 0, NULL};
        ghost_order_verdict verdict = ghost_order_offer(inbox->context.ghost_order, id, &book, now_us);
        if (verdict == GHOST_ORDER_STALE) continue;
        Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
        position.x = moves->x[i];
        position.y = moves->y[i];
        position.z = moves->z[i];
        Tessera__Cluster__GhostUpdate update = TESSERA__CLUSTER__GHOST_UPDATE__INIT;
        update.position = &position;
        update.yaw = moves->yaw[i];
        update.move_count = moves->move_count[i];
        update.property_count = CELL_CHANGE_COUNT_MASK + 1; /* not told: unchanged */
        Tessera__Cluster__GhostMessage message = TESSERA__CLUSTER__GHOST_MESSAGE__INIT;
        message.entity_id = id;
        message.incarnation = moves->incarnation[i];
        message.body_case = TESSERA__CLUSTER__GHOST_MESSAGE__BODY_UPDATE;
        message.update = &update;
        if (verdict == GHOST_ORDER_APPLY) {
            haunt_apply(inbox->context.haunts, peer, &message);
            continue;
        }
        /* Held for an earlier real: kept as the GhostUpdate it stands for. */
        Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
        item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_GHOST;
        item.ghost = &message;
        size_t length = tessera__cluster__cell_item__get_packed_size(&item);
        ghost_inbox_item *held = xmalloc(sizeof *held + (length ? length : 1));
        held->peer = peer;
        held->length = length;
        tessera__cluster__cell_item__pack(&item, held->bytes);
        ghost_order_hold_payload(inbox->context.ghost_order, id, held);
    }
}

/* Replays one held item. */
static void ghost_inbox_replay(ghost_inbox *inbox, ghost_inbox_item *held) {
    Tessera__Cluster__CellItem *item = tessera__cluster__cell_item__unpack(NULL, held->length, held->bytes);
    if (!item) {
        log_warn("a held item from cellapp %" PRIu64 " does not decode: dropped", held->peer);
        return;
    }
    if (item->body_case == TESSERA__CLUSTER__CELL_ITEM__BODY_GHOST)
        haunt_apply(inbox->context.haunts, held->peer, item->ghost);
    else if (item->body_case == TESSERA__CLUSTER__CELL_ITEM__BODY_OFFLOAD)
        offload_apply(inbox->context.offloads, held->peer, item->offload);
    tessera__cluster__cell_item__free_unpacked(item, NULL);
}

static void ghost_inbox_release(ghost_inbox *inbox, uint64_t entity_id) {
    ghost_order_message message;
    for (;;) {
        ghost_order_event event = ghost_order_next(inbox->context.ghost_order, entity_id, &message);
        if (event == GHOST_ORDER_NONE) return;
        if (event == GHOST_ORDER_LOST) {
            cell_entity *ghost = spaces_find_entity(inbox->context.spaces, entity_id);
            if (ghost && ghost->kind == CELL_ENTITY_GHOST) {
                log_debug("ghost %" PRIu64 ": its real's cellapp is gone: dropped", entity_id);
                cell_destroy(ghost->home, ghost);
            }
            continue;
        }
        ghost_inbox_replay(inbox, message.payload);
        free(message.payload);
    }
}

void ghost_inbox_on_offload(ghost_inbox *inbox, uint64_t peer, const Tessera__Cluster__Offload *offload,
                            const uint8_t *item, size_t item_length) {
    const Tessera__Cluster__CellEntityState *state = offload->entity;
    if (!state || state->entity_id == 0 || state->incarnation < 2) {
        log_warn("cellapp %" PRIu64 " sent a malformed offload: ignored", peer);
        return;
    }
    ghost_order_message book = {GHOST_ORDER_OFFLOAD, peer, state->incarnation - 1, inbox->context.self->process_id,
                                NULL};
    switch (ghost_order_offer(inbox->context.ghost_order, state->entity_id, &book, clock_monotonic_us())) {
        case GHOST_ORDER_APPLY:
            offload_apply(inbox->context.offloads, peer, offload);
            ghost_inbox_release(inbox, state->entity_id);
            break;
        case GHOST_ORDER_HOLD:
            ghost_order_hold_payload(inbox->context.ghost_order, state->entity_id,
                                     ghost_inbox_hold_item(peer, item, item_length));
            log_debug("entity %" PRIu64 ": offload from cellapp %" PRIu64 " held for an earlier real", state->entity_id,
                      peer);
            break;
        case GHOST_ORDER_STALE:
            offload_refuse(inbox->context.offloads, peer, offload, "a later incarnation of it is known here");
            break;
    }
}

void ghost_inbox_peer_down(ghost_inbox *inbox, uint64_t peer, bool keep_orphans) {
    size_t capacity = ghost_order_size(inbox->context.ghost_order);
    uint64_t *ids = xcalloc(capacity ? capacity : 1, sizeof *ids);
    size_t count = keep_orphans ? ghost_order_peer_orphans(inbox->context.ghost_order, peer, ids, capacity)
                                : ghost_order_peer_down(inbox->context.ghost_order, peer, ids, capacity);
    for (size_t i = 0; i < count; i++) ghost_inbox_release(inbox, ids[i]);
    free(ids);
    if (count) log_info("cellapp %" PRIu64 " gone: %zu entities' held messages re-examined", peer, count);
}
