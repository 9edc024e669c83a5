/* cellapp.c -- what the cellapp does for its peers and on each tick:
 * creating and destroying cell entities at a baseapp's request, relaying
 * client movement into the space, checking and running method calls (a
 * client's, a peer's), packing each changed entity once and running the
 * witnesses once per tick, and shipping their client messages to the
 * baseapps in one batch each. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "clock.h"
#include "log.h"
#include "method_call.h"
#include "property_codec.h"

/* Client messages for one baseapp, gathered over a tick and sent as one
 * ToClientBatch. The payloads are owned here until the flush. */
struct cellapp_outbox {
    Tessera__Cluster__ToClient *messages;
    size_t count, capacity;
};

static cellapp_outbox *cellapp_outbox_for(cellapp *app, uint64_t baseapp_id) {
    cellapp_outbox *box = id_map_get(&app->outboxes, baseapp_id);
    if (!box) {
        box = xcalloc(1, sizeof *box);
        id_map_put(&app->outboxes, baseapp_id, box);
    }
    return box;
}

/* Queues `payload` (ownership passes to the outbox) for the client of
 * `entity_id`, whose base lives on `baseapp_id`. */
static void cellapp_outbox_add(cellapp *app, uint64_t baseapp_id, uint64_t entity_id, uint8_t *payload,
                               size_t length) {
    cellapp_outbox *box = cellapp_outbox_for(app, baseapp_id);
    if (box->count == box->capacity) {
        box->capacity = box->capacity ? box->capacity * 2 : 64;
        box->messages = xrealloc(box->messages, box->capacity * sizeof *box->messages);
    }
    Tessera__Cluster__ToClient message = TESSERA__CLUSTER__TO_CLIENT__INIT;
    message.entity_id = entity_id;
    message.payload.data = payload;
    message.payload.len = length;
    box->messages[box->count++] = message;
}

static void cellapp_outbox_flush(cellapp *app) {
    size_t cursor = 0;
    uint64_t baseapp_id;
    void *value;
    while (id_map_next(&app->outboxes, &cursor, &baseapp_id, &value)) {
        cellapp_outbox *box = value;
        if (box->count == 0) continue;
        Tessera__Cluster__ToClient **pointers = xcalloc(box->count, sizeof *pointers);
        for (size_t i = 0; i < box->count; i++) pointers[i] = &box->messages[i];
        Tessera__Cluster__ToClientBatch batch = TESSERA__CLUSTER__TO_CLIENT_BATCH__INIT;
        batch.n_messages = box->count;
        batch.messages = pointers;
        Tessera__Cluster__PeerMessage message = TESSERA__CLUSTER__PEER_MESSAGE__INIT;
        message.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_TO_CLIENT;
        message.to_client = &batch;
        /* A baseapp that went away loses its messages; its entities are
         * being destroyed. */
        peer_set_send(app->peers, baseapp_id, &message);
        for (size_t i = 0; i < box->count; i++) free(box->messages[i].payload.data);
        free(pointers);
        box->count = 0;
    }
}

void cellapp_close_outboxes(cellapp *app) {
    size_t cursor = 0;
    uint64_t baseapp_id;
    void *value;
    while (id_map_next(&app->outboxes, &cursor, &baseapp_id, &value)) {
        cellapp_outbox *box = value;
        for (size_t i = 0; i < box->count; i++) free(box->messages[i].payload.data);
        free(box->messages);
        free(box);
    }
    id_map_close(&app->outboxes);
}

void cellapp_send_to_client(cellapp *app, const cell_entity *entity, const Tessera__Client__ServerToClient *message) {
    size_t length = tessera__client__server_to_client__get_packed_size(message);
    uint8_t *payload = xmalloc(length);
    tessera__client__server_to_client__pack(message, payload);
    cellapp_outbox_add(app, entity->baseapp_id, entity->id, payload, length);
}

static void cellapp_note_destroyed_real(cellapp *app, uint64_t entity_id) {
    if (app->destroyed_count == app->destroyed_capacity) {
        app->destroyed_capacity = app->destroyed_capacity ? app->destroyed_capacity * 2 : 64;
        app->destroyed_reals = xrealloc(app->destroyed_reals, app->destroyed_capacity * sizeof *app->destroyed_reals);
    }
    app->destroyed_reals[app->destroyed_count++] = entity_id;
}

