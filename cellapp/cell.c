/* cell.c -- one cellapp's part of one space: its region from the layout, the
 * entities in it (reals and ghosts) by id and in a dense array, their nodes
 * in the cell's coordinate system, their traps and timers, and deferred
 * deletion so that nothing is freed while a tick walks the cell. Who sees
 * whom is the coordinate system's and the witnesses' business (coord.c,
 * witness.c); who is real where is haunt.c's and offload.c's. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cell.h"
#include "clock.h"
#include "log.h"

/* A trap's coord watcher reaches its owner through this: by id, so a
 * callback after the owner left finds nothing rather than freed memory. */
typedef struct cell_trap_binding {
    cell *c;
    uint64_t owner_id;
    uint32_t tag;
} cell_trap_binding;

static void cell_apply_region(cell *c, const space_layout *layout) {
    c->layout = layout;
    const space_layout_node *mine = space_layout_cell_of(layout, c->shared->self_id);
    c->has_region = mine != NULL && space_layout_rect_of(layout, mine->cell_id, &c->region) == 0;
    c->cell_id = c->has_region ? mine->cell_id : 0;
    c->layout_changed = true;
}

cell *cell_create(cell_shared *shared, const space_layout *layout) {
    const cellapp_settings *settings = shared->settings;
    cell *c = xcalloc(1, sizeof *c);
    if (volatile_codec_config_init(&c->volatile_config, settings->position_precision, layout->min, layout->max,
                                   (uint32_t)settings->yaw_steps) != 0) {
        log_warn("space '%s' is more than %u steps of position_precision (%g m) across: no cell here", layout->name,
                 VOLATILE_CODEC_MAX_UNITS, settings->position_precision);
        free(c);
        return NULL;
    }
    c->shared = shared;
    snprintf(c->space_name, sizeof c->space_name, "%s", layout->name);
    c->three_d = layout->three_d;
    memcpy(c->min, layout->min, sizeof c->min);
    memcpy(c->max, layout->max, sizeof c->max);
    id_map_init(&c->entities);
    c->coord = coord_create(layout->three_d);
    if (!c->coord) log_panic("space '%s': cannot create its coordinate system", layout->name);
    coord_mode aoi_mode = COORD_MODE_AUTO; /* the name was checked at startup */
    coord_mode_from_name(shared->settings->aoi_mode, &aoi_mode);
    coord_set_mode(c->coord, aoi_mode);
    c->timers = entity_timers_create(shared->timer_ids);
    cell_apply_region(c, layout);
    return c;
}

void cell_set_layout(cell *c, const space_layout *layout) { cell_apply_region(c, layout); }

bool cell_region_holds(const cell *c, double x, double z, double margin) {
    if (!c->has_region) return false;
    /* A cell squeezed to no area (retiring) holds nothing, not even within
     * the margin: its reals must all leave before it can be removed. */
    if (c->region.max_x <= c->region.min_x || c->region.max_z <= c->region.min_z) return false;
    /* The outer edges of the space hold whatever is beyond them. */
    double min_x = c->region.min_x <= c->min[0] ? -INFINITY : c->region.min_x - margin;
    double max_x = c->region.max_x >= c->max[0] ? INFINITY : c->region.max_x + margin;
    double min_z = c->region.min_z <= c->min[2] ? -INFINITY : c->region.min_z - margin;
    double max_z = c->region.max_z >= c->max[2] ? INFINITY : c->region.max_z + margin;
    return x >= min_x && x < max_x && z >= min_z && z < max_z;
}

bool cell_in_bounds(const cell *c, float x, float y, float z) {
    return isfinite(x) && isfinite(y) && isfinite(z) && x >= c->min[0] && x <= c->max[0] && y >= c->min[1] &&
           y <= c->max[1] && z >= c->min[2] && z <= c->max[2];
}

static void cell_remove_traps(cell *c, cell_entity *entity) {
    for (uint32_t i = 0; i < entity->real->trap_count; i++) {
        coord_remove_watcher(c->coord, entity->real->traps[i].watcher);
        free(entity->real->traps[i].binding);
    }
    entity->real->trap_count = 0;
}

