/* lua_runtime.c -- owns one process's lua_State: its allocator (with the
 * memory limit), the sandboxed environments, the instruction budget, the
 * generations of loaded scripts and the reload requests. It knows nothing
 * of entities: the cell and base hosts bind those (lua_cell.c,
 * lua_base.c) and call scripts through lua_runtime_call.
 */
#include "lua_runtime.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <lualib.h>

#include "clock.h"
#include "latency_histogram.h"
#include "log.h"

/* The count hook runs every this many VM instructions: often enough that a
 * runaway loop is stopped within a few microseconds of its budget, rarely
 * enough that it costs nothing measurable. */
#define LUA_RUNTIME_HOOK_EVERY 1000
/* A changed script is noticed within this long (one stat per file). */
#define LUA_RUNTIME_POLL_MS 1000
/* Module names `require` accepts: letters, digits, '_' and '.' (a
 * subfolder), at most this long. */
#define LUA_RUNTIME_MODULE_NAME_MAX 64

struct lua_runtime {
    lua_State *L;
    char folder[PATH_MAX];
    char side[8];
    lua_runtime_limits limits;
    size_t bytes, bytes_peak;
    int64_t instructions_left; /* in the current call */
    int template_ref;          /* the safe globals every environment copies */
    int generation_ref;        /* the installed generation; LUA_NOREF before the first */
    int objects_ref;           /* id -> the object scripts get for it */
    uint32_t sweep_countdown;
    uint32_t generation;
    bool reload_requested;
    uint64_t last_poll_ms;
    uint64_t scripts_stamp; /* of the .lua files when the installed generation loaded */
    lua_runtime_figures figures;
    latency_histogram gc_pauses;
};

/* ---- memory ----------------------------------------------------------------- */

static void *lua_runtime_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    lua_runtime *rt = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        rt->bytes -= old;
        return NULL;
    }
    if (nsize > old && rt->limits.memory_limit && rt->bytes + (nsize - old) > rt->limits.memory_limit) return NULL;
    void *grown = realloc(ptr, nsize);
    if (!grown) return NULL;
    rt->bytes = rt->bytes - old + nsize;
    if (rt->bytes > rt->bytes_peak) rt->bytes_peak = rt->bytes;
    return grown;
}

static lua_runtime *lua_runtime_of(lua_State *L) { return *(lua_runtime **)lua_getextraspace(L); }

/* ---- the instruction budget ------------------------------------------------------ */

static void lua_runtime_count_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_runtime *rt = lua_runtime_of(L);
    rt->instructions_left -= LUA_RUNTIME_HOOK_EVERY;
    if (rt->instructions_left < 0) {
        rt->figures.budget_stops += rt->instructions_left > -LUA_RUNTIME_HOOK_EVERY;
        luaL_error(L, "stopped: the instruction budget of %I instructions per call is spent",
                   (lua_Integer)rt->limits.instruction_budget);
    }
}

/* ---- the sandbox ----------------------------------------------------------------- */

/* print: a log line, with the script's text escaped by the log. */
static int lua_runtime_print(lua_State *L) {
    int count = lua_gettop(L);
    luaL_Buffer buffer;
    luaL_buffinit(L, &buffer);
    for (int i = 1; i <= count; i++) {
        if (i > 1) luaL_addchar(&buffer, ' ');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&buffer);
    }
    luaL_pushresult(&buffer);
    log_info("lua: %s", lua_tostring(L, -1));
    return 0;
}

/* What a script gets for a name the sandbox withholds: an error naming it. */
static int lua_runtime_withheld(lua_State *L) {
    const char *table = lua_tostring(L, lua_upvalueindex(1));
    const char *key = lua_tostring(L, 2);
    if (!key) return 0;
    static const char *const global_names[] = {"io",     "debug",      "package",        "load", "loadfile",
                                               "dofile", "loadstring", "collectgarbage", NULL};
    static const char *const os_names[] = {"execute", "exit",    "getenv",    "remove",
                                           "rename",  "tmpname", "setlocale", NULL};
    const char *const *names = table[0] ? os_names : global_names;
    for (size_t i = 0; names[i]; i++)
        if (strcmp(names[i], key) == 0)
            return luaL_error(L, "%s%s%s is not available to game scripts (the sandbox withholds it)", table,
                              table[0] ? "." : "", key);
    return 0;
}

