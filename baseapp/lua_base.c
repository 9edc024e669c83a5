/* lua_base.c -- owns the base side's scripted classes: the base objects
 * scripts are handed (a userdata holding the entity's id, resolved at each
 * use), the `tessera` table of the baseapp's services, the callbacks
 * scripts give to asynchronous services (kept in the registry until they
 * run once), and the trampolines through which the engine's base hooks
 * reach the current generation. Everything goes through the
 * tessera_base_api a C module gets.
 */
#include "lua_base.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "base_game.h"
#include "entity_state.h"
#include "game_args.h"
#include "clock.h"
#include "log.h"
#include "lua_values.h"
#include "method_call.h"

#define LUA_BASE_MAX_LISTENERS 64
#define LUA_BASE_NAME_MAX 48

typedef struct lua_base_class {
    const entity_def_class *def;
    tessera_base_class *cls; /* registered here: its base rules are a script */
    int rules_ref;           /* the current generation's `base` table */
    int metatable_ref;
} lua_base_class;

struct lua_base {
    lua_runtime *rt;
    lua_State *L;
    tessera_baseapp *app;
    const tessera_base_api *api;
    const entity_def_registry *definitions;
    lua_base_class *classes; /* by entity_def_class id */
    size_t class_count;
    const char **script_names;
    size_t script_count;
    int game_ref; /* game.lua's base table */
    char listened[LUA_BASE_MAX_LISTENERS][LUA_BASE_NAME_MAX];
    size_t listened_count;
    struct lua_base_callback *callbacks; /* kept, not yet called (or kept for good) */
    /* The base the innermost running hook was given: its object reaches it
     * for the hook's length even where resolve no longer does (in
     * `destroyed`, as a C hook's tessera_base does). */
    uint64_t hooked_id;
    tessera_base *hooked;
};

typedef struct lua_base_object {
    uint64_t id;
    lua_base_class *cls;
} lua_base_object;

/* A script's callback waiting for an asynchronous answer. */
typedef struct lua_base_callback {
    lua_base *lb;
    int function_ref;
    struct lua_base_callback *next, *previous; /* lb->callbacks */
} lua_base_callback;

static lua_base *lua_base_of(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* ---- base objects ---------------------------------------------------------------------- */

static lua_base_object *lua_base_object_at(lua_State *L, int idx) {
    lua_base_object *object = lua_touserdata(L, idx);
    if (!object || !lua_getmetatable(L, idx)) return NULL;
    bool base = lua_getfield(L, -1, "__base") == LUA_TBOOLEAN;
    lua_pop(L, 2);
    return base ? object : NULL;
}

static uint64_t lua_base_object_id(lua_State *L, int idx) {
    lua_base_object *object = lua_base_object_at(L, idx);
    return object ? object->id : 0;
}

static lua_base_class *lua_base_class_named(lua_base *lb, const char *name) {
    const entity_def_class *def = name ? entity_def_registry_find_class(lb->definitions, name) : NULL;
    return def && def->id < lb->class_count ? &lb->classes[def->id] : NULL;
}

static void lua_base_push(lua_base *lb, tessera_base *base) {
    lua_State *L = lb->L;
    lua_base_class *cls = base ? lua_base_class_named(lb, lb->api->class_name(base)) : NULL;
    if (!cls) {
        lua_pushnil(L);
        return;
    }
    uint64_t id = lb->api->handle(base);
    if (lua_runtime_push_object(lb->rt, id)) return;
    lua_base_object *object = lua_newuserdatauv(L, sizeof *object, 0);
    object->id = id;
    object->cls = cls;
    lua_rawgeti(L, LUA_REGISTRYINDEX, cls->metatable_ref);
    lua_setmetatable(L, -2);
    lua_runtime_keep_object(lb->rt, id);
}

/* Whether base `id` is still on this baseapp (its cached object stays). */
static bool lua_base_alive(void *context, uint64_t id) {
    lua_base *lb = context;
    return lb->api->resolve(lb->app, id) != NULL;
}

/* The base of `id` here: the running hook's own, or what resolve finds. */
static tessera_base *lua_base_lookup(lua_base *lb, uint64_t id) {
    return id && id == lb->hooked_id ? lb->hooked : lb->api->resolve(lb->app, id);
}

static tessera_base *lua_base_arg(lua_base *lb, lua_State *L, int idx) {
    lua_base_object *object = lua_base_object_at(L, idx);
    if (!object) lua_values_raise(L, "argument %d: a base expected, got a %s", idx, luaL_typename(L, idx));
    tessera_base *base = lua_base_lookup(lb, object->id);
    if (!base)
        lua_values_raise(L, "base %I (%s) is gone from this baseapp", (lua_Integer)object->id, object->cls->def->name);
    return base;
}

static uint64_t lua_base_id_arg(lua_State *L, int idx) {
    if (lua_type(L, idx) == LUA_TNUMBER) return (uint64_t)luaL_checkinteger(L, idx);
    uint64_t id = lua_base_object_id(L, idx);
    if (!id) lua_values_raise(L, "argument %d: a base or an entity id expected, got a %s", idx, luaL_typename(L, idx));
    return id;
}

/* ---- properties ------------------------------------------------------------------------------ */

static int lua_base_get_property(lua_base *lb, tessera_base *base, const entity_def_property *property) {
    lua_State *L = lb->L;
    const tessera_base_api *api = lb->api;
    lua_values_scalar value = {0};
    int id = property->id, rc = -1;
    entity_def_kind kind = property->type.kind;
    if (kind <= ENTITY_DEF_INT64)
        rc = api->get_int(base, id, 0, &value.i);
    else if (kind <= ENTITY_DEF_UINT64)
        rc = api->get_uint(base, id, 0, &value.u);
    else if (kind == ENTITY_DEF_FLOAT || kind == ENTITY_DEF_DOUBLE)
        rc = api->get_float(base, id, 0, &value.f);
    else if (kind == ENTITY_DEF_BOOL)
        rc = api->get_bool(base, id, 0, &value.b);
    else if (kind == ENTITY_DEF_STRING)
        rc = api->get_string(base, id, 0, &value.s, &value.length);
    else if (kind == ENTITY_DEF_ENTITY)
        rc = api->get_handle(base, id, 0, &value.h);
    if (rc != 0)
        return luaL_error(L, "%s: a %s the base side cannot read (not a base property, or not one value)",
                          property->name, entity_def_kind_name(kind));
    lua_values_push_scalar(L, kind, &value);
    return 1;
}

static void lua_base_set_property(lua_base *lb, tessera_base *base, const entity_def_class *def,
                                  const entity_def_property *property, int value_index) {
    lua_State *L = lb->L;
    const tessera_base_api *api = lb->api;
    char what[160];
    snprintf(what, sizeof what, "%s.%s", def->name, property->name);
    lua_values_scalar value;
    lua_values_check(L, value_index, &property->type, what, lua_base_object_id, &value);
    int id = property->id, rc = -1;
    entity_def_kind kind = property->type.kind;
    if (kind <= ENTITY_DEF_INT64)
        rc = api->set_int(base, id, 0, value.i);
    else if (kind <= ENTITY_DEF_UINT64)
        rc = api->set_uint(base, id, 0, value.u);
    else if (kind == ENTITY_DEF_FLOAT || kind == ENTITY_DEF_DOUBLE)
        rc = api->set_float(base, id, 0, value.f);
    else if (kind == ENTITY_DEF_BOOL)
        rc = api->set_bool(base, id, 0, value.b);
    else if (kind == ENTITY_DEF_STRING)
        rc = api->set_string(base, id, 0, value.s, value.length);
    else if (kind == ENTITY_DEF_ENTITY)
        rc = api->set_handle(base, id, 0, value.h);
    if (rc != 0) lua_values_raise(L, "%s: the engine refused the value (see the log line before this one)", what);
}

static int lua_base_object_index(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_base_object *object = lua_touserdata(L, 1);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TNUMBER) {
        const entity_def_property *property = &object->cls->def->properties[lua_tointeger(L, -1)];
        return lua_base_get_property(lb, lua_base_arg(lb, L, 1), property);
    }
    lua_pop(L, 1);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(3)) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    if (object->cls->rules_ref == LUA_NOREF) return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, object->cls->rules_ref);
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
}