/* Releases what only a real holds elsewhere (its witness, traps, timers,
 * inbox, game data, controllers, outputs) and keeps the real part itself:
 * a destroyed real stays one until it is reaped. No-op on a ghost. */
static void cell_strip_real(cell *c, cell_entity *entity) {
    cell_real *real = entity->real;
    if (!real) return;
    c->shared->release_real(c->shared->host, c, entity);
    cell_remove_traps(c, entity);
    entity_timers_take(c->timers, entity->id, 0, NULL, NULL);
    mailbox_inbox_free(real->inbox);
    real->inbox = NULL;
    real->haunt_count = 0;
    free(real->game_data);
    real->game_data = NULL;
    entity_io_outputs_free(&real->outputs);
}

/* Strips the real part and frees it: the entity is left with what a ghost
 * has. No-op on a ghost. */
static void cell_free_real(cell *c, cell_entity *entity) {
    if (!entity->real) return;
    cell_strip_real(c, entity);
    cell_clear_broadcasts(entity);
    free(entity->real->broadcast_calls);
    free(entity->real->broadcast_events);
    free(entity->real->haunts);
    free(entity->real->traps);
    free(entity->real);
    entity->real = NULL;
}

/* A fresh real part: no witness, traps, haunts or messages yet, and its
 * haunts to be worked out. */
static cell_real *cell_real_create(void) {
    cell_real *real = xcalloc(1, sizeof *real);
    real->haunts_stale = true;
    return real;
}

static void cell_free_entity(cell *c, cell_entity *entity) {
    cell_free_real(c, entity);
    c->shared->entity_freed(c->shared->host, entity);
    free(entity->observers);
    entity_state_free(entity->state);
    free(entity);
}

void cell_free(cell *c) {
    if (!c) return;
    for (size_t i = 0; i < c->count; i++) cell_free_entity(c, c->by_index[i]);
    free(c->by_index);
    free(c->changed);
    free(c->witnessed);
    id_map_close(&c->entities);
    coord_free(c->coord);
    entity_timers_free(c->timers);
    free(c->entity_id_of);
    free(c->chained);
    free(c->doomed);
    free(c->view_events);
    free(c);
}

uint64_t cell_entity_id_of(const cell *c, uint32_t coord_id) {
    return coord_id < c->entity_id_capacity ? c->entity_id_of[coord_id] : 0;
}

void cell_note_changed(cell *c, cell_entity *entity) {
    if (entity->listed) return;
    entity->listed = true;
    if (c->changed_count == c->changed_capacity) {
        c->changed_capacity = c->changed_capacity ? c->changed_capacity * 2 : 64;
        c->changed = xrealloc(c->changed, c->changed_capacity * sizeof(cell_entity *));
    }
    c->changed[c->changed_count++] = entity;
}

void cell_witnessed_add(cell *c, cell_entity *entity) {
    if (c->witnessed_count == c->witnessed_capacity) {
        c->witnessed_capacity = c->witnessed_capacity ? c->witnessed_capacity * 2 : 64;
        c->witnessed = xrealloc(c->witnessed, c->witnessed_capacity * sizeof(cell_entity *));
    }
    entity->real->witnessed_index = (uint32_t)c->witnessed_count;
    c->witnessed[c->witnessed_count++] = entity;
}

void cell_witnessed_remove(cell *c, cell_entity *entity) {
    uint32_t index = entity->real->witnessed_index;
    if (index >= c->witnessed_count || c->witnessed[index] != entity) {
        log_warn("space '%s': entity %" PRIu64 " is not on the list of witnessed reals", c->space_name, entity->id);
        return;
    }
    cell_entity *last = c->witnessed[--c->witnessed_count];
    c->witnessed[index] = last;
    last->real->witnessed_index = index;
}

/* A property of the entity was written: entity_state tells once a tick. */
static void cell_on_dirtied(void *context) {
    cell_entity *entity = context;
    cell_note_changed(entity->home, entity);
}

