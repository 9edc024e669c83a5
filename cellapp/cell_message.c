/* cell_message.c -- messages to entities' cell parts (proto/cluster.proto,
 * CellMessage), wherever the real is: delivered here in each stream's order
 * (mailbox_inbox), forwarded to the real when this cellapp holds only its
 * ghost or remembers where it went (the ghost route), or failed back to the
 * sender. Also what the messages do once delivered (a client's move, a
 * method call, destroy, congestion), and the calls game code makes: cell
 * methods of other entities (through the mailbox) and client methods. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cell_message.h"

#include "clock.h"
#include "log.h"
#include "method_call.h"
#include "peer_message.h"
#include "property_codec.h"
#include "movement.h"
#include "witness.h"

/* Why 8: a real moves at most once a tick or two; a message still behind
 * it after eight hops is chasing a loop (layouts that disagree). */
#define CELL_MESSAGE_MAX_HOPS 8

struct cell_messages {
    cell_messages_context context;
};

cell_messages *cell_message_create(const cell_messages_context *context) {
    cell_messages *messages = xcalloc(1, sizeof *messages);
    messages->context = *context;
    return messages;
}

void cell_message_free(cell_messages *messages) { free(messages); }

static void cell_message_fail(cell_messages *m, const Tessera__Cluster__CellMessage *message, const char *reason) {
    m->context.counters->messages_failed++;
    log_info("entity %" PRIu64 ": a message from process %" PRIu64 " (stream %" PRIu64 ", #%" PRIu64
             ") cannot be delivered: %s",
             message->entity_id, message->sender_id, message->stream, message->sequence, reason);
    Tessera__Cluster__CellMessageFailed failed = TESSERA__CLUSTER__CELL_MESSAGE_FAILED__INIT;
    failed.entity_id = message->entity_id;
    failed.stream = message->stream;
    failed.sequence = message->sequence;
    failed.reason = (char *)reason;
    if (message->sender_id == m->context.self->process_id) {
        mailbox_on_failed(m->context.mailbox, &failed);
        return;
    }
    peer_send_cell_message_failed(m->context.peers, message->sender_id, &failed);
}

static void cell_message_forward(cell_messages *m, uint64_t target, const Tessera__Cluster__CellMessage *message) {
    Tessera__Cluster__CellMessage copy = *message;
    copy.hops = message->hops + 1;
    Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
    item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_MESSAGE;
    item.message = &copy;
    outbox_to_cellapp(m->context.outbox, target, &item);
    m->context.counters->messages_forwarded++;
}

/* ---- what a delivered message does ----------------------------------------- */

static void cell_message_move(cell_messages *m, cell_entity *entity, const Tessera__Client__Move *move) {
    cell *c = entity->home;
    float x = move->position ? move->position->x : entity->x;
    float y = move->position ? move->position->y : entity->y;
    float z = move->position ? move->position->z : entity->z;
    movement_verdict verdict =
        movement_check(&m->context.settings->movement, c, entity, x, y, z, move->yaw, clock_monotonic_us());
    entity->real->last_sequence = move->sequence;
    if (verdict == MOVEMENT_ACCEPTED) {
        double metres = hypot(hypot((double)x - entity->x, (double)y - entity->y), (double)z - entity->z);
        cell_move(c, entity, x, y, z, move->yaw);
        entity->move_stamp_us = clock_wall_us();
        m->context.hooks->moved(m->context.hooks->host, entity, metres);
        return;
    }
    m->context.counters->moves_refused++;
    log_info("entity %" PRIu64 ": move %u refused (%s); correcting", entity->id, move->sequence,
             movement_verdict_text(verdict));
    Tessera__Client__Correction correction = TESSERA__CLIENT__CORRECTION__INIT;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = entity->x;
    position.y = entity->y;
    position.z = entity->z;
    correction.position = &position;
    correction.yaw = entity->yaw;
    correction.sequence = move->sequence;
    correction.reason = (char *)movement_verdict_text(verdict);
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_CORRECTION;
    message.correction = &correction;
    outbox_message_to_client(m->context.outbox, entity, &message);
}

/* A client's call, at the caller's real: the client may address its own
 * entity and the entities its witness has sent it; method_call_prepare
 * checks the rest. Anything else drops the client. */
