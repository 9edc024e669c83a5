/* haunt.c -- where each real's ghosts live, and the ghost protocol
 * (proto/cluster.proto, GhostMessage).
 *
 * Sending. A real has a ghost in every other cell whose region comes within
 * ghost_distance of it (on X and on Z, like views), so every witness that
 * could see it, in any cell, has a copy to see. A ghost is kept until the
 * real is farther than ghost_distance + ghost_fudge from that cell and the
 * ghost has lived ghost_min_lifespan_ms, so walking along a line does not
 * make and unmake ghosts. A real far from every other cell has no ghost.
 * Each tick a real that moved, changed a ghost property or called its
 * observers' clients sends one GhostUpdate to each haunt; creates carry the
 * whole ghost state. Everything goes through the outbox, in order, on the
 * channel to that cellapp.
 *
 * Receiving. Messages pass the incarnation books first (ghost_inbox.c);
 * haunt_apply does what those let through to the ghosts here. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "haunt.h"

#include "clock.h"
#include "id_map.h"
#include "log.h"
#include "property_codec.h"
#include "witness.h"

/* Cells one real can be near: a handful in any sane layout; the rest of a
 * pathological one is ignored (and logged). */
#define HAUNT_MAX_NEAR 32

struct haunts {
    haunts_context context;
    id_map ghost_moves; /* cellapp id -> this tick's moves for it (haunt_moves) */
};

static bool haunt_has(const cell_entity *entity, uint64_t peer) {
    for (uint32_t i = 0; i < entity->real->haunt_count; i++)
        if (entity->real->haunts[i].cellapp_id == peer) return true;
    return false;
}

static void haunt_append(cell_entity *entity, uint64_t peer, uint64_t now_us) {
    if (entity->real->haunt_count == entity->real->haunt_capacity) {
        entity->real->haunt_capacity = entity->real->haunt_capacity ? entity->real->haunt_capacity * 2 : 2;
        entity->real->haunts =
            xrealloc(entity->real->haunts, entity->real->haunt_capacity * sizeof *entity->real->haunts);
    }
    entity->real->haunts[entity->real->haunt_count++] = (cell_haunt){peer, now_us};
}

void haunt_send(haunts *h, uint64_t peer, const Tessera__Cluster__GhostMessage *message) {
    Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
    item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_GHOST;
    item.ghost = (Tessera__Cluster__GhostMessage *)message;
    size_t before = outbox_cellapp_bytes(h->context.outbox, peer);
    outbox_to_cellapp(h->context.outbox, peer, &item);
    h->context.counters->ghost_bytes += outbox_cellapp_bytes(h->context.outbox, peer) - before;
}

/* The ghost properties of `entity`: all of them into `w`, byte-aligned. */
static void haunt_encode_all(const haunts *h, const cell_entity *entity, bit_writer *w) {
    const entity_state_mask *ghosts =
        replication_schema_mask(h->context.shared->schema, entity->cls->id, REPLICATION_AUDIENCE_GHOSTS);
    property_codec_encode_changes(w, entity->state, ghosts);
    bit_writer_align(w);
}

void haunt_add(haunts *h, cell_entity *entity, uint64_t peer) {
    uint64_t began = cell_load_transient_begin(); /* ghost churn is transient load */
    if (haunt_has(entity, peer)) return;
    bit_writer w;
    bit_writer_init(&w);
    haunt_encode_all(h, entity, &w);
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = entity->x;
    position.y = entity->y;
    position.z = entity->z;
    Tessera__Cluster__GhostCreate create = TESSERA__CLUSTER__GHOST_CREATE__INIT;
    create.entity_type = (char *)entity->cls->name;
    create.space_name = entity->home->space_name;
    create.position = &position;
    create.yaw = entity->yaw;
    create.stamp_us = entity->move_stamp_us;
    create.move_count = entity->move_count;
    create.property_count = entity->property_count;
    create.properties.data = (uint8_t *)bit_writer_data(&w);
    create.properties.len = bit_writer_bytes(&w);
    Tessera__Cluster__GhostMessage message = TESSERA__CLUSTER__GHOST_MESSAGE__INIT;
    message.entity_id = entity->id;
    message.incarnation = entity->incarnation;
    message.body_case = TESSERA__CLUSTER__GHOST_MESSAGE__BODY_CREATE;
    message.create = &create;
    haunt_send(h, peer, &message);
    bit_writer_close(&w);
    haunt_append(entity, peer, clock_monotonic_us());
    h->context.counters->ghosts_created++;
    cell_load_transient_end(h->context.load, began);
}