/* Sets a metatable whose __index names withheld keys (`table`: "" for the
 * globals, "os" for os) on the table on top of the stack. */
static void lua_runtime_guard(lua_State *L, const char *table) {
    lua_createtable(L, 0, 1);
    lua_pushstring(L, table);
    lua_pushcclosure(L, lua_runtime_withheld, 1);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
}

/* Copies the entries of the table at `from` into the table on top. */
static void lua_runtime_copy_table(lua_State *L, int from) {
    from = lua_absindex(L, from);
    lua_pushnil(L);
    while (lua_next(L, from)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, -4);
    }
}

/* The template of the safe globals, kept in the registry. */
static void lua_runtime_build_template(lua_runtime *rt) {
    lua_State *L = rt->L;
    luaL_openlibs(L);
    /* string.dump would hand out bytecode, which load refuses anyway; it
     * goes from the shared string library, which strings' metatable uses. */
    lua_getglobal(L, "string");
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);

    lua_newtable(L);
    static const char *const functions[] = {
        "assert", "error",  "ipairs",   "next",   "pairs",  "pcall",  "select",       "tonumber",     "tostring",
        "type",   "xpcall", "rawequal", "rawget", "rawset", "rawlen", "setmetatable", "getmetatable", NULL};
    for (size_t i = 0; functions[i]; i++) {
        lua_getglobal(L, functions[i]);
        lua_setfield(L, -2, functions[i]);
    }
    static const char *const libraries[] = {"string", "table", "math", "utf8", "coroutine", NULL};
    for (size_t i = 0; libraries[i]; i++) {
        lua_getglobal(L, libraries[i]);
        lua_setfield(L, -2, libraries[i]);
    }
    lua_createtable(L, 0, 4);
    lua_getglobal(L, "os");
    static const char *const os_functions[] = {"time", "clock", "date", "difftime", NULL};
    for (size_t i = 0; os_functions[i]; i++) {
        lua_getfield(L, -1, os_functions[i]);
        lua_setfield(L, -3, os_functions[i]);
    }
    lua_pop(L, 1);
    lua_setfield(L, -2, "os");
    lua_pushcfunction(L, lua_runtime_print);
    lua_setfield(L, -2, "print");
    lua_pushliteral(L, LUA_VERSION);
    lua_setfield(L, -2, "_VERSION");
    rt->template_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

void lua_runtime_set_global(lua_runtime *rt, const char *name) {
    lua_rawgeti(rt->L, LUA_REGISTRYINDEX, rt->template_ref);
    lua_insert(rt->L, -2);
    lua_setfield(rt->L, -2, name);
    lua_pop(rt->L, 1);
}

static int lua_runtime_require(lua_State *L);

/* Pushes a fresh environment: the template's globals with the libraries
 * copied (a generation cannot change another's), the withheld names
 * guarded, and a require of its own. */
static void lua_runtime_new_environment(lua_runtime *rt) {
    lua_State *L = rt->L;
    lua_newtable(L);
    int env = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, rt->template_ref);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        if (lua_istable(L, -1) && !lua_getmetatable(L, -1)) {
            lua_newtable(L);
            lua_runtime_copy_table(L, -2);
            lua_remove(L, -2);
        } else if (lua_istable(L, -1)) {
            lua_pop(L, 1); /* a table with a metatable (tessera): shared as it is */
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, env);
    }
    lua_pop(L, 1);
    lua_getfield(L, env, "os");
    lua_runtime_guard(L, "os");
    lua_pop(L, 1);
    lua_newtable(L); /* the modules this environment required */
    lua_pushvalue(L, env);
    lua_pushcclosure(L, lua_runtime_require, 2);
    lua_setfield(L, env, "require");
    lua_runtime_guard(L, "");
}