static void cell_message_client_call(cell_messages *m, cell_entity *caller, const Tessera__Cluster__CellCall *call) {
    char reason[256];
    uint64_t target_id = call->target_id ? call->target_id : caller->id;
    cell_entity *target = target_id == caller->id ? caller : cell_find(caller->home, target_id);
    if (!target ||
        (target != caller && !(cell_entity_witness(caller) && witness_sees(cell_entity_witness(caller), target->id)))) {
        snprintf(reason, sizeof reason, "called a method of entity %" PRIu64 ", which it does not see", target_id);
        reals_drop_client(m->context.reals, caller, TESSERA__CLIENT__ERROR_CODE__ERROR_UNKNOWN_ENTITY, reason);
        return;
    }
    const entity_def_method *method;
    entity_state *args;
    method_call_verdict verdict =
        method_call_prepare(target->cls, ENTITY_DEF_PART_CELL, call->method_id, call->args.data, call->args.len, true,
                            &method, &args, reason, sizeof reason);
    if (verdict != METHOD_CALL_OK) {
        reals_drop_client(m->context.reals, caller, (Tessera__Client__ErrorCode)method_call_error_code(verdict),
                          reason);
        return;
    }
    cell_message_call(m, target, method, caller->id, args);
    entity_state_free(args);
}

/* A server call (a base's, or game code's on another cellapp): trusted as
 * far as exposure goes, checked like any input. */
static void cell_message_server_call(cell_messages *m, uint64_t sender, cell_entity *target,
                                     const Tessera__Cluster__CellCall *call) {
    char reason[256];
    const entity_def_method *method;
    entity_state *args;
    if (method_call_prepare(target->cls, ENTITY_DEF_PART_CELL, call->method_id, call->args.data, call->args.len, false,
                            &method, &args, reason, sizeof reason) != METHOD_CALL_OK) {
        log_warn("process %" PRIu64 ": call on entity %" PRIu64 " dropped: %s", sender, target->id, reason);
        return;
    }
    m->context.hooks->call(m->context.hooks->host, target, method, call->caller_id, args);
    entity_state_free(args);
}

/* The client of `entity` changed (cluster.proto's ClientBinding): drop the
 * witness, or build a fresh one for the new connection, whose view starts
 * from nothing, and tell the base what the client needs to know. */
static void cell_message_client_binding(cell_messages *m, cell_entity *entity,
                                        const Tessera__Cluster__ClientBinding *binding) {
    entity->real->client_binding = binding->binding;
    if (!binding->attached) {
        bool had = cell_entity_witness(entity) != NULL;
        witness_detach(entity->home, entity);
        if (had) m->context.hooks->witness(m->context.hooks->host, entity, false);
        log_debug("entity %" PRIu64 ": its client left (binding %u): no witness", entity->id, binding->binding);
        return;
    }
    bool had = cell_entity_witness(entity) != NULL;
    witness_reset(entity->home, entity);
    if (!had) m->context.hooks->witness(m->context.hooks->host, entity, true);
    log_debug("entity %" PRIu64 ": a client attached (binding %u): a fresh witness", entity->id, binding->binding);
    reals_reply_created(m->context.reals, entity->real->baseapp_id, entity->id, entity, NULL);
}

/* Sends the base the entity's persistent cell state (CellBackup): the
 * persistent cell properties as a change list, and where it is. */
static void cell_message_backup(cell_messages *m, cell_entity *entity, uint64_t request, bool destroyed) {
    entity_state_mask persistent = {{0}};
    for (size_t p = 0; p < entity->cls->property_count; p++) {
        const entity_def_property *property = &entity->cls->properties[p];
        if (property->audience.on_cell && property->persistent) entity_state_mask_add(&persistent, property->id);
    }
    bit_writer w;
    bit_writer_init(&w);
    property_codec_encode_changes(&w, entity->state, &persistent);
    bit_writer_align(&w);
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = entity->x;
    position.y = entity->y;
    position.z = entity->z;
    Tessera__Cluster__CellBackup backup = TESSERA__CLUSTER__CELL_BACKUP__INIT;
    backup.entity_id = entity->id;
    backup.request = request;
    backup.properties.data = (uint8_t *)bit_writer_data(&w);
    backup.properties.len = bit_writer_bytes(&w);
    backup.space_name = (char *)entity->home->space_name;
    backup.position = &position;
    backup.yaw = entity->yaw;
    backup.destroyed = destroyed;
    if (peer_send_cell_backup(m->context.peers, entity->real->baseapp_id, &backup) != 0)
        log_warn("entity %" PRIu64 ": its baseapp %" PRIu64 " is not up: the cell backup is lost", entity->id,
                 entity->real->baseapp_id);
    bit_writer_close(&w);
}