void haunt_send_delete(haunts *h, const cell_entity *entity, uint64_t peer, bool destroyed) {
    Tessera__Cluster__GhostDelete remove = TESSERA__CLUSTER__GHOST_DELETE__INIT;
    remove.destroyed = destroyed;
    Tessera__Cluster__GhostMessage message = TESSERA__CLUSTER__GHOST_MESSAGE__INIT;
    message.entity_id = entity->id;
    message.incarnation = entity->incarnation;
    message.body_case = TESSERA__CLUSTER__GHOST_MESSAGE__BODY_DELETE;
    message.delete_ = &remove;
    haunt_send(h, peer, &message);
    h->context.counters->ghosts_deleted++;
}

void haunt_destroyed(haunts *h, cell_entity *entity) {
    for (uint32_t i = 0; i < entity->real->haunt_count; i++)
        if (peer_set_is_up(h->context.peers, entity->real->haunts[i].cellapp_id))
            haunt_send_delete(h, entity, entity->real->haunts[i].cellapp_id, true);
    entity->real->haunt_count = 0;
}

/* How far `entity` is from the region of the cell `peer` owns in its space
 * (infinitely far if it owns none). */
static double haunt_distance_to(const cell *c, const cell_entity *entity, uint64_t peer) {
    const space_layout_node *node = space_layout_cell_of(c->layout, peer);
    space_layout_rect rect;
    if (!node || space_layout_rect_of(c->layout, node->cell_id, &rect) != 0) return INFINITY;
    return space_layout_rect_distance(&rect, entity->x, entity->z);
}

/* Brings one real's haunts up to date. Returns true while some haunt is
 * kept only by the fudge margin or the lifespan (so it is checked again). */
static bool haunt_recompute(haunts *h, cell *c, cell_entity *entity, uint64_t now_us) {
    const haunt_config *config = h->context.config;
    const space_layout_node *near[HAUNT_MAX_NEAR];
    size_t found =
        space_layout_cells_near(c->layout, entity->x, entity->z, config->ghost_distance, near, HAUNT_MAX_NEAR);
    if (found > HAUNT_MAX_NEAR) found = HAUNT_MAX_NEAR;
    for (size_t i = 0; i < found; i++) {
        uint64_t peer = near[i]->cellapp_id;
        if (peer == h->context.self->process_id || haunt_has(entity, peer) || !peer_set_is_up(h->context.peers, peer))
            continue;
        if (!spaces_peer_epoch(h->context.spaces, peer, c->space_name)) continue; /* it cannot place a ghost yet */
        haunt_add(h, entity, peer);
    }
    bool lingering = false;
    uint64_t lifespan_us = (uint64_t)config->ghost_min_lifespan_ms * 1000u;
    for (uint32_t i = 0; i < entity->real->haunt_count;) {
        cell_haunt *haunt = &entity->real->haunts[i];
        bool wanted = false;
        for (size_t n = 0; n < found && !wanted; n++) wanted = near[n]->cellapp_id == haunt->cellapp_id;
        if (wanted) {
            i++;
            continue;
        }
        bool young = now_us - haunt->since_us < lifespan_us;
        bool close = haunt_distance_to(c, entity, haunt->cellapp_id) <= config->ghost_distance + config->ghost_fudge;
        if (peer_set_is_up(h->context.peers, haunt->cellapp_id) && (young || close)) {
            lingering = true;
            i++;
            continue;
        }
        if (peer_set_is_up(h->context.peers, haunt->cellapp_id)) haunt_send_delete(h, entity, haunt->cellapp_id, false);
        entity->real->haunts[i] = entity->real->haunts[--entity->real->haunt_count];
    }
    return lingering;
}

/* The moves of one tick for one haunt, gathered into GhostMoves arrays;
 * the arrays are kept from tick to tick. */
