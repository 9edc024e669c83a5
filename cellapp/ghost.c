/* ghost.c -- mirrors between cellapps. Our reals are sent to every peer
 * cellapp as ghosts (in full when the peer comes up, then per tick what is
 * new, moved or destroyed); the peers' reals arrive here and live in our
 * space as ghosts, which witnesses see like reals. A ghost is read-only: it
 * changes only by its real's word, and vanishes with its cellapp. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "log.h"

static void ghost_fill_state(const cell_entity *entity, bool full, const char *space_name,
                             Tessera__Cluster__GhostState *state, Tessera__Client__Vector3 *position) {
    Tessera__Cluster__GhostState init = TESSERA__CLUSTER__GHOST_STATE__INIT;
    Tessera__Client__Vector3 vector = TESSERA__CLIENT__VECTOR3__INIT;
    *state = init;
    *position = vector;
    position->x = entity->x;
    position->y = entity->y;
    position->z = entity->z;
    state->entity_id = entity->id;
    state->position = position;
    state->yaw = entity->yaw;
    state->stamp_us = entity->move_stamp_us;
    if (full) {
        state->entity_type = (char *)entity->type;
        state->space_name = (char *)space_name;
    }
}

/* Packs the reals selected by `full` (all) or by their per-tick flags into
 * one GhostBatch and sends it to `peer_id`, or to every cellapp peer when
 * peer_id is 0. */
static void ghost_send(cellapp *app, uint64_t peer_id, bool full) {
    space *sp = &app->space;
    Tessera__Cluster__GhostState *states = xcalloc(sp->real_count + 1, sizeof *states);
    Tessera__Cluster__GhostState **pointers = xcalloc(sp->real_count + 1, sizeof *pointers);
    Tessera__Client__Vector3 *positions = xcalloc(sp->real_count + 1, sizeof *positions);
    size_t count = 0;
    for (size_t i = 0; i < sp->count && count < sp->real_count; i++) {
        const cell_entity *entity = sp->by_index[i];
        if (entity->kind != CELL_ENTITY_REAL || entity->destroyed) continue;
        if (!full && !entity->is_new && !entity->moved) continue;
        ghost_fill_state(entity, full || entity->is_new, sp->name, &states[count], &positions[count]);
        pointers[count] = &states[count];
        count++;
    }
    Tessera__Cluster__GhostBatch batch = TESSERA__CLUSTER__GHOST_BATCH__INIT;
    batch.n_states = count;
    batch.states = pointers;
    if (!full) {
        batch.n_destroyed = app->destroyed_count;
        batch.destroyed = app->destroyed_reals;
    }
    if (batch.n_states + batch.n_destroyed > 0) {
        Tessera__Cluster__PeerMessage message = TESSERA__CLUSTER__PEER_MESSAGE__INIT;
        message.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_GHOSTS;
        message.ghosts = &batch;
        if (peer_id) {
            peer_set_send(app->peers, peer_id, &message);
        } else {
            size_t cursor = 0;
            uint64_t peer;
            while ((peer = peer_set_next_up(app->peers, PEER_ROLE_CELLAPP, &cursor)) != 0)
                peer_set_send(app->peers, peer, &message);
        }
    }
    free(states);
    free(pointers);
    free(positions);
}

void ghost_send_full_state(cellapp *app, uint64_t peer_id) { ghost_send(app, peer_id, true); }

void ghost_send_tick(cellapp *app) {
    ghost_send(app, 0, false);
    app->destroyed_count = 0;
}

void ghost_apply(cellapp *app, uint64_t peer_id, const Tessera__Cluster__GhostBatch *batch) {
    space *sp = &app->space;
    for (size_t i = 0; i < batch->n_destroyed; i++) {
        cell_entity *ghost = space_find(sp, batch->destroyed[i]);
        if (ghost && ghost->kind == CELL_ENTITY_GHOST && ghost->owner_cellapp == peer_id) space_destroy(sp, ghost);
    }
    for (size_t i = 0; i < batch->n_states; i++) {
        const Tessera__Cluster__GhostState *state = batch->states[i];
        cell_entity *ghost = space_find(sp, state->entity_id);
        if (!ghost) {
            if (state->space_name && state->space_name[0] && strcmp(state->space_name, sp->name) != 0) {
                log_warn("cellapp %" PRIu64 " sent a ghost of entity %" PRIu64 " in unknown space '%s'", peer_id,
                         state->entity_id, state->space_name);
                continue;
            }
            if (id_map_get(&sp->entities, state->entity_id)) continue; /* reaped at the end of this tick */
            float x = state->position ? state->position->x : 0, y = state->position ? state->position->y : 0;
            float z = state->position ? state->position->z : 0;
            ghost = space_add(sp, state->entity_id, CELL_ENTITY_GHOST, state->entity_type, x, y, z);
            if (!ghost) continue;
            ghost->owner_cellapp = peer_id;
            ghost->yaw = state->yaw;
            ghost->moved = true;
        } else if (ghost->kind != CELL_ENTITY_GHOST || ghost->owner_cellapp != peer_id) {
            log_warn("cellapp %" PRIu64 " sent a ghost of entity %" PRIu64 ", which is not its real: ignored",
                     peer_id, state->entity_id);
            continue;
        } else if (state->position) {
            space_move(sp, ghost, state->position->x, state->position->y, state->position->z, state->yaw);
        }
        ghost->move_stamp_us = state->stamp_us;
    }
}

void ghost_drop_peer(cellapp *app, uint64_t peer_id) {
    space *sp = &app->space;
    size_t dropped = 0;
    for (size_t i = 0; i < sp->count; i++) {
        cell_entity *entity = sp->by_index[i];
        if (entity->kind == CELL_ENTITY_GHOST && entity->owner_cellapp == peer_id && !entity->destroyed) {
            space_destroy(sp, entity);
            dropped++;
        }
    }
    if (dropped) log_info("dropped %zu ghosts of cellapp %" PRIu64, dropped, peer_id);
}