/* Loads `path` as a text chunk whose _ENV is the environment at `env`, and
 * pushes the function. Returns 0, or -1 with the message pushed. */
static int lua_runtime_load_file(lua_State *L, const char *path, int env) {
    env = lua_absindex(L, env);
    if (luaL_loadfilex(L, path, "t") != LUA_OK) return -1;
    lua_pushvalue(L, env);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
    return 0;
}

/* require(name): a module of the script folder, loaded once per
 * generation; any other name is refused. */
static int lua_runtime_require(lua_State *L) {
    lua_runtime *rt = lua_runtime_of(L);
    size_t length = 0;
    const char *name = luaL_checklstring(L, 1, &length);
    bool ok = length > 0 && length <= LUA_RUNTIME_MODULE_NAME_MAX && name[0] != '.' && name[length - 1] != '.';
    for (size_t i = 0; ok && i < length; i++) {
        char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
             (c == '.' && name[i + 1] != '.');
    }
    if (!ok)
        return luaL_error(L,
                          "require('%s'): only modules of the game's script folder may be required (names of "
                          "letters, digits, '_' and '.')",
                          name);
    lua_settop(L, 1);
    lua_pushvalue(L, 1);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) {
        if (lua_isboolean(L, -1) && !lua_toboolean(L, -1))
            return luaL_error(L, "require('%s'): the module requires itself", name);
        return 1;
    }
    lua_pop(L, 1);
    char relative[LUA_RUNTIME_MODULE_NAME_MAX + 8];
    snprintf(relative, sizeof relative, "%s", name);
    for (char *c = relative; *c; c++)
        if (*c == '.') *c = '/';
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/%s.lua", rt->folder, relative);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return luaL_error(L, "require('%s'): no %s.lua in the game's script folder", name, relative);
    lua_pushvalue(L, 1);
    lua_pushboolean(L, 0); /* loading */
    lua_rawset(L, lua_upvalueindex(1));
    if (lua_runtime_load_file(L, path, lua_upvalueindex(2)) != 0) return lua_error(L);
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, 1);
    lua_pushvalue(L, -2);
    lua_rawset(L, lua_upvalueindex(1));
    return 1;
}

/* ---- lifecycle ------------------------------------------------------------------- */

lua_runtime *lua_runtime_create(const char *folder, const char *side, const lua_runtime_limits *limits, char *err,
                                size_t errlen) {
    char resolved[PATH_MAX];
    if (!folder || !folder[0] || !realpath(folder, resolved)) {
        snprintf(err, errlen, "game_scripts '%s': %s", folder ? folder : "",
                 folder && folder[0] ? strerror(errno) : "empty");
        return NULL;
    }
    lua_runtime *rt = xcalloc(1, sizeof *rt);
    snprintf(rt->folder, sizeof rt->folder, "%s", resolved);
    snprintf(rt->side, sizeof rt->side, "%s", side);
    rt->limits = *limits;
    rt->generation_ref = LUA_NOREF;
    rt->L = lua_newstate(lua_runtime_alloc, rt);
    if (!rt->L) {
        snprintf(err, errlen, "game_scripts: Lua could not start (memory limit %zu bytes)", limits->memory_limit);
        free(rt);
        return NULL;
    }
    *(lua_runtime **)lua_getextraspace(rt->L) = rt;
    /* Generational collection (short minor collections rather than long
     * incremental cycles over a heap of long-lived tables), stepped by the
     * host between ticks (lua_runtime_collect), never inside a hook. */
    lua_gc(rt->L, LUA_GCGEN, 0, 0);
    lua_runtime_build_template(rt);
    lua_gc(rt->L, LUA_GCSTOP);
    lua_newtable(rt->L);
    rt->objects_ref = luaL_ref(rt->L, LUA_REGISTRYINDEX);
    /* Pauses in 10 us buckets up to 100 ms; longer ones share the top. */
    latency_histogram_init(&rt->gc_pauses, 10, 100000);
    lua_sethook(rt->L, lua_runtime_count_hook, LUA_MASKCOUNT, LUA_RUNTIME_HOOK_EVERY);
    return rt;
}