typedef struct haunt_moves {
    uint64_t *entity_id;
    uint32_t *incarnation, *move_count;
    float *x, *y, *z, *yaw;
    size_t count, capacity;
} haunt_moves;

static void haunt_add_move(haunts *h, uint64_t peer, const cell_entity *entity) {
    haunt_moves *moves = id_map_get(&h->ghost_moves, peer);
    if (!moves) {
        moves = xcalloc(1, sizeof *moves);
        id_map_put(&h->ghost_moves, peer, moves);
    }
    if (moves->count == moves->capacity) {
        moves->capacity = moves->capacity ? moves->capacity * 2 : 64;
        moves->entity_id = xrealloc(moves->entity_id, moves->capacity * sizeof *moves->entity_id);
        moves->incarnation = xrealloc(moves->incarnation, moves->capacity * sizeof *moves->incarnation);
        moves->move_count = xrealloc(moves->move_count, moves->capacity * sizeof *moves->move_count);
        moves->x = xrealloc(moves->x, moves->capacity * sizeof *moves->x);
        moves->y = xrealloc(moves->y, moves->capacity * sizeof *moves->y);
        moves->z = xrealloc(moves->z, moves->capacity * sizeof *moves->z);
        moves->yaw = xrealloc(moves->yaw, moves->capacity * sizeof *moves->yaw);
    }
    size_t i = moves->count++;
    moves->entity_id[i] = entity->id;
    moves->incarnation[i] = entity->incarnation;
    moves->move_count[i] = entity->move_count;
    moves->x[i] = entity->x;
    moves->y[i] = entity->y;
    moves->z[i] = entity->z;
    moves->yaw[i] = entity->yaw;
}

/* Appends each haunt's gathered moves to its outbox, after everything else
 * the tick's haunts queued for it (creates first, so a move never precedes
 * its ghost). */
static void haunt_flush_moves(haunts *h) {
    size_t cursor = 0;
    uint64_t peer;
    void *value;
    while (id_map_next(&h->ghost_moves, &cursor, &peer, &value)) {
        haunt_moves *moves = value;
        if (!moves->count) continue;
        Tessera__Cluster__GhostMoves message = TESSERA__CLUSTER__GHOST_MOVES__INIT;
        message.n_entity_id = message.n_incarnation = message.n_move_count = message.n_x = message.n_y = message.n_z =
            message.n_yaw = moves->count;
        message.entity_id = moves->entity_id;
        message.incarnation = moves->incarnation;
        message.move_count = moves->move_count;
        message.x = moves->x;
        message.y = moves->y;
        message.z = moves->z;
        message.yaw = moves->yaw;
        Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
        item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_GHOST_MOVES;
        item.ghost_moves = &message;
        size_t before = outbox_cellapp_bytes(h->context.outbox, peer);
        outbox_to_cellapp(h->context.outbox, peer, &item);
        h->context.counters->ghost_bytes += outbox_cellapp_bytes(h->context.outbox, peer) - before;
        moves->count = 0;
    }
}

haunts *haunt_create(const haunts_context *context) {
    haunts *h = xcalloc(1, sizeof *h);
    h->context = *context;
    id_map_init(&h->ghost_moves);
    return h;
}

void haunt_free(haunts *h) {
    if (!h) return;
    size_t cursor = 0;
    uint64_t peer;
    void *value;
    while (id_map_next(&h->ghost_moves, &cursor, &peer, &value)) {
        haunt_moves *moves = value;
        free(moves->entity_id);
        free(moves->incarnation);
        free(moves->move_count);
        free(moves->x);
        free(moves->y);
        free(moves->z);
        free(moves->yaw);
        free(moves);
    }
    id_map_close(&h->ghost_moves);
    free(h);
}

/* The tick's GhostUpdate of a real, to each haunt: a move alone goes in
 * the haunt's GhostMoves. */