static void cellapp_destroy_real(cellapp *app, cell_entity *entity) {
    if (entity->destroyed) return;
    space_destroy(&app->space, entity);
    cellapp_note_destroyed_real(app, entity->id);
}

/* xorshift64*: spawn points need spread, not cryptographic quality. */
double cellapp_random_unit(cellapp *app) {
    uint64_t x = app->random_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    app->random_state = x;
    return (double)((x * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void cellapp_reply_created(cellapp *app, uint64_t baseapp_id, uint64_t entity_id, const cell_entity *entity,
                                  const char *error) {
    Tessera__Cluster__CellEntityCreated reply = TESSERA__CLUSTER__CELL_ENTITY_CREATED__INIT;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_min = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_max = TESSERA__CLIENT__VECTOR3__INIT;
    reply.entity_id = entity_id;
    reply.ok = entity != NULL;
    reply.error = (char *)(error ? error : "");
    if (entity) {
        position.x = entity->x;
        position.y = entity->y;
        position.z = entity->z;
        reply.position = &position;
        reply.yaw = entity->yaw;
        reply.view_radius = (float)app->settings.view_radius;
        reply.view_hysteresis = (float)app->settings.view_hysteresis;
        reply.max_speed = (float)app->settings.max_speed;
        reply.tick_hz = (uint32_t)app->settings.tick_hz;
        reply.space_name = app->space.name;
        reply.max_aliases = (uint32_t)app->settings.max_aliases;
        reply.position_precision = app->volatile_config.precision;
        world_min.x = (float)app->volatile_config.min[0];
        world_min.y = (float)app->volatile_config.min[1];
        world_min.z = (float)app->volatile_config.min[2];
        world_max.x = (float)app->volatile_config.max[0];
        world_max.y = (float)app->volatile_config.max[1];
        world_max.z = (float)app->volatile_config.max[2];
        reply.world_min = &world_min;
        reply.world_max = &world_max;
        reply.yaw_steps = app->volatile_config.yaw_steps;
        reply.detail_near_distance = (float)app->settings.detail_near_distance;
        reply.detail_medium_distance = (float)app->settings.detail_medium_distance;
    }
    Tessera__Cluster__PeerMessage message = TESSERA__CLUSTER__PEER_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_ENTITY_CREATED;
    message.cell_entity_created = &reply;
    peer_set_send(app->peers, baseapp_id, &message);
}

static void cellapp_create_entity(cellapp *app, uint64_t baseapp_id, const Tessera__Cluster__CreateCellEntity *request) {
    const cellapp_settings *settings = &app->settings;
    space *sp = &app->space;
    if (request->space_name && request->space_name[0] && strcmp(request->space_name, sp->name) != 0) {
        cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "unknown space");
        return;
    }
    if ((int64_t)sp->real_count >= settings->max_entities) {
        cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "cellapp is full");
        return;
    }
    const entity_def_class *cls =
        request->entity_type ? entity_def_registry_find_class(app->definitions, request->entity_type) : NULL;
    if (!cls) {
        log_warn("baseapp %" PRIu64 " asked for entity %" PRIu64 " of type '%s', which the definitions lack",
                 baseapp_id, request->entity_id, request->entity_type ? request->entity_type : "");
        cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "unknown entity type");
        return;
    }
    float x, y = 0, z;
    if (request->has_position && request->position) {
        x = request->position->x;
        y = request->position->y;
        z = request->position->z;
        if (!isfinite(x) || !isfinite(y) || !isfinite(z) || x < settings->world_min_x || x > settings->world_max_x ||
            z < settings->world_min_z || z > settings->world_max_z) {
            cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "position outside the world");
            return;
        }
    } else {
        /* Uniform over the spawn disc. */
        double angle = cellapp_random_unit(app) * 2.0 * M_PI;
        double distance = sqrt(cellapp_random_unit(app)) * settings->spawn_radius;
        x = (float)(settings->spawn_x + distance * cos(angle));
        z = (float)(settings->spawn_z + distance * sin(angle));
    }
    /* The position is checked above: space_add refuses only a taken id. */
    cell_entity *entity = space_add(sp, request->entity_id, CELL_ENTITY_REAL, cls, x, y, z);
    if (!entity) {
        log_warn("baseapp %" PRIu64 " asked for entity %" PRIu64 ", which already exists here", baseapp_id,
                 request->entity_id);
        cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "entity id already exists");
        return;
    }
    /* The base's starting values of the cell properties (its cellData). */
    if (request->cell_properties.len) {
        entity_state_mask on_cell = {{0}};
        for (size_t p = 0; p < cls->property_count; p++)
            if (cls->properties[p].audience.on_cell) entity_state_mask_add(&on_cell, (uint16_t)p);
        bit_reader reader;
        bit_reader_init(&reader, request->cell_properties.data, request->cell_properties.len);
        int rc = property_codec_decode_changes(&reader, entity->state, &on_cell, NULL);
        if (rc != 0) {
            log_warn("baseapp %" PRIu64 ": entity %" PRIu64 "'s cell properties do not decode: %s", baseapp_id,
                     request->entity_id, property_codec_strerror(rc));
            space_destroy(sp, entity);
            cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "malformed cell properties");
            return;
        }
    }
    entity->baseapp_id = baseapp_id;
    entity->yaw = isfinite(request->yaw) ? request->yaw : 0.0f;
    entity->move_stamp_us = clock_wall_us();
    movement_reset(settings, entity, clock_monotonic_us());
    if (request->has_client) witness_attach(app, entity);
    game_on_real_created(app, entity);
    log_debug("created %s %" PRIu64 " for baseapp %" PRIu64 " at (%.1f, %.1f)", entity->type, entity->id, baseapp_id,
              (double)x, (double)z);
    cellapp_reply_created(app, baseapp_id, request->entity_id, entity, NULL);
}