cell_entity *cell_add(cell *c, uint64_t id, cell_entity_kind kind, const entity_def_class *cls, float x, float y,
                      float z) {
    if (id == 0 || id_map_get(&c->entities, id)) return NULL;
    if (!isfinite(x) || !isfinite(y) || !isfinite(z)) return NULL;
    /* On a cache line's boundary, for the line witnesses read (cell.h). */
    cell_entity *entity = aligned_alloc(_Alignof(cell_entity), sizeof *entity);
    if (!entity) log_panic("cell %u: out of memory for entity %llu", c->cell_id, (unsigned long long)id);
    memset(entity, 0, sizeof *entity);
    entity->id = id;
    entity->kind = kind;
    entity->home = c;
    entity->cls = cls;
    entity->state = entity_state_create(cls);
    entity_state_on_dirtied(entity->state, cell_on_dirtied, entity);
    replication_entity_init(&entity->replication, entity->state, id);
    entity->is_new = true;
    if (kind == CELL_ENTITY_REAL) entity->real = cell_real_create();
    entity->x = x;
    entity->y = y;
    entity->z = z;
    entity->coord_id = coord_add_entity(c->coord, x, y, z, 0, kind == CELL_ENTITY_REAL ? 1u : 0u, entity);
    if (entity->coord_id == COORD_NONE)
        log_panic("space '%s': coordinate system refused entity %" PRIu64, c->space_name, id);
    if (entity->coord_id >= c->entity_id_capacity) {
        size_t capacity = c->entity_id_capacity ? c->entity_id_capacity : 256;
        while (capacity <= entity->coord_id) capacity *= 2;
        c->entity_id_of = xrealloc(c->entity_id_of, capacity * sizeof *c->entity_id_of);
        memset(c->entity_id_of + c->entity_id_capacity, 0,
               (capacity - c->entity_id_capacity) * sizeof *c->entity_id_of);
        c->entity_id_capacity = capacity;
    }
    c->entity_id_of[entity->coord_id] = id;
    if (id_map_put(&c->entities, id, entity) != 0) log_panic("space '%s': cannot index entity", c->space_name);
    if (c->count == c->capacity) {
        c->capacity = c->capacity ? c->capacity * 2 : 64;
        c->by_index = xrealloc(c->by_index, c->capacity * sizeof(cell_entity *));
    }
    entity->index = c->count;
    c->by_index[c->count++] = entity;
    if (kind == CELL_ENTITY_REAL)
        c->real_count++;
    else
        c->ghost_count++;
    cell_note_changed(c, entity); /* is_new */
    return entity;
}

cell_entity *cell_find(const cell *c, uint64_t id) {
    cell_entity *entity = id_map_get(&c->entities, id);
    return entity && !entity->destroyed ? entity : NULL;
}

void cell_move(cell *c, cell_entity *entity, float x, float y, float z, float yaw) {
    if (entity->destroyed) return;
    if (coord_move_entity(c->coord, entity->coord_id, x, y, z) != 0) return;
    entity->x = x;
    entity->y = y;
    entity->z = z;
    entity->yaw = yaw;
    entity->moved = true;
    if (entity->real) entity->real->haunts_stale = true;
    cell_note_changed(c, entity);
}

void cell_destroy(cell *c, cell_entity *entity) {
    if (entity->destroyed) return;
    entity->destroyed = true;
    cell_note_changed(c, entity);
    cell_strip_real(c, entity);
    coord_remove_entity(c->coord, entity->coord_id);
}

void cell_make_ghost(cell *c, cell_entity *entity, uint64_t owner, uint32_t incarnation) {
    if (entity->kind == CELL_ENTITY_REAL) {
        cell_free_real(c, entity);
        c->real_count--;
        c->ghost_count++;
        coord_set_entity_filter(c->coord, entity->coord_id, 0, 0);
    }
    entity->kind = CELL_ENTITY_GHOST;
    entity->owner_cellapp = owner;
    entity->incarnation = incarnation;
    /* Its state is the real's as it left here: as fresh as a ghost's can be. */
    entity->orphaned_us = 0;
    entity->ghost_heard_us = clock_monotonic_us();
}

cell_real *cell_make_real(cell *c, cell_entity *entity) {
    if (entity->kind == CELL_ENTITY_GHOST) {
        entity->real = cell_real_create();
        entity->kind = CELL_ENTITY_REAL;
        cell_note_changed(c, entity); /* its haunts are to be worked out */
        entity->owner_cellapp = 0;
        c->ghost_count--;
        c->real_count++;
        coord_set_entity_filter(c->coord, entity->coord_id, 0, 1);
    }
    return entity->real;
}

