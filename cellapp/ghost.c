/* ghost.c -- mirrors between cellapps. Our reals are sent to every peer
 * cellapp as ghosts (in full when the peer comes up, then per tick what is
 * new, moved or destroyed); the peers' reals arrive here and live in our
 * space as ghosts, which witnesses see like reals. A ghost is read-only: it
 * changes only by its real's word, and vanishes with its cellapp.
 *
 * A ghost holds the properties entity_def sends to ghosts (to_ghosts: the
 * public ones, which other clients may see); they travel as change lists,
 * every one when the ghost is new, then the ones changed each tick. A
 * client call the real made to everyone who sees it travels with it too. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "log.h"
#include "property_codec.h"

/* The properties of `entity` its ghosts get this time: every one a ghost
 * holds when `full`, else those changed this tick. */
static void ghost_properties(const cellapp *app, const cell_entity *entity, bool full, entity_state_mask *out) {
    const entity_state_mask *ghosts = replication_schema_mask(app->schema, entity->cls->id, REPLICATION_AUDIENCE_GHOSTS);
    if (full) *out = *ghosts;
    else entity_state_mask_intersect(out, entity_state_dirty(entity->state), ghosts);
}

/* Fills one GhostState; its property change list is appended to `w` and
 * pointed to once `w` stops growing (ghost_send). */
static void ghost_fill_state(const cellapp *app, const cell_entity *entity, bool full,
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
        state->space_name = (char *)app->space.name;
    }
    if (!full && entity->broadcast_count) {
        state->n_client_calls = entity->broadcast_count;
        state->client_calls = xcalloc(entity->broadcast_count, sizeof *state->client_calls);
        for (size_t i = 0; i < entity->broadcast_count; i++) state->client_calls[i] = &entity->broadcast_calls[i];
    }
}

/* Appends the change list of `changed`: a new ghost's whole state is
 * encoded here; a tick's changes are the GHOSTS encoding the cell packed
 * once this tick (replication.c), copied without its length prefix. */
static void ghost_append_properties(cellapp *app, cell_entity *entity, bool whole, const entity_state_mask *changed,
                                    bit_writer *w) {
    if (!whole && entity->packed &&
        replication_append_change_list(app->replication, &entity->replication, REPLICATION_AUDIENCE_GHOSTS, w) > 0)
        return;
    property_codec_encode_changes(w, entity->state, changed);
}

/* Packs the reals selected by `full` (all) or by their per-tick changes into
 * one GhostBatch and sends it to `peer_id`, or to every cellapp peer when
 * peer_id is 0. */
static void ghost_send(cellapp *app, uint64_t peer_id, bool full) {
    space *sp = &app->space;
    Tessera__Cluster__GhostState *states = xcalloc(sp->real_count + 1, sizeof *states);
    Tessera__Cluster__GhostState **pointers = xcalloc(sp->real_count + 1, sizeof *pointers);
    Tessera__Client__Vector3 *positions = xcalloc(sp->real_count + 1, sizeof *positions);
    size_t *property_at = xcalloc(sp->real_count + 1, sizeof *property_at);
    bit_writer properties;
    bit_writer_init(&properties);
    size_t count = 0;
    for (size_t i = 0; i < sp->count && count < sp->real_count; i++) {
        cell_entity *entity = sp->by_index[i];
        if (entity->kind != CELL_ENTITY_REAL || entity->destroyed) continue;
        bool whole = full || entity->is_new;
        entity_state_mask changed;
        ghost_properties(app, entity, whole, &changed);
        bool has_properties = !entity_state_mask_empty(&changed);
        if (!whole && !entity->moved && !has_properties && entity->broadcast_count == 0) continue;
        ghost_fill_state(app, entity, whole, &states[count], &positions[count]);
        /* Each change list starts on a byte, so it can be sliced out. */
        bit_writer_align(&properties);
        property_at[count] = bit_writer_bytes(&properties);
        if (has_properties) {
            ghost_append_properties(app, entity, whole, &changed, &properties);
            bit_writer_align(&properties);
        }
        states[count].properties.len = bit_writer_bytes(&properties) - property_at[count];
        pointers[count] = &states[count];
        count++;
    }
    for (size_t i = 0; i < count; i++)
        if (states[i].properties.len) states[i].properties.data = (uint8_t *)bit_writer_data(&properties) + property_at[i];
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
    for (size_t i = 0; i < count; i++) free(states[i].client_calls);
    bit_writer_close(&properties);
    free(property_at);
    free(states);
    free(pointers);
    free(positions);
}

void ghost_send_full_state(cellapp *app, uint64_t peer_id) { ghost_send(app, peer_id, true); }

void ghost_send_tick(cellapp *app) {
    ghost_send(app, 0, false);
    app->destroyed_count = 0;
}

/* Applies a ghost's property change list; a broken one is a peer's bug,
 * logged and skipped. */
static void ghost_apply_properties(cellapp *app, uint64_t peer_id, cell_entity *ghost,
                                   const Tessera__Cluster__GhostState *state) {
    if (state->properties.len == 0) return;
    bit_reader reader;
    bit_reader_init(&reader, state->properties.data, state->properties.len);
    const entity_state_mask *accept =
        replication_schema_mask(app->schema, ghost->cls->id, REPLICATION_AUDIENCE_GHOSTS);
    int rc = property_codec_decode_changes(&reader, ghost->state, accept, NULL);
    if (rc != 0)
        log_warn("cellapp %" PRIu64 ": properties of ghost %" PRIu64 " do not decode: %s", peer_id, ghost->id,
                 property_codec_strerror(rc));
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
            const entity_def_class *cls =
                state->entity_type ? entity_def_registry_find_class(app->definitions, state->entity_type) : NULL;
            if (!cls) {
                log_warn("cellapp %" PRIu64 " sent a ghost of entity %" PRIu64 " of type '%s', which our definitions "
                         "lack (do the cellapps load the same definitions?)",
                         peer_id, state->entity_id, state->entity_type ? state->entity_type : "");
                continue;
            }
            float x = state->position ? state->position->x : 0, y = state->position ? state->position->y : 0;
            float z = state->position ? state->position->z : 0;
            ghost = space_add(sp, state->entity_id, CELL_ENTITY_GHOST, cls, x, y, z);
            if (!ghost) continue;
            ghost->owner_cellapp = peer_id;
            ghost->yaw = state->yaw;
            ghost->moved = true;
        } else if (ghost->kind != CELL_ENTITY_GHOST || ghost->owner_cellapp != peer_id) {
            log_warn("cellapp %" PRIu64 " sent a ghost of entity %" PRIu64 ", which is not its real: ignored",
                     peer_id, state->entity_id);
            continue;
        } else if (state->position &&
                   (state->position->x != ghost->x || state->position->y != ghost->y ||
                    state->position->z != ghost->z || state->yaw != ghost->yaw)) {
            space_move(sp, ghost, state->position->x, state->position->y, state->position->z, state->yaw);
        }
        ghost->move_stamp_us = state->stamp_us;
        ghost_apply_properties(app, peer_id, ghost, state);
        for (size_t c = 0; c < state->n_client_calls; c++) {
            const Tessera__Client__ClientCall *call = state->client_calls[c];
            if (call->entity_id != ghost->id) continue;
            cellapp_queue_for_observers(app, ghost->id, call->method_id, call->args.data, call->args.len);
        }
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