/* Finds the real `entity_id` if it belongs to `baseapp_id`; anything else is
 * a stale or forged request and is logged, not obeyed. */
static cell_entity *cellapp_find_real_of(cellapp *app, uint64_t baseapp_id, uint64_t entity_id, const char *what) {
    cell_entity *entity = space_find(&app->space, entity_id);
    if (!entity || entity->kind != CELL_ENTITY_REAL || entity->baseapp_id != baseapp_id) {
        log_debug("baseapp %" PRIu64 ": %s for entity %" PRIu64 ", which is not its real here: ignored", baseapp_id,
                  what, entity_id);
        return NULL;
    }
    return entity;
}

static void cellapp_client_move(cellapp *app, uint64_t baseapp_id, const Tessera__Cluster__ClientMove *request) {
    cell_entity *entity = cellapp_find_real_of(app, baseapp_id, request->entity_id, "move");
    if (!entity || !request->move) return;
    const Tessera__Client__Move *move = request->move;
    float x = move->position ? move->position->x : entity->x;
    float y = move->position ? move->position->y : entity->y;
    float z = move->position ? move->position->z : entity->z;
    movement_verdict verdict = movement_check(&app->settings, entity, x, y, z, move->yaw, clock_monotonic_us());
    entity->last_sequence = move->sequence;
    if (verdict == MOVEMENT_ACCEPTED) {
        double metres = hypot(hypot((double)x - entity->x, (double)y - entity->y), (double)z - entity->z);
        space_move(&app->space, entity, x, y, z, move->yaw);
        entity->move_stamp_us = clock_wall_us();
        game_on_moved(app, entity, metres);
        return;
    }
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
    cellapp_send_to_client(app, entity, &message);
}


/* ---- method calls --------------------------------------------------------- */

/* Asks the baseapp of real `entity` to drop its client, which broke the
 * rules; the cell entity goes when the baseapp destroys it. */
static void cellapp_drop_client(cellapp *app, const cell_entity *entity, Tessera__Client__ErrorCode code,
                                const char *reason) {
    log_warn("entity %" PRIu64 ": dropping its client: %s", entity->id, reason);
    Tessera__Cluster__DropClient drop = TESSERA__CLUSTER__DROP_CLIENT__INIT;
    drop.entity_id = entity->id;
    drop.code = code;
    drop.reason = (char *)reason;
    Tessera__Cluster__PeerMessage message = TESSERA__CLUSTER__PEER_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_DROP_CLIENT;
    message.drop_client = &drop;
    peer_set_send(app->peers, entity->baseapp_id, &message);
}

