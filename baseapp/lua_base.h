/* lua_base.h -- the base side's Lua host: the `base` tables of the game's
 * scripts (<Class>.lua, game.lua) run through the same services a C
 * module's base_init gets (struct tessera_base_api), with hot reload at
 * the baseapp's tick. base_game.c opens it after the module's base_init,
 * while registration is open. docs/lua.md is the scripts' reference.
 */
#ifndef TESSERA_LUA_BASE_H
#define TESSERA_LUA_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/game.h>

#include "entity_def.h"
#include "lua_runtime.h"

typedef struct lua_base lua_base;

/* Opens the scripts of `folder` for the baseapp `app` and registers every
 * class whose script has a base table. NULL with why in err (a script
 * that does not load: file:line; a class a C module registered too); NULL
 * with err empty when there is nothing to host. */
lua_base *lua_base_open(tessera_baseapp *app, const tessera_base_api *api, const entity_def_registry *definitions,
                        const char *folder, const lua_runtime_limits *limits, char *err, size_t errlen);
/* Runs game.lua's base.init. -1 if it threw. */
int lua_base_start(lua_base *lb, char *err, size_t errlen);
void lua_base_free(lua_base *lb);

/* The baseapp's game tick: a wanted reload happens here, then game.lua's
 * base.tick runs. */
void lua_base_tick(lua_base *lb, uint64_t now_ms);
void lua_base_request_reload(lua_base *lb);
int lua_base_reload(lua_base *lb, char *err, size_t errlen);

lua_runtime *lua_base_runtime(lua_base *lb);
size_t lua_base_class_count(const lua_base *lb);

#endif