static int lua_base_object_newindex(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_base_object *object = lua_touserdata(L, 1);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TNUMBER) {
        const entity_def_property *property = &object->cls->def->properties[lua_tointeger(L, -1)];
        lua_base_set_property(lb, lua_base_arg(lb, L, 1), object->cls->def, property, 3);
        return 0;
    }
    return luaL_error(L, "%s has no base property '%s' (a base keeps only what its definition declares)",
                      object->cls->def->name, lua_tostring(L, 2) ? lua_tostring(L, 2) : "?");
}

static int lua_base_object_equal(lua_State *L) {
    lua_base_object *a = lua_base_object_at(L, 1), *b = lua_base_object_at(L, 2);
    lua_pushboolean(L, a && b && a->id == b->id);
    return 1;
}

static int lua_base_object_tostring(lua_State *L) {
    lua_base_object *object = lua_touserdata(L, 1);
    lua_pushfstring(L, "%s %I (base)", object->cls->def->name, (lua_Integer)object->id);
    return 1;
}

/* ---- arguments ------------------------------------------------------------------------------- */

typedef struct lua_base_fill {
    const entity_def_method *method;
    entity_state *state;
    int count;
    bool named;
} lua_base_fill;

static int lua_base_fill_protected(lua_State *L) {
    lua_base_fill *fill = lua_touserdata(L, 1);
    if (fill->named)
        lua_values_fill_named(L, 2, fill->method, fill->state, lua_base_object_id);
    else
        lua_values_fill_args(L, 2, fill->count, fill->method, fill->state, lua_base_object_id);
    return 0;
}

/* The arguments of `method` from the values at [first, first + count), or
 * from the table at `named` (not 0); a refused value frees them and
 * raises the error. */
static tessera_args *lua_base_args(lua_State *L, const entity_def_method *method, int first, int count, int named) {
    lua_base_fill fill = {method, method_call_args_create(method), count, named != 0};
    lua_pushcfunction(L, lua_base_fill_protected);
    lua_pushlightuserdata(L, &fill);
    if (named)
        lua_pushvalue(L, named);
    else
        for (int i = 0; i < count; i++) lua_pushvalue(L, first + i);
    if (lua_pcall(L, 1 + (named ? 1 : count), 0, 0) != LUA_OK) {
        entity_state_free(fill.state);
        lua_error(L);
        return NULL;
    }
    return game_args_of(fill.state);
}

static const entity_def_method *lua_base_method_arg(lua_State *L, const entity_def_class *def, entity_def_part part,
                                                    const char *name) {
    const entity_def_method *method = def ? entity_def_class_find_method(def, part, name) : NULL;
    if (!method)
        lua_values_raise(L, "%s has no %s method '%s'", def ? def->name : "(unknown class)", entity_def_part_name(part),
                         name);
    return method;
}

/* ---- methods on base objects ----------------------------------------------------------------- */

#define LUA_BASE_SELF()            \
    lua_base *lb = lua_base_of(L); \
    tessera_base *self = lua_base_arg(lb, L, 1)

static int lua_base_m_id(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)lua_base_object_id(L, 1));
    return 1;
}

static int lua_base_m_class_name(lua_State *L) {
    lua_base_object *object = lua_base_object_at(L, 1);
    if (!object) return luaL_error(L, "class_name: a base expected");
    lua_pushstring(L, object->cls->def->name);
    return 1;
}