/* What the message asks of the real `entity`. The base-only bodies come
 * from the entity's own baseapp or not at all. */
static void cell_message_dispatch(cell_messages *m, cell_entity *entity, const Tessera__Cluster__CellMessage *message) {
    bool from_base = message->sender_id == entity->real->baseapp_id && entity->real->baseapp_id != 0;
    switch (message->body_case) {
        case TESSERA__CLUSTER__CELL_MESSAGE__BODY_CLIENT_MOVE:
            if (from_base && message->client_move->move) cell_message_move(m, entity, message->client_move->move);
            break;
        case TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL:
            if (message->call->from_client) {
                if (from_base) cell_message_client_call(m, entity, message->call);
            } else {
                cell_message_server_call(m, message->sender_id, entity, message->call);
            }
            break;
        case TESSERA__CLUSTER__CELL_MESSAGE__BODY_DESTROY:
            if (!from_base) break;
            if (message->destroy->backup) cell_message_backup(m, entity, message->destroy->request, true);
            reals_destroy(m->context.reals, entity);
            break;
        case TESSERA__CLUSTER__CELL_MESSAGE__BODY_CLIENT_BINDING:
            if (from_base) cell_message_client_binding(m, entity, message->client_binding);
            break;
        case TESSERA__CLUSTER__CELL_MESSAGE__BODY_BACKUP:
            if (from_base) cell_message_backup(m, entity, message->backup->request, false);
            break;
        case TESSERA__CLUSTER__CELL_MESSAGE__BODY_CONGESTION:
            if (from_base && cell_entity_witness(entity))
                witness_set_congested(cell_entity_witness(entity), message->congestion->congested);
            break;
        case TESSERA__CLUSTER__CELL_MESSAGE__BODY_EVENT:
            event_route_on_message(m->context.events, entity, message->event);
            return;
        case TESSERA__CLUSTER__CELL_MESSAGE__BODY_IO_INPUT:
            io_route_on_message(m->context.io, entity, message->io_input);
            return;
        case TESSERA__CLUSTER__CELL_MESSAGE__BODY_BASE_MOVED: {
            /* From the baseapp its base was restored on: not its baseapp
             * yet, by definition (reals_base_moved checks the claim). */
            char why[160];
            if (reals_base_moved(m->context.reals, entity, message->base_moved->dead_baseapp_id, message->sender_id,
                                 why, sizeof why) != 0)
                cell_message_fail(m, message, why);
            return;
        }
        default:
            log_warn("process %" PRIu64 ": a message for entity %" PRIu64 " with no body: ignored", message->sender_id,
                     entity->id);
            return;
    }
    if (!from_base && message->body_case != TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL)
        log_debug("entity %" PRIu64 ": a base-only message from process %" PRIu64 ", not its baseapp: ignored",
                  entity->id, message->sender_id);
}

/* Delivers held messages of `entity` whose turn has come (or whose gap
 * waited `gap_us`). */
static void cell_message_drain(cell_messages *m, cell_entity *entity, uint64_t gap_us) {
    uint64_t now_us = clock_monotonic_us();
    for (;;) {
        if (entity->destroyed || !entity->real || !entity->real->inbox) return;
        size_t length;
        uint64_t skipped;
        uint8_t *encoded = mailbox_inbox_next(entity->real->inbox, now_us, gap_us, &length, &skipped);
        if (!encoded) return;
        if (skipped) {
            m->context.counters->stream_gaps += skipped;
            log_warn("entity %" PRIu64 ": %" PRIu64 " messages never arrived; going on without them", entity->id,
                     skipped);
        }
        Tessera__Cluster__CellMessage *message = tessera__cluster__cell_message__unpack(NULL, length, encoded);
        free(encoded);
        if (!message) continue;
        cell_message_dispatch(m, entity, message);
        tessera__cluster__cell_message__free_unpacked(message, NULL);
    }
}

