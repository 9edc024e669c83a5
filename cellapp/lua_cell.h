/* lua_cell.h -- the cell side's Lua host: classes whose rules are Lua
 * scripts, run through the same services a C module gets
 * (include/tessera/game.h), with hot reload at a tick boundary.
 *
 * The game host (game_host.c) opens it after the C module's cell_init,
 * while registration is still open: every class of the definitions with a
 * `<Class>.lua` in the script folder whose table has a `cell` part is
 * registered here (a class a C module registered too is an error). Its
 * hooks, method bodies, thinks and inputs are this file's trampolines,
 * which call the current generation's functions by name. docs/lua.md is
 * the scripts' reference.
 */
#ifndef TESSERA_LUA_CELL_H
#define TESSERA_LUA_CELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/game.h>

#include "entity_def.h"
#include "lua_runtime.h"

typedef struct lua_cell lua_cell;

/* Opens the scripts of `folder` for the cellapp `app`. Returns NULL with
 * why in err (a script that does not load: file:line; a class registered
 * twice); returns NULL with err empty when the folder has no script at
 * all (nothing to host). */
lua_cell *lua_cell_open(tessera_cellapp *app, const tessera_cell_api *api, const entity_def_registry *definitions,
                        const char *folder, const lua_runtime_limits *limits, char *err, size_t errlen);
/* Runs game.lua's cell.init (after the systems started). -1 if it threw. */
int lua_cell_start(lua_cell *lc, char *err, size_t errlen);
void lua_cell_free(lua_cell *lc);

/* The tick's start (a tick boundary): a wanted reload happens here, then
 * game.lua's cell.tick runs. */
void lua_cell_tick(lua_cell *lc, uint64_t now_ms);
/* SIGHUP: reload at the next tick. */
void lua_cell_request_reload(lua_cell *lc);
/* Reloads now: returns 0 when the new code runs, -1 (the old code kept,
 * why in err) when it did not load or start. */
int lua_cell_reload(lua_cell *lc, char *err, size_t errlen);

lua_runtime *lua_cell_runtime(lua_cell *lc);
/* How many classes run scripts here. */
size_t lua_cell_class_count(const lua_cell *lc);

#endif