static void haunt_send_update(haunts *h, cell_entity *entity, const entity_state_mask *changed) {
    bool has_properties = !entity_state_mask_empty(changed);
    bool has_broadcasts = entity->real->broadcast_count || entity->real->broadcast_event_count;
    if (!entity->moved && !has_properties && !has_broadcasts) return;
    if (!has_properties && !has_broadcasts) {
        for (uint32_t i = 0; i < entity->real->haunt_count; i++)
            haunt_add_move(h, entity->real->haunts[i].cellapp_id, entity);
        return;
    }
    bit_writer w;
    bit_writer_init(&w);
    if (has_properties) {
        /* The cell packed this tick's GHOSTS encoding once; copy it. */
        if (!(entity->packed && replication_append_change_list(h->context.shared->replication, &entity->replication,
                                                               REPLICATION_AUDIENCE_GHOSTS, &w) > 0))
            property_codec_encode_changes(&w, entity->state, changed);
        bit_writer_align(&w);
    }
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = entity->x;
    position.y = entity->y;
    position.z = entity->z;
    Tessera__Cluster__GhostUpdate update = TESSERA__CLUSTER__GHOST_UPDATE__INIT;
    if (entity->moved) update.position = &position;
    update.yaw = entity->yaw;
    update.stamp_us = entity->move_stamp_us;
    update.move_count = entity->move_count;
    update.property_count = entity->property_count;
    update.properties.data = (uint8_t *)bit_writer_data(&w);
    update.properties.len = bit_writer_bytes(&w);
    Tessera__Client__ClientCall **calls = NULL;
    if (entity->real->broadcast_count) {
        calls = xcalloc(entity->real->broadcast_count, sizeof(Tessera__Client__ClientCall *));
        for (size_t i = 0; i < entity->real->broadcast_count; i++) calls[i] = &entity->real->broadcast_calls[i];
        update.n_client_calls = entity->real->broadcast_count;
        update.client_calls = calls;
    }
    Tessera__Client__GameEvent **events = NULL;
    if (entity->real->broadcast_event_count) {
        events = xcalloc(entity->real->broadcast_event_count, sizeof(Tessera__Client__GameEvent *));
        for (size_t i = 0; i < entity->real->broadcast_event_count; i++) events[i] = &entity->real->broadcast_events[i];
        update.n_events = entity->real->broadcast_event_count;
        update.events = events;
    }
    Tessera__Cluster__GhostMessage message = TESSERA__CLUSTER__GHOST_MESSAGE__INIT;
    message.entity_id = entity->id;
    message.incarnation = entity->incarnation;
    message.body_case = TESSERA__CLUSTER__GHOST_MESSAGE__BODY_UPDATE;
    message.update = &update;
    for (uint32_t i = 0; i < entity->real->haunt_count; i++)
        haunt_send(h, entity->real->haunts[i].cellapp_id, &message);
    free(calls);
    free(events);
    bit_writer_close(&w);
}

/* Counts this tick's changes of a real (cell_change_count_ahead), haunts
 * or not: its copies, and a witness that travels, compare them. Leaves the
 * ghost properties that changed in `changed`. */
static void haunt_count_changes(haunts *h, cell_entity *entity, entity_state_mask *changed) {
    if (entity->moved) entity->move_count = cell_change_count_next(entity->move_count);
    const entity_state_mask *ghosts =
        replication_schema_mask(h->context.shared->schema, entity->cls->id, REPLICATION_AUDIENCE_GHOSTS);
    entity_state_mask_intersect(changed, entity_state_dirty(entity->state), ghosts);
    if (!entity_state_mask_empty(changed)) entity->property_count = cell_change_count_next(entity->property_count);
}

void haunt_tick(haunts *h, cell *c) {
    uint64_t now_us = clock_monotonic_us();
    /* A real that moved, had a ghost property or a broadcast, or whose
     * haunts are stale is on the cell's changed list; an idle real has
     * nothing to tell its ghosts. Only a new layout makes every real
     * recheck. */
    bool every = c->layout_changed;
    size_t count = every ? c->count : c->changed_count;
    /* Indexed afresh each time: a destruction or a make_real on the way
     * lists an entity, and may move the changed list. */
    for (size_t i = 0; i < count; i++) {
        cell_entity *entity = every ? c->by_index[i] : c->changed[i];
        if (entity->kind != CELL_ENTITY_REAL || entity->destroyed) continue;
        entity_state_mask changed;
        haunt_count_changes(h, entity, &changed);
        if (entity->real->haunts_stale || c->layout_changed)
            entity->real->haunts_stale = haunt_recompute(h, c, entity, now_us);
        if (entity->real->haunt_count) haunt_send_update(h, entity, &changed);
    }
    haunt_flush_moves(h);
}

