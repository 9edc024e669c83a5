/* space.c -- the entities of one space on this cellapp, reals and ghosts:
 * lookup by id, a dense array for iteration, and deferred deletion so that
 * nothing is freed while a tick walks the space. Who sees whom is the
 * witnesses' business (witness.c). */
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "log.h"

void space_init(space *sp, const char *name) {
    memset(sp, 0, sizeof *sp);
    snprintf(sp->name, sizeof sp->name, "%s", name);
    id_map_init(&sp->entities);
}

static void space_free_entity(cell_entity *entity) {
    if (entity->witness) witness_detach(entity);
    free(entity);
}

void space_close(space *sp) {
    for (size_t i = 0; i < sp->count; i++) space_free_entity(sp->by_index[i]);
    free(sp->by_index);
    id_map_close(&sp->entities);
    memset(sp, 0, sizeof *sp);
}

cell_entity *space_add(space *sp, uint64_t id, cell_entity_kind kind, const char *type) {
    if (id == 0 || id_map_get(&sp->entities, id)) return NULL;
    cell_entity *entity = xcalloc(1, sizeof *entity);
    entity->id = id;
    entity->kind = kind;
    snprintf(entity->type, sizeof entity->type, "%s", type && type[0] ? type : "Entity");
    entity->is_new = true;
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

void space_destroy(space *sp, cell_entity *entity) {
    (void)sp;
    entity->destroyed = true;
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
        space_free_entity(entity);
    }
    sp->tick++;
}