static void cell_message_deliver(cell_messages *m, cell_entity *entity, const Tessera__Cluster__CellMessage *message) {
    if (!entity->real->inbox) entity->real->inbox = mailbox_inbox_create();
    uint64_t now_us = clock_monotonic_us();
    switch (mailbox_inbox_offer(entity->real->inbox, message->sender_id, message->stream, message->sequence, now_us)) {
        case MAILBOX_DELIVER:
            cell_message_dispatch(m, entity, message);
            cell_message_drain(m, entity, UINT64_MAX);
            break;
        case MAILBOX_HOLD: {
            size_t length = tessera__cluster__cell_message__get_packed_size(message);
            uint8_t *encoded = xmalloc(length ? length : 1);
            tessera__cluster__cell_message__pack(message, encoded);
            mailbox_inbox_hold(entity->real->inbox, message->sender_id, message->sequence, encoded, length, now_us);
            free(encoded);
            break;
        }
        case MAILBOX_DUPLICATE:
            m->context.counters->duplicates++;
            log_debug("entity %" PRIu64 ": message #%" PRIu64 " from process %" PRIu64 " delivered before: dropped",
                      entity->id, message->sequence, message->sender_id);
            break;
    }
}

void cell_message_on_message(cell_messages *m, uint64_t peer, peer_role role,
                             const Tessera__Cluster__CellMessage *message) {
    if (role == PEER_ROLE_BASEAPP && message->sender_id != peer) {
        log_warn("baseapp %" PRIu64 " sent a message as process %" PRIu64 ": ignored", peer, message->sender_id);
        return;
    }
    if (message->entity_id == 0 || message->sequence == 0) {
        log_warn("%s %" PRIu64 " sent a message without an entity or a sequence: ignored", peer_role_name(role), peer);
        return;
    }
    cell_entity *entity = spaces_find_entity(m->context.spaces, message->entity_id);
    if (entity && entity->kind == CELL_ENTITY_REAL) {
        cell_message_deliver(m, entity, message);
        return;
    }
    uint64_t target = entity ? entity->owner_cellapp
                             : ghost_route_find(m->context.route, message->entity_id, clock_monotonic_us() / 1000);
    if (!target || target == m->context.self->process_id) {
        cell_message_fail(m, message, "the entity is not real anywhere this cellapp knows of");
    } else if (message->hops >= CELL_MESSAGE_MAX_HOPS) {
        cell_message_fail(m, message, "it was forwarded too often (cells that disagree where the real is)");
    } else if (!peer_set_is_up(m->context.peers, target)) {
        cell_message_fail(m, message, "the cellapp holding the real is not up");
    } else {
        cell_message_forward(m, target, message);
    }
}

void cell_message_tick(cell_messages *m, cell *c) {
    uint64_t gap_us = (uint64_t)m->context.settings->cell_stream_gap_ms * 1000u;
    for (size_t i = 0; i < c->count; i++) {
        cell_entity *entity = c->by_index[i];
        if (entity->real && entity->real->inbox && mailbox_inbox_held_count(entity->real->inbox))
            cell_message_drain(m, entity, gap_us);
    }
}

/* ---- calls game code makes ---------------------------------------------------- */

void cell_message_call(cell_messages *m, cell_entity *target, const entity_def_method *method, uint64_t caller_id,
                       const entity_state *args) {
    if (target->kind == CELL_ENTITY_REAL) {
        m->context.hooks->call(m->context.hooks->host, target, method, caller_id, args);
        return;
    }
    /* A ghost: the method runs where the real is. */
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(args, &w);
    Tessera__Cluster__CellCall call = TESSERA__CLUSTER__CELL_CALL__INIT;
    call.caller_id = caller_id;
    call.method_id = method->id;
    call.args.data = (uint8_t *)bit_writer_data(&w);
    call.args.len = bit_writer_bytes(&w);
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.entity_id = target->id;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL;
    message.call = &call;
    mailbox_send_cell(m->context.mailbox, &message, target->owner_cellapp, clock_monotonic_us() / 1000);
    bit_writer_close(&w);
}

void cell_message_call_client(cell_entity *entity, const entity_def_method *method, const entity_state *args,
                              bool every_observer) {
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(args, &w);
    const uint8_t *data = bit_writer_data(&w);
    size_t length = bit_writer_bytes(&w);
    if (!every_observer) {
        if (cell_entity_witness(entity))
            witness_queue_call(cell_entity_witness(entity), entity->id, method->id, data, length);
    } else {
        witness_queue_call_for_observers(entity, method->id, data, length);
        /* Observers in other cells see a ghost: the call goes with it. */
        if (entity->kind == CELL_ENTITY_REAL && entity->real->haunt_count)
            cell_queue_broadcast(entity, method->id, data, length);
    }
    bit_writer_close(&w);
}
