/* witness.c -- one client's view of its space: who it sees, and the view
 * updates that follow from it. Each tick the witness compares every entity
 * of the space with its owner's position by the view rule (view_oracle.c)
 * and packs leaves, enters and the moves of entities it keeps seeing into
 * one ServerToClient(view) for the client.
 *
 * This is the brute-force witness: O(entities) per witness per tick. It is
 * exact by construction and is kept as the oracle once the coordinate-axis
 * AOI replaces it. */
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "log.h"

struct witness {
    id_map view;          /* entity id -> (void *)1 for every entity in view */
    double radius;
    double hysteresis;
};

void witness_attach(cell_entity *entity, double view_radius, double view_hysteresis) {
    if (entity->witness) return;
    witness *view = xcalloc(1, sizeof *view);
    id_map_init(&view->view);
    view->radius = view_radius;
    view->hysteresis = view_hysteresis;
    entity->witness = view;
}

void witness_detach(cell_entity *entity) {
    if (!entity->witness) return;
    id_map_close(&entity->witness->view);
    free(entity->witness);
    entity->witness = NULL;
}

size_t witness_view_size(const witness *view) { return id_map_count(&view->view); }

/* Growable scratch arrays for one update; freed at the end of it. */
typedef struct witness_scratch {
    uint64_t *leaves;
    size_t leave_count, leave_capacity;
    const cell_entity **enters;
    size_t enter_count, enter_capacity;
    const cell_entity **moves;
    size_t move_count, move_capacity;
} witness_scratch;

#define WITNESS_PUSH(array, count, capacity, value)                                                      \
    do {                                                                                                 \
        if ((count) == (capacity)) {                                                                     \
            (capacity) = (capacity) ? (capacity) * 2 : 16;                                               \
            (array) = xrealloc((array), (capacity) * sizeof *(array));                                   \
        }                                                                                                \
        (array)[(count)++] = (value);                                                                    \
    } while (0)

static size_t witness_pack(const space *sp, witness_scratch *scratch, uint8_t **payload) {
    Tessera__Client__ViewUpdate update = TESSERA__CLIENT__VIEW_UPDATE__INIT;
    update.tick = sp->tick;
    update.n_leaves = scratch->leave_count;
    update.leaves = scratch->leaves;

    Tessera__Client__EntityEnter *enters = xcalloc(scratch->enter_count + 1, sizeof *enters);
    Tessera__Client__EntityEnter **enter_pointers = xcalloc(scratch->enter_count + 1, sizeof *enter_pointers);
    Tessera__Client__Vector3 *positions =
        xcalloc(scratch->enter_count + scratch->move_count + 1, sizeof *positions);
    for (size_t i = 0; i < scratch->enter_count; i++) {
        const cell_entity *entity = scratch->enters[i];
        Tessera__Client__EntityEnter init = TESSERA__CLIENT__ENTITY_ENTER__INIT;
        Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
        position.x = entity->x;
        position.y = entity->y;
        position.z = entity->z;
        positions[i] = position;
        enters[i] = init;
        enters[i].entity_id = entity->id;
        enters[i].position = &positions[i];
        enters[i].yaw = entity->yaw;
        enters[i].entity_type = (char *)entity->type;
        enter_pointers[i] = &enters[i];
    }
    update.n_enters = scratch->enter_count;
    update.enters = enter_pointers;

    Tessera__Client__EntityMove *moves = xcalloc(scratch->move_count + 1, sizeof *moves);
    Tessera__Client__EntityMove **move_pointers = xcalloc(scratch->move_count + 1, sizeof *move_pointers);
    for (size_t i = 0; i < scratch->move_count; i++) {
        const cell_entity *entity = scratch->moves[i];
        Tessera__Client__EntityMove init = TESSERA__CLIENT__ENTITY_MOVE__INIT;
        Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
        position.x = entity->x;
        position.y = entity->y;
        position.z = entity->z;
        Tessera__Client__Vector3 *slot = &positions[scratch->enter_count + i];
        *slot = position;
        moves[i] = init;
        moves[i].entity_id = entity->id;
        moves[i].position = slot;
        moves[i].yaw = entity->yaw;
        moves[i].stamp_us = entity->move_stamp_us;
        move_pointers[i] = &moves[i];
    }
    update.n_moves = scratch->move_count;
    update.moves = move_pointers;

    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_VIEW;
    message.view = &update;
    size_t length = tessera__client__server_to_client__get_packed_size(&message);
    *payload = xmalloc(length);
    tessera__client__server_to_client__pack(&message, *payload);

    free(enters);
    free(enter_pointers);
    free(moves);
    free(move_pointers);
    free(positions);
    return length;
}

size_t witness_update(witness *view, const cell_entity *owner, const space *sp, uint8_t **payload) {
    witness_scratch scratch;
    memset(&scratch, 0, sizeof scratch);

    /* Leaves first: entities gone from the space, then those now too far. */
    size_t cursor = 0;
    uint64_t id;
    void *unused;
    while (id_map_next(&view->view, &cursor, &id, &unused)) {
        const cell_entity *other = space_find(sp, id);
        if (!other || (other != owner && view_oracle_should_leave(owner, other, view->radius, view->hysteresis)))
            WITNESS_PUSH(scratch.leaves, scratch.leave_count, scratch.leave_capacity, id);
    }
    for (size_t i = 0; i < scratch.leave_count; i++) id_map_remove(&view->view, scratch.leaves[i]);

    for (size_t i = 0; i < sp->count; i++) {
        const cell_entity *other = sp->by_index[i];
        if (other->destroyed) continue;
        if (id_map_get(&view->view, other->id)) {
            if (other->moved && other != owner)
                WITNESS_PUSH(scratch.moves, scratch.move_count, scratch.move_capacity, other);
        } else if (other == owner || view_oracle_should_enter(owner, other, view->radius)) {
            id_map_put(&view->view, other->id, (void *)1);
            WITNESS_PUSH(scratch.enters, scratch.enter_count, scratch.enter_capacity, other);
        }
    }

    size_t length = 0;
    *payload = NULL;
    if (scratch.leave_count + scratch.enter_count + scratch.move_count > 0) length = witness_pack(sp, &scratch, payload);
    free(scratch.leaves);
    free(scratch.enters);
    free(scratch.moves);
    return length;
}