void haunt_count(const haunts *h, size_t *interior_reals, size_t *reals, size_t *ghosts) {
    *interior_reals = *reals = *ghosts = 0;
    size_t cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(h->context.spaces, &cursor)) != NULL) {
        *reals += c->real_count;
        *ghosts += c->ghost_count;
        for (size_t i = 0; i < c->count; i++) {
            const cell_entity *entity = c->by_index[i];
            if (entity->kind == CELL_ENTITY_REAL && !entity->destroyed && entity->real->haunt_count == 0)
                (*interior_reals)++;
        }
    }
}

/* ---- receiving ------------------------------------------------------------- */

static void haunt_decode_properties(uint64_t peer, cell_entity *ghost, const ProtobufCBinaryData *properties,
                                    const replication_schema *schema) {
    if (properties->len == 0) return;
    bit_reader reader;
    bit_reader_init(&reader, properties->data, properties->len);
    const entity_state_mask *accept = replication_schema_mask(schema, ghost->cls->id, REPLICATION_AUDIENCE_GHOSTS);
    int rc = property_codec_decode_changes(&reader, ghost->state, accept, NULL);
    if (rc != 0)
        log_warn("cellapp %" PRIu64 ": properties of ghost %" PRIu64 " do not decode: %s", peer, ghost->id,
                 property_codec_strerror(rc));
}

static void haunt_apply_create(haunts *h, uint64_t peer, uint64_t entity_id, uint32_t incarnation,
                               const Tessera__Cluster__GhostCreate *create) {
    const entity_def_class *cls =
        create->entity_type ? entity_def_registry_find_class(h->context.shared->definitions, create->entity_type)
                            : NULL;
    if (!cls) {
        log_warn("cellapp %" PRIu64 " sent a ghost of entity %" PRIu64 " of type '%s', which our definitions lack "
                 "(do the cellapps load the same definitions?)",
                 peer, entity_id, create->entity_type ? create->entity_type : "");
        return;
    }
    cell *c = spaces_cell(h->context.spaces, create->space_name, true);
    if (!c) {
        log_warn("cellapp %" PRIu64 " sent a ghost of entity %" PRIu64 " in space '%s', which this cellapp does not "
                 "know yet: dropped",
                 peer, entity_id, create->space_name ? create->space_name : "");
        return;
    }
    float x = create->position ? create->position->x : 0, y = create->position ? create->position->y : 0;
    float z = create->position ? create->position->z : 0;
    cell_entity *ghost = spaces_find_entity(h->context.spaces, entity_id);
    if (ghost && (ghost->kind != CELL_ENTITY_GHOST || ghost->home != c || ghost->cls != cls)) {
        if (ghost->kind == CELL_ENTITY_REAL) {
            log_warn("cellapp %" PRIu64 " sent a ghost of entity %" PRIu64 ", which is real here: ignored", peer,
                     entity_id);
            return;
        }
        cell_destroy(ghost->home, ghost); /* it changed space: a new ghost there */
        ghost = NULL;
    }
    if (!ghost) {
        ghost = cell_add(c, entity_id, CELL_ENTITY_GHOST, cls, x, y, z);
        if (!ghost) {
            /* Destroyed earlier this tick and not reaped yet: it comes back
             * as a new ghost from the real's next message. */
            log_debug("ghost %" PRIu64 " is being reaped; its create waits for the next", entity_id);
            return;
        }
    } else {
        cell_move(c, ghost, x, y, z, create->yaw);
    }
    ghost->kind = CELL_ENTITY_GHOST;
    ghost->owner_cellapp = peer;
    ghost->incarnation = incarnation;
    ghost->orphaned_us = 0;
    ghost->ghost_heard_us = clock_monotonic_us();
    ghost->yaw = create->yaw;
    ghost->moved = true;
    ghost->move_stamp_us = create->stamp_us;
    ghost->move_count = create->move_count & CELL_CHANGE_COUNT_MASK;
    ghost->property_count = create->property_count & CELL_CHANGE_COUNT_MASK;
    haunt_decode_properties(peer, ghost, &create->properties, h->context.shared->schema);
}

