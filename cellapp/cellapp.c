/* cellapp.c -- the cellapp's conversation with its peers and its tick:
 * creating cell entities at a baseapp's request (forwarding the request to
 * the cellapp whose cell holds the spawn point), dispatching what baseapps
 * and cellapps send, reacting to peers that come and go, and running the
 * tick's phases over every cell in a fixed order:
 *
 *   1. layouts fetched since the last tick are applied, whole;
 *   2. the game's own tick (NPCs to spawn);
 *   3. per cell: due timers, then held messages whose gap waited too long;
 *   4. per cell: the coord flush (enters, leaves, traps), then pack once:
 *      every changed entity encoded once per audience someone receives;
 *   5. per cell: each witness writes its client's stream; the client
 *      messages go to the baseapps (one frame each);
 *   6. per cell: haunts (ghost creates, updates, deletes), then offloads
 *      of reals that left their region, after their clients' messages;
 *   7. everything for other cellapps goes (one frame each); dirty sets
 *      clear; destroyed entities are freed; empty cells without a region
 *      go. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "event_route.h"
#include "map_entities.h"
#include "space_map.h"
#include "clock.h"
#include "log.h"
#include "method_call.h"
#include "peer_message.h"
#include "property_codec.h"

void cellapp_drop_client(cellapp *app, const cell_entity *entity, Tessera__Client__ErrorCode code, const char *reason) {
    log_warn("entity %" PRIu64 ": dropping its client: %s", entity->id, reason);
    if (!entity->real) return; /* a ghost has no client of its own here */
    Tessera__Cluster__DropClient drop = TESSERA__CLUSTER__DROP_CLIENT__INIT;
    drop.entity_id = entity->id;
    drop.code = code;
    drop.reason = (char *)reason;
    peer_send_drop_client(app->peers, entity->real->baseapp_id, &drop);
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

cell_entity *cellapp_create_real(cellapp *app, cell *c, uint64_t id, const entity_def_class *cls, float x, float y,
                                 float z, float yaw, uint64_t baseapp_id) {
    if (spaces_find_entity(app->spaces, id)) return NULL;
    cell_entity *entity = cell_add(c, id, CELL_ENTITY_REAL, cls, x, y, z);
    if (!entity) return NULL;
    entity->incarnation = 1;
    entity->real->baseapp_id = baseapp_id;
    entity->yaw = isfinite(yaw) ? yaw : 0.0f;
    entity->move_stamp_us = clock_wall_us();
    movement_reset(&app->settings.movement, entity, clock_monotonic_us());
    ghost_order_set_real(app->ghost_order, id, 1, app->self.process_id);
    mailbox_directory_set(app->redis, app->settings.process.cluster_name, id, app->self.process_id, 1);
    return entity;
}

void cellapp_destroy_real(cellapp *app, cell_entity *entity) {
    if (entity->destroyed || entity->kind != CELL_ENTITY_REAL) return;
    game_host_destroyed(app->game, entity);
    haunt_destroyed(app, entity);
    mailbox_directory_remove(app->redis, app->settings.process.cluster_name, entity->id, app->self.process_id,
                             entity->incarnation);
    ghost_order_forget(app->ghost_order, entity->id, clock_monotonic_us());
    cell_destroy(entity->home, entity);
}

/* ---- navigation meshes ------------------------------------------------------ */

const navmesh *cellapp_navmesh_of(const cellapp *app, const char *space) {
    for (size_t i = 0; space && i < app->navmesh_count; i++)
        if (strcmp(app->navmeshes[i].space, space) == 0) return app->navmeshes[i].mesh;
    return NULL;
}

int cellapp_load_navmeshes(cellapp *app, char *err, size_t errlen) {
    const config_group *maps = &app->settings.maps;
    app->navmeshes = xcalloc(maps->count ? maps->count : 1, sizeof *app->navmeshes);
    navmesh_config config = navmesh_default_config();
    config.cell_size = (float)app->settings.navmesh_cell_size;
    for (size_t i = 0; i < maps->count; i++) {
        const char *space = maps->items[i].name, *path = maps->items[i].value;
        if (strlen(space) >= SPACE_LAYOUT_NAME_MAX) {
            snprintf(err, errlen, "maps.%s: the space name is too long", space);
            return -1;
        }
        uint64_t began = clock_monotonic_us();
        char why[512];
        navmesh *mesh = space_map_navmesh(path, &config, why, sizeof why);
        if (!mesh) {
            snprintf(err, errlen, "maps.%s: %s", space, why);
            return -1;
        }
        struct cellapp_navmesh *entry = &app->navmeshes[app->navmesh_count++];
        snprintf(entry->space, sizeof entry->space, "%s", space);
        entry->mesh = mesh;
        log_info("space '%s': navigation mesh from %s, %d polygons, in %.0f ms", space, path,
                 navmesh_polygon_count(mesh), (double)(clock_monotonic_us() - began) / 1000.0);
    }
    return 0;
}