void lua_runtime_free(lua_runtime *rt) {
    if (!rt) return;
    lua_close(rt->L);
    latency_histogram_close(&rt->gc_pauses);
    free(rt);
}

lua_State *lua_runtime_state(lua_runtime *rt) { return rt->L; }
const char *lua_runtime_folder(const lua_runtime *rt) { return rt->folder; }

static bool lua_runtime_file_exists(const lua_runtime *rt, const char *name) {
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/%s.lua", rt->folder, name);
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool lua_runtime_has_class_script(const lua_runtime *rt, const char *class_name) {
    return strcmp(class_name, "game") != 0 && lua_runtime_file_exists(rt, class_name);
}

bool lua_runtime_has_game_script(const lua_runtime *rt) { return lua_runtime_file_exists(rt, "game"); }

/* ---- calling ------------------------------------------------------------------------ */

static int lua_runtime_traceback(lua_State *L) {
    const char *message = lua_tostring(L, 1);
    if (!message) message = luaL_tolstring(L, 1, NULL);
    luaL_traceback(L, L, message, 1);
    return 1;
}

/* Copies the first line of the message on top (without the traceback). */
static void lua_runtime_first_line(lua_State *L, char *err, size_t errlen) {
    if (!err || !errlen) return;
    const char *message = lua_tostring(L, -1);
    if (!message) message = "(an error that is not a string)";
    const char *end = strstr(message, "\nstack traceback:");
    int length = end ? (int)(end - message) : (int)strlen(message);
    snprintf(err, errlen, "%.*s", length, message);
}

int lua_runtime_call(lua_runtime *rt, int nargs, int nresults, const char *owner, const char *hook, uint64_t entity_id,
                     char *err, size_t errlen) {
    lua_State *L = rt->L;
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, lua_runtime_traceback);
    lua_insert(L, base);
    rt->instructions_left = (int64_t)rt->limits.instruction_budget;
    rt->figures.calls++;
    uint64_t started = clock_monotonic_us();
    int rc = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    if (rc == LUA_OK) return 0;
    double ran_ms = (double)(clock_monotonic_us() - started) / 1000.0;
    rt->figures.errors++;
    const char *message = lua_tostring(L, -1);
    char entity[40] = "";
    if (entity_id) snprintf(entity, sizeof entity, " (entity %" PRIu64 ")", entity_id);
    log_warn("lua: %s.%s%s failed after %.1f ms: %s", owner, hook, entity, ran_ms,
             message ? message : "(an error that is not a string)");
    lua_runtime_first_line(L, err, errlen);
    lua_pop(L, 1);
    for (int i = 0; i < nresults; i++) lua_pushnil(L);
    return -1;
}

/* ---- generations ------------------------------------------------------------------------ */

/* Runs the chunk on top (under the budget) and checks it returned a
 * table, which replaces it. Returns 0, or -1 with err. */
