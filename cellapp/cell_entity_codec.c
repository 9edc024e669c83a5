/* cell_entity_codec.c -- an entity's whole cell state as one message
 * (proto/cluster.proto, CellEntityState), and back: properties (all of
 * them), position, movement allowance, timers, traps and what is inside
 * them, the witness (aliases, cooldowns, budget, per-alias state, queued
 * calls), the order of the messages sent to it, and the game's
 * per-entity data (through the game's hooks). An offload moves
 * exactly this; anything a real gains later must join it here. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cell_entity_codec.h"

#include "clock.h"
#include "log.h"
#include "movement.h"
#include "witness.h"

static void cell_entity_save_parts(const cell_entity_codec *codec, const cell_entity *entity,
                                   Tessera__Cluster__CellEntityState *out, bool with_witness) {
    cell *c = entity->home;
    uint64_t now_us = clock_monotonic_us();
    tessera__cluster__cell_entity_state__init(out);
    out->entity_id = entity->id;
    out->incarnation = entity->incarnation;
    out->entity_type = (char *)entity->cls->name;
    out->space_name = c->space_name;
    Tessera__Client__Vector3 *position = xmalloc(sizeof *position);
    tessera__client__vector3__init(position);
    position->x = entity->x;
    position->y = entity->y;
    position->z = entity->z;
    out->position = position;
    out->yaw = entity->yaw;
    out->stamp_us = entity->move_stamp_us;
    out->move_count = entity->move_count;
    out->client_binding = entity->real->client_binding;
    out->property_count = entity->property_count;
    out->baseapp_id = entity->real->baseapp_id;
    bit_writer w;
    bit_writer_init(&w);
    entity_state_encode_all(entity->state, &w);
    bit_writer_align(&w);
    out->properties.len = bit_writer_bytes(&w);
    out->properties.data = xmalloc(out->properties.len ? out->properties.len : 1);
    memcpy(out->properties.data, bit_writer_data(&w), out->properties.len);
    bit_writer_close(&w);

    Tessera__Cluster__MovementState *movement = xmalloc(sizeof *movement);
    tessera__cluster__movement_state__init(movement);
    movement->allowance = entity->real->move_allowance;
    movement->age_us = now_us > entity->real->allowance_us ? now_us - entity->real->allowance_us : 0;
    movement->last_sequence = entity->real->last_sequence;
    out->movement = movement;

    entity_timers_save(c->timers, entity->id, now_us, &out->timers, &out->n_timers);

    if (entity->real->trap_count) {
        out->traps = xcalloc(entity->real->trap_count, sizeof(Tessera__Cluster__TrapState *));
        for (uint32_t t = 0; t < entity->real->trap_count; t++) {
            const cell_trap *trap = &entity->real->traps[t];
            Tessera__Cluster__TrapState *saved = xmalloc(sizeof *saved);
            tessera__cluster__trap_state__init(saved);
            saved->tag = trap->tag;
            saved->controller_id = trap->controller_id;
            saved->radius = trap->radius;
            saved->shape = (uint32_t)trap->shape;
            size_t members = coord_watcher_view_size(c->coord, trap->watcher);
            saved->members = xcalloc(members ? members : 1, sizeof *saved->members);
            size_t cursor = 0;
            uint32_t coord_id;
            while ((coord_id = coord_watcher_next(c->coord, trap->watcher, &cursor)) != COORD_NONE &&
                   saved->n_members < members)
                saved->members[saved->n_members++] = cell_entity_id_of(c, coord_id);
            out->traps[t] = saved;
        }
        out->n_traps = entity->real->trap_count;
    }

    if (cell_entity_witness(entity) && with_witness) {
        Tessera__Cluster__WitnessState *witness = xmalloc(sizeof *witness);
        witness_save(cell_entity_witness(entity), c, witness);
        out->witness = witness;
    }
    out->had_witness = cell_entity_witness(entity) != NULL && !with_witness;
    if (entity->real->inbox) mailbox_inbox_save(entity->real->inbox, now_us, &out->inbox, &out->n_inbox);
    out->sent_wall_us = clock_wall_us();
    out->teleported = entity->real->teleported;
    out->offloads = entity->real->offloads;
    out->controllers = controller_save(entity);
    out->entity_name = (char *)entity->real->name;
    entity_io_save(&entity->real->outputs, &out->connections, &out->n_connections);
    codec->hooks->save(codec->hooks->host, entity, out);
}

void cell_entity_save(const cell_entity_codec *codec, const cell_entity *entity,
                      Tessera__Cluster__CellEntityState *out) {
    cell_entity_save_parts(codec, entity, out, true);
}

void cell_entity_save_backup(const cell_entity_codec *codec, const cell_entity *entity,
                             Tessera__Cluster__CellEntityState *out) {
    cell_entity_save_parts(codec, entity, out, false);
}

void cell_entity_saved_free(Tessera__Cluster__CellEntityState *state) {
    free(state->position);
    free(state->properties.data);
    free(state->movement);
    entity_timers_wire_free(state->timers, state->n_timers);
    for (size_t i = 0; i < state->n_traps; i++) {
        free(state->traps[i]->members);
        free(state->traps[i]);
    }
    free(state->traps);
    if (state->witness) {
        witness_saved_free(state->witness);
        free(state->witness);
    }
    if (state->inbox) mailbox_inbox_saved_free(state->inbox, state->n_inbox);
    for (size_t i = 0; i < state->n_game_fields; i++) {
        free(state->game_fields[i]->value.data);
        free(state->game_fields[i]);
    }
    free(state->game_fields);
    controller_saved_free(state->controllers);
    entity_io_saved_free(state->connections, state->n_connections);
    tessera__cluster__cell_entity_state__init(state);
}

int cell_entity_restore(const cell_entity_codec *codec, cell *c, cell_entity *entity,
                        const Tessera__Cluster__CellEntityState *state, char *err, size_t errlen) {
    const entity_def_class *cls =
        state->entity_type ? entity_def_registry_find_class(codec->definitions, state->entity_type) : NULL;
    if (!cls) {
        snprintf(err, errlen, "its class '%s' is not in this cellapp's definitions",
                 state->entity_type ? state->entity_type : "");
        return -1;
    }
    float x = state->position ? state->position->x : 0, y = state->position ? state->position->y : 0;
    float z = state->position ? state->position->z : 0;
    if (!cell_in_bounds(c, x, y, z)) {
        snprintf(err, errlen, "its position (%.1f, %.1f, %.1f) is outside space '%s'", (double)x, (double)y, (double)z,
                 c->space_name);
        return -1;
    }
    entity_state *properties = entity_state_create(cls);
    bit_reader reader;
    bit_reader_init(&reader, state->properties.data, state->properties.len);
    int rc = entity_state_decode_all(properties, &reader);
    if (rc != 0) {
        entity_state_free(properties);
        snprintf(err, errlen, "its properties do not decode: %s", entity_state_strerror(rc));
        return -1;
    }
    if (entity && entity->cls != cls) {
        snprintf(err, errlen, "its ghost here is a %s, not a %s", entity->cls->name, cls->name);
        entity_state_free(properties);
        return -1;
    }
    bool had_ghost = entity != NULL;
    if (!entity) {
        entity = cell_add(c, state->entity_id, CELL_ENTITY_REAL, cls, x, y, z);
        if (!entity) {
            snprintf(err, errlen, "its id is taken in this cell");
            entity_state_free(properties);
            return -1;
        }
    } else {
        cell_make_real(c, entity);
        if (x != entity->x || y != entity->y || z != entity->z) cell_move(c, entity, x, y, z, state->yaw);
    }
    if (had_ghost) {
        /* The old real's values. Its client and its other ghosts saw every
         * change already; the watchers here saw the ghost's values as last
         * packed: a change the ghost took and this cellapp has not packed
         * yet (its dirty set), and any value the ghost lagged behind in,
         * still go to them. */
        for (uint16_t p = 0; p < cls->property_count; p++) entity_state_copy_property(entity->state, properties, p);
    } else {
        /* New here: its watchers get every value with its ENTER. */
        entity_state_copy(entity->state, properties);
        entity_state_clear_dirty(entity->state);
    }
    entity_state_free(properties);
    entity->yaw = state->yaw;
    entity->move_stamp_us = state->stamp_us;
    entity->move_count = state->move_count & CELL_CHANGE_COUNT_MASK;
    entity->real->client_binding = state->client_binding;
    entity->property_count = state->property_count & CELL_CHANGE_COUNT_MASK;
    entity->real->baseapp_id = state->baseapp_id;
    entity->owner_cellapp = 0;
    entity->incarnation = state->incarnation;
    entity->real->offloads = state->offloads;
    entity->real->teleported = state->teleported;
    entity->real->haunts_stale = true;
    cell_note_changed(entity->home, entity);
    uint64_t now_us = clock_monotonic_us();
    if (state->movement) {
        entity->real->move_allowance = state->movement->allowance;
        entity->real->allowance_us = now_us > state->movement->age_us ? now_us - state->movement->age_us : 0;
        entity->real->last_sequence = state->movement->last_sequence;
    } else {
        movement_reset(codec->movement, entity, now_us);
    }
    /* Time in flight counts against the timers (same clock on one machine,
     * NTP's few milliseconds across machines). */
    uint64_t wall = clock_wall_us();
    uint64_t transit_us = wall > state->sent_wall_us && state->sent_wall_us ? wall - state->sent_wall_us : 0;
    entity_timers_load(c->timers, entity->id, now_us, state->timers, state->n_timers, transit_us);
    controller_restore(c, entity, state->controllers);
    snprintf(entity->real->name, sizeof entity->real->name, "%s", state->entity_name ? state->entity_name : "");
    entity_io_restore(&entity->real->outputs, state->connections, state->n_connections);
    for (size_t t = 0; t < state->n_traps; t++) {
        const Tessera__Cluster__TrapState *trap = state->traps[t];
        uint32_t controller_id = trap->controller_id ? trap->controller_id : controller_new_id(entity);
        /* An unknown shape (from a newer engine) is refused rather than read
         * as a box that would fire where the game said it should not. */
        bool known = trap->shape <= COORD_SHAPE_SPHERE;
        if (!known || cell_add_trap(c, entity, controller_id, trap->tag, (coord_shape)trap->shape, trap->radius,
                                    trap->members, trap->n_members) != 0)
            log_warn("entity %" PRIu64 ": its trap %u (shape %u, radius %g) could not be set again", entity->id,
                     trap->tag, trap->shape, (double)trap->radius);
    }
    if (state->witness) witness_restore(c, entity, state->witness);
    codec->hooks->restore(codec->hooks->host, entity, state);
    if (state->n_inbox) {
        mailbox_inbox_free(entity->real->inbox);
        entity->real->inbox = mailbox_inbox_restore(state->inbox, state->n_inbox, now_us);
    }
    return 0;
}