/* Whether any of `audiences` receives a property in the entity's change
 * list. */
static bool cell_anyone_receives(const cell *c, const cell_entity *entity, unsigned audiences) {
    const entity_state_mask *dirty = entity_state_dirty(entity->state);
    for (unsigned audience = 0; audience < REPLICATION_AUDIENCE_COUNT; audience++) {
        if (!(audiences & (1u << audience))) continue;
        const entity_state_mask *mask =
            replication_schema_mask(c->shared->schema, entity->cls->id, (replication_audience)audience);
        for (int k = 0; k < ENTITY_STATE_MASK_WORDS; k++)
            if (dirty->words[k] & mask->words[k]) return true;
    }
    return false;
}

void cell_pack(cell *c) {
    /* Only a listed entity can be dirty, or packed from an earlier pack. */
    for (size_t i = 0; i < c->changed_count; i++) {
        cell_entity *entity = c->changed[i];
        entity->packed = false;
        if (entity->destroyed || entity_state_mask_empty(entity_state_dirty(entity->state))) continue;
        /* Only the audiences someone receives: the own client's when there
         * is one, the ghosts' when it has ghosts. */
        unsigned audiences = REPLICATION_OTHERS_AUDIENCES;
        if (cell_entity_witness(entity)) audiences |= 1u << REPLICATION_AUDIENCE_OWN;
        if (entity->kind == CELL_ENTITY_REAL && entity->real->haunt_count)
            audiences |= 1u << REPLICATION_AUDIENCE_GHOSTS;
        /* A change nobody receives (a cell-private counter that moves with
         * every step) is not packed, and touches no witness. */
        if (!cell_anyone_receives(c, entity, audiences)) continue;
        replication_pack_audiences(c->shared->replication, &entity->replication, audiences);
        entity->packed = true;
    }
}

/* Whether `entity`, listed this tick, stays on the list for the next: a
 * real whose haunts must be worked out again (a recompute that has to
 * retry), whose teleport into another space waits, whose backup is due, or
 * that is outside its cell's region with the offload margin (an offload
 * waiting for its cellapp). haunt_tick, offload_tick and the backups then
 * find it without a walk over every entity. */
static bool cell_carries_over(const cell *c, const cell_entity *entity) {
    const cell_real *real = entity->real;
    if (!real || entity->destroyed) return false;
    return real->haunts_stale || real->teleport_pending || real->snapshot_due ||
           !cell_region_holds(c, entity->x, entity->z, c->shared->settings->haunt.offload_margin);
}

#ifdef TESSERA_CELL_CHECKS
/* Whether something the end of the tick resets or carries over is set on
 * `entity`: then it must be on the changed list. */
static bool cell_has_tick_changes(const cell *c, const cell_entity *entity) {
    if (entity->moved || entity->is_new || entity->destroyed || entity->packed) return true;
    if (!entity_state_mask_empty(entity_state_dirty(entity->state))) return true;
    const cell_real *real = entity->real;
    if (real && (real->teleported || real->space_changed || real->broadcast_count || real->broadcast_event_count))
        return true;
    return !c->layout_changed && cell_carries_over(c, entity);
}

/* Checks the list against every entity (builds other than release): an
 * entity that changed without being listed would be skipped by the
 * tick's passes, and its change lost. */
static void cell_check_changed_list(const cell *c) {
    for (size_t i = 0; i < c->count; i++) {
        const cell_entity *entity = c->by_index[i];
        if (!entity->listed && cell_has_tick_changes(c, entity))
            log_panic("space '%s': entity %" PRIu64 " changed this tick but is not on the cell's changed list",
                      c->space_name, entity->id);
    }
}
#endif