static int lua_runtime_run_chunk(lua_runtime *rt, const char *file, char *err, size_t errlen) {
    lua_State *L = rt->L;
    lua_pushcfunction(L, lua_runtime_traceback);
    lua_insert(L, -2);
    rt->instructions_left = (int64_t)rt->limits.instruction_budget;
    int rc = lua_pcall(L, 0, 1, -2);
    lua_remove(L, -2);
    if (rc != LUA_OK) {
        log_warn("lua: %s failed: %s", file, lua_tostring(L, -1) ? lua_tostring(L, -1) : "(not a string)");
        lua_runtime_first_line(L, err, errlen);
        lua_pop(L, 1);
        return -1;
    }
    if (!lua_istable(L, -1)) {
        snprintf(err, errlen, "%s/%s: returned %s, not a table of rules", rt->folder, file, luaL_typename(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

/* A fingerprint of the folder's .lua files (names, sizes, times). */
static uint64_t lua_runtime_stamp(const lua_runtime *rt) {
    DIR *dir = opendir(rt->folder);
    if (!dir) return 0;
    uint64_t stamp = 1469598103934665603ull;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        size_t length = strlen(entry->d_name);
        if (length < 5 || strcmp(entry->d_name + length - 4, ".lua") != 0) continue;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", rt->folder, entry->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < length; i++) h = (h ^ (unsigned char)entry->d_name[i]) * 1099511628211ull;
        h ^= (uint64_t)st.st_size * 0x9e3779b97f4a7c15ull;
        h ^= ((uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec) * 0xc2b2ae3d27d4eb4full;
        stamp += h; /* order-free: readdir's order is not fixed */
    }
    closedir(dir);
    return stamp;
}

int lua_runtime_load_generation(lua_runtime *rt, const char *const *class_names, size_t class_count, char *err,
                                size_t errlen) {
    lua_State *L = rt->L;
    int top = lua_gettop(L);
    uint64_t stamp = lua_runtime_stamp(rt);
    lua_createtable(L, 0, 3);
    int generation = lua_gettop(L);
    lua_runtime_new_environment(rt);
    int env = lua_gettop(L);
    char path[PATH_MAX + 80];
    if (lua_runtime_has_game_script(rt)) {
        snprintf(path, sizeof path, "%s/game.lua", rt->folder);
        if (lua_runtime_load_file(L, path, env) != 0) {
            lua_runtime_first_line(L, err, errlen);
            lua_settop(L, top);
            return -1;
        }
        if (lua_runtime_run_chunk(rt, "game.lua", err, errlen) != 0) {
            lua_settop(L, top);
            return -1;
        }
        lua_setfield(L, generation, "game");
    }
    lua_createtable(L, 0, (int)class_count);
    for (size_t i = 0; i < class_count; i++) {
        if (!lua_runtime_has_class_script(rt, class_names[i])) continue;
        snprintf(path, sizeof path, "%s/%s.lua", rt->folder, class_names[i]);
        if (lua_runtime_load_file(L, path, env) != 0) {
            lua_runtime_first_line(L, err, errlen);
            lua_settop(L, top);
            return -1;
        }
        char file[200];
        snprintf(file, sizeof file, "%s.lua", class_names[i]);
        if (lua_runtime_run_chunk(rt, file, err, errlen) != 0) {
            lua_settop(L, top);
            return -1;
        }
        lua_setfield(L, -2, class_names[i]);
    }
    lua_setfield(L, generation, "classes");
    lua_pushvalue(L, env);
    lua_setfield(L, generation, "env");
    lua_pushinteger(L, (lua_Integer)(stamp >> 1));
    lua_setfield(L, generation, "stamp");
    lua_settop(L, generation);
    return 0;
}

void lua_runtime_install_generation(lua_runtime *rt) {
    lua_State *L = rt->L;
    lua_getfield(L, -1, "stamp");
    rt->scripts_stamp = (uint64_t)lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (rt->generation_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, rt->generation_ref);
    rt->generation_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    rt->generation++;
    /* The old generation is garbage now: collect it here, in the reload,
     * rather than in a later tick's step. */
    lua_gc(L, LUA_GCCOLLECT);
}

bool lua_runtime_push_object(lua_runtime *rt, uint64_t id) {
    lua_State *L = rt->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, rt->objects_ref);
    if (lua_rawgeti(L, -1, (lua_Integer)id) != LUA_TNIL) {
        lua_remove(L, -2);
        return true;
    }
    lua_pop(L, 2);
    return false;
}

void lua_runtime_keep_object(lua_runtime *rt, uint64_t id) {
    lua_State *L = rt->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, rt->objects_ref);
    lua_pushvalue(L, -2);
    lua_rawseti(L, -2, (lua_Integer)id);
    lua_pop(L, 1);
}

void lua_runtime_sweep_objects(lua_runtime *rt, bool (*alive)(void *context, uint64_t id), void *context,
                               uint32_t every) {
    if (rt->sweep_countdown > 0) {
        rt->sweep_countdown--;
        return;
    }
    rt->sweep_countdown = every;
    lua_State *L = rt->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, rt->objects_ref);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        uint64_t id = (uint64_t)lua_tointeger(L, -1);
        if (!alive(context, id)) {
            /* Clearing a field during a traversal is allowed (lua_next). */
            lua_pushvalue(L, -1);
            lua_pushnil(L);
            lua_rawset(L, -4);
        }
    }
    lua_pop(L, 1);
}

