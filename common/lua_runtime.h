/* lua_runtime.h -- one process's Lua: a sandboxed state, the game's
 * script folder, generations of loaded scripts and hot reload.
 *
 * A game's rules may be Lua files in its script folder (the setting
 * game_scripts; by default the entity definitions' folder): `<Class>.lua`
 * for a class of the definitions, and `game.lua` for the game as a whole.
 * Each returns a table; its `cell` and `base` tables hold what that side
 * runs (docs/lua.md is the reference). The cell and base hosts
 * (cellapp/lua_cell.c, baseapp/lua_base.c) bind the engine's services; this
 * module owns what both share:
 *
 *   - the sandbox: a fresh environment per generation with the safe parts
 *     of the standard library (no io, no os.execute or os.exit, no load,
 *     dofile or debug); `require` finds modules in the script folder only;
 *     a memory limit; and an instruction budget per call from the engine
 *     (a runaway loop is stopped with its traceback, the caller goes on);
 *   - generations: every script loaded into one table, {game = ...,
 *     classes = {Name = ...}}. A reload builds a whole new generation and
 *     swaps it in only if every file loaded and its start ran; otherwise
 *     the old one keeps running and the error names file:line.
 *   - reload requests: SIGHUP (lua_runtime_request_reload) or a changed
 *     .lua file (lua_runtime_poll, on the tick), carried out by the host
 *     at a tick boundary.
 */
#ifndef TESSERA_LUA_RUNTIME_H
#define TESSERA_LUA_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

typedef struct lua_runtime lua_runtime;

typedef struct lua_runtime_limits {
    /* VM instructions one call from the engine may run before it is
     * stopped (a hook, a method body, a tick). */
    uint64_t instruction_budget;
    /* Bytes the whole state may hold; past it an allocation fails and the
     * call that made it errs. */
    size_t memory_limit;
} lua_runtime_limits;

/* Opens a state over `folder` for `side` ("cell" or "base": the table a
 * script's rules for this process are in). Returns NULL with why in err
 * when the folder cannot be read. No script is loaded yet. */
lua_runtime *lua_runtime_create(const char *folder, const char *side, const lua_runtime_limits *limits, char *err,
                                size_t errlen);
void lua_runtime_free(lua_runtime *rt);

lua_State *lua_runtime_state(lua_runtime *rt);
/* Pops the value on top of the stack into every environment's globals
 * as `name` (the host's `tessera` table), from the next load on. */
void lua_runtime_set_global(lua_runtime *rt, const char *name);
const char *lua_runtime_folder(const lua_runtime *rt);

/* Whether `<folder>/<class_name>.lua` exists. */
bool lua_runtime_has_class_script(const lua_runtime *rt, const char *class_name);
/* Whether `<folder>/game.lua` exists. */
bool lua_runtime_has_game_script(const lua_runtime *rt);

/* Loads a new generation: game.lua (if present) and `<Name>.lua` for each
 * of `class_names`, each in the generation's fresh environment, and
 * pushes the generation's table. Returns 0, or -1 with the first error
 * (file:line: message) in err and nothing pushed. */
int lua_runtime_load_generation(lua_runtime *rt, const char *const *class_names, size_t class_count, char *err,
                                size_t errlen);

/* Makes the table on top of the stack the current generation (popping it);
 * the previous one is released. */
void lua_runtime_install_generation(lua_runtime *rt);
/* Pushes the current generation's `side` table of `class_name` (nil when
 * none), or of game.lua with class_name NULL. */
void lua_runtime_push_rules(lua_runtime *rt, const char *class_name);
/* How many generations were installed (1 after the first load). */
uint32_t lua_runtime_generation(const lua_runtime *rt);

/* Calls the function under its `nargs` arguments on the stack, with the
 * instruction budget and a traceback on error. The log line names the
 * call: `owner`.`hook` (a class, or "game"), and entity `entity_id` when
 * not 0. Leaves `nresults` results (nils on error). Returns 0, or -1 when
 * it erred (logged with the traceback; the message without it in err when
 * err is not NULL). */
int lua_runtime_call(lua_runtime *rt, int nargs, int nresults, const char *owner, const char *hook, uint64_t entity_id,
                     char *err, size_t errlen);

/* A reload is wanted (SIGHUP). */
void lua_runtime_request_reload(lua_runtime *rt);
/* Whether a reload is wanted: asked for, or (checked at most once a
 * second) a .lua file in the folder changed since the last load. Clears
 * the request. */
bool lua_runtime_poll(lua_runtime *rt, uint64_t now_ms);

/* The objects scripts are handed for entities (and bases), one per id,
 * kept so that a hook allocates nothing: a weak cache would be emptied by
 * every collection and refilled by the next tick's hooks. Entries whose
 * entity is gone are dropped by lua_runtime_sweep_objects; a script that
 * kept an object still holds a valid handle (it reads "gone"). */
/* Pushes the object cached for `id` and returns true, or pushes nothing
 * and returns false. */
bool lua_runtime_push_object(lua_runtime *rt, uint64_t id);
/* Caches the object on top of the stack (left there) for `id`. */
void lua_runtime_keep_object(lua_runtime *rt, uint64_t id);
/* Drops the cached objects whose entity `alive` says is gone, at most once
 * every `every` calls (the host calls it each tick). */
void lua_runtime_sweep_objects(lua_runtime *rt, bool (*alive)(void *context, uint64_t id), void *context,
                               uint32_t every);

/* Garbage collection. The collector does not run inside hooks: the host
 * calls this once a tick, between ticks, and it runs one generational step
 * (a minor collection, now and then a major one) whose duration is the
 * pause the figures report. An allocation that would pass the memory limit
 * still collects at once (Lua's emergency collection) before it fails. */
void lua_runtime_collect(lua_runtime *rt);

/* Figures: bytes the state holds now and at most; calls from the engine,
 * those that erred and those the budget stopped; reloads done and refused
 * and how long the last one took; the collection steps and their pauses. */
typedef struct lua_runtime_figures {
    size_t bytes, bytes_peak;
    uint64_t calls, budget_stops, errors, reloads, reloads_refused, last_reload_us;
    uint64_t gc_steps, gc_p50_us, gc_p99_us, gc_max_us;
} lua_runtime_figures;
lua_runtime_figures lua_runtime_get_figures(const lua_runtime *rt);
/* Counts a reload, done or refused, that took `took_us`. */
void lua_runtime_count_reload(lua_runtime *rt, bool done, uint64_t took_us);

/* The checks that --check runs: opens the folder and loads a generation of
 * every class script there is for `class_names` (and game.lua), without
 * calling anything. Returns 0, or -1 with the first error in err. */
int lua_runtime_check(const char *folder, const char *side, const char *const *class_names, size_t class_count,
                      char *err, size_t errlen);

#endif