/* A client's call of a cell method, relayed by its baseapp. The client may
 * address its own entity and the entities its witness has sent it; the
 * method must exist on the target's class and be exposed, and the
 * arguments must be exactly the declared types. Anything else drops the
 * client. */
static void cellapp_client_call(cellapp *app, uint64_t baseapp_id, const Tessera__Cluster__CellCall *call) {
    cell_entity *caller = cellapp_find_real_of(app, baseapp_id, call->caller_id, "call");
    if (!caller) return;
    char reason[256];
    cell_entity *target = call->target_id == caller->id ? caller : space_find(&app->space, call->target_id);
    if (!target || (target != caller && !(caller->witness && witness_sees(caller->witness, target->id)))) {
        snprintf(reason, sizeof reason, "called a method of entity %" PRIu64 ", which it does not see",
                 call->target_id);
        cellapp_drop_client(app, caller, TESSERA__CLIENT__ERROR_CODE__ERROR_UNKNOWN_ENTITY, reason);
        return;
    }
    if (call->method_id >= target->cls->method_count[ENTITY_DEF_PART_CELL]) {
        snprintf(reason, sizeof reason, "called cell method %u of %s, which has %zu", call->method_id,
                 target->cls->name, target->cls->method_count[ENTITY_DEF_PART_CELL]);
        cellapp_drop_client(app, caller, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT, reason);
        return;
    }
    const entity_def_method *method = &target->cls->methods[ENTITY_DEF_PART_CELL][call->method_id];
    if (!method->exposed) {
        snprintf(reason, sizeof reason, "called %s.%s, which is not exposed to clients", target->cls->name,
                 method->name);
        cellapp_drop_client(app, caller, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_EXPOSED, reason);
        return;
    }
    entity_state *args = method_call_args_create(method);
    int rc = method_call_decode(args, call->args.data, call->args.len);
    if (rc != 0) {
        snprintf(reason, sizeof reason, "called %s.%s with arguments that are not its declared types: %s",
                 target->cls->name, method->name, method_call_strerror(rc));
        cellapp_drop_client(app, caller, TESSERA__CLIENT__ERROR_CODE__ERROR_BAD_ARGUMENTS, reason);
    } else {
        cellapp_call_cell(app, target, method, caller->id, args);
    }
    entity_state_free(args);
}

void cellapp_call_cell(cellapp *app, cell_entity *target, const entity_def_method *method, uint64_t caller_id,
                       const entity_state *args) {
    if (target->kind == CELL_ENTITY_REAL) {
        game_run_method(app, target, method, caller_id, args);
        return;
    }
    /* A ghost: the method runs where the real is. */
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(args, &w);
    Tessera__Cluster__CellCall call = TESSERA__CLUSTER__CELL_CALL__INIT;
    call.caller_id = caller_id;
    call.target_id = target->id;
    call.method_id = method->id;
    call.args.data = (uint8_t *)bit_writer_data(&w);
    call.args.len = bit_writer_bytes(&w);
    Tessera__Cluster__PeerMessage message = TESSERA__CLUSTER__PEER_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_CALL;
    message.cell_call = &call;
    if (peer_set_send(app->peers, target->owner_cellapp, &message) != 0)
        log_info("entity %" PRIu64 ": %s.%s for its real on cellapp %" PRIu64 " is lost: the cellapp is gone",
                 target->id, target->cls->name, method->name, target->owner_cellapp);
    bit_writer_close(&w);
}

/* A peer cellapp's call for one of our reals (it held a ghost). Trusted as
 * far as exposure goes, but checked like any input. */