void cellapp_free_navmeshes(cellapp *app) {
    for (size_t i = 0; i < app->navmesh_count; i++) navmesh_free(app->navmeshes[i].mesh);
    free(app->navmeshes);
    app->navmeshes = NULL;
    app->navmesh_count = 0;
}

/* ---- creating entities ---------------------------------------------------- */

void cellapp_reply_created(cellapp *app, uint64_t baseapp_id, uint64_t entity_id, const cell_entity *entity,
                           const char *error) {
    const cellapp_settings *settings = &app->settings;
    Tessera__Cluster__CellEntityCreated reply = TESSERA__CLUSTER__CELL_ENTITY_CREATED__INIT;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_min = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_max = TESSERA__CLIENT__VECTOR3__INIT;
    reply.entity_id = entity_id;
    reply.ok = entity != NULL;
    reply.error = (char *)(error ? error : "");
    if (entity) {
        const cell *c = entity->home;
        position.x = entity->x;
        position.y = entity->y;
        position.z = entity->z;
        reply.position = &position;
        reply.yaw = entity->yaw;
        reply.view_radius = (float)settings->witness.view_radius;
        reply.view_hysteresis = (float)settings->witness.view_hysteresis;
        reply.max_speed = (float)settings->movement.max_speed;
        reply.tick_hz = (uint32_t)settings->tick_hz;
        reply.space_name = (char *)c->space_name;
        reply.max_aliases = (uint32_t)settings->witness.max_aliases;
        reply.position_precision = c->volatile_config.precision;
        world_min.x = (float)c->volatile_config.min[0];
        world_min.y = (float)c->volatile_config.min[1];
        world_min.z = (float)c->volatile_config.min[2];
        world_max.x = (float)c->volatile_config.max[0];
        world_max.y = (float)c->volatile_config.max[1];
        world_max.z = (float)c->volatile_config.max[2];
        reply.world_min = &world_min;
        reply.world_max = &world_max;
        reply.yaw_steps = c->volatile_config.yaw_steps;
        reply.detail_near_distance = (float)settings->witness.detail_near_distance;
        reply.detail_medium_distance = (float)settings->witness.detail_medium_distance;
        reply.alias_cooldown_ms = (uint32_t)settings->witness.alias_cooldown_ms;
        reply.detail_hysteresis = (float)settings->witness.detail_hysteresis;
        reply.incarnation = entity->incarnation;
        reply.client_binding = entity->real->client_binding;
    }
    peer_send_cell_entity_created(app->peers, baseapp_id, &reply);
}