static int lua_base_m_exists(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_base_object *object = lua_base_object_at(L, 1);
    lua_pushboolean(L, object && lua_base_lookup(lb, object->id) != NULL);
    return 1;
}

static int lua_base_m_account(lua_State *L) {
    LUA_BASE_SELF();
    lua_pushstring(L, lb->api->account(self));
    return 1;
}

static int lua_base_m_has_client(lua_State *L) {
    LUA_BASE_SELF();
    lua_pushboolean(L, lb->api->has_client(self));
    return 1;
}

/* self:call_cell("method", ...) on the base's own cell part. */
static int lua_base_m_call_cell(lua_State *L) {
    LUA_BASE_SELF();
    const char *name = luaL_checkstring(L, 2);
    lua_base_object *object = lua_base_object_at(L, 1);
    const entity_def_method *method = lua_base_method_arg(L, object->cls->def, ENTITY_DEF_PART_CELL, name);
    tessera_args *args = lua_base_args(L, method, 3, lua_gettop(L) - 2, 0);
    int rc = lb->api->call_cell(self, name, args);
    lb->api->args->free(args);
    if (rc != 0) return luaL_error(L, "call_cell('%s') refused (see the log line before this one)", name);
    return 0;
}

static int lua_base_call_part(lua_State *L, tessera_part part) {
    LUA_BASE_SELF();
    uint64_t target = lua_base_id_arg(L, 2);
    const char *class_name = luaL_checkstring(L, 3);
    const char *name = luaL_checkstring(L, 4);
    const entity_def_class *def = entity_def_registry_find_class(lb->definitions, class_name);
    const entity_def_method *method = lua_base_method_arg(L, def, (entity_def_part)part, name);
    tessera_args *args = lua_base_args(L, method, 5, lua_gettop(L) - 4, 0);
    int rc = lb->api->call_base(self, target, class_name, part, name, args);
    lb->api->args->free(args);
    if (rc != 0) return luaL_error(L, "call to %s.%s refused (see the log line before this one)", class_name, name);
    return 0;
}

static int lua_base_m_call_base(lua_State *L) { return lua_base_call_part(L, TESSERA_PART_BASE); }
static int lua_base_m_call_client(lua_State *L) { return lua_base_call_part(L, TESSERA_PART_CLIENT); }

static int lua_base_m_give_client(lua_State *L) {
    LUA_BASE_SELF();
    tessera_base *to = lua_base_arg(lb, L, 2);
    lua_pushboolean(L, lb->api->give_client(self, to) == 0);
    return 1;
}

static int lua_base_m_destroy(lua_State *L) {
    LUA_BASE_SELF();
    lb->api->destroy(self, lua_isnoneornil(L, 2) ? true : lua_toboolean(L, 2), luaL_optstring(L, 3, "script"));
    return 0;
}

static const entity_def_method *lua_base_event_arg(lua_base *lb, lua_State *L, const char *name) {
    const entity_def_method *event = entity_def_registry_find_event(lb->definitions, name);
    if (!event) lua_values_raise(L, "no event '%s' in the definitions", name);
    return event;
}

static int lua_base_m_send_event(lua_State *L) {
    LUA_BASE_SELF();
    const char *name = luaL_checkstring(L, 2);
    const entity_def_method *event = lua_base_event_arg(lb, L, name);
    tessera_args *fields = lua_base_args(L, event, 0, 0, lua_isnoneornil(L, 3) ? 0 : 3);
    int rc = lb->api->send_event(self, name, fields);
    lb->api->args->free(fields);
    lua_pushboolean(L, rc == 0);
    return 1;
}

static int lua_base_m_add_timer(lua_State *L) {
    LUA_BASE_SELF();
    lua_Integer delay = luaL_optinteger(L, 2, 0), repeat = luaL_optinteger(L, 3, 0), tag = luaL_optinteger(L, 4, 0);
    if (delay < 0 || repeat < 0 || tag < 0 || tag >= (lua_Integer)TESSERA_TIMER_TAG_LIMIT)
        return luaL_error(L, "add_timer: delay, repeat and tag must not be negative (and tag below 2^31)");
    uint64_t id =
        lb->api->add_timer(self, (uint64_t)delay, (uint64_t)repeat, (uint32_t)tag, (uint64_t)luaL_optinteger(L, 5, 0));
    if (!id) return luaL_error(L, "add_timer refused (see the log line before this one)");
    lua_pushinteger(L, (lua_Integer)id);
    return 1;
}

static int lua_base_m_cancel_timer(lua_State *L) {
    LUA_BASE_SELF();
    lua_pushboolean(L, lb->api->cancel_timer(self, (uint64_t)luaL_checkinteger(L, 2)) == 0);
    return 1;
}

static int lua_base_log_text(lua_State *L, int first, tessera_log_level level, const tessera_base *base) {
    lua_base *lb = lua_base_of(L);
    int top = lua_gettop(L);
    luaL_Buffer buffer;
    luaL_buffinit(L, &buffer);
    for (int i = first; i <= top; i++) {
        if (i > first) luaL_addchar(&buffer, ' ');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&buffer);
    }
    luaL_pushresult(&buffer);
    lb->api->log(lb->app, level, base, "%s", lua_tostring(L, -1));
    return 0;
}

static int lua_base_m_log(lua_State *L) {
    LUA_BASE_SELF();
    return lua_base_log_text(L, 2, TESSERA_LOG_INFO, self);
}

static int lua_base_m_warn(lua_State *L) {
    LUA_BASE_SELF();
    return lua_base_log_text(L, 2, TESSERA_LOG_WARN, self);
}

static int lua_base_m_debug(lua_State *L) {
    LUA_BASE_SELF();
    return lua_base_log_text(L, 2, TESSERA_LOG_DEBUG, self);
}

