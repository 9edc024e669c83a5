/* game_host.h -- the cellapp's side of the game ABI (include/tessera/game.h):
 * loads the game module, keeps what it registered (per class: hooks, the
 * per-entity data's size and field table, method bodies, thinks, inputs;
 * game systems and event listeners), implements the engine services the
 * ABI offers on top of the cellapp's modules, and is the one place the
 * engine calls into game code: the tick calls the game_host_* events
 * below directly, the modules beneath the game host reach it through the
 * game_hooks it fills (game_hooks.h).
 *
 * With no module configured the cellapp runs the definitions alone: every
 * entity has its properties, replication, persistence and movement, and
 * a cell method a client calls is checked and then logged as having no
 * body.
 */
#ifndef TESSERA_GAME_HOST_H
#define TESSERA_GAME_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/game.h>

#include "base_route.h"
#include "cell.h"
#include "cell_message.h"
#include "cellapp_counters.h"
#include "cluster.pb-c.h"
#include "config.h"
#include "controller.h"
#include "entity_def.h"
#include "entity_io.h"
#include "entity_state.h"
#include "event_route.h"
#include "game_hooks.h"
#include "id_block.h"
#include "io_route.h"
#include "lua_runtime.h"
#include "offload.h"
#include "reals.h"
#include "space_maps.h"
#include "spaces.h"

typedef struct game_host game_host;

/* What the engine services of the ABI are built on (each borrowed; each
 * outlives the game host). The host installs itself in `shared` (its host,
 * the trap listener, whether witnesses report views) and fills `hooks`. */
typedef struct game_host_services {
    cell_shared *shared;
    game_hooks *hooks;
    spaces *spaces;
    reals *reals;
    cell_messages *messages;
    event_route *events;
    io_route *io_route;
    offloads *offloads;
    base_route *bases;
    entity_io *io;
    id_block *ids;          /* entity ids for what the game spawns */
    const space_maps *maps; /* navigation meshes */
    uint64_t *random_state; /* random_unit.h */
    cellapp_counters *counters;
    const char *default_space; /* where spawns go when the game names none */
} game_host_services;

/* Where a game's Lua scripts are (lua_cell.h): the folder ("" for none)
 * and the limits each call runs under. */
typedef struct game_host_scripts {
    const char *folder;
    lua_runtime_limits limits;
} game_host_scripts;

/* Loads the module at `path` ("" for none) and runs its cell_init with
 * `settings` (the config's "game" group), then opens the Lua scripts of
 * `scripts` (their classes registered beside the module's), then starts
 * the game systems and runs game.lua's init. NULL with why in err: the
 * file does not load, it has no tessera_game symbol, its ABI version
 * differs from this engine's, a registration failed, its cell_init did, a
 * script did not load (file:line), or a system or init did not start. */
game_host *game_host_load(const game_host_services *services, const char *path, const config_group *settings,
                          const game_host_scripts *scripts, char *err, size_t errlen);
/* The Lua host of the cellapp whose ABI handle is `app` (NULL: no scripts). */
struct lua_cell *game_host_lua(tessera_cellapp *app);
/* SIGHUP: the scripts reload at the next tick. */
void game_host_request_reload(game_host *host);
/* The Lua scripts' figures; false (nothing written) without scripts. */
bool game_host_lua_figures(const game_host *host, lua_runtime_figures *out);
/* Stops its systems, runs the module's cell_shutdown and unloads it. NULL
 * is ignored. */
void game_host_free(game_host *host);
/* The module's name ("" with none). */
const char *game_host_name(const game_host *host);

/* ---- events the tick delivers (reals only; each hook is optional) ---------- */

void game_host_tick(game_host *host);
/* The game systems' per-tick hooks, in their order. */
void game_host_before_thinks(game_host *host);
void game_host_after_thinks(game_host *host);
void game_host_created(game_host *host, cell_entity *entity);
void game_host_destroyed(game_host *host, cell_entity *entity);
void game_host_leaving(game_host *host, cell_entity *entity);
void game_host_arrived(game_host *host, cell_entity *entity);
void game_host_restored(game_host *host, cell_entity *entity, uint32_t state_age_ms, bool from_ghost);
void game_host_teleported(game_host *host, cell_entity *entity, bool space_changed);
void game_host_moved(game_host *host, cell_entity *entity, double metres);
void game_host_witness(game_host *host, cell_entity *entity, bool got);
/* `other_id` entered (or left) the view of real `owner`'s client. */
void game_host_view(game_host *host, cell_entity *owner, uint64_t other_id, bool entered);
/* Whether any class has a view hook (so that witnesses report views). */
bool game_host_wants_views(const game_host *host);
void game_host_trap(game_host *host, cell_entity *owner, uint32_t tag, cell_entity *visitor, bool entered);
/* Timer `timer_id` of real `entity` is due: its think (a tag from
 * GAME_HOST_THINK_TAG up) or its class's timer hook runs. */
void game_host_timer(game_host *host, cell_entity *entity, uint64_t timer_id, uint32_t tag, uint64_t user_data);
/* A controller_event_callback (controller.h); context is the game host. */
void game_host_controller_event(cell *c, cell_entity *entity, controller_event event, uint32_t controller_id,
                                uint64_t user_data, const char *reason, void *context);
/* An entity_io_deliver (entity_io.h); context is the game host. */
void game_host_io_deliver(const char *target, uint64_t self_id, uint64_t activator_id, uint64_t caller_id,
                          const char *input, const char *parameter, void *context);
/* Runs input `input` of the real `target` with `parameter` converted to
 * the input's type (a missing input or a failed conversion warns and
 * skips), fired by `self_id` with `activator_id` as its activator. */
void game_host_io_input(game_host *host, cell_entity *target, uint64_t activator_id, uint64_t self_id,
                        const char *input, const char *parameter);
/* Runs the body of cell method `method` of `entity` for `caller_id`.
 * Returns false (logged) when the game gave it none. */
bool game_host_call(game_host *host, cell_entity *entity, const entity_def_method *method, uint64_t caller_id,
                    const entity_state *args);
/* The game event `event` was fired here or arrived here: its listeners
 * hear it (a firing this deep in listeners is refused: game_event.h). */
void game_host_event_heard(game_host *host, const entity_def_method *event, uint64_t source_id,
                           const entity_state *fields);

/* ---- the per-entity data ----------------------------------------------------- */

/* The field `name` of the per-entity data the game registered for `cls`,
 * or NULL. */
const tessera_field *game_host_find_field(game_host *host, const entity_def_class *cls, const char *name);
/* A real's per-entity data (made, zeroed, on first use), or NULL when its
 * class has none. */
void *game_host_data(cell_entity *entity);
/* Converts text to a value of `type` (an input's parameter, a map's
 * keyvalue): decimal numbers, "1"/"0"/"true"/"false", "x y z". Returns 0,
 * or -1 when it does not convert. */
int game_host_convert(const char *text, tessera_field_type type, tessera_value *out);
/* Adds the entity's saved fields to `out`: game_fields, each and its value
 * allocated (cell_entity_saved_free frees them). */
void game_host_save(game_host *host, const cell_entity *entity, Tessera__Cluster__CellEntityState *out);
/* Fills the entity's data from `state`'s fields, by name and type. */
void game_host_restore(game_host *host, cell_entity *entity, const Tessera__Cluster__CellEntityState *state);

#endif