static void cellapp_create_entity(cellapp *app, uint64_t from, const Tessera__Cluster__CreateCellEntity *request) {
    const cellapp_settings *settings = &app->settings;
    uint64_t baseapp_id = request->baseapp_id;
    const char *space_name =
        request->space_name && request->space_name[0] ? request->space_name : settings->default_space;
    const space_layout *layout = spaces_layout(app->spaces, space_name);
    if (!layout) {
        cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "unknown space");
        return;
    }
    const entity_def_class *cls =
        request->entity_type ? entity_def_registry_find_class(app->shared.definitions, request->entity_type) : NULL;
    if (!cls) {
        log_warn("process %" PRIu64 " asked for entity %" PRIu64 " of type '%s', which the definitions lack", from,
                 request->entity_id, request->entity_type ? request->entity_type : "");
        cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "unknown entity type");
        return;
    }
    float x, y = 0, z;
    if (request->has_position && request->position) {
        x = request->position->x;
        y = request->position->y;
        z = request->position->z;
        if (!isfinite(x) || !isfinite(y) || !isfinite(z) || x < layout->min[0] || x > layout->max[0] ||
            y < layout->min[1] || y > layout->max[1] || z < layout->min[2] || z > layout->max[2]) {
            cellapp_reply_created(app, baseapp_id, request->entity_id, NULL,
                                  "position outside every cell of the space");
            return;
        }
    } else {
        /* Uniform over the space's spawn disc. */
        double angle = cellapp_random_unit(app) * 2.0 * M_PI;
        double distance = sqrt(cellapp_random_unit(app)) * layout->spawn_radius;
        x = (float)(layout->spawn_x + distance * cos(angle));
        z = (float)(layout->spawn_z + distance * sin(angle));
    }
    /* The cellapp whose cell holds the point creates it; while that one
     * cannot (not up, or without the space yet), this one does, and the
     * real moves there when it can. */
    const space_layout_node *node = space_layout_cell_at(layout, x, z);
    if (node && node->cellapp_id != app->self.process_id && request->hops == 0 &&
        peer_set_is_up(app->peers, node->cellapp_id) &&
        spaces_peer_epoch(app->spaces, node->cellapp_id, space_name) != 0) {
        Tessera__Cluster__CreateCellEntity forward = *request;
        Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
        position.x = x;
        position.y = y;
        position.z = z;
        forward.position = &position;
        forward.has_position = true;
        forward.space_name = (char *)space_name;
        forward.hops = request->hops + 1;
        Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
        item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_CREATE;
        item.create = &forward;
        outbox_to_cellapp(app->outbox, node->cellapp_id, &item);
        return;
    }
    cell *c = spaces_cell(app->spaces, space_name, true);
    if (!c || (int64_t)spaces_real_count(app->spaces) >= settings->max_entities) {
        cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, c ? "cellapp is full" : "unknown space");
        return;
    }
    cell_entity *entity = cellapp_create_real(app, c, request->entity_id, cls, x, y, z, request->yaw, baseapp_id);
    if (!entity) {
        log_warn("process %" PRIu64 " asked for entity %" PRIu64 ", which already exists here", from,
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
            log_warn("process %" PRIu64 ": entity %" PRIu64 "'s cell properties do not decode: %s", from,
                     request->entity_id, property_codec_strerror(rc));
            cellapp_destroy_real(app, entity);
            cellapp_reply_created(app, baseapp_id, request->entity_id, NULL, "malformed cell properties");
            return;
        }
    }
    if (request->has_client) {
        entity->real->client_binding = request->client_binding;
        witness_attach(c, entity);
    }
    game_host_created(app->game, entity);
    if (cell_entity_witness(entity)) game_host_witness(app->game, entity, true);
    log_debug("created %s %" PRIu64 " for baseapp %" PRIu64 " in space '%s' at (%.1f, %.1f)", cls->name, entity->id,
              baseapp_id, c->space_name, (double)x, (double)z);
    cellapp_reply_created(app, baseapp_id, request->entity_id, entity, NULL);
}

/* ---- peers ------------------------------------------------------------------ */

/* One frame of another cellapp's tick, item by item, in order. */
static void cellapp_on_cell_batch(cellapp *app, uint64_t peer, const Tessera__Cluster__CellBatch *batch) {
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
                haunt_on_message(app, peer, item->ghost, bytes->data, bytes->len);
                if (churn) cell_load_transient_end(app, began);
                break;
            }
            case TESSERA__CLUSTER__CELL_ITEM__BODY_OFFLOAD: {
                uint64_t began = cell_load_transient_begin();
                offload_on_offload(app, peer, item->offload, bytes->data, bytes->len);
                cell_load_transient_end(app, began);
                break;
            }
            case TESSERA__CLUSTER__CELL_ITEM__BODY_OFFLOAD_ACK:
                offload_on_ack(app, peer, item->offload_ack);
                break;
            case TESSERA__CLUSTER__CELL_ITEM__BODY_MESSAGE:
                cell_message_on_message(app, peer, PEER_ROLE_CELLAPP, item->message);
                break;
            case TESSERA__CLUSTER__CELL_ITEM__BODY_CREATE:
                cellapp_create_entity(app, peer, item->create);
                break;
            case TESSERA__CLUSTER__CELL_ITEM__BODY_FAILED:
                mailbox_on_failed(app->mailbox, item->failed);
                break;
            case TESSERA__CLUSTER__CELL_ITEM__BODY_GHOST_MOVES:
                haunt_on_moves(app, peer, item->ghost_moves);
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

/* ---- calls to bases ---------------------------------------------------------- */

static int cellapp_base_send(uint64_t baseapp_id, const Tessera__Cluster__BaseCall *call, void *user_data) {
    cellapp *app = user_data;
    return peer_send_base_call(app->peers, baseapp_id, call);
}

