/* cellapp.c -- what the cellapp does for its peers and on each tick:
 * creating and destroying cell entities at a baseapp's request, relaying
 * client movement into the space, running the witnesses once per tick and
 * shipping their client messages to the baseapps in one batch each. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "clock.h"
#include "log.h"

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

static void cellapp_send_to_client(cellapp *app, const cell_entity *entity,
                                   const Tessera__Client__ServerToClient *message) {
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
static double cellapp_random_unit(cellapp *app) {
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
    cell_entity *entity = space_add(sp, request->entity_id, CELL_ENTITY_REAL, request->entity_type, x, y, z);
    if (!entity) {
        log_warn("baseapp %" PRIu64 " asked for entity %" PRIu64 ", which already exists here", baseapp_id,
                 request->entity_id);
        cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "entity id already exists");
        return;
    }
    entity->baseapp_id = baseapp_id;
    entity->yaw = isfinite(request->yaw) ? request->yaw : 0.0f;
    entity->move_stamp_us = clock_wall_us();
    movement_reset(settings, entity, clock_monotonic_us());
    if (request->has_client) witness_attach(sp, entity, settings->view_radius, settings->view_hysteresis);
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
        space_move(&app->space, entity, x, y, z, move->yaw);
        entity->move_stamp_us = clock_wall_us();
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
    /* Every move since the last tick is already in the coordinate system;
     * the flush turns the crossings into each witness's net enters and
     * leaves, then each witness packs its client's update. */
    coord_flush(sp->coord);
    for (size_t i = 0; i < sp->count; i++) {
        cell_entity *entity = sp->by_index[i];
        if (!entity->witness || entity->destroyed) continue;
        uint8_t *payload;
        size_t length = witness_update(entity->witness, entity, sp, &payload);
        if (length) cellapp_outbox_add(app, entity->baseapp_id, entity->id, payload, length);
    }
    cellapp_outbox_flush(app);
    ghost_send_tick(app);
    space_end_tick(sp);
    app->last_tick_duration_us = clock_monotonic_us() - started;
}