void cell_end_tick(cell *c) {
#ifdef TESSERA_CELL_CHECKS
    cell_check_changed_list(c);
#endif
    size_t kept = 0;
    for (size_t k = 0; k < c->changed_count; k++) {
        cell_entity *entity = c->changed[k];
        entity->listed = false;
        if (!entity->destroyed) {
            entity->moved = false;
            entity->is_new = false;
            entity->packed = false;
            if (entity->real) entity->real->teleported = entity->real->space_changed = false;
            if (cell_carries_over(c, entity)) {
                entity->listed = true;
                c->changed[kept++] = entity;
            }
            continue;
        }
        id_map_remove(&c->entities, entity->id);
        if (entity->kind == CELL_ENTITY_REAL)
            c->real_count--;
        else
            c->ghost_count--;
        size_t i = entity->index;
        c->by_index[i] = c->by_index[--c->count];
        c->by_index[i]->index = i;
        cell_free_entity(c, entity);
    }
    c->changed_count = kept;
    /* A new layout moved the region under every real, listed or not. */
    if (c->layout_changed)
        for (size_t i = 0; i < c->count; i++)
            if (cell_carries_over(c, c->by_index[i])) cell_note_changed(c, c->by_index[i]);
    c->layout_changed = false;
    c->tick++;
}

/* ---- traps ------------------------------------------------------------------ */

static void cell_on_trap(coord_system *cs, uint32_t watcher, uint32_t other, void *user_data, bool entered) {
    cell_trap_binding *binding = user_data;
    cell_entity *owner = cell_find(binding->c, binding->owner_id);
    cell_entity *visitor = coord_entity_user_data(cs, other);
    if (!owner || owner->kind != CELL_ENTITY_REAL || !visitor || visitor->destroyed) return;
    bool live = false;
    for (uint32_t i = 0; i < owner->real->trap_count; i++) live |= owner->real->traps[i].watcher == watcher;
    if (!live) return;
    cell_shared *shared = binding->c->shared;
    if (shared->on_trap) shared->on_trap(shared->host, owner, binding->tag, visitor, entered);
}

static void cell_on_trap_enter(coord_system *cs, uint32_t watcher, uint32_t entity, void *user_data) {
    cell_on_trap(cs, watcher, entity, user_data, true);
}

static void cell_on_trap_leave(coord_system *cs, uint32_t watcher, uint32_t entity, void *user_data) {
    cell_on_trap(cs, watcher, entity, user_data, false);
}

static const coord_watcher_callbacks cell_trap_callbacks = {
    .on_enter = cell_on_trap_enter,
    .on_leave = cell_on_trap_leave,
};

int cell_add_trap(cell *c, cell_entity *entity, uint32_t controller_id, uint32_t tag, coord_shape shape, float radius,
                  const uint64_t *members, size_t member_count) {
    cell_trap_binding *binding = xmalloc(sizeof *binding);
    binding->c = c;
    binding->owner_id = entity->id;
    binding->tag = tag;
    uint32_t watcher = coord_add_watcher(c->coord, entity->coord_id, radius, 0, &cell_trap_callbacks, binding);
    if (watcher != COORD_NONE && coord_set_watcher_shape(c->coord, watcher, shape) != 0) {
        coord_remove_watcher(c->coord, watcher);
        watcher = COORD_NONE;
    }
    if (watcher == COORD_NONE) {
        free(binding);
        return -1;
    }
    for (size_t i = 0; i < member_count; i++) {
        cell_entity *member = cell_find(c, members[i]);
        if (member) coord_watcher_seed(c->coord, watcher, member->coord_id);
    }
    if (entity->real->trap_count == entity->real->trap_capacity) {
        entity->real->trap_capacity = entity->real->trap_capacity ? entity->real->trap_capacity * 2 : 2;
        entity->real->traps = xrealloc(entity->real->traps, entity->real->trap_capacity * sizeof *entity->real->traps);
    }
    entity->real->traps[entity->real->trap_count++] = (cell_trap){watcher, controller_id, tag, shape, radius, binding};
    return 0;
}

size_t cell_query_range(cell *c, const cell_entity *around, coord_shape shape, float radius, uint64_t *out,
                        size_t max) {
    /* The ids come back in the coordinate system's terms, in a buffer no
     * larger than the cell's population; the total says how many match. */
    size_t room = out ? max : 0, population = coord_entity_count(c->coord);
    if (room > population) room = population;
    uint32_t *found = room ? xmalloc(room * sizeof *found) : NULL;
    coord_query_filter filter = {.exclude_entity = around->coord_id};
    size_t total = coord_query_shape(c->coord, shape, around->x, around->y, around->z, radius, &filter, found, room);
    for (size_t i = 0; i < room && i < total; i++) out[i] = cell_entity_id_of(c, found[i]);
    free(found);
    return total;
}