static void cellapp_peer_cell_call(cellapp *app, uint64_t peer_id, const Tessera__Cluster__CellCall *call) {
    cell_entity *target = space_find(&app->space, call->target_id);
    if (!target || target->kind != CELL_ENTITY_REAL) {
        log_debug("cellapp %" PRIu64 ": call for entity %" PRIu64 ", which is not a real here: dropped", peer_id,
                  call->target_id);
        return;
    }
    if (call->method_id >= target->cls->method_count[ENTITY_DEF_PART_CELL]) {
        log_warn("cellapp %" PRIu64 ": call of cell method %u of %s, which does not exist: dropped", peer_id,
                 call->method_id, target->cls->name);
        return;
    }
    const entity_def_method *method = &target->cls->methods[ENTITY_DEF_PART_CELL][call->method_id];
    entity_state *args = method_call_args_create(method);
    int rc = method_call_decode(args, call->args.data, call->args.len);
    if (rc != 0)
        log_warn("cellapp %" PRIu64 ": call of %s.%s with bad arguments (%s): dropped", peer_id, target->cls->name,
                 method->name, method_call_strerror(rc));
    else
        game_run_method(app, target, method, call->caller_id, args);
    entity_state_free(args);
}

/* Queues a client call for every witness here that sees `entity_id`. */
void cellapp_queue_for_observers(cellapp *app, uint64_t entity_id, uint32_t method_id, const uint8_t *args,
                                 size_t length) {
    space *sp = &app->space;
    for (size_t i = 0; i < sp->count; i++) {
        cell_entity *observer = sp->by_index[i];
        if (observer->witness && !observer->destroyed && witness_sees(observer->witness, entity_id))
            witness_queue_call(observer->witness, entity_id, method_id, args, length);
    }
}

void cellapp_call_client(cellapp *app, cell_entity *entity, const entity_def_method *method, const entity_state *args,
                         bool every_observer) {
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(args, &w);
    const uint8_t *data = bit_writer_data(&w);
    size_t length = bit_writer_bytes(&w);
    if (!every_observer) {
        if (entity->witness) witness_queue_call(entity->witness, entity->id, method->id, data, length);
    } else {
        cellapp_queue_for_observers(app, entity->id, method->id, data, length);
        if (entity->kind == CELL_ENTITY_REAL) {
            /* Observers on other cellapps see a ghost: the call goes with it. */
            if (entity->broadcast_count == entity->broadcast_capacity) {
                entity->broadcast_capacity = entity->broadcast_capacity ? entity->broadcast_capacity * 2 : 4;
                entity->broadcast_calls =
                    xrealloc(entity->broadcast_calls, entity->broadcast_capacity * sizeof *entity->broadcast_calls);
            }
            Tessera__Client__ClientCall call = TESSERA__CLIENT__CLIENT_CALL__INIT;
            call.entity_id = entity->id;
            call.method_id = method->id;
            call.args.data = xmalloc(length ? length : 1);
            if (length) memcpy(call.args.data, data, length);
            call.args.len = length;
            entity->broadcast_calls[entity->broadcast_count++] = call;
        }
    }
    bit_writer_close(&w);
}

void cellapp_on_message(peer_set *set, uint64_t process_id, peer_role role,
                        const Tessera__Cluster__PeerMessage *message, void *user_data) {
    cellapp *app = user_data;
    (void)set;
    switch (message->body_case) {
    case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CREATE_CELL_ENTITY:
        if (role == PEER_ROLE_BASEAPP) cellapp_create_entity(app, process_id, message->create_cell_entity);
        return;
    case TESSERA__CLUSTER__PEER_MESSAGE__BODY_DESTROY_CELL_ENTITY:
        if (role == PEER_ROLE_BASEAPP) {
            cell_entity *entity =
                cellapp_find_real_of(app, process_id, message->destroy_cell_entity->entity_id, "destroy");
            if (entity) cellapp_destroy_real(app, entity);
        }
        return;
    case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CLIENT_MOVE:
        if (role == PEER_ROLE_BASEAPP) cellapp_client_move(app, process_id, message->client_move);
        return;
    case TESSERA__CLUSTER__PEER_MESSAGE__BODY_GHOSTS:
        if (role == PEER_ROLE_CELLAPP) ghost_apply(app, process_id, message->ghosts);
        return;
    case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CLIENT_CONGESTION:
        if (role == PEER_ROLE_BASEAPP) {
            cell_entity *entity =
                cellapp_find_real_of(app, process_id, message->client_congestion->entity_id, "congestion");
            if (entity && entity->witness) witness_set_congested(entity->witness, message->client_congestion->congested);
        }
        return;
    case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_CALL:
        if (role == PEER_ROLE_BASEAPP) cellapp_client_call(app, process_id, message->cell_call);
        else cellapp_peer_cell_call(app, process_id, message->cell_call);
        return;
    default:
        log_warn("%s %" PRIu64 " sent a message this cellapp does not handle (%d): ignored", peer_role_name(role),
                 process_id, (int)message->body_case);
        return;
    }
}

