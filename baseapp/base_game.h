/* base_game.h -- the baseapp's side of the game ABI (include/tessera/game.h):
 * loads the game module, keeps what its base_init registered (per class:
 * hooks and base method bodies; event listeners), implements the base
 * services of the ABI on top of the baseapp's modules, and is the one place
 * the baseapp calls into game code: the modules below reach it through the
 * base_hooks it fills (base_hooks.h). It owns the cluster singletons the
 * game takes part in (base_singleton.h) and runs the bases' timers
 * (base_timer.h). After every hook and method body,
 * what the game set of a base's BASE_AND_CLIENT properties goes to its own
 * client.
 *
 * With no module, or a module without base rules, bases keep their
 * properties and persistence, and a base method a client calls is checked
 * and then logged as having no body.
 */
#ifndef TESSERA_BASE_GAME_H
#define TESSERA_BASE_GAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/game.h>

#include "base_call.h"
#include "base_entity.h"
#include "base_event.h"
#include "base_hooks.h"
#include "base_life.h"
#include "base_timer.h"
#include "config.h"
#include "entity_def.h"
#include "lua_runtime.h"
#include "persistence.h"
#include "process_self.h"
#include "proxy.h"
#include "redis_client.h"

typedef struct base_game base_game;

/* What the base services of the ABI are built on (each borrowed; each
 * outlives the game). The game fills `hooks`. */
typedef struct base_game_services {
    const entity_def_registry *definitions;
    base_hooks *hooks;
    base_entities *bases;
    base_life *life;
    proxies *players;
    cell_links *cells;
    persistence *store;
    base_calls *calls;
    const base_events *events;
    const process_self *self;
    const bool *draining;
    base_timers *timers;      /* the bases' timers (base_timer.h) */
    redis_client *redis;      /* cluster singletons (base_singleton.h) */
    const char *cluster_name; /* ... and their keys */
} base_game_services;

/* Loads the module at `path` ("" for none) and runs its base_init with
 * `settings` (the config's "game" group). NULL with why in err. */
base_game *base_game_load(const base_game_services *services, const char *path, const config_group *settings, char *err,
                          size_t errlen);
/* Opens the game's Lua scripts in `folder` ("" for none: 0), registering
 * the classes whose scripts have a base table (lua_base.h), and runs
 * game.lua's base.init. -1 with why in err: a script does not load
 * (file:line), a class is registered twice, or init threw. */
int base_game_open_scripts(base_game *game, const char *folder, const lua_runtime_limits *limits, char *err,
                           size_t errlen);
/* The Lua host of the baseapp whose ABI handle is `app` (NULL: none). */
struct lua_base *base_game_lua(tessera_baseapp *app);
/* SIGHUP: the scripts reload at the next game tick. */
void base_game_request_reload(base_game *game);

/* Runs base_shutdown and unloads the module. NULL is ignored. */
void base_game_free(base_game *game);

/* The game's base tick (the sweep timer's period), after the cluster
 * singletons this baseapp takes part in are checked. */
void base_game_tick(base_game *game);
/* Runs the bases' timers that are due by `now_us` (monotonic): the timer
 * hooks (the baseapp's 50 ms beat). */
void base_game_run_timers(base_game *game, uint64_t now_us);

#endif
