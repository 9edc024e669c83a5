/* space.c -- the entities of one space on this cellapp, reals and ghosts:
 * lookup by id, a dense array for iteration, their nodes in the space's
 * coordinate system, and deferred deletion so that nothing is freed while a
 * tick walks the space. Who sees whom is the coordinate system's and the
 * witnesses' business (coord.c, witness.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "log.h"

void space_init(space *sp, const char *name, bool three_d) {
    memset(sp, 0, sizeof *sp);
    snprintf(sp->name, sizeof sp->name, "%s", name);
    id_map_init(&sp->entities);
    sp->coord = coord_create(three_d);
    if (!sp->coord) log_panic("space '%s': cannot create its coordinate system", name);
}

static void space_free_entity(space *sp, cell_entity *entity) {
    if (entity->witness) witness_detach(sp, entity);
    for (size_t i = 0; i < entity->broadcast_count; i++) free(entity->broadcast_calls[i].args.data);
    free(entity->broadcast_calls);
    entity_state_free(entity->state);
    free(entity);
}

/* Removes the entity's own watchers from the coordinate system. */
static void space_remove_watchers(space *sp, cell_entity *entity) {
    if (entity->witness) witness_detach(sp, entity);
    if (entity->trap != COORD_NONE) {
        coord_remove_watcher(sp->coord, entity->trap);
        entity->trap = COORD_NONE;
    }
}

void space_close(space *sp) {
    for (size_t i = 0; i < sp->count; i++) space_free_entity(sp, sp->by_index[i]);
    free(sp->by_index);
    id_map_close(&sp->entities);
    coord_free(sp->coord);
    free(sp->entity_id_of);
    memset(sp, 0, sizeof *sp);
}

uint64_t space_entity_id_of(const space *sp, uint32_t coord_id) {
    return coord_id < sp->entity_id_capacity ? sp->entity_id_of[coord_id] : 0;
}

cell_entity *space_add(space *sp, uint64_t id, cell_entity_kind kind, const entity_def_class *cls, float x, float y,
                       float z) {
    if (id == 0 || id_map_get(&sp->entities, id)) return NULL;
    if (!isfinite(x) || !isfinite(y) || !isfinite(z)) return NULL;
    cell_entity *entity = xcalloc(1, sizeof *entity);
    entity->id = id;
    entity->kind = kind;
    entity->cls = cls;
    entity->state = entity_state_create(cls);
    replication_entity_init(&entity->replication, entity->state, id);
    entity->trap = COORD_NONE;
    snprintf(entity->type, sizeof entity->type, "%s", cls->name);
    entity->is_new = true;
    entity->x = x;
    entity->y = y;
    entity->z = z;
    entity->coord_id = coord_add_entity(sp->coord, x, y, z, 0, kind == CELL_ENTITY_REAL ? 1u : 0u, entity);
    if (entity->coord_id == COORD_NONE) log_panic("space '%s': coordinate system refused entity %llu", sp->name,
                                                  (unsigned long long)id);
    if (entity->coord_id >= sp->entity_id_capacity) {
        size_t capacity = sp->entity_id_capacity ? sp->entity_id_capacity : 256;
        while (capacity <= entity->coord_id) capacity *= 2;
        sp->entity_id_of = xrealloc(sp->entity_id_of, capacity * sizeof *sp->entity_id_of);
        memset(sp->entity_id_of + sp->entity_id_capacity, 0,
               (capacity - sp->entity_id_capacity) * sizeof *sp->entity_id_of);
        sp->entity_id_capacity = capacity;
    }
    sp->entity_id_of[entity->coord_id] = id;
    if (id_map_put(&sp->entities, id, entity) != 0) log_panic("space '%s': cannot index entity", sp->name);
    if (sp->count == sp->capacity) {
        sp->capacity = sp->capacity ? sp->capacity * 2 : 64;
        sp->by_index = xrealloc(sp->by_index, sp->capacity * sizeof *sp->by_index);
    }
    entity->index = sp->count;
    sp->by_index[sp->count++] = entity;
    if (kind == CELL_ENTITY_REAL) sp->real_count++;
    else sp->ghost_count++;
    return entity;
}

cell_entity *space_find(const space *sp, uint64_t id) {
    cell_entity *entity = id_map_get(&sp->entities, id);
    return entity && !entity->destroyed ? entity : NULL;
}

void space_move(space *sp, cell_entity *entity, float x, float y, float z, float yaw) {
    if (entity->destroyed) return;
    if (coord_move_entity(sp->coord, entity->coord_id, x, y, z) != 0) return;
    entity->x = x;
    entity->y = y;
    entity->z = z;
    entity->yaw = yaw;
    entity->moved = true;
}

void space_destroy(space *sp, cell_entity *entity) {
    if (entity->destroyed) return;
    entity->destroyed = true;
    space_remove_watchers(sp, entity);
    coord_remove_entity(sp->coord, entity->coord_id);
}

void space_end_tick(space *sp) {
    size_t i = 0;
    while (i < sp->count) {
        cell_entity *entity = sp->by_index[i];
        if (!entity->destroyed) {
            entity->moved = false;
            entity->is_new = false;
            i++;
            continue;
        }
        id_map_remove(&sp->entities, entity->id);
        if (entity->kind == CELL_ENTITY_REAL) sp->real_count--;
        else sp->ghost_count--;
        sp->by_index[i] = sp->by_index[--sp->count];
        sp->by_index[i]->index = i;
        space_free_entity(sp, entity);
    }
    sp->tick++;
}