static void cellapp_base_failed(const Tessera__Cluster__EntityCallFailed *failed, void *user_data) {
    cellapp *app = user_data;
    app->base_calls_failed++;
    log_info("a call of entity %" PRIu64 "'s base (by entity %" PRIu64 ") failed: %s", failed->entity_id,
             failed->caller_id, failed->reason ? failed->reason : "");
}

base_mailbox *cellapp_base_mailbox_create(cellapp *app) {
    return base_mailbox_create(app->redis, app->settings.process.cluster_name, cellapp_base_send, cellapp_base_failed,
                               app);
}

int cellapp_call_base(cellapp *app, uint64_t caller_id, uint64_t target_id, const char *class_name,
                      entity_def_part part, const char *method_name, const entity_state *args) {
    const entity_def_class *cls = entity_def_registry_find_class(app->shared.definitions, class_name);
    const entity_def_method *method = cls ? entity_def_class_find_method(cls, part, method_name) : NULL;
    if (!method || !app->bases || (part != ENTITY_DEF_PART_BASE && part != ENTITY_DEF_PART_CLIENT)) return -1;
    /* A real here knows its own base's baseapp: no lookup. */
    cell_entity *target = spaces_find_entity(app->spaces, target_id);
    if (target && target->kind == CELL_ENTITY_REAL && target->real->baseapp_id)
        base_mailbox_learn(app->bases, target_id, target->real->baseapp_id);
    app->base_calls++;
    return base_mailbox_call(app->bases, caller_id, target_id, class_name, method, args);
}

void cellapp_on_message(peer_set *set, uint64_t process_id, peer_role role,
                        const Tessera__Cluster__PeerMessage *message, void *user_data) {
    cellapp *app = user_data;
    (void)set;
    if (app->self.stopping) return;
    switch (message->body_case) {
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CREATE_CELL_ENTITY:
            if (role == PEER_ROLE_BASEAPP && message->create_cell_entity->baseapp_id == process_id)
                cellapp_create_entity(app, process_id, message->create_cell_entity);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_MESSAGE:
            cell_message_on_message(app, process_id, role, message->cell_message);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_MESSAGE_FAILED:
            mailbox_on_failed(app->mailbox, message->cell_message_failed);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_ENTITY_CALL_FAILED:
            if (app->bases) base_mailbox_on_failed(app->bases, message->entity_call_failed);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_GAME_EVENT:
            event_route_on_broadcast(app, process_id, message->game_event);
            return;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_BATCH:
            if (role == PEER_ROLE_CELLAPP) cellapp_on_cell_batch(app, process_id, message->cell_batch);
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
    if (role != PEER_ROLE_CELLAPP) return;
    /* It learns our layouts; once it says which it has, reals near its
     * cells give it ghosts. */
    spaces_announce(app->spaces, process_id);
}

void cellapp_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data) {
    cellapp *app = user_data;
    (void)set;
    (void)reason;
    outbox_drop_peer(app->outbox, process_id);
    if (role == PEER_ROLE_CELLAPP) {
        spaces_peer_down(app->spaces, process_id);
        /* First take back what was in flight to it, then let its ghosts go. */
        offload_peer_down(app, process_id);
        haunt_peer_down(app, process_id);
        return;
    }
    /* The baseapp held these entities' bases and clients: without them the
     * cell entities have nobody to answer to. */
    size_t destroyed = 0, cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->count; i++) {
            cell_entity *entity = c->by_index[i];
            if (entity->kind == CELL_ENTITY_REAL && entity->real->baseapp_id == process_id && !entity->destroyed) {
                cellapp_destroy_real(app, entity);
                destroyed++;
            }
        }
    }
    if (destroyed) log_info("destroyed %zu entities of baseapp %" PRIu64, destroyed, process_id);
}

/* ---- the tick ----------------------------------------------------------------- */

static void cellapp_witnesses(cellapp *app, cell *c) {
    for (size_t i = 0; i < c->count; i++) {
        cell_entity *entity = c->by_index[i];
        if (!cell_entity_witness(entity) || entity->destroyed) continue;
        uint8_t *payload;
        size_t length = witness_update(cell_entity_witness(entity), c, entity, &payload);
        if (length) outbox_to_client(app->outbox, entity, payload, length);
    }
}

