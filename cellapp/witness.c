/* witness.c -- one client's view of its space and the messages that follow
 * from it. The view itself is a watcher in the space's coordinate system
 * (coord.h: a square of half-side view_radius, left beyond view_radius +
 * view_hysteresis); its flush tells the witness who entered and left, net
 * for the tick. The witness packs those, plus the moves of everything it
 * keeps seeing, into one ServerToClient(view) per tick. The client sees its
 * own entity first (the coordinate system never shows an owner itself). */
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "log.h"

struct witness {
    const space *sp;
    uint32_t watcher;
    uint32_t *entered;    /* coord ids reported entering since the last update */
    size_t entered_count, entered_capacity;
    uint64_t *left;       /* entity ids reported leaving since the last update */
    size_t left_count, left_capacity;
    bool self_sent;
};

#define WITNESS_PUSH(array, count, capacity, value)                                                      \
    do {                                                                                                 \
        if ((count) == (capacity)) {                                                                     \
            (capacity) = (capacity) ? (capacity) * 2 : 16;                                               \
            (array) = xrealloc((array), (capacity) * sizeof *(array));                                   \
        }                                                                                                \
        (array)[(count)++] = (value);                                                                    \
    } while (0)

static void witness_on_enter(coord_system *cs, uint32_t watcher, uint32_t entity, void *user_data) {
    witness *view = user_data;
    (void)cs;
    (void)watcher;
    WITNESS_PUSH(view->entered, view->entered_count, view->entered_capacity, entity);
}

static void witness_on_leave(coord_system *cs, uint32_t watcher, uint32_t entity, void *user_data) {
    witness *view = user_data;
    (void)cs;
    (void)watcher;
    WITNESS_PUSH(view->left, view->left_count, view->left_capacity, space_entity_id_of(view->sp, entity));
}

static const coord_watcher_callbacks witness_callbacks = {
    .on_enter = witness_on_enter,
    .on_leave = witness_on_leave,
};

void witness_attach(space *sp, cell_entity *entity, double view_radius, double view_hysteresis) {
    if (entity->witness) return;
    witness *view = xcalloc(1, sizeof *view);
    view->sp = sp;
    view->watcher = coord_add_watcher(sp->coord, entity->coord_id, (float)view_radius, (float)view_hysteresis,
                                      &witness_callbacks, view);
    if (view->watcher == COORD_NONE) log_panic("entity %llu: cannot attach a witness", (unsigned long long)entity->id);
    entity->witness = view;
}

void witness_detach(space *sp, cell_entity *entity) {
    witness *view = entity->witness;
    if (!view) return;
    coord_remove_watcher(sp->coord, view->watcher);
    free(view->entered);
    free(view->left);
    free(view);
    entity->witness = NULL;
}

static void witness_fill_position(Tessera__Client__Vector3 *position, const cell_entity *entity) {
    Tessera__Client__Vector3 init = TESSERA__CLIENT__VECTOR3__INIT;
    *position = init;
    position->x = entity->x;
    position->y = entity->y;
    position->z = entity->z;
}

size_t witness_update(witness *view, const cell_entity *owner, const space *sp, uint8_t **payload) {
    *payload = NULL;
    size_t enter_capacity = view->entered_count + 1;
    const cell_entity **enters = xmalloc(enter_capacity * sizeof *enters);
    size_t enter_count = 0;
    if (!view->self_sent) {
        enters[enter_count++] = owner;
        view->self_sent = true;
    }
    for (size_t i = 0; i < view->entered_count; i++) {
        const cell_entity *other = coord_entity_user_data(sp->coord, view->entered[i]);
        if (other) enters[enter_count++] = other;
    }

    /* Moves: everything in view that moved this tick, except what entered
     * now (its enter carries the current state). */
    size_t move_capacity = 16, move_count = 0;
    const cell_entity **moves = xmalloc(move_capacity * sizeof *moves);
    size_t cursor = 0;
    uint32_t coord_id;
    while ((coord_id = coord_watcher_next(sp->coord, view->watcher, &cursor)) != COORD_NONE) {
        const cell_entity *other = coord_entity_user_data(sp->coord, coord_id);
        if (!other || !other->moved) continue;
        bool just_entered = false;
        for (size_t i = 0; i < enter_count && !just_entered; i++) just_entered = enters[i] == other;
        if (just_entered) continue;
        if (move_count == move_capacity) {
            move_capacity *= 2;
            moves = xrealloc(moves, move_capacity * sizeof *moves);
        }
        moves[move_count++] = other;
    }

    size_t length = 0;
    if (view->left_count + enter_count + move_count > 0) {
        Tessera__Client__ViewUpdate update = TESSERA__CLIENT__VIEW_UPDATE__INIT;
        update.tick = sp->tick;
        update.n_leaves = view->left_count;
        update.leaves = view->left;

        Tessera__Client__Vector3 *positions = xcalloc(enter_count + move_count + 1, sizeof *positions);
        Tessera__Client__EntityEnter *enter_records = xcalloc(enter_count + 1, sizeof *enter_records);
        Tessera__Client__EntityEnter **enter_pointers = xcalloc(enter_count + 1, sizeof *enter_pointers);
        for (size_t i = 0; i < enter_count; i++) {
            Tessera__Client__EntityEnter init = TESSERA__CLIENT__ENTITY_ENTER__INIT;
            enter_records[i] = init;
            witness_fill_position(&positions[i], enters[i]);
            enter_records[i].entity_id = enters[i]->id;
            enter_records[i].position = &positions[i];
            enter_records[i].yaw = enters[i]->yaw;
            enter_records[i].entity_type = (char *)enters[i]->type;
            enter_pointers[i] = &enter_records[i];
        }
        update.n_enters = enter_count;
        update.enters = enter_pointers;

        Tessera__Client__EntityMove *move_records = xcalloc(move_count + 1, sizeof *move_records);
        Tessera__Client__EntityMove **move_pointers = xcalloc(move_count + 1, sizeof *move_pointers);
        for (size_t i = 0; i < move_count; i++) {
            Tessera__Client__EntityMove init = TESSERA__CLIENT__ENTITY_MOVE__INIT;
            move_records[i] = init;
            witness_fill_position(&positions[enter_count + i], moves[i]);
            move_records[i].entity_id = moves[i]->id;
            move_records[i].position = &positions[enter_count + i];
            move_records[i].yaw = moves[i]->yaw;
            move_records[i].stamp_us = moves[i]->move_stamp_us;
            move_pointers[i] = &move_records[i];
        }
        update.n_moves = move_count;
        update.moves = move_pointers;

        Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
        message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_VIEW;
        message.view = &update;
        length = tessera__client__server_to_client__get_packed_size(&message);
        *payload = xmalloc(length);
        tessera__client__server_to_client__pack(&message, *payload);
        free(positions);
        free(enter_records);
        free(enter_pointers);
        free(move_records);
        free(move_pointers);
    }
    free(enters);
    free(moves);
    view->entered_count = 0;
    view->left_count = 0;
    return length;
}