static const luaL_Reg lua_base_methods[] = {
    {"id", lua_base_m_id},
    {"class_name", lua_base_m_class_name},
    {"exists", lua_base_m_exists},
    {"account", lua_base_m_account},
    {"has_client", lua_base_m_has_client},
    {"call_cell", lua_base_m_call_cell},
    {"call_base", lua_base_m_call_base},
    {"call_client", lua_base_m_call_client},
    {"give_client", lua_base_m_give_client},
    {"destroy", lua_base_m_destroy},
    {"send_event", lua_base_m_send_event},
    {"add_timer", lua_base_m_add_timer},
    {"cancel_timer", lua_base_m_cancel_timer},
    {"log", lua_base_m_log},
    {"warn", lua_base_m_warn},
    {"debug", lua_base_m_debug},
    {NULL, NULL},
};

/* ---- callbacks from asynchronous services ---------------------------------------------------- */

/* Takes the function at `idx` for one later call. */
static lua_base_callback *lua_base_keep(lua_base *lb, lua_State *L, int idx) {
    if (lua_isnoneornil(L, idx)) return NULL;
    luaL_checktype(L, idx, LUA_TFUNCTION);
    lua_base_callback *callback = xcalloc(1, sizeof *callback);
    callback->lb = lb;
    lua_pushvalue(L, idx);
    callback->function_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    callback->next = lb->callbacks;
    if (lb->callbacks) lb->callbacks->previous = callback;
    lb->callbacks = callback;
    return callback;
}

static void lua_base_forget(lua_base_callback *callback) {
    if (!callback) return;
    lua_base *lb = callback->lb;
    if (callback->previous)
        callback->previous->next = callback->next;
    else
        lb->callbacks = callback->next;
    if (callback->next) callback->next->previous = callback->previous;
    luaL_unref(lb->L, LUA_REGISTRYINDEX, callback->function_ref);
    free(callback);
}

/* Pushes the kept function; the caller pushes the arguments and calls. */
static void lua_base_recall(lua_base_callback *callback) {
    lua_rawgeti(callback->lb->L, LUA_REGISTRYINDEX, callback->function_ref);
}

static void lua_base_on_global(const tessera_base_context *ctx, bool ok, tessera_handle holder, void *user_data) {
    (void)ctx;
    lua_base_callback *callback = user_data;
    if (!callback) return;
    lua_base *lb = callback->lb;
    lua_base_recall(callback);
    lua_pushboolean(lb->L, ok);
    lua_pushinteger(lb->L, (lua_Integer)holder);
    lua_runtime_call(lb->rt, 2, 0, "game", "global callback", 0, NULL, 0);
    lua_base_forget(callback);
}

/* The singleton's ready callback may run more than once (each time the
 * singleton is made again elsewhere): it is kept for the process's life. */
static void lua_base_on_singleton(const tessera_base_context *ctx, bool ok, tessera_handle holder, void *user_data) {
    (void)ctx;
    lua_base_callback *callback = user_data;
    lua_base *lb = callback->lb;
    lua_base_recall(callback);
    lua_pushboolean(lb->L, ok);
    lua_pushinteger(lb->L, (lua_Integer)holder);
    lua_runtime_call(lb->rt, 2, 0, "game", "singleton callback", 0, NULL, 0);
}

static void lua_base_on_loaded(const tessera_base_context *ctx, tessera_handle loaded, const char *why,
                               void *user_data) {
    (void)ctx;
    lua_base_callback *callback = user_data;
    if (!callback) return;
    lua_base *lb = callback->lb;
    lua_base_recall(callback);
    if (loaded)
        lua_pushinteger(lb->L, (lua_Integer)loaded);
    else
        lua_pushnil(lb->L);
    lua_pushstring(lb->L, why ? why : "");
    lua_runtime_call(lb->rt, 2, 0, "game", "load_base callback", 0, NULL, 0);
    lua_base_forget(callback);
}

/* ---- the world: the `tessera` table ---------------------------------------------------------- */

static int lua_base_w_now_ms(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_pushinteger(L, (lua_Integer)lb->api->now_ms(lb->app));
    return 1;
}

static int lua_base_w_wall_ms(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_pushinteger(L, (lua_Integer)lb->api->wall_ms(lb->app));
    return 1;
}

static int lua_base_w_random(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_pushnumber(L, lb->api->random_unit(lb->app));
    return 1;
}

static int lua_base_w_setting(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_pushnumber(L, lb->api->setting_number(lb->app, luaL_checkstring(L, 1), luaL_optnumber(L, 2, 0)));
    return 1;
}

static int lua_base_w_resolve(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_base_push(lb, lb->api->resolve(lb->app, lua_base_id_arg(L, 1)));
    return 1;
}

static int lua_base_w_stopping(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_pushboolean(L, lb->api->stopping(lb->app));
    return 1;
}