static void haunt_apply_update(haunts *h, uint64_t peer, cell_entity *ghost,
                               const Tessera__Cluster__GhostUpdate *update) {
    cell *c = ghost->home;
    if (update->position && (update->position->x != ghost->x || update->position->y != ghost->y ||
                             update->position->z != ghost->z || update->yaw != ghost->yaw))
        cell_move(c, ghost, update->position->x, update->position->y, update->position->z, update->yaw);
    else if (update->yaw != ghost->yaw)
        cell_move(c, ghost, ghost->x, ghost->y, ghost->z, update->yaw);
    ghost->move_stamp_us = update->stamp_us;
    ghost->move_count = update->move_count & CELL_CHANGE_COUNT_MASK;
    /* A move from GhostMoves leaves the property counter as it is. */
    if (update->property_count <= CELL_CHANGE_COUNT_MASK) ghost->property_count = update->property_count;
    haunt_decode_properties(peer, ghost, &update->properties, h->context.shared->schema);
    for (size_t i = 0; i < update->n_client_calls; i++) {
        const Tessera__Client__ClientCall *call = update->client_calls[i];
        if (call->entity_id != ghost->id) continue;
        witness_queue_call_for_observers(ghost, call->method_id, call->args.data, call->args.len);
    }
    for (size_t i = 0; i < update->n_events; i++) {
        const Tessera__Client__GameEvent *event = update->events[i];
        if (event->source_id != ghost->id) continue;
        witness_queue_event_for_observers(ghost, event->event_id, event->args.data, event->args.len);
    }
}

/* Applies one ghost message the books let through. */
void haunt_apply(haunts *h, uint64_t peer, const Tessera__Cluster__GhostMessage *message) {
    uint64_t id = message->entity_id;
    if (message->body_case == TESSERA__CLUSTER__GHOST_MESSAGE__BODY_CREATE) {
        haunt_apply_create(h, peer, id, message->incarnation, message->create);
        return;
    }
    cell_entity *ghost = spaces_find_entity(h->context.spaces, id);
    if (!ghost || ghost->kind != CELL_ENTITY_GHOST) {
        log_debug("cellapp %" PRIu64 ": ghost message for entity %" PRIu64 ", which has no ghost here", peer, id);
        return;
    }
    /* The books let it through: its sender feeds this ghost now. */
    ghost->owner_cellapp = peer;
    ghost->incarnation = message->incarnation;
    ghost->orphaned_us = 0;
    ghost->ghost_heard_us = clock_monotonic_us();
    switch (message->body_case) {
        case TESSERA__CLUSTER__GHOST_MESSAGE__BODY_UPDATE:
            haunt_apply_update(h, peer, ghost, message->update);
            break;
        case TESSERA__CLUSTER__GHOST_MESSAGE__BODY_DELETE:
            cell_destroy(ghost->home, ghost);
            break;
        case TESSERA__CLUSTER__GHOST_MESSAGE__BODY_SET_REAL:
            ghost->owner_cellapp = message->set_real->next_cellapp_id;
            ghost->incarnation = message->incarnation + 1;
            break;
        default:
            break;
    }
}

void haunt_peer_down(haunts *h, uint64_t peer, bool drop_ghosts) {
    /* Whatever the books did not release (a ghost whose create never
     * passed them) goes, unless its real is to be restored; and the peer
     * leaves every haunt list. */
    size_t dropped = 0, cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(h->context.spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->count; i++) {
            cell_entity *entity = c->by_index[i];
            if (entity->destroyed) continue;
            if (entity->kind == CELL_ENTITY_GHOST && entity->owner_cellapp == peer && drop_ghosts) {
                cell_destroy(c, entity);
                ghost_order_forget(h->context.ghost_order, entity->id, clock_monotonic_us());
                dropped++;
                continue;
            }
            if (!entity->real) continue; /* another cellapp's ghost */
            for (uint32_t k = 0; k < entity->real->haunt_count;) {
                if (entity->real->haunts[k].cellapp_id == peer)
                    entity->real->haunts[k] = entity->real->haunts[--entity->real->haunt_count];
                else
                    k++;
            }
        }
    }
    if (dropped) log_info("cellapp %" PRIu64 " gone: %zu more of its ghosts dropped", peer, dropped);
}
