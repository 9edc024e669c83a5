/* game_hooks.h -- the game's rules as the engine's modules reach them.
 *
 * What the engine tells the game about a real's life (created, destroyed,
 * leaving this cellapp, arrived, teleported, moved by its client, given or
 * losing a client), the cell methods it asks the game to run, the game
 * events and entity I/O inputs it delivers, and the game's per-entity data
 * it saves with an entity and restores. The game host fills one table
 * (game_host_install_hooks) and owns what `host` points to; the modules
 * below it (reals, offloads, messages, routes, the entity codec) take a
 * const pointer to the table, so none of them calls into the game host and
 * the game host may call all of them. Every hook is set once the game host
 * has loaded (with no game module they do nothing).
 */
#ifndef TESSERA_GAME_HOOKS_H
#define TESSERA_GAME_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include "cell.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"

typedef struct game_hooks {
    void *host;
    /* A real came to be here: created, or restored after its cellapp died. */
    void (*created)(void *host, cell_entity *entity);
    /* A real is being destroyed (it is still whole). */
    void (*destroyed)(void *host, cell_entity *entity);
    /* A real is about to leave this cellapp (offload, teleport). */
    void (*leaving)(void *host, cell_entity *entity);
    /* A real arrived from another cellapp, restored whole. */
    void (*arrived)(void *host, cell_entity *entity);
    /* A real was brought back here after its cellapp died, from a state
     * `state_age_ms` old (from_ghost: its position and ghosted values are
     * its ghost's, a tick old at most). */
    void (*restored)(void *host, cell_entity *entity, uint32_t state_age_ms, bool from_ghost);
    /* A real was teleported here (space_changed: from another space). */
    void (*teleported)(void *host, cell_entity *entity, bool space_changed);
    /* Its client moved it `metres`. */
    void (*moved)(void *host, cell_entity *entity, double metres);
    /* It got (true) or lost (false) a client to see through. */
    void (*witness)(void *host, cell_entity *entity, bool got);
    /* Runs the body of cell method `method` of real `entity` for
     * `caller_id` (0: the server). Returns false (logged) when the game gave
     * it none. */
    bool (*call)(void *host, cell_entity *entity, const entity_def_method *method, uint64_t caller_id,
                 const entity_state *args);
    /* Game event `event` was fired here or arrived here: its listeners
     * hear it. */
    void (*event_heard)(void *host, const entity_def_method *event, uint64_t source_id, const entity_state *fields);
    /* Entity I/O input `input` of real `target`, with its parameter as
     * text, fired by `self_id` with `activator_id` as its activator. */
    void (*io_input)(void *host, cell_entity *target, uint64_t activator_id, uint64_t self_id, const char *input,
                     const char *parameter);
    /* Adds the game's per-entity data of `entity` to a saved state: its
     * game_fields, each and its value allocated (cell_entity_saved_free
     * frees them with the rest). */
    void (*save)(void *host, const cell_entity *entity, Tessera__Cluster__CellEntityState *out);
    /* Fills the game's per-entity data of `entity` from a saved state. */
    void (*restore)(void *host, cell_entity *entity, const Tessera__Cluster__CellEntityState *state);
} game_hooks;

#endif