/* The timers of one cell fire for its reals, into the game's rules. */
typedef struct cellapp_timer_run {
    cell *c;
    game_host *game;
} cellapp_timer_run;

static bool cellapp_timer_live(uint64_t entity_id, void *context) {
    const cellapp_timer_run *run = context;
    const cell_entity *entity = cell_find(run->c, entity_id);
    return entity && entity->kind == CELL_ENTITY_REAL;
}

static void cellapp_timer_fire(uint64_t entity_id, uint64_t timer_id, uint32_t tag, uint64_t user_data, void *context) {
    const cellapp_timer_run *run = context;
    cell_entity *entity = cell_find(run->c, entity_id);
    if (entity) game_host_timer(run->game, entity, timer_id, tag, user_data);
}

static void cellapp_run_timers(cellapp *app, cell *c, uint64_t now_us) {
    cellapp_timer_run run = {c, app->game};
    entity_timers_run(c->timers, now_us, cellapp_timer_live, cellapp_timer_fire, &run);
}

static void cellapp_end_tick(cell *c) {
    for (size_t i = 0; i < c->count; i++) {
        cell_entity *entity = c->by_index[i];
        entity_state_clear_dirty(entity->state); /* packed, or received by nobody */
        cell_clear_broadcasts(entity);
    }
    cell_end_tick(c);
}

void cellapp_tick(cellapp *app) {
    uint64_t started = clock_monotonic_us();
    spaces_apply_pending(app->spaces);
    game_host_tick(app->game);
    map_entities_tick(app);
    size_t cursor = 0;
    cell *c;
    game_host_before_thinks(app->game);
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) cellapp_run_timers(app, c, started);
    /* Entity I/O: the events that are due, after the thinks and timers. */
    if (app->io) entity_io_service(app->io, started / 1000, game_host_io_deliver, app);
    game_host_after_thinks(app->game);
    cursor = 0;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        cell_message_tick(app, c);
        controller_tick(c, 1.0 / (double)app->settings.tick_hz, game_host_controller_event, app);
    }
    replication_begin_tick(app->shared.replication, ++app->shared.replication_tick);
    cursor = 0;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        /* Every move since the last tick is already in the coordinate
         * system; the flush turns the crossings into the witnesses' net
         * leaves and fires the traps (whose game rules may change
         * properties). Then pack once. */
        coord_flush(c->coord);
        cell_pack(c);
        witness_notify_changes(c);
        cellapp_witnesses(app, c);
    }
    /* The game hears of this tick's view changes once every witness has
     * written its stream. */
    cursor = 0;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->view_event_count; i++) {
            cell_entity *owner = cell_find(c, c->view_events[i].owner_id);
            if (owner && owner->kind == CELL_ENTITY_REAL)
                game_host_view(app->game, owner, c->view_events[i].other_id, c->view_events[i].entered);
        }
        c->view_event_count = 0;
    }
    /* The end of the tick for what game code destroyed: each goes now, its
     * destroyed hook told once; witnesses see it leave at the next flush. */
    cursor = 0;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->doomed_count; i++) {
            cell_entity *doomed = cell_find(c, c->doomed[i]);
            if (doomed && doomed->real && doomed->real->doomed) cellapp_destroy_real(app, doomed);
        }
        c->doomed_count = 0;
    }
    outbox_flush_clients(app->outbox);
    cursor = 0;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        haunt_tick(app, c);
        offload_tick(app, c);
    }
    outbox_flush_cellapps(app->outbox);
    cursor = 0;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) cellapp_end_tick(c);
    spaces_reap(app->spaces);
    uint64_t now_us = clock_monotonic_us();
    ghost_route_expire(app->route, now_us / 1000);
    if (app->shared.replication_tick % (uint64_t)app->settings.tick_hz == 0) {
        /* Once a second: held ghost messages whose earlier real never
         * finished, and the tombstones of deleted ghosts, both far older
         * than any message is late; and streams nobody writes to. */
        ghost_order_expire(app->ghost_order, now_us, 30u * 1000u * 1000u, 60u * 1000u * 1000u);
        mailbox_sweep(app->mailbox, now_us / 1000);
    }
    spaces_poll(app->spaces);
    cell_load_sample(app, now_us);
    if (app->balancer) balancer_tick(app->balancer, now_us);
    app->last_tick_duration_us = clock_monotonic_us() - started;
    latency_histogram_add(&app->counters.tick_time, app->last_tick_duration_us);
}