void lua_runtime_collect(lua_runtime *rt) {
    uint64_t started = clock_monotonic_us();
    lua_gc(rt->L, LUA_GCSTEP, 0);
    latency_histogram_add(&rt->gc_pauses, clock_monotonic_us() - started);
}

void lua_runtime_push_rules(lua_runtime *rt, const char *class_name) {
    lua_State *L = rt->L;
    if (rt->generation_ref == LUA_NOREF) {
        lua_pushnil(L);
        return;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, rt->generation_ref);
    if (class_name) {
        lua_getfield(L, -1, "classes");
        lua_remove(L, -2);
        lua_getfield(L, -1, class_name);
    } else {
        lua_getfield(L, -1, "game");
    }
    lua_remove(L, -2);
    if (lua_istable(L, -1))
        lua_getfield(L, -1, rt->side);
    else
        lua_pushnil(L);
    lua_remove(L, -2);
}

uint32_t lua_runtime_generation(const lua_runtime *rt) { return rt->generation; }

/* ---- reload requests -------------------------------------------------------------------- */

void lua_runtime_request_reload(lua_runtime *rt) { rt->reload_requested = true; }

bool lua_runtime_poll(lua_runtime *rt, uint64_t now_ms) {
    if (rt->reload_requested) {
        rt->reload_requested = false;
        return true;
    }
    if (now_ms - rt->last_poll_ms < LUA_RUNTIME_POLL_MS) return false;
    rt->last_poll_ms = now_ms;
    uint64_t stamp = lua_runtime_stamp(rt) >> 1;
    if (stamp == rt->scripts_stamp) return false;
    /* Refused loads do not move the stamp: the same broken file is not
     * tried again every second, only once it changes. */
    rt->scripts_stamp = stamp;
    return true;
}

lua_runtime_figures lua_runtime_get_figures(const lua_runtime *rt) {
    lua_runtime_figures figures = rt->figures;
    figures.bytes = rt->bytes;
    figures.bytes_peak = rt->bytes_peak;
    figures.gc_steps = rt->gc_pauses.count;
    figures.gc_p50_us = latency_histogram_percentile(&rt->gc_pauses, 50.0);
    figures.gc_p99_us = latency_histogram_percentile(&rt->gc_pauses, 99.0);
    figures.gc_max_us = rt->gc_pauses.max_us;
    return figures;
}

void lua_runtime_count_reload(lua_runtime *rt, bool done, uint64_t took_us) {
    if (done)
        rt->figures.reloads++;
    else
        rt->figures.reloads_refused++;
    rt->figures.last_reload_us = took_us;
}

int lua_runtime_check(const char *folder, const char *side, const char *const *class_names, size_t class_count,
                      char *err, size_t errlen) {
    lua_runtime_limits limits = {.instruction_budget = 100000000, .memory_limit = 256u << 20};
    lua_runtime *rt = lua_runtime_create(folder, side, &limits, err, errlen);
    if (!rt) return -1;
    /* A script's top level may read tessera.side; nothing else runs yet. */
    lua_createtable(rt->L, 0, 1);
    lua_pushstring(rt->L, side);
    lua_setfield(rt->L, -2, "side");
    lua_runtime_set_global(rt, "tessera");
    int rc = lua_runtime_load_generation(rt, class_names, class_count, err, errlen);
    lua_runtime_free(rt);
    return rc;
}