void cellapp_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data) {
    cellapp *app = user_data;
    (void)set;
    if (role == PEER_ROLE_CELLAPP) ghost_send_full_state(app, process_id);
}

void cellapp_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data) {
    cellapp *app = user_data;
    (void)set;
    (void)reason;
    if (role == PEER_ROLE_CELLAPP) {
        ghost_drop_peer(app, process_id);
        return;
    }
    /* The baseapp held these entities' bases and clients: without them the
     * cell entities have nobody to answer to. */
    size_t destroyed = 0;
    for (size_t i = 0; i < app->space.count; i++) {
        cell_entity *entity = app->space.by_index[i];
        if (entity->kind == CELL_ENTITY_REAL && entity->baseapp_id == process_id && !entity->destroyed) {
            cellapp_destroy_real(app, entity);
            destroyed++;
        }
    }
    cellapp_outbox *box = id_map_remove(&app->outboxes, process_id);
    if (box) {
        for (size_t i = 0; i < box->count; i++) free(box->messages[i].payload.data);
        free(box->messages);
        free(box);
    }
    if (destroyed) log_info("destroyed %zu entities of baseapp %" PRIu64, destroyed, process_id);
}

void cellapp_tick(cellapp *app) {
    uint64_t started = clock_monotonic_us();
    space *sp = &app->space;
    game_tick(app);
    /* Every move since the last tick is already in the coordinate system;
     * the flush turns the crossings into the witnesses' net leaves and
     * fires the traps (whose game rules may change properties). */
    coord_flush(sp->coord);
    /* Pack once: every entity whose properties changed is encoded once per
     * audience, for every witness to copy. */
    replication_begin_tick(app->replication, ++app->replication_tick);
    bool has_neighbours = peer_set_count_up(app->peers, PEER_ROLE_CELLAPP) > 0;
    for (size_t i = 0; i < sp->count; i++) {
        cell_entity *entity = sp->by_index[i];
        entity->packed = false;
        if (entity->destroyed || entity_state_mask_empty(entity_state_dirty(entity->state))) continue;
        /* Only the audiences someone receives: the own client's when there
         * is one, the ghosts' when there are neighbours to send to. */
        unsigned audiences = REPLICATION_OTHERS_AUDIENCES;
        if (entity->witness) audiences |= 1u << REPLICATION_AUDIENCE_OWN;
        if (entity->kind == CELL_ENTITY_REAL && has_neighbours) audiences |= 1u << REPLICATION_AUDIENCE_GHOSTS;
        replication_pack_audiences(app->replication, &entity->replication, audiences);
        entity->packed = true;
    }
    for (size_t i = 0; i < sp->count; i++) {
        cell_entity *entity = sp->by_index[i];
        if (!entity->witness || entity->destroyed) continue;
        uint8_t *payload;
        size_t length = witness_update(entity->witness, app, entity, &payload);
        if (length) cellapp_outbox_add(app, entity->baseapp_id, entity->id, payload, length);
    }
    cellapp_outbox_flush(app);
    ghost_send_tick(app);
    for (size_t i = 0; i < sp->count; i++) {
        cell_entity *entity = sp->by_index[i];
        if (entity->packed) entity_state_clear_dirty(entity->state);
        for (size_t c = 0; c < entity->broadcast_count; c++) free(entity->broadcast_calls[c].args.data);
        entity->broadcast_count = 0;
    }
    space_end_tick(sp);
    app->last_tick_duration_us = clock_monotonic_us() - started;
}