static int lua_base_w_find_by_class(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    const char *class_name = luaL_checkstring(L, 1);
    size_t count = lb->api->find_by_class(lb->app, class_name, NULL, 0);
    if (count > (size_t)INT_MAX / sizeof(tessera_handle)) count = (size_t)INT_MAX / sizeof(tessera_handle);
    /* Every one of them (a baseapp holds thousands of players), in a
     * buffer the collector owns, so an error while filling leaks nothing. */
    if (count == 0) {
        lua_newtable(L);
        return 1;
    }
    tessera_handle *found = lua_newuserdatauv(L, count * sizeof *found, 0);
    size_t now = lb->api->find_by_class(lb->app, class_name, found, count);
    if (now < count) count = now;
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        lua_pushinteger(L, (lua_Integer)found[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int lua_base_w_create_base(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    tessera_handle id = lb->api->create_base(lb->app, luaL_checkstring(L, 1), luaL_optstring(L, 2, ""));
    if (!id) return 0;
    lua_pushinteger(L, (lua_Integer)id);
    return 1;
}

/* tessera.load_base(from, "Class", "key", function(id, why) ... end) */
static int lua_base_w_load_base(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    tessera_base *from = lua_base_arg(lb, L, 1);
    lua_base_callback *callback = lua_base_keep(lb, L, 4);
    if (lb->api->load_base(from, luaL_checkstring(L, 2), luaL_checkstring(L, 3), lua_base_on_loaded, callback) != 0) {
        lua_base_forget(callback);
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int lua_base_w_register_global(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    const char *name = luaL_checkstring(L, 1);
    tessera_base *base = lua_base_arg(lb, L, 2);
    lua_base_callback *callback = lua_base_keep(lb, L, 3);
    if (lb->api->register_global(lb->app, name, base, lua_base_on_global, callback) != 0) {
        lua_base_forget(callback);
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int lua_base_w_find_global(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lua_base_callback *callback = lua_base_keep(lb, L, 2);
    if (lb->api->find_global(lb->app, luaL_checkstring(L, 1), lua_base_on_global, callback) != 0) {
        lua_base_forget(callback);
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int lua_base_w_unregister_global(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    lb->api->unregister_global(lb->app, luaL_checkstring(L, 1), lua_base_id_arg(L, 2));
    return 0;
}

/* tessera.singleton("Name", "Class", function(ok, holder) ... end) */
static int lua_base_w_singleton(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    const char *name = luaL_checkstring(L, 1);
    const char *class_name = luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    lua_base_callback *callback = lua_base_keep(lb, L, 3);
    if (lb->api->singleton(lb->app, name, class_name, lua_base_on_singleton, callback) != 0) {
        lua_base_forget(callback);
        return luaL_error(L, "singleton('%s', '%s') refused (see the log line before this one)", name, class_name);
    }
    return 0;
}

static tessera_event_scope lua_base_scope_arg(lua_State *L, int idx) {
    static const char *const names[] = {"server", "viewers", "space", "everyone", "servers", NULL};
    return (tessera_event_scope)luaL_checkoption(L, idx, NULL, names);
}

/* tessera.fire_event("event", {fields}, "scope"[, source]) */
static int lua_base_w_fire_event(lua_State *L) {
    lua_base *lb = lua_base_of(L);
    const char *name = luaL_checkstring(L, 1);
    const entity_def_method *event = lua_base_event_arg(lb, L, name);
    tessera_event_scope scope = lua_base_scope_arg(L, 3);
    tessera_base *source = lua_isnoneornil(L, 4) ? NULL : lua_base_arg(lb, L, 4);
    tessera_args *fields = lua_base_args(L, event, 0, 0, lua_isnoneornil(L, 2) ? 0 : 2);
    int rc = lb->api->fire_event(lb->app, source, name, fields, scope);
    lb->api->args->free(fields);
    if (rc != 0) return luaL_error(L, "fire_event('%s') refused (see the log line before this one)", name);
    return 0;
}

static int lua_base_w_log(lua_State *L) { return lua_base_log_text(L, 1, TESSERA_LOG_INFO, NULL); }
static int lua_base_w_warn(lua_State *L) { return lua_base_log_text(L, 1, TESSERA_LOG_WARN, NULL); }
static int lua_base_w_debug(lua_State *L) { return lua_base_log_text(L, 1, TESSERA_LOG_DEBUG, NULL); }

static const luaL_Reg lua_base_world[] = {
    {"now_ms", lua_base_w_now_ms},
    {"wall_ms", lua_base_w_wall_ms},
    {"random", lua_base_w_random},
    {"setting", lua_base_w_setting},
    {"resolve", lua_base_w_resolve},
    {"stopping", lua_base_w_stopping},
    {"find_by_class", lua_base_w_find_by_class},
    {"create_base", lua_base_w_create_base},
    {"load_base", lua_base_w_load_base},
    {"register_global", lua_base_w_register_global},
    {"find_global", lua_base_w_find_global},
    {"unregister_global", lua_base_w_unregister_global},
    {"singleton", lua_base_w_singleton},
    {"fire_event", lua_base_w_fire_event},
    {"log", lua_base_w_log},
    {"warn", lua_base_w_warn},
    {"debug", lua_base_w_debug},
    {NULL, NULL},
};

/* ---- trampolines ----------------------------------------------------------------------------- */

static lua_base *lua_base_from(const tessera_base_context *ctx) { return base_game_lua(ctx->app); }

static lua_base_class *lua_base_begin(lua_base *lb, tessera_base *base, const char *hook) {
    lua_State *L = lb->L;
    lua_base_class *cls = lua_base_class_named(lb, lb->api->class_name(base));
    if (!cls || cls->rules_ref == LUA_NOREF) return NULL;
    lua_rawgeti(L, LUA_REGISTRYINDEX, cls->rules_ref);
    if (lua_getfield(L, -1, hook) != LUA_TFUNCTION) {
        lua_pop(L, 2);
        return NULL;
    }
    lua_remove(L, -2);
    lua_base_push(lb, base);
    return cls;
}

static void lua_base_finish(lua_base *lb, lua_base_class *cls, const char *hook, tessera_base *base, int nargs) {
    uint64_t outer_id = lb->hooked_id;
    tessera_base *outer = lb->hooked;
    lb->hooked_id = lb->api->handle(base);
    lb->hooked = base;
    lua_runtime_call(lb->rt, 1 + nargs, 0, cls->def->name, hook, lb->hooked_id, NULL, 0);
    lb->hooked_id = outer_id;
    lb->hooked = outer;
}

#define LUA_BASE_HOOK0(hook)                                                                \
    static void lua_base_hook_##hook(const tessera_base_context *ctx, tessera_base *base) { \
        lua_base *lb = lua_base_from(ctx);                                                  \
        lua_base_class *cls = lua_base_begin(lb, base, #hook);                              \
        if (cls) lua_base_finish(lb, cls, #hook, base, 0);                                  \
    }
LUA_BASE_HOOK0(created)
LUA_BASE_HOOK0(destroyed)
LUA_BASE_HOOK0(client_enabled)

static void lua_base_hook_written(const tessera_base_context *ctx, tessera_base *base, bool ok, const char *detail) {
    lua_base *lb = lua_base_from(ctx);
    lua_base_class *cls = lua_base_begin(lb, base, "written");
    if (!cls) return;
    lua_pushboolean(lb->L, ok);
    lua_pushstring(lb->L, detail ? detail : "");
    lua_base_finish(lb, cls, "written", base, 2);
}

static void lua_base_hook_call_failed(const tessera_base_context *ctx, tessera_base *base, tessera_handle target,
                                      tessera_part part, const char *method_name) {
    lua_base *lb = lua_base_from(ctx);
    lua_base_class *cls = lua_base_begin(lb, base, "call_failed");
    if (!cls) return;
    static const char *const parts[] = {"base", "cell", "client"};
    lua_pushinteger(lb->L, (lua_Integer)target);
    lua_pushstring(lb->L, (unsigned)part < 3 ? parts[part] : "?");
    lua_pushstring(lb->L, method_name ? method_name : "");
    lua_base_finish(lb, cls, "call_failed", base, 3);
}

static void lua_base_hook_handover_refused(const tessera_base_context *ctx, tessera_base *base, tessera_handle target,
                                           const char *rule) {
    lua_base *lb = lua_base_from(ctx);
    lua_base_class *cls = lua_base_begin(lb, base, "handover_refused");
    if (!cls) return;
    lua_pushinteger(lb->L, (lua_Integer)target);
    lua_pushstring(lb->L, rule ? rule : "");
    lua_base_finish(lb, cls, "handover_refused", base, 2);
}

static void lua_base_hook_method(const tessera_base_context *ctx, tessera_base *base, const char *method_name,
                                 tessera_handle caller, const tessera_args *args) {
    lua_base *lb = lua_base_from(ctx);
    lua_base_class *cls = lua_base_begin(lb, base, method_name);
    if (!cls) {
        lb->api->log(lb->app, TESSERA_LOG_WARN, base, "lua: no base function '%s': the call is dropped", method_name);
        return;
    }
    const entity_def_method *method = entity_def_class_find_method(cls->def, ENTITY_DEF_PART_BASE, method_name);
    lua_pushinteger(lb->L, (lua_Integer)caller);
    int count = method ? lua_values_push_args(lb->L, method, game_args_state(args)) : 0;
    lua_base_finish(lb, cls, method_name, base, 1 + count);
}

static void lua_base_hook_timer(const tessera_base_context *ctx, tessera_base *base, uint64_t timer_id, uint32_t tag,
                                uint64_t user_data) {
    lua_base *lb = lua_base_from(ctx);
    lua_base_class *cls = lua_base_begin(lb, base, "timer");
    if (!cls) return;
    lua_pushinteger(lb->L, (lua_Integer)timer_id);
    lua_pushinteger(lb->L, tag);
    lua_pushinteger(lb->L, (lua_Integer)user_data);
    lua_base_finish(lb, cls, "timer", base, 3);
}

/* ---- game.lua -------------------------------------------------------------------------------- */

static int lua_base_call_game(lua_base *lb, const char *name, char *err, size_t errlen) {
    lua_State *L = lb->L;
    if (lb->game_ref == LUA_NOREF) return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, lb->game_ref);
    if (lua_getfield(L, -1, name) != LUA_TFUNCTION) {
        lua_pop(L, 2);
        return 0;
    }
    lua_remove(L, -2);
    return lua_runtime_call(lb->rt, 0, 0, "game", name, 0, err, errlen);
}

static void lua_base_listener(const tessera_base_context *ctx, const char *event, tessera_handle source,
                              const tessera_args *fields, void *user_data) {
    (void)user_data;
    lua_base *lb = lua_base_from(ctx);
    lua_State *L = lb->L;
    if (lb->game_ref == LUA_NOREF) return;
    int top = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, lb->game_ref);
    if (lua_getfield(L, -1, "events") != LUA_TTABLE || lua_getfield(L, -1, event) != LUA_TFUNCTION) {
        lua_settop(L, top);
        return;
    }
    lua_replace(L, top + 1);
    lua_settop(L, top + 1);
    const entity_def_method *def = entity_def_registry_find_event(lb->definitions, event);
    lua_pushstring(L, event);
    lua_pushinteger(L, (lua_Integer)source);
    if (def)
        lua_values_push_named(L, def, game_args_state(fields));
    else
        lua_newtable(L);
    lua_runtime_call(lb->rt, 3, 0, "game.events", event, 0, NULL, 0);
}

/* Listens to the events game.lua's base.events names (each once). A reload
 * naming a new one is refused: listeners are made at start. */
static int lua_base_listen(lua_base *lb, int game_table, bool at_start, char *err, size_t errlen) {
    lua_State *L = lb->L;
    int top = lua_gettop(L);
    if (!game_table || lua_getfield(L, game_table, "events") != LUA_TTABLE) {
        lua_settop(L, top);
        return 0;
    }
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        const char *name = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        bool known = false;
        for (size_t i = 0; name && i < lb->listened_count; i++) known |= strcmp(lb->listened[i], name) == 0;
        if (name && !known) {
            if (!at_start || lb->listened_count == LUA_BASE_MAX_LISTENERS ||
                lb->api->listen_event(lb->app, name, lua_base_listener, NULL) != 0) {
                snprintf(err, errlen, "game.lua: cannot listen to '%s' (%s)", name,
                         at_start ? "no such event, or too many listeners" : "new listeners need a restart");
                lua_settop(L, top);
                return -1;
            }
            snprintf(lb->listened[lb->listened_count++], LUA_BASE_NAME_MAX, "%s", name);
        }
        lua_pop(L, 1);
    }
    lua_settop(L, top);
    return 0;
}

/* ---- generations ----------------------------------------------------------------------------- */

/* Pushes generation `generation`'s base table of `class_name` (NULL:
 * game.lua's), or nil. */
static void lua_base_rules_in(lua_State *L, int generation, const char *class_name) {
    if (class_name) {
        lua_getfield(L, generation, "classes");
        lua_getfield(L, -1, class_name);
        lua_remove(L, -2);
    } else {
        lua_getfield(L, generation, "game");
    }
    if (lua_istable(L, -1))
        lua_getfield(L, -1, "base");
    else
        lua_pushnil(L);
    lua_remove(L, -2);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        lua_pushnil(L);
    }
}

/* Points every registered class and game.lua at the generation on top. */
static void lua_base_take_generation(lua_base *lb) {
    lua_State *L = lb->L;
    int generation = lua_gettop(L);
    for (size_t i = 0; i < lb->class_count; i++) {
        lua_base_class *cls = &lb->classes[i];
        if (cls->rules_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, cls->rules_ref);
        cls->rules_ref = LUA_NOREF;
        if (!cls->cls) continue;
        lua_base_rules_in(L, generation, cls->def->name);
        cls->rules_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    if (lb->game_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, lb->game_ref);
    lua_base_rules_in(L, generation, NULL);
    lb->game_ref = lua_isnil(L, -1) ? (lua_pop(L, 1), LUA_NOREF) : luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, generation);
    lua_runtime_install_generation(lb->rt);
}

static void lua_base_build_metatable(lua_base *lb, lua_base_class *cls) {
    lua_State *L = lb->L;
    lua_createtable(L, 0, 6);
    int metatable = lua_gettop(L);
    lua_pushboolean(L, 1);
    lua_setfield(L, metatable, "__base");
    /* getmetatable() from a script gets this, not the table: no script can
     * change how entities read and write. */
    lua_pushliteral(L, "locked");
    lua_setfield(L, metatable, "__metatable");
    lua_pushstring(L, cls->def->name);
    lua_setfield(L, metatable, "__name");
    lua_createtable(L, 0, (int)cls->def->property_count);
    /* What the base holds: its BASE properties, and the persistent ones
     * (those it loads and saves; a cell property's value there is the one
     * last saved, or set before its cell part is made). */
    for (size_t i = 0; i < cls->def->property_count; i++) {
        if (!cls->def->properties[i].audience.on_base && !cls->def->properties[i].persistent) continue;
        lua_pushinteger(L, (lua_Integer)i);
        lua_setfield(L, -2, cls->def->properties[i].name);
    }
    int properties = lua_gettop(L);
    lua_newtable(L);
    lua_pushlightuserdata(L, lb);
    luaL_setfuncs(L, lua_base_methods, 1);
    int methods = lua_gettop(L);
    for (int k = 0; k < 2; k++) {
        lua_pushlightuserdata(L, lb);
        lua_pushvalue(L, properties);
        lua_pushvalue(L, methods);
        lua_pushcclosure(L, k == 0 ? lua_base_object_index : lua_base_object_newindex, 3);
        lua_setfield(L, metatable, k == 0 ? "__index" : "__newindex");
    }
    lua_pushcfunction(L, lua_base_object_tostring);
    lua_setfield(L, metatable, "__tostring");
    lua_pushcfunction(L, lua_base_object_equal);
    lua_setfield(L, metatable, "__eq");
    lua_settop(L, metatable);
    cls->metatable_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* Registers every class whose script in the generation on top has a base
 * table. */
static int lua_base_register_classes(lua_base *lb, char *err, size_t errlen) {
    lua_State *L = lb->L;
    int generation = lua_gettop(L);
    const tessera_base_hooks hooks = {
        .created = lua_base_hook_created,
        .destroyed = lua_base_hook_destroyed,
        .client_enabled = lua_base_hook_client_enabled,
        .written = lua_base_hook_written,
        .call_failed = lua_base_hook_call_failed,
        .handover_refused = lua_base_hook_handover_refused,
        .method = lua_base_hook_method,
        .timer = lua_base_hook_timer,
    };
    for (size_t i = 0; i < lb->class_count; i++) {
        lua_base_class *cls = &lb->classes[i];
        lua_base_rules_in(L, generation, cls->def->name);
        bool scripted = lua_istable(L, -1);
        lua_settop(L, generation);
        if (!scripted) continue;
        cls->cls = lb->api->register_class(lb->app, cls->def->name, &hooks);
        if (!cls->cls) {
            snprintf(err, errlen,
                     "%s.lua: class %s could not be registered on the base side (a C module registered "
                     "it already: the log says so)",
                     cls->def->name, cls->def->name);
            return -1;
        }
    }
    return 0;
}

/* Checks a reloaded generation (on top) keeps a base table for every
 * registered class. */
static int lua_base_check_generation(lua_base *lb, char *err, size_t errlen) {
    lua_State *L = lb->L;
    int generation = lua_gettop(L);
    for (size_t i = 0; i < lb->class_count; i++) {
        if (!lb->classes[i].cls) continue;
        lua_base_rules_in(L, generation, lb->classes[i].def->name);
        bool scripted = lua_istable(L, -1);
        lua_settop(L, generation);
        if (!scripted) {
            snprintf(err, errlen, "%s.lua: no base table any more (a class keeps its rules until a restart)",
                     lb->classes[i].def->name);
            return -1;
        }
    }
    return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

lua_base *lua_base_open(tessera_baseapp *app, const tessera_base_api *api, const entity_def_registry *definitions,
                        const char *folder, const lua_runtime_limits *limits, char *err, size_t errlen) {
    err[0] = '\0';
    lua_runtime *rt = lua_runtime_create(folder, "base", limits, err, errlen);
    if (!rt) return NULL;
    lua_base *lb = xcalloc(1, sizeof *lb);
    lb->rt = rt;
    lb->L = lua_runtime_state(rt);
    lb->app = app;
    lb->api = api;
    lb->definitions = definitions;
    lb->game_ref = LUA_NOREF;
    lb->class_count = entity_def_registry_class_count(definitions);
    lb->classes = xcalloc(lb->class_count ? lb->class_count : 1, sizeof *lb->classes);
    lb->script_names = xcalloc(lb->class_count ? lb->class_count : 1, sizeof *lb->script_names);
    for (size_t i = 0; i < lb->class_count; i++) {
        const entity_def_class *def = entity_def_registry_class(definitions, (uint16_t)i);
        lb->classes[def->id] = (lua_base_class){def, NULL, LUA_NOREF, LUA_NOREF};
        if (lua_runtime_has_class_script(rt, def->name)) lb->script_names[lb->script_count++] = def->name;
    }
    if (lb->script_count == 0 && !lua_runtime_has_game_script(rt)) {
        lua_base_free(lb);
        return NULL;
    }
    lua_State *L = lb->L;
    lua_newtable(L);
    lua_pushlightuserdata(L, lb);
    luaL_setfuncs(L, lua_base_world, 1);
    lua_pushliteral(L, "base");
    lua_setfield(L, -2, "side");
    /* tessera.kept: shared by every generation (lua_cell.c says how). */
    lua_newtable(L);
    lua_setfield(L, -2, "kept");
    lua_runtime_set_global(rt, "tessera");
    if (lua_runtime_load_generation(rt, lb->script_names, lb->script_count, err, errlen) != 0 ||
        lua_base_register_classes(lb, err, errlen) != 0) {
        lua_settop(L, 0);
        lua_base_free(lb);
        return NULL;
    }
    for (size_t i = 0; i < lb->class_count; i++) lua_base_build_metatable(lb, &lb->classes[i]);
    lua_base_rules_in(L, 1, NULL);
    int rc = lua_base_listen(lb, lua_istable(L, -1) ? lua_gettop(L) : 0, true, err, errlen);
    lua_pop(L, 1);
    if (rc != 0) {
        lua_settop(L, 0);
        lua_base_free(lb);
        return NULL;
    }
    lua_base_take_generation(lb);
    lua_settop(L, 0);
    return lb;
}

int lua_base_start(lua_base *lb, char *err, size_t errlen) { return lua_base_call_game(lb, "init", err, errlen); }

int lua_base_reload(lua_base *lb, char *err, size_t errlen) {
    uint64_t started = clock_monotonic_us();
    lua_State *L = lb->L;
    int top = lua_gettop(L);
    if (lua_runtime_load_generation(lb->rt, lb->script_names, lb->script_count, err, errlen) != 0 ||
        lua_base_check_generation(lb, err, errlen) != 0) {
        lua_settop(L, top);
        lua_runtime_count_reload(lb->rt, false, clock_monotonic_us() - started);
        return -1;
    }
    int generation = lua_gettop(L);
    lua_base_rules_in(L, generation, NULL);
    int game = lua_istable(L, -1) ? lua_gettop(L) : 0;
    if (lua_base_listen(lb, game, false, err, errlen) != 0 ||
        (game && lua_getfield(L, game, "init") == LUA_TFUNCTION &&
         lua_runtime_call(lb->rt, 0, 0, "game", "init", 0, err, errlen) != 0)) {
        lua_settop(L, top);
        lua_runtime_count_reload(lb->rt, false, clock_monotonic_us() - started);
        return -1;
    }
    lua_settop(L, generation);
    lua_base_take_generation(lb);
    lua_settop(L, top);
    lua_runtime_count_reload(lb->rt, true, clock_monotonic_us() - started);
    return 0;
}

void lua_base_tick(lua_base *lb, uint64_t now_ms) {
    lua_runtime_collect(lb->rt);
    /* Every 10 game ticks (10 s): the objects of bases gone. */
    lua_runtime_sweep_objects(lb->rt, lua_base_alive, lb, 10);
    if (lua_runtime_poll(lb->rt, now_ms)) {
        char err[400];
        if (lua_base_reload(lb, err, sizeof err) == 0)
            log_info("lua: the base scripts of %s reloaded (generation %u) in %.1f ms", lua_runtime_folder(lb->rt),
                     lua_runtime_generation(lb->rt), (double)lua_runtime_get_figures(lb->rt).last_reload_us / 1000.0);
        else
            log_warn("lua: reload refused, the old code keeps running: %s", err);
    }
    lua_base_call_game(lb, "tick", NULL, 0);
}

void lua_base_request_reload(lua_base *lb) { lua_runtime_request_reload(lb->rt); }
lua_runtime *lua_base_runtime(lua_base *lb) { return lb->rt; }

size_t lua_base_class_count(const lua_base *lb) {
    size_t count = 0;
    for (size_t i = 0; i < lb->class_count; i++) count += lb->classes[i].cls != NULL;
    return count;
}

void lua_base_free(lua_base *lb) {
    if (!lb) return;
    for (lua_base_callback *callback = lb->callbacks, *next; callback; callback = next) {
        next = callback->next;
        luaL_unref(lb->L, LUA_REGISTRYINDEX, callback->function_ref);
        free(callback);
    }
    lb->callbacks = NULL;
    free(lb->classes);
    free(lb->script_names);
    lua_runtime_free(lb->rt);
    free(lb);
}