void cell_note_view(cell *c, uint64_t owner_id, uint64_t other_id, bool entered) {
    if (c->view_event_count == c->view_event_capacity) {
        c->view_event_capacity = c->view_event_capacity ? c->view_event_capacity * 2 : 64;
        c->view_events = xrealloc(c->view_events, c->view_event_capacity * sizeof *c->view_events);
    }
    c->view_events[c->view_event_count++] = (struct cell_view_event){owner_id, other_id, entered};
}

void cell_doom(cell *c, cell_entity *entity) {
    if (!entity->real || entity->real->doomed || entity->destroyed) return;
    entity->real->doomed = true;
    if (c->doomed_count == c->doomed_capacity) {
        c->doomed_capacity = c->doomed_capacity ? c->doomed_capacity * 2 : 16;
        c->doomed = xrealloc(c->doomed, c->doomed_capacity * sizeof *c->doomed);
    }
    c->doomed[c->doomed_count++] = entity->id;
}

int cell_remove_trap(cell *c, cell_entity *entity, uint32_t controller_id) {
    for (uint32_t i = 0; i < entity->real->trap_count; i++) {
        if (entity->real->traps[i].controller_id != controller_id) continue;
        coord_remove_watcher(c->coord, entity->real->traps[i].watcher);
        free(entity->real->traps[i].binding);
        memmove(&entity->real->traps[i], &entity->real->traps[i + 1],
                (entity->real->trap_count - i - 1) * sizeof *entity->real->traps);
        entity->real->trap_count--;
        return 0;
    }
    return -1;
}

void cell_queue_broadcast(cell_entity *entity, uint32_t method_id, const uint8_t *args, size_t length) {
    if (entity->real->broadcast_count == entity->real->broadcast_capacity) {
        entity->real->broadcast_capacity = entity->real->broadcast_capacity ? entity->real->broadcast_capacity * 2 : 4;
        entity->real->broadcast_calls = xrealloc(
            entity->real->broadcast_calls, entity->real->broadcast_capacity * sizeof *entity->real->broadcast_calls);
    }
    Tessera__Client__ClientCall call = TESSERA__CLIENT__CLIENT_CALL__INIT;
    call.entity_id = entity->id;
    call.method_id = method_id;
    call.args.data = xmalloc(length ? length : 1);
    if (length) memcpy(call.args.data, args, length);
    call.args.len = length;
    entity->real->broadcast_calls[entity->real->broadcast_count++] = call;
    cell_note_changed(entity->home, entity);
}

void cell_queue_broadcast_event(cell_entity *entity, uint32_t event_id, const uint8_t *args, size_t length) {
    if (entity->real->broadcast_event_count == entity->real->broadcast_event_capacity) {
        entity->real->broadcast_event_capacity =
            entity->real->broadcast_event_capacity ? entity->real->broadcast_event_capacity * 2 : 4;
        entity->real->broadcast_events =
            xrealloc(entity->real->broadcast_events,
                     entity->real->broadcast_event_capacity * sizeof *entity->real->broadcast_events);
    }
    Tessera__Client__GameEvent event = TESSERA__CLIENT__GAME_EVENT__INIT;
    event.event_id = event_id;
    event.source_id = entity->id;
    event.args.data = xmalloc(length ? length : 1);
    if (length) memcpy(event.args.data, args, length);
    event.args.len = length;
    entity->real->broadcast_events[entity->real->broadcast_event_count++] = event;
    cell_note_changed(entity->home, entity);
}

void cell_clear_broadcasts(cell_entity *entity) {
    if (!entity->real) return;
    for (size_t i = 0; i < entity->real->broadcast_count; i++) free(entity->real->broadcast_calls[i].args.data);
    entity->real->broadcast_count = 0;
    for (size_t i = 0; i < entity->real->broadcast_event_count; i++) free(entity->real->broadcast_events[i].args.data);
    entity->real->broadcast_event_count = 0;
}
