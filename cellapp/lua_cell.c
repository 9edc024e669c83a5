/* lua_cell.c -- owns the cell side's scripted classes: what each declared
 * (its per-entity fields, thinks and inputs, fixed at start), the entity
 * objects scripts are handed, the `tessera` table of world services, and
 * the trampolines through which the engine's hooks reach the current
 * generation's functions. Everything goes through the tessera_cell_api a
 * C module gets, so a Lua class and a C class obey the same rules.
 *
 * An entity object is a userdata holding the entity's id, never its
 * pointer: it is resolved at each use, so an object kept across ticks
 * reads "gone" rather than freed memory once its entity is destroyed or
 * has moved to another cellapp. One object per entity is cached (weakly),
 * so hooks do not allocate.
 */
#include "lua_cell.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "entity_state.h"
#include "game_args.h"
#include "game_host.h"
#include "clock.h"
#include "log.h"
#include "lua_values.h"
#include "method_call.h"

#define LUA_CELL_MAX_THINKS 16
#define LUA_CELL_MAX_INPUTS 32
#define LUA_CELL_MAX_LISTENERS 64
#define LUA_CELL_NAME_MAX 48
/* A script's string field holds at most this many bytes. */
#define LUA_CELL_FIELD_STRING_MAX 255

typedef struct lua_cell_class {
    const entity_def_class *def;
    tessera_class *cls; /* registered here: its rules are a script */
    int rules_ref;      /* the current generation's `cell` table */
    int metatable_ref;  /* entity objects of this class */
    tessera_field *fields;
    size_t field_count, data_size;
    char thinks[LUA_CELL_MAX_THINKS][LUA_CELL_NAME_MAX];
    size_t think_count;
    struct lua_cell_input {
        char name[LUA_CELL_NAME_MAX];
        tessera_field_type type;
    } inputs[LUA_CELL_MAX_INPUTS];
    size_t input_count;
} lua_cell_class;

struct lua_cell {
    lua_runtime *rt;
    lua_State *L;
    tessera_cellapp *app;
    const tessera_cell_api *api;
    const entity_def_registry *definitions;
    lua_cell_class *classes; /* by entity_def_class id */
    size_t class_count;
    const char **script_names; /* every class with a script file */
    size_t script_count;
    int game_ref; /* game.lua's cell table, or LUA_NOREF */
    char listened[LUA_CELL_MAX_LISTENERS][LUA_CELL_NAME_MAX];
    size_t listened_count;
};

/* An entity object's userdata. */
typedef struct lua_cell_object {
    uint64_t id;
    lua_cell_class *cls;
} lua_cell_object;

static lua_cell *lua_cell_of(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* ---- entity objects ------------------------------------------------------------ */

/* The object at `idx`, or NULL when it is not an entity object. */
static lua_cell_object *lua_cell_object_at(lua_State *L, int idx) {
    lua_cell_object *object = lua_touserdata(L, idx);
    if (!object || !lua_getmetatable(L, idx)) return NULL;
    bool entity = lua_getfield(L, -1, "__entity") == LUA_TBOOLEAN;
    lua_pop(L, 2);
    return entity ? object : NULL;
}

static uint64_t lua_cell_object_id(lua_State *L, int idx) {
    lua_cell_object *object = lua_cell_object_at(L, idx);
    return object ? object->id : 0;
}

/* Pushes the object of the entity `id` (of `cls`): the cached one, or a new
 * one. */
static void lua_cell_push_object(lua_cell *lc, uint64_t id, lua_cell_class *cls) {
    lua_State *L = lc->L;
    if (lua_runtime_push_object(lc->rt, id)) return;
    lua_cell_object *object = lua_newuserdatauv(L, sizeof *object, 0);
    object->id = id;
    object->cls = cls;
    lua_rawgeti(L, LUA_REGISTRYINDEX, cls->metatable_ref);
    lua_setmetatable(L, -2);
    lua_runtime_keep_object(lc->rt, id);
}

/* Whether entity `id` is still on this cellapp (its cached object stays). */
static bool lua_cell_alive(void *context, uint64_t id) {
    lua_cell *lc = context;
    return lc->api->resolve(lc->app, id) != NULL;
}

static lua_cell_class *lua_cell_class_of(lua_cell *lc, const tessera_entity *entity) {
    const entity_def_class *def = entity_def_registry_find_class(lc->definitions, lc->api->class_name(entity));
    return def && def->id < lc->class_count ? &lc->classes[def->id] : NULL;
}

/* Pushes the object of `entity`, or nil for NULL. */
static void lua_cell_push_entity(lua_cell *lc, tessera_entity *entity) {
    lua_cell_class *cls = entity ? lua_cell_class_of(lc, entity) : NULL;
    if (!cls) {
        lua_pushnil(lc->L);
        return;
    }
    lua_cell_push_object(lc, lc->api->handle(entity), cls);
}

/* The entity the object at `idx` stands for, or a Lua error: not an
 * object, or its entity is gone from this cellapp. */
static tessera_entity *lua_cell_entity_arg(lua_cell *lc, lua_State *L, int idx) {
    lua_cell_object *object = lua_cell_object_at(L, idx);
    if (!object) lua_values_raise(L, "argument %d: an entity expected, got a %s", idx, luaL_typename(L, idx));
    tessera_entity *entity = lc->api->resolve(lc->app, object->id);
    if (!entity)
        lua_values_raise(L, "entity %I (%s) is gone from this cellapp (destroyed, or moved away)",
                         (lua_Integer)object->id, object->cls->def->name);
    return entity;
}

/* An entity given as an object or an id, resolved here; NULL (no error)
 * when it is not here. */
static tessera_entity *lua_cell_entity_or_id(lua_cell *lc, lua_State *L, int idx) {
    uint64_t id = lua_type(L, idx) == LUA_TNUMBER ? (uint64_t)lua_tointeger(L, idx) : lua_cell_object_id(L, idx);
    if (!id) lua_values_raise(L, "argument %d: an entity or its id expected, got a %s", idx, luaL_typename(L, idx));
    return lc->api->resolve(lc->app, id);
}

static uint64_t lua_cell_id_arg(lua_State *L, int idx) {
    if (lua_type(L, idx) == LUA_TNUMBER) return (uint64_t)luaL_checkinteger(L, idx);
    uint64_t id = lua_cell_object_id(L, idx);
    if (!id) lua_values_raise(L, "argument %d: an entity or its id expected, got a %s", idx, luaL_typename(L, idx));
    return id;
}

/* ---- properties and fields ------------------------------------------------------------ */

static void lua_cell_push_property(lua_cell *lc, tessera_entity *entity, const entity_def_property *property,
                                   uint32_t index, const entity_def_type *type) {
    lua_State *L = lc->L;
    const tessera_cell_api *api = lc->api;
    int id = property->id;
    lua_values_scalar value = {0};
    int rc = -1;
    switch (type->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64:
            rc = api->get_int(entity, id, index, &value.i);
            break;
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64:
            rc = api->get_uint(entity, id, index, &value.u);
            break;
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE:
            rc = api->get_float(entity, id, index, &value.f);
            break;
        case ENTITY_DEF_BOOL:
            rc = api->get_bool(entity, id, index, &value.b);
            break;
        case ENTITY_DEF_STRING:
            rc = api->get_string(entity, id, index, &value.s, &value.length);
            break;
        case ENTITY_DEF_ENTITY:
            rc = api->get_handle(entity, id, index, &value.h);
            break;
        default:
            break;
    }
    if (rc != 0)
        lua_values_raise(L, "%s.%s: a %s is not reachable from game code", property->name, property->name,
                         entity_def_kind_name(type->kind));
    lua_values_push_scalar(L, type->kind, &value);
}

static void lua_cell_store_property(lua_cell *lc, tessera_entity *entity, const entity_def_class *def,
                                    const entity_def_property *property, uint32_t index, const entity_def_type *type,
                                    int value_index) {
    lua_State *L = lc->L;
    const tessera_cell_api *api = lc->api;
    char what[160];
    snprintf(what, sizeof what, "%s.%s", def->name, property->name);
    lua_values_scalar value;
    lua_values_check(L, value_index, type, what, lua_cell_object_id, &value);
    int id = property->id;
    int rc = -1;
    switch (type->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64:
            rc = api->set_int(entity, id, index, value.i);
            break;
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64:
            rc = api->set_uint(entity, id, index, value.u);
            break;
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE:
            rc = api->set_float(entity, id, index, value.f);
            break;
        case ENTITY_DEF_BOOL:
            rc = api->set_bool(entity, id, index, value.b);
            break;
        case ENTITY_DEF_STRING:
            rc = api->set_string(entity, id, index, value.s, value.length);
            break;
        case ENTITY_DEF_ENTITY:
            rc = api->set_handle(entity, id, index, value.h);
            break;
        default:
            lua_values_raise(L, "%s: a %s is not reachable from game code", what, entity_def_kind_name(type->kind));
    }
    if (rc != 0)
        lua_values_raise(L, "%s: the engine refused the value (%s)", what,
                         api->is_real(entity) ? "see the log line before this one" : "this is a ghost: read-only");
}

/* A vector3 (a field, an input's value) is a table {x = , y = , z = }. */
static void lua_cell_push_vector(lua_State *L, const float v[3]) {
    static const char *const names[] = {"x", "y", "z"};
    lua_createtable(L, 0, 3);
    for (int c = 0; c < 3; c++) {
        lua_pushnumber(L, v[c]);
        lua_setfield(L, -2, names[c]);
    }
}

/* The vector3 at `idx`: a table with x, y and z (or 1, 2 and 3), numbers
 * all; anything else raises an error naming `what`. */
static void lua_cell_vector_arg(lua_State *L, int idx, const char *what, float v[3]) {
    static const char *const names[] = {"x", "y", "z"};
    if (!lua_istable(L, idx))
        lua_values_raise(L, "field '%s': a %s is not a vector3 table {x = , y = , z = }", what, luaL_typename(L, idx));
    for (int c = 0; c < 3; c++) {
        if (lua_getfield(L, idx, names[c]) == LUA_TNIL) {
            lua_pop(L, 1);
            lua_rawgeti(L, idx, c + 1);
        }
        if (lua_type(L, -1) != LUA_TNUMBER)
            lua_values_raise(L, "field '%s': its %s is a %s, not a number", what, names[c], luaL_typename(L, -1));
        v[c] = (float)lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
}

static void lua_cell_push_field(lua_cell *lc, tessera_entity *entity, const tessera_field *field) {
    lua_State *L = lc->L;
    const char *data = lc->api->data(entity);
    if (!data) lua_values_raise(L, "field '%s': fields live on the real, and this is a ghost", field->name);
    const char *at = data + field->offset;
    switch (field->type) {
        case TESSERA_FIELD_INT32: {
            int32_t v;
            memcpy(&v, at, sizeof v);
            lua_pushinteger(L, v);
            break;
        }
        case TESSERA_FIELD_UINT32: {
            uint32_t v;
            memcpy(&v, at, sizeof v);
            lua_pushinteger(L, v);
            break;
        }
        case TESSERA_FIELD_INT64:
        case TESSERA_FIELD_UINT64:
        case TESSERA_FIELD_HANDLE: {
            int64_t v;
            memcpy(&v, at, sizeof v);
            lua_pushinteger(L, v);
            break;
        }
        case TESSERA_FIELD_FLOAT: {
            float v;
            memcpy(&v, at, sizeof v);
            lua_pushnumber(L, v);
            break;
        }
        case TESSERA_FIELD_DOUBLE: {
            double v;
            memcpy(&v, at, sizeof v);
            lua_pushnumber(L, v);
            break;
        }
        case TESSERA_FIELD_BOOL:
            lua_pushboolean(L, *at != 0);
            break;
        case TESSERA_FIELD_STRING:
            lua_pushstring(L, at);
            break;
        case TESSERA_FIELD_VECTOR3: {
            float v[3];
            memcpy(v, at, sizeof v);
            lua_cell_push_vector(L, v);
            break;
        }
    }
}

static void lua_cell_store_field(lua_cell *lc, tessera_entity *entity, const tessera_field *field, int value_index) {
    lua_State *L = lc->L;
    char *data = lc->api->data(entity);
    if (!data) lua_values_raise(L, "field '%s': fields live on the real, and this is a ghost", field->name);
    char *at = data + field->offset;
    int is_integer = 0;
    switch (field->type) {
        case TESSERA_FIELD_INT32:
        case TESSERA_FIELD_UINT32:
        case TESSERA_FIELD_INT64:
        case TESSERA_FIELD_UINT64:
        case TESSERA_FIELD_HANDLE: {
            lua_Integer v = field->type == TESSERA_FIELD_HANDLE ? (lua_Integer)lua_cell_object_id(L, value_index) : 0;
            if (!v)
                v = lua_tointegerx(L, value_index, &is_integer);
            else
                is_integer = 1;
            if (!is_integer && !(field->type == TESSERA_FIELD_HANDLE && lua_isnil(L, value_index)))
                lua_values_raise(L, "field '%s': a %s is not an integer", field->name, luaL_typename(L, value_index));
            if ((field->type == TESSERA_FIELD_INT32 && (v < INT32_MIN || v > INT32_MAX)) ||
                (field->type == TESSERA_FIELD_UINT32 && (v < 0 || v > (lua_Integer)UINT32_MAX)))
                lua_values_raise(L, "field '%s': %I does not fit its type", field->name, v);
            if (field->type == TESSERA_FIELD_INT32) {
                int32_t narrow = (int32_t)v;
                memcpy(at, &narrow, sizeof narrow);
            } else if (field->type == TESSERA_FIELD_UINT32) {
                uint32_t narrow = (uint32_t)v;
                memcpy(at, &narrow, sizeof narrow);
            } else {
                int64_t wide = v;
                memcpy(at, &wide, sizeof wide);
            }
            break;
        }
        case TESSERA_FIELD_FLOAT:
        case TESSERA_FIELD_DOUBLE: {
            if (lua_type(L, value_index) != LUA_TNUMBER)
                lua_values_raise(L, "field '%s': a %s is not a number", field->name, luaL_typename(L, value_index));
            double v = lua_tonumber(L, value_index);
            if (field->type == TESSERA_FIELD_FLOAT) {
                float narrow = (float)v;
                memcpy(at, &narrow, sizeof narrow);
            } else {
                memcpy(at, &v, sizeof v);
            }
            break;
        }
        case TESSERA_FIELD_BOOL:
            if (!lua_isboolean(L, value_index))
                lua_values_raise(L, "field '%s': a %s is not a boolean", field->name, luaL_typename(L, value_index));
            *at = (char)lua_toboolean(L, value_index);
            break;
        case TESSERA_FIELD_STRING: {
            size_t length = 0;
            const char *text = lua_type(L, value_index) == LUA_TSTRING ? lua_tolstring(L, value_index, &length) : NULL;
            if (!text)
                lua_values_raise(L, "field '%s': a %s is not a string", field->name, luaL_typename(L, value_index));
            if (length >= field->size)
                lua_values_raise(L, "field '%s': %I bytes is longer than its %I", field->name, (lua_Integer)length,
                                 (lua_Integer)field->size - 1);
            memcpy(at, text, length);
            at[length] = '\0';
            break;
        }
        case TESSERA_FIELD_VECTOR3: {
            float v[3];
            lua_cell_vector_arg(L, value_index, field->name, v);
            memcpy(at, v, sizeof v);
            break;
        }
    }
}

/* __index: a property, a field, an engine method, then the class's own
 * functions (helpers a script defines in its cell table). */
static int lua_cell_object_index(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    lua_cell_object *object = lua_touserdata(L, 1);
    lua_cell_class *cls = object->cls;
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TNUMBER) {
        const entity_def_property *property = &cls->def->properties[lua_tointeger(L, -1)];
        tessera_entity *entity = lua_cell_entity_arg(lc, L, 1);
        if (!lua_values_is_scalar(&property->type))
            lua_values_raise(L, "%s.%s is an %s: read its elements with entity:get('%s[1]...')", cls->def->name,
                             property->name, entity_def_kind_name(property->type.kind), property->name);
        lua_cell_push_property(lc, entity, property, 0, &property->type);
        return 1;
    }
    lua_pop(L, 1);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(3)) == LUA_TNUMBER) {
        const tessera_field *field = &cls->fields[lua_tointeger(L, -1)];
        lua_cell_push_field(lc, lua_cell_entity_arg(lc, L, 1), field);
        return 1;
    }
    lua_pop(L, 1);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(4)) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    if (cls->rules_ref == LUA_NOREF) return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, cls->rules_ref);
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
}

/* __newindex: a property through its typed, range-checked setter, or a
 * field; anything else is an error (a script keeps no state of its own on
 * an entity: it would not travel). */
static int lua_cell_object_newindex(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    lua_cell_object *object = lua_touserdata(L, 1);
    lua_cell_class *cls = object->cls;
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TNUMBER) {
        const entity_def_property *property = &cls->def->properties[lua_tointeger(L, -1)];
        tessera_entity *entity = lua_cell_entity_arg(lc, L, 1);
        lua_cell_store_property(lc, entity, cls->def, property, 0, &property->type, 3);
        return 0;
    }
    lua_pop(L, 1);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(3)) == LUA_TNUMBER) {
        const tessera_field *field = &cls->fields[lua_tointeger(L, -1)];
        lua_cell_store_field(lc, lua_cell_entity_arg(lc, L, 1), field, 3);
        return 0;
    }
    return luaL_error(L,
                      "%s has no property or field '%s' (an entity keeps only what its definition and its fields "
                      "declare: nothing else would travel with it)",
                      cls->def->name, lua_tostring(L, 2) ? lua_tostring(L, 2) : "?");
}

/* Two objects of one entity (one kept by a script across a sweep, one made
 * since) are equal. */
static int lua_cell_object_equal(lua_State *L) {
    lua_cell_object *a = lua_cell_object_at(L, 1), *b = lua_cell_object_at(L, 2);
    lua_pushboolean(L, a && b && a->id == b->id);
    return 1;
}

static int lua_cell_object_tostring(lua_State *L) {
    lua_cell_object *object = lua_touserdata(L, 1);
    lua_pushfstring(L, "%s %I", object->cls->def->name, (lua_Integer)object->id);
    return 1;
}

/* ---- engine methods on entity objects ---------------------------------------------------- */

#define LUA_CELL_SELF()            \
    lua_cell *lc = lua_cell_of(L); \
    tessera_entity *self = lua_cell_entity_arg(lc, L, 1)

static int lua_cell_m_id(lua_State *L) {
    lua_cell_object *object = lua_cell_object_at(L, 1);
    if (!object) return luaL_error(L, "id: an entity expected");
    lua_pushinteger(L, (lua_Integer)object->id);
    return 1;
}

static int lua_cell_m_class_name(lua_State *L) {
    lua_cell_object *object = lua_cell_object_at(L, 1);
    if (!object) return luaL_error(L, "class_name: an entity expected");
    lua_pushstring(L, object->cls->def->name);
    return 1;
}

static int lua_cell_m_exists(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    lua_cell_object *object = lua_cell_object_at(L, 1);
    lua_pushboolean(L, object && lc->api->resolve(lc->app, object->id) != NULL);
    return 1;
}

static int lua_cell_m_is_real(lua_State *L) {
    LUA_CELL_SELF();
    lua_pushboolean(L, lc->api->is_real(self));
    return 1;
}

static int lua_cell_m_has_client(lua_State *L) {
    LUA_CELL_SELF();
    lua_pushboolean(L, lc->api->has_client(self));
    return 1;
}

static int lua_cell_m_position(lua_State *L) {
    LUA_CELL_SELF();
    float position[3], yaw = 0;
    lc->api->position(self, position, &yaw);
    lua_pushnumber(L, position[0]);
    lua_pushnumber(L, position[1]);
    lua_pushnumber(L, position[2]);
    lua_pushnumber(L, yaw);
    return 4;
}

static int lua_cell_m_tick(lua_State *L) {
    LUA_CELL_SELF();
    lua_pushinteger(L, lc->api->tick(self));
    return 1;
}

static uint64_t lua_cell_opt_unsigned(lua_State *L, int idx, const char *what) {
    lua_Integer value = luaL_optinteger(L, idx, 0);
    if (value < 0) lua_values_raise(L, "%s must not be negative", what);
    return (uint64_t)value;
}

static int lua_cell_m_add_timer(lua_State *L) {
    LUA_CELL_SELF();
    uint64_t delay = lua_cell_opt_unsigned(L, 2, "add_timer's delay_ms");
    uint64_t repeat = lua_cell_opt_unsigned(L, 3, "add_timer's repeat_ms");
    uint64_t tag = lua_cell_opt_unsigned(L, 4, "add_timer's tag");
    if (tag >= TESSERA_TIMER_TAG_LIMIT) return luaL_error(L, "add_timer: tag %I is too large", (lua_Integer)tag);
    uint64_t id = lc->api->add_timer(self, delay, repeat, (uint32_t)tag, (uint64_t)luaL_optinteger(L, 5, 0));
    if (!id) return luaL_error(L, "add_timer refused (see the log line before this one)");
    lua_pushinteger(L, (lua_Integer)id);
    return 1;
}

static int lua_cell_m_cancel_timer(lua_State *L) {
    LUA_CELL_SELF();
    lua_pushboolean(L, lc->api->cancel_timer(self, (uint64_t)luaL_checkinteger(L, 2)) == 0);
    return 1;
}

static int lua_cell_m_set_think(lua_State *L) {
    LUA_CELL_SELF();
    const char *name = luaL_checkstring(L, 2);
    if (lc->api->set_think(self, name, lua_cell_opt_unsigned(L, 3, "set_think's delay_ms")) != 0)
        return luaL_error(L, "set_think('%s') refused: declare it in the class's thinks list", name);
    return 0;
}

static int lua_cell_m_cancel_think(lua_State *L) {
    LUA_CELL_SELF();
    lua_pushboolean(L, lc->api->cancel_think(self, luaL_checkstring(L, 2)) == 0);
    return 1;
}

/* "box" (the default), "circle" or "sphere" (tessera_trap_shape). */
static tessera_trap_shape lua_cell_shape_arg(lua_State *L, int idx) {
    static const char *const names[] = {"box", "circle", "sphere", NULL};
    return (tessera_trap_shape)luaL_checkoption(L, idx, "box", names);
}

/* self:add_trap(tag, radius[, shape]) */
static int lua_cell_m_add_trap(lua_State *L) {
    LUA_CELL_SELF();
    uint64_t tag = lua_cell_opt_unsigned(L, 2, "add_trap's tag");
    double radius = luaL_checknumber(L, 3);
    uint32_t id = lc->api->add_trap_shaped(self, (uint32_t)tag, lua_cell_shape_arg(L, 4), (float)radius);
    if (!id) return luaL_error(L, "add_trap refused (see the log line before this one)");
    lua_pushinteger(L, id);
    return 1;
}

static int lua_cell_push_handles(lua_State *L, const tessera_handle *handles, size_t count);

#define LUA_CELL_FIND_MAX 1024

/* self:query(radius[, shape]): the ids of the entities around it. */
static int lua_cell_m_query(lua_State *L) {
    LUA_CELL_SELF();
    tessera_handle found[LUA_CELL_FIND_MAX];
    size_t count =
        lc->api->query_range(self, lua_cell_shape_arg(L, 3), (float)luaL_checknumber(L, 2), found, LUA_CELL_FIND_MAX);
    return lua_cell_push_handles(L, found, count < LUA_CELL_FIND_MAX ? count : LUA_CELL_FIND_MAX);
}

static void lua_cell_point_arg(lua_State *L, int idx, float point[3]) {
    for (int i = 0; i < 3; i++) point[i] = (float)luaL_checknumber(L, idx + i);
}

static int lua_cell_m_move_to_point(lua_State *L) {
    LUA_CELL_SELF();
    float point[3];
    lua_cell_point_arg(L, 2, point);
    uint32_t id = lc->api->move_to_point(self, point, (float)luaL_checknumber(L, 5), (float)luaL_optnumber(L, 6, 0),
                                         lua_toboolean(L, 7), (uint64_t)luaL_optinteger(L, 8, 0));
    if (!id) return luaL_error(L, "move_to_point refused (see the log line before this one)");
    lua_pushinteger(L, id);
    return 1;
}

static int lua_cell_m_move_to_entity(lua_State *L) {
    LUA_CELL_SELF();
    uint32_t id = lc->api->move_to_entity(self, lua_cell_id_arg(L, 2), (float)luaL_checknumber(L, 3),
                                          (float)luaL_optnumber(L, 4, 0), lua_toboolean(L, 5),
                                          (uint64_t)luaL_optinteger(L, 6, 0));
    if (!id) return luaL_error(L, "move_to_entity refused (see the log line before this one)");
    lua_pushinteger(L, id);
    return 1;
}

/* navigate returns the controller's id, or nil and why. */
static int lua_cell_m_navigate(lua_State *L) {
    LUA_CELL_SELF();
    float point[3];
    lua_cell_point_arg(L, 2, point);
    char why[200] = "";
    uint32_t id = lc->api->navigate(self, point, (float)luaL_checknumber(L, 5), (float)luaL_optnumber(L, 6, 0),
                                    lua_toboolean(L, 7), (uint64_t)luaL_optinteger(L, 8, 0), why, sizeof why);
    if (!id) {
        lua_pushnil(L);
        lua_pushstring(L, why);
        return 2;
    }
    lua_pushinteger(L, id);
    return 1;
}

static int lua_cell_m_turn_to(lua_State *L) {
    LUA_CELL_SELF();
    uint32_t id = lc->api->turn_to(self, (float)luaL_checknumber(L, 2), (float)luaL_checknumber(L, 3),
                                   (uint64_t)luaL_optinteger(L, 4, 0));
    if (!id) return luaL_error(L, "turn_to refused (see the log line before this one)");
    lua_pushinteger(L, id);
    return 1;
}

static int lua_cell_m_cancel_controller(lua_State *L) {
    LUA_CELL_SELF();
    lua_pushboolean(L, lc->api->cancel_controller(self, (uint32_t)luaL_checkinteger(L, 2)) == 0);
    return 1;
}

static int lua_cell_m_stop_movement(lua_State *L) {
    LUA_CELL_SELF();
    lc->api->stop_movement(self);
    return 0;
}

static int lua_cell_m_in_view(lua_State *L) {
    LUA_CELL_SELF();
    tessera_entity *target = lua_cell_entity_or_id(lc, L, 2);
    lua_pushboolean(L, target && lc->api->in_view(self, target));
    return 1;
}

static int lua_cell_m_distance(lua_State *L) {
    LUA_CELL_SELF();
    tessera_entity *target = lua_cell_entity_or_id(lc, L, 2);
    if (!target) return luaL_error(L, "distance: the other entity is not on this cellapp");
    lua_pushnumber(L, lc->api->distance(self, target));
    return 1;
}

/* Calls lua_values_fill_args under a protected call so the arguments can
 * be freed when a value is refused. */
typedef struct lua_cell_fill {
    const entity_def_method *method;
    entity_state *state;
    int first, count, named;
} lua_cell_fill;

static int lua_cell_fill_protected(lua_State *L) {
    lua_cell_fill *fill = lua_touserdata(L, 1);
    if (fill->named)
        lua_values_fill_named(L, fill->named, fill->method, fill->state, lua_cell_object_id);
    else
        lua_values_fill_args(L, fill->first, fill->count, fill->method, fill->state, lua_cell_object_id);
    return 0;
}

/* The arguments of `method` from the Lua values at [first, first+count)
 * (or the table at `named` when not 0), or a Lua error after freeing them:
 * the checks raise errors, so they run in a protected call of their own,
 * on copies of the values. */
static tessera_args *lua_cell_args(lua_State *L, const entity_def_method *method, int first, int count, int named) {
    lua_cell_fill fill = {method, method_call_args_create(method), 2, count, named ? 2 : 0};
    lua_pushcfunction(L, lua_cell_fill_protected);
    lua_pushlightuserdata(L, &fill);
    if (named) {
        lua_pushvalue(L, named);
    } else {
        for (int i = 0; i < count; i++) lua_pushvalue(L, first + i);
    }
    if (lua_pcall(L, 1 + (named ? 1 : count), 0, 0) != LUA_OK) {
        entity_state_free(fill.state);
        lua_error(L);
        return NULL;
    }
    return game_args_of(fill.state);
}

static const entity_def_method *lua_cell_method_arg(lua_State *L, const entity_def_class *def, entity_def_part part,
                                                    const char *name) {
    const entity_def_method *method = def ? entity_def_class_find_method(def, part, name) : NULL;
    if (!method)
        lua_values_raise(L, "%s has no %s method '%s'", def ? def->name : "(unknown class)", entity_def_part_name(part),
                         name);
    return method;
}

/* self:call_cell(target, "method", ...) */
static int lua_cell_m_call_cell(lua_State *L) {
    LUA_CELL_SELF();
    tessera_entity *target = lua_cell_entity_or_id(lc, L, 2);
    if (!target) return luaL_error(L, "call_cell: the target is not on this cellapp (call it through its base)");
    const char *name = luaL_checkstring(L, 3);
    lua_cell_class *cls = lua_cell_class_of(lc, target);
    const entity_def_method *method = lua_cell_method_arg(L, cls ? cls->def : NULL, ENTITY_DEF_PART_CELL, name);
    tessera_args *args = lua_cell_args(L, method, 4, lua_gettop(L) - 3, 0);
    int rc = lc->api->call_cell(self, target, name, args);
    lc->api->args->free(args);
    if (rc != 0) return luaL_error(L, "call_cell('%s') refused (see the log line before this one)", name);
    return 0;
}

/* self:call_base(target_id, "Class", "method", ...) and call_client. */
static int lua_cell_call_base_part(lua_State *L, tessera_part part) {
    LUA_CELL_SELF();
    uint64_t target = lua_cell_id_arg(L, 2);
    const char *class_name = luaL_checkstring(L, 3);
    const char *name = luaL_checkstring(L, 4);
    const entity_def_class *def = entity_def_registry_find_class(lc->definitions, class_name);
    const entity_def_method *method = lua_cell_method_arg(L, def, (entity_def_part)part, name);
    tessera_args *args = lua_cell_args(L, method, 5, lua_gettop(L) - 4, 0);
    int rc = lc->api->call_base(self, target, class_name, part, name, args);
    lc->api->args->free(args);
    if (rc != 0) return luaL_error(L, "call to %s.%s refused (see the log line before this one)", class_name, name);
    return 0;
}

static int lua_cell_m_call_base(lua_State *L) { return lua_cell_call_base_part(L, TESSERA_PART_BASE); }
static int lua_cell_m_call_client(lua_State *L) { return lua_cell_call_base_part(L, TESSERA_PART_CLIENT); }

/* self:call_clients("method", every_observer, ...) */
static int lua_cell_m_call_clients(lua_State *L) {
    LUA_CELL_SELF();
    const char *name = luaL_checkstring(L, 2);
    bool every = lua_toboolean(L, 3);
    lua_cell_class *cls = lua_cell_class_of(lc, self);
    const entity_def_method *method = lua_cell_method_arg(L, cls->def, ENTITY_DEF_PART_CLIENT, name);
    tessera_args *args = lua_cell_args(L, method, 4, lua_gettop(L) - 3, 0);
    int rc = lc->api->call_clients(self, name, args, every);
    lc->api->args->free(args);
    if (rc != 0) return luaL_error(L, "call_clients('%s') refused (see the log line before this one)", name);
    return 0;
}

static int lua_cell_m_set_lookup_name(lua_State *L) {
    LUA_CELL_SELF();
    if (lc->api->set_name(self, luaL_checkstring(L, 2)) != 0) return luaL_error(L, "set_lookup_name refused");
    return 0;
}

static int lua_cell_m_lookup_name(lua_State *L) {
    LUA_CELL_SELF();
    const char *name = lc->api->name(self);
    lua_pushstring(L, name ? name : "");
    return 1;
}

static int lua_cell_m_destroy(lua_State *L) {
    LUA_CELL_SELF();
    if (lc->api->destroy(self) != 0) return luaL_error(L, "destroy refused: a ghost, or a player's entity");
    return 0;
}

static int lua_cell_m_teleport(lua_State *L) {
    LUA_CELL_SELF();
    const char *space = luaL_optstring(L, 2, "");
    if (lc->api->teleport(self, space, (float)luaL_checknumber(L, 3), (float)luaL_checknumber(L, 4),
                          (float)luaL_checknumber(L, 5)) != 0)
        return luaL_error(L, "teleport refused (see the log line before this one)");
    return 0;
}

static int lua_cell_m_connect(lua_State *L) {
    LUA_CELL_SELF();
    int rc = lc->api->connect(self, luaL_checkstring(L, 2), luaL_checkstring(L, 3), luaL_checkstring(L, 4),
                              luaL_optstring(L, 5, ""), (uint32_t)luaL_optinteger(L, 6, 0),
                              (int32_t)luaL_optinteger(L, 7, -1));
    if (rc != 0) return luaL_error(L, "connect refused (see the log line before this one)");
    return 0;
}

/* self:fire_output(output, activator, parameter[, caller]): the caller is
 * the entity itself unless given (0: none). */
static int lua_cell_m_fire_output(lua_State *L) {
    LUA_CELL_SELF();
    uint64_t caller = lua_isnoneornil(L, 5) ? lc->api->handle(self) : lua_cell_id_arg(L, 5);
    size_t queued =
        lc->api->fire_output(self, luaL_checkstring(L, 2), lua_isnoneornil(L, 3) ? 0 : lua_cell_id_arg(L, 3), caller,
                             luaL_optstring(L, 4, ""));
    lua_pushinteger(L, (lua_Integer)queued);
    return 1;
}

/* Path access to arrays and structs: self:get("slots[2].count"). */
static const entity_def_property *lua_cell_path(lua_cell *lc, lua_State *L, tessera_entity *self, const char *path,
                                                uint32_t *index, const entity_def_type **type) {
    lua_cell_class *cls = lua_cell_class_of(lc, self);
    char head[LUA_CELL_NAME_MAX];
    size_t length = strcspn(path, "[.");
    snprintf(head, sizeof head, "%.*s", (int)(length < sizeof head ? length : sizeof head - 1), path);
    const entity_def_property *property = entity_def_class_find_property(cls->def, head);
    tessera_class *registered = lc->api->class_of(self);
    /* property_index takes the path within the property: "[2].count". */
    const char *within = path + length;
    if (!property || !registered || (!within[0] && !lua_values_is_scalar(&property->type)) ||
        lc->api->property_index(registered, property->id, within, index) != 0)
        lua_values_raise(L, "%s has no property element '%s' (a path such as 'slots[0].count': indices from 0)",
                         cls->def->name, path);
    *type = entity_state_value_type(cls->def, property->id, *index);
    if (!*type) lua_values_raise(L, "%s: '%s' names no value", cls->def->name, path);
    return property;
}

static int lua_cell_m_get(lua_State *L) {
    LUA_CELL_SELF();
    uint32_t index = 0;
    const entity_def_type *type = NULL;
    const entity_def_property *property = lua_cell_path(lc, L, self, luaL_checkstring(L, 2), &index, &type);
    lua_cell_push_property(lc, self, property, index, type);
    return 1;
}

static int lua_cell_m_set(lua_State *L) {
    LUA_CELL_SELF();
    uint32_t index = 0;
    const entity_def_type *type = NULL;
    const entity_def_property *property = lua_cell_path(lc, L, self, luaL_checkstring(L, 2), &index, &type);
    luaL_checkany(L, 3);
    lua_cell_store_property(lc, self, lua_cell_class_of(lc, self)->def, property, index, type, 3);
    return 0;
}

static int lua_cell_log_text(lua_State *L, int first, tessera_log_level level, tessera_entity *entity) {
    lua_cell *lc = lua_cell_of(L);
    int top = lua_gettop(L);
    luaL_Buffer buffer;
    luaL_buffinit(L, &buffer);
    for (int i = first; i <= top; i++) {
        if (i > first) luaL_addchar(&buffer, ' ');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&buffer);
    }
    luaL_pushresult(&buffer);
    lc->api->log(lc->app, level, entity, "%s", lua_tostring(L, -1));
    return 0;
}

static int lua_cell_m_log(lua_State *L) {
    LUA_CELL_SELF();
    return lua_cell_log_text(L, 2, TESSERA_LOG_INFO, self);
}

static int lua_cell_m_warn(lua_State *L) {
    LUA_CELL_SELF();
    return lua_cell_log_text(L, 2, TESSERA_LOG_WARN, self);
}

static int lua_cell_m_debug(lua_State *L) {
    LUA_CELL_SELF();
    return lua_cell_log_text(L, 2, TESSERA_LOG_DEBUG, self);
}

/* Scope names for fire_event. */
static tessera_event_scope lua_cell_scope_arg(lua_State *L, int idx) {
    static const char *const names[] = {"server", "viewers", "space", "everyone", "servers", NULL};
    return (tessera_event_scope)luaL_checkoption(L, idx, NULL, names);
}

static const entity_def_method *lua_cell_event_arg(lua_cell *lc, lua_State *L, const char *name) {
    const entity_def_method *event = entity_def_registry_find_event(lc->definitions, name);
    if (!event) lua_values_raise(L, "no event '%s' in the definitions", name);
    return event;
}

/* fire_event(source or nil, "event", {fields}, "scope") */
static int lua_cell_fire(lua_State *L, tessera_entity *source, int first) {
    lua_cell *lc = lua_cell_of(L);
    const char *name = luaL_checkstring(L, first);
    const entity_def_method *event = lua_cell_event_arg(lc, L, name);
    tessera_event_scope scope = lua_cell_scope_arg(L, first + 2);
    tessera_args *fields = lua_cell_args(L, event, 0, 0, lua_isnoneornil(L, first + 1) ? 0 : first + 1);
    int rc = lc->api->fire_event(lc->app, source, name, fields, scope);
    lc->api->args->free(fields);
    if (rc != 0) return luaL_error(L, "fire_event('%s') refused (see the log line before this one)", name);
    return 0;
}

static int lua_cell_m_fire_event(lua_State *L) {
    LUA_CELL_SELF();
    return lua_cell_fire(L, self, 2);
}

/* send_event(source or nil, "event", {fields}, {recipients}) */
static int lua_cell_send(lua_State *L, tessera_entity *source, int first) {
    lua_cell *lc = lua_cell_of(L);
    const char *name = luaL_checkstring(L, first);
    const entity_def_method *event = lua_cell_event_arg(lc, L, name);
    luaL_checktype(L, first + 2, LUA_TTABLE);
    size_t count = lua_rawlen(L, first + 2);
    if (count > 4096) return luaL_error(L, "send_event: %I recipients is more than 4096", (lua_Integer)count);
    tessera_handle recipients[4096];
    for (size_t i = 0; i < count; i++) {
        lua_rawgeti(L, first + 2, (lua_Integer)i + 1);
        recipients[i] = lua_cell_id_arg(L, lua_gettop(L));
        lua_pop(L, 1);
    }
    tessera_args *fields = lua_cell_args(L, event, 0, 0, lua_isnoneornil(L, first + 1) ? 0 : first + 1);
    int sent = lc->api->send_event(lc->app, source, name, fields, recipients, count);
    lc->api->args->free(fields);
    if (sent < 0) return luaL_error(L, "send_event('%s') refused (see the log line before this one)", name);
    lua_pushinteger(L, sent);
    return 1;
}

static int lua_cell_m_send_event(lua_State *L) {
    LUA_CELL_SELF();
    return lua_cell_send(L, self, 2);
}

static const luaL_Reg lua_cell_entity_methods[] = {
    {"id", lua_cell_m_id},
    {"class_name", lua_cell_m_class_name},
    {"exists", lua_cell_m_exists},
    {"is_real", lua_cell_m_is_real},
    {"has_client", lua_cell_m_has_client},
    {"position", lua_cell_m_position},
    {"tick", lua_cell_m_tick},
    {"add_timer", lua_cell_m_add_timer},
    {"cancel_timer", lua_cell_m_cancel_timer},
    {"set_think", lua_cell_m_set_think},
    {"cancel_think", lua_cell_m_cancel_think},
    {"add_trap", lua_cell_m_add_trap},
    {"query", lua_cell_m_query},
    {"move_to_point", lua_cell_m_move_to_point},
    {"move_to_entity", lua_cell_m_move_to_entity},
    {"navigate", lua_cell_m_navigate},
    {"turn_to", lua_cell_m_turn_to},
    {"cancel_controller", lua_cell_m_cancel_controller},
    {"stop_movement", lua_cell_m_stop_movement},
    {"in_view", lua_cell_m_in_view},
    {"distance", lua_cell_m_distance},
    {"call_cell", lua_cell_m_call_cell},
    {"call_base", lua_cell_m_call_base},
    {"call_client", lua_cell_m_call_client},
    {"call_clients", lua_cell_m_call_clients},
    {"set_lookup_name", lua_cell_m_set_lookup_name},
    {"lookup_name", lua_cell_m_lookup_name},
    {"destroy", lua_cell_m_destroy},
    {"teleport", lua_cell_m_teleport},
    {"connect", lua_cell_m_connect},
    {"fire_output", lua_cell_m_fire_output},
    {"get", lua_cell_m_get},
    {"set", lua_cell_m_set},
    {"log", lua_cell_m_log},
    {"warn", lua_cell_m_warn},
    {"debug", lua_cell_m_debug},
    {"fire_event", lua_cell_m_fire_event},
    {"send_event", lua_cell_m_send_event},
    {NULL, NULL},
};

/* ---- the world: the `tessera` table ---------------------------------------------------------- */

static int lua_cell_w_now_ms(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    lua_pushinteger(L, (lua_Integer)lc->api->now_ms(lc->app));
    return 1;
}

static int lua_cell_w_wall_ms(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    lua_pushinteger(L, (lua_Integer)lc->api->wall_ms(lc->app));
    return 1;
}

static int lua_cell_w_random(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    lua_pushnumber(L, lc->api->random_unit(lc->app));
    return 1;
}

static int lua_cell_w_setting(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    lua_pushnumber(L, lc->api->setting_number(lc->app, luaL_checkstring(L, 1), luaL_optnumber(L, 2, 0)));
    return 1;
}

static int lua_cell_w_resolve(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    lua_cell_push_entity(lc, lc->api->resolve(lc->app, lua_cell_id_arg(L, 1)));
    return 1;
}

static int lua_cell_w_spawn(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    /* nil: the default space (where players spawn). */
    const char *space = lua_isnoneornil(L, 2) ? lc->api->default_space(lc->app) : luaL_checkstring(L, 2);
    tessera_handle id =
        lc->api->spawn(lc->app, luaL_checkstring(L, 1), space, (float)luaL_checknumber(L, 3),
                       (float)luaL_checknumber(L, 4), (float)luaL_checknumber(L, 5), (float)luaL_optnumber(L, 6, 0));
    if (!id) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushinteger(L, (lua_Integer)id);
    return 1;
}

static int lua_cell_push_handles(lua_State *L, const tessera_handle *handles, size_t count) {
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        lua_pushinteger(L, (lua_Integer)handles[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int lua_cell_w_find_by_name(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    tessera_handle found[LUA_CELL_FIND_MAX];
    size_t count = lc->api->find_by_name(lc->app, luaL_checkstring(L, 1), found, LUA_CELL_FIND_MAX);
    return lua_cell_push_handles(L, found, count < LUA_CELL_FIND_MAX ? count : LUA_CELL_FIND_MAX);
}

static int lua_cell_w_find_by_class(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    tessera_handle found[LUA_CELL_FIND_MAX];
    size_t count = lc->api->find_by_class(lc->app, luaL_checkstring(L, 1), found, LUA_CELL_FIND_MAX);
    lua_cell_push_handles(L, found, count < LUA_CELL_FIND_MAX ? count : LUA_CELL_FIND_MAX);
    lua_pushinteger(L, (lua_Integer)count); /* all of them: the list stops at 1024 */
    return 2;
}

static int lua_cell_w_default_space(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    const char *space = lc->api->default_space(lc->app);
    lua_pushstring(L, space ? space : "");
    return 1;
}

static int lua_cell_w_spawn_area(lua_State *L) {
    lua_cell *lc = lua_cell_of(L);
    float x = 0, z = 0, radius = 0;
    if (lc->api->spawn_area(lc->app, luaL_optstring(L, 1, lc->api->default_space(lc->app)), &x, &z, &radius) != 0)
        return 0;
    lua_pushnumber(L, x);
    lua_pushnumber(L, z);
    lua_pushnumber(L, radius);
    return 3;
}

static int lua_cell_w_fire_event(lua_State *L) { return lua_cell_fire(L, NULL, 1); }
static int lua_cell_w_send_event(lua_State *L) { return lua_cell_send(L, NULL, 1); }

static int lua_cell_w_log(lua_State *L) { return lua_cell_log_text(L, 1, TESSERA_LOG_INFO, NULL); }
static int lua_cell_w_warn(lua_State *L) { return lua_cell_log_text(L, 1, TESSERA_LOG_WARN, NULL); }
static int lua_cell_w_debug(lua_State *L) { return lua_cell_log_text(L, 1, TESSERA_LOG_DEBUG, NULL); }

static const luaL_Reg lua_cell_world[] = {
    {"now_ms", lua_cell_w_now_ms},
    {"wall_ms", lua_cell_w_wall_ms},
    {"random", lua_cell_w_random},
    {"setting", lua_cell_w_setting},
    {"resolve", lua_cell_w_resolve},
    {"spawn", lua_cell_w_spawn},
    {"find_by_name", lua_cell_w_find_by_name},
    {"find_by_class", lua_cell_w_find_by_class},
    {"default_space", lua_cell_w_default_space},
    {"spawn_area", lua_cell_w_spawn_area},
    {"fire_event", lua_cell_w_fire_event},
    {"send_event", lua_cell_w_send_event},
    {"log", lua_cell_w_log},
    {"warn", lua_cell_w_warn},
    {"debug", lua_cell_w_debug},
    {NULL, NULL},
};

/* ---- trampolines: the engine's hooks into the current generation ----------------------------- */

static lua_cell *lua_cell_from(const tessera_cell_context *ctx) { return game_host_lua(ctx->app); }

/* Pushes the class's function `hook` and the entity's object. Returns the
 * class, or NULL (nothing pushed) when the script has no such function. */
static lua_cell_class *lua_cell_begin(lua_cell *lc, tessera_entity *entity, const char *hook) {
    lua_State *L = lc->L;
    lua_cell_class *cls = lua_cell_class_of(lc, entity);
    if (!cls || cls->rules_ref == LUA_NOREF) return NULL;
    lua_rawgeti(L, LUA_REGISTRYINDEX, cls->rules_ref);
    if (lua_getfield(L, -1, hook) != LUA_TFUNCTION) {
        lua_pop(L, 2);
        return NULL;
    }
    lua_remove(L, -2);
    lua_cell_push_entity(lc, entity);
    return cls;
}

static void lua_cell_finish(lua_cell *lc, lua_cell_class *cls, const char *hook, tessera_entity *entity, int nargs) {
    lua_runtime_call(lc->rt, 1 + nargs, 0, cls->def->name, hook, lc->api->handle(entity), NULL, 0);
}

#define LUA_CELL_HOOK0(hook)                                                                           \
    static void lua_cell_hook_##hook(const tessera_cell_context *ctx, tessera_entity *e, void *data) { \
        (void)data;                                                                                    \
        lua_cell *lc = lua_cell_from(ctx);                                                             \
        lua_cell_class *cls = lua_cell_begin(lc, e, #hook);                                            \
        if (cls) lua_cell_finish(lc, cls, #hook, e, 0);                                                \
    }
LUA_CELL_HOOK0(created)
LUA_CELL_HOOK0(destroyed)
LUA_CELL_HOOK0(leaving)
LUA_CELL_HOOK0(arrived)
LUA_CELL_HOOK0(got_witness)
LUA_CELL_HOOK0(lost_witness)

static void lua_cell_hook_teleported(const tessera_cell_context *ctx, tessera_entity *e, void *data,
                                     bool space_changed) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, "teleported");
    if (!cls) return;
    lua_pushboolean(lc->L, space_changed);
    lua_cell_finish(lc, cls, "teleported", e, 1);
}

static void lua_cell_hook_moved(const tessera_cell_context *ctx, tessera_entity *e, void *data, double metres) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, "moved");
    if (!cls) return;
    lua_pushnumber(lc->L, metres);
    lua_cell_finish(lc, cls, "moved", e, 1);
}

static void lua_cell_hook_entered_view(const tessera_cell_context *ctx, tessera_entity *e, void *data,
                                       tessera_entity *other) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, "entered_view");
    if (!cls) return;
    lua_cell_push_entity(lc, other);
    lua_cell_finish(lc, cls, "entered_view", e, 1);
}

static void lua_cell_hook_left_view(const tessera_cell_context *ctx, tessera_entity *e, void *data,
                                    tessera_handle other) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, "left_view");
    if (!cls) return;
    lua_pushinteger(lc->L, (lua_Integer)other);
    lua_cell_finish(lc, cls, "left_view", e, 1);
}

static void lua_cell_trap(const tessera_cell_context *ctx, tessera_entity *e, const char *hook, uint32_t tag,
                          tessera_entity *other) {
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, hook);
    if (!cls) return;
    lua_pushinteger(lc->L, tag);
    lua_cell_push_entity(lc, other);
    lua_cell_finish(lc, cls, hook, e, 2);
}

static void lua_cell_hook_entered_trap(const tessera_cell_context *ctx, tessera_entity *e, void *data, uint32_t tag,
                                       tessera_entity *other) {
    (void)data;
    lua_cell_trap(ctx, e, "entered_trap", tag, other);
}

static void lua_cell_hook_left_trap(const tessera_cell_context *ctx, tessera_entity *e, void *data, uint32_t tag,
                                    tessera_entity *other) {
    (void)data;
    lua_cell_trap(ctx, e, "left_trap", tag, other);
}

static void lua_cell_hook_timer(const tessera_cell_context *ctx, tessera_entity *e, void *data, uint64_t timer_id,
                                uint32_t tag, uint64_t user_data) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, "timer");
    if (!cls) return;
    lua_pushinteger(lc->L, (lua_Integer)timer_id);
    lua_pushinteger(lc->L, tag);
    lua_pushinteger(lc->L, (lua_Integer)user_data);
    lua_cell_finish(lc, cls, "timer", e, 3);
}

static void lua_cell_controller(const tessera_cell_context *ctx, tessera_entity *e, const char *hook,
                                uint32_t controller_id, uint64_t user_data, const char *reason) {
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, hook);
    if (!cls) return;
    lua_pushinteger(lc->L, controller_id);
    lua_pushinteger(lc->L, (lua_Integer)user_data);
    if (reason) lua_pushstring(lc->L, reason);
    lua_cell_finish(lc, cls, hook, e, reason ? 3 : 2);
}

static void lua_cell_hook_controller_moved(const tessera_cell_context *ctx, tessera_entity *e, void *data,
                                           uint32_t controller_id, uint64_t user_data) {
    (void)data;
    lua_cell_controller(ctx, e, "controller_moved", controller_id, user_data, NULL);
}

static void lua_cell_hook_controller_arrived(const tessera_cell_context *ctx, tessera_entity *e, void *data,
                                             uint32_t controller_id, uint64_t user_data) {
    (void)data;
    lua_cell_controller(ctx, e, "controller_arrived", controller_id, user_data, NULL);
}

static void lua_cell_hook_controller_failed(const tessera_cell_context *ctx, tessera_entity *e, void *data,
                                            uint32_t controller_id, uint64_t user_data, const char *reason) {
    (void)data;
    lua_cell_controller(ctx, e, "controller_failed", controller_id, user_data, reason ? reason : "");
}

static void lua_cell_hook_restored(const tessera_cell_context *ctx, tessera_entity *e, void *data,
                                   uint32_t state_age_ms, bool from_ghost) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, "restored");
    if (!cls) return;
    lua_pushinteger(lc->L, state_age_ms);
    lua_pushboolean(lc->L, from_ghost);
    lua_cell_finish(lc, cls, "restored", e, 2);
}

static void lua_cell_hook_method(const tessera_cell_context *ctx, tessera_entity *e, void *data,
                                 const char *method_name, tessera_handle caller, const tessera_args *args) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, method_name);
    if (!cls) {
        lc->api->log(lc->app, TESSERA_LOG_WARN, e, "lua: %s.lua has no cell function '%s': the call is dropped",
                     lua_cell_class_of(lc, e) ? lua_cell_class_of(lc, e)->def->name : "?", method_name);
        return;
    }
    const entity_def_method *method = entity_def_class_find_method(cls->def, ENTITY_DEF_PART_CELL, method_name);
    lua_pushinteger(lc->L, (lua_Integer)caller);
    int count = method ? lua_values_push_args(lc->L, method, game_args_state(args)) : 0;
    lua_cell_finish(lc, cls, method_name, e, 1 + count);
}

static void lua_cell_hook_think(const tessera_cell_context *ctx, tessera_entity *e, void *data, const char *name) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, name);
    if (cls) lua_cell_finish(lc, cls, name, e, 0);
}

static void lua_cell_hook_input(const tessera_cell_context *ctx, tessera_entity *e, void *data, const char *name,
                                tessera_handle activator, tessera_handle caller, const tessera_value *value) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, name);
    if (!cls) return;
    lua_State *L = lc->L;
    lua_pushinteger(L, (lua_Integer)activator);
    lua_pushinteger(L, (lua_Integer)caller);
    switch (value->type) {
        case TESSERA_FIELD_INT32:
        case TESSERA_FIELD_INT64:
            lua_pushinteger(L, value->i);
            break;
        case TESSERA_FIELD_UINT32:
        case TESSERA_FIELD_UINT64:
            lua_pushinteger(L, (lua_Integer)value->u);
            break;
        case TESSERA_FIELD_FLOAT:
        case TESSERA_FIELD_DOUBLE:
            lua_pushnumber(L, value->f);
            break;
        case TESSERA_FIELD_BOOL:
            lua_pushboolean(L, value->b);
            break;
        case TESSERA_FIELD_HANDLE:
            lua_pushinteger(L, (lua_Integer)value->h);
            break;
        case TESSERA_FIELD_VECTOR3:
            lua_cell_push_vector(L, value->v);
            break;
        case TESSERA_FIELD_STRING:
            lua_pushstring(L, value->s ? value->s : "");
            break;
    }
    lua_cell_finish(lc, cls, name, e, 3);
}

static void lua_cell_hook_property_changed(const tessera_cell_context *ctx, tessera_entity *e, void *data, int property,
                                           uint32_t index) {
    (void)data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_cell_class *cls = lua_cell_begin(lc, e, "property_changed");
    if (!cls) return;
    const entity_def_property *def = entity_def_class_property(cls->def, (uint16_t)property);
    lua_pushstring(lc->L, def ? def->name : "?");
    lua_pushinteger(lc->L, index);
    lua_cell_finish(lc, cls, "property_changed", e, 2);
}

/* ---- game.lua: the tick, systems and event listeners ----------------------------------------- */

/* Calls game.lua's cell function `name` (if any) with `nargs` arguments
 * already pushed (popped either way). Returns 0, or -1 if it threw. */
static int lua_cell_call_game(lua_cell *lc, const char *name, int nargs, char *err, size_t errlen) {
    lua_State *L = lc->L;
    if (lc->game_ref == LUA_NOREF) {
        lua_pop(L, nargs);
        return 0;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, lc->game_ref);
    if (lua_getfield(L, -1, name) != LUA_TFUNCTION) {
        lua_pop(L, 2 + nargs);
        return 0;
    }
    lua_remove(L, -2);
    lua_insert(L, -1 - nargs);
    return lua_runtime_call(lc->rt, nargs, 0, "game", name, 0, err, errlen);
}

static void lua_cell_system_before(const tessera_cell_context *ctx) {
    lua_cell_call_game(lua_cell_from(ctx), "before_thinks", 0, NULL, 0);
}

static void lua_cell_system_after(const tessera_cell_context *ctx) {
    lua_cell_call_game(lua_cell_from(ctx), "after_thinks", 0, NULL, 0);
}

static void lua_cell_listener(const tessera_cell_context *ctx, const char *event, tessera_handle source,
                              const tessera_args *fields, void *user_data) {
    (void)user_data;
    lua_cell *lc = lua_cell_from(ctx);
    lua_State *L = lc->L;
    if (lc->game_ref == LUA_NOREF) return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, lc->game_ref);
    if (lua_getfield(L, -1, "events") != LUA_TTABLE || lua_getfield(L, -1, event) != LUA_TFUNCTION) {
        lua_settop(L, lua_gettop(L) - 3);
        return;
    }
    lua_insert(L, -3);
    lua_pop(L, 2);
    const entity_def_method *def = entity_def_registry_find_event(lc->definitions, event);
    lua_pushstring(L, event);
    lua_pushinteger(L, (lua_Integer)source);
    if (def)
        lua_values_push_named(L, def, game_args_state(fields));
    else
        lua_newtable(L);
    lua_runtime_call(lc->rt, 3, 0, "game.events", event, 0, NULL, 0);
}

/* Listens to every event game.lua's cell.events names (each once, for the
 * process's life: a reload that adds one is told it needs a restart). */
static int lua_cell_listen(lua_cell *lc, bool at_start, char *err, size_t errlen) {
    lua_State *L = lc->L;
    if (lc->game_ref == LUA_NOREF) return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, lc->game_ref);
    if (lua_getfield(L, -1, "events") != LUA_TTABLE) {
        lua_pop(L, 2);
        return 0;
    }
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        const char *name = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        bool known = false;
        for (size_t i = 0; name && i < lc->listened_count; i++) known |= strcmp(lc->listened[i], name) == 0;
        if (name && !known) {
            if (!at_start) {
                snprintf(err, errlen, "game.lua: a listener of '%s' is new: new listeners need a restart", name);
                lua_pop(L, 4);
                return -1;
            }
            if (lc->listened_count == LUA_CELL_MAX_LISTENERS ||
                lc->api->listen_event(lc->app, name, lua_cell_listener, NULL) != 0) {
                snprintf(err, errlen, "game.lua: cannot listen to '%s' (no such event, or %d listeners already)", name,
                         LUA_CELL_MAX_LISTENERS);
                lua_pop(L, 4);
                return -1;
            }
            snprintf(lc->listened[lc->listened_count++], LUA_CELL_NAME_MAX, "%s", name);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    return 0;
}

/* ---- declarations: fields, thinks, inputs ---------------------------------------------------- */

static const struct {
    const char *name;
    tessera_field_type type;
    size_t size;
} lua_cell_field_types[] = {
    {"int32", TESSERA_FIELD_INT32, 4},   {"uint32", TESSERA_FIELD_UINT32, 4}, {"int64", TESSERA_FIELD_INT64, 8},
    {"uint64", TESSERA_FIELD_UINT64, 8}, {"float", TESSERA_FIELD_FLOAT, 4},   {"double", TESSERA_FIELD_DOUBLE, 8},
    {"bool", TESSERA_FIELD_BOOL, 1},     {"entity", TESSERA_FIELD_HANDLE, 8}, {"vector3", TESSERA_FIELD_VECTOR3, 12},
};

static int lua_cell_compare_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Reads the rules table on top's declarations into `cls` (at start), or
 * checks they are unchanged (a reload). Returns 0, or -1 with err. */
static int lua_cell_declarations(lua_cell *lc, lua_cell_class *cls, bool at_start, char *err, size_t errlen) {
    lua_State *L = lc->L;
    int rules = lua_gettop(L);
    const char *name = cls->def->name;
    /* fields = { laps = "int32", motto = "string:32", ... }, laid out by
     * name so every cellapp agrees. */
    tessera_field fields[64];
    char field_names[64][LUA_CELL_NAME_MAX];
    size_t field_count = 0, offset = 0;
    const char *names[64];
    size_t name_count = 0;
    if (lua_getfield(L, rules, "fields") == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING || name_count == 64) {
                snprintf(err, errlen, "%s.lua: cell.fields must map names to type names (at most 64)", name);
                lua_settop(L, rules);
                return -1;
            }
            names[name_count++] = lua_tostring(L, -2);
            lua_pop(L, 1);
        }
        qsort(names, name_count, sizeof names[0], lua_cell_compare_names);
        for (size_t i = 0; i < name_count; i++) {
            lua_getfield(L, -1, names[i]);
            const char *type = lua_tostring(L, -1);
            tessera_field *field = &fields[field_count];
            snprintf(field_names[field_count], LUA_CELL_NAME_MAX, "%s", names[i]);
            field->name = field_names[field_count];
            size_t size = 0;
            if (strncmp(type, "string:", 7) == 0) {
                long bytes = strtol(type + 7, NULL, 10);
                if (bytes < 1 || bytes > LUA_CELL_FIELD_STRING_MAX) {
                    snprintf(err, errlen, "%s.lua: field '%s': string:N takes 1 to %d bytes", name, names[i],
                             LUA_CELL_FIELD_STRING_MAX);
                    lua_settop(L, rules);
                    return -1;
                }
                field->type = TESSERA_FIELD_STRING;
                size = (size_t)bytes + 1;
            } else {
                size_t t = 0, types = sizeof lua_cell_field_types / sizeof lua_cell_field_types[0];
                while (t < types && strcmp(lua_cell_field_types[t].name, type) != 0) t++;
                if (t == types) {
                    snprintf(err, errlen,
                             "%s.lua: field '%s' has type '%s' (int32, uint32, int64, uint64, float, double, bool, "
                             "entity, vector3 or string:N)",
                             name, names[i], type);
                    lua_settop(L, rules);
                    return -1;
                }
                field->type = lua_cell_field_types[t].type;
                size = lua_cell_field_types[t].size;
            }
            size_t align = size >= 8 ? 8 : size >= 4 ? 4 : 1;
            if (field->type == TESSERA_FIELD_STRING) align = 1;
            if (field->type == TESSERA_FIELD_VECTOR3) align = 4; /* float[3] */
            offset = (offset + align - 1) / align * align;
            field->offset = offset;
            field->size = size;
            offset += size;
            field_count++;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    /* thinks = { "patrol", ... } and inputs = { Open = "string", ... } */
    char thinks[LUA_CELL_MAX_THINKS][LUA_CELL_NAME_MAX];
    size_t think_count = 0;
    if (lua_getfield(L, rules, "thinks") == LUA_TTABLE) {
        size_t count = lua_rawlen(L, -1);
        for (size_t i = 1; i <= count; i++) {
            lua_rawgeti(L, -1, (lua_Integer)i);
            const char *think = lua_tostring(L, -1);
            if (!think || think_count == LUA_CELL_MAX_THINKS || strlen(think) >= LUA_CELL_NAME_MAX) {
                snprintf(err, errlen, "%s.lua: cell.thinks must list at most %d names", name, LUA_CELL_MAX_THINKS);
                lua_settop(L, rules);
                return -1;
            }
            snprintf(thinks[think_count++], LUA_CELL_NAME_MAX, "%s", think);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    struct lua_cell_input inputs[LUA_CELL_MAX_INPUTS];
    size_t input_count = 0;
    if (lua_getfield(L, rules, "inputs") == LUA_TTABLE) {
        name_count = 0;
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING || name_count == LUA_CELL_MAX_INPUTS) {
                snprintf(err, errlen, "%s.lua: cell.inputs must map input names to type names (at most %d)", name,
                         LUA_CELL_MAX_INPUTS);
                lua_settop(L, rules);
                return -1;
            }
            names[name_count++] = lua_tostring(L, -2);
            lua_pop(L, 1);
        }
        qsort(names, name_count, sizeof names[0], lua_cell_compare_names);
        for (size_t i = 0; i < name_count; i++) {
            lua_getfield(L, -1, names[i]);
            const char *type = lua_tostring(L, -1);
            static const char *const type_names[] = {"int32",  "uint32", "int64",  "uint64",  "float",
                                                     "double", "bool",   "entity", "vector3", "string"};
            size_t t = 0;
            while (t < 10 && strcmp(type_names[t], type) != 0) t++;
            if (t == 10 || strlen(names[i]) >= LUA_CELL_NAME_MAX) {
                snprintf(err, errlen, "%s.lua: input '%s' has type '%s' (int32 ... string)", name, names[i], type);
                lua_settop(L, rules);
                return -1;
            }
            snprintf(inputs[input_count].name, LUA_CELL_NAME_MAX, "%s", names[i]);
            inputs[input_count++].type = (tessera_field_type)t;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    if (at_start) {
        cls->fields = field_count ? xcalloc(field_count, sizeof *cls->fields) : NULL;
        for (size_t i = 0; i < field_count; i++) {
            cls->fields[i] = fields[i];
            cls->fields[i].name = xstrdup(fields[i].name);
        }
        cls->field_count = field_count;
        cls->data_size = offset;
        memcpy(cls->thinks, thinks, sizeof thinks);
        cls->think_count = think_count;
        memcpy(cls->inputs, inputs, sizeof inputs);
        cls->input_count = input_count;
        return 0;
    }
    bool same = field_count == cls->field_count && think_count == cls->think_count && input_count == cls->input_count;
    for (size_t i = 0; same && i < field_count; i++)
        same = strcmp(fields[i].name, cls->fields[i].name) == 0 && fields[i].type == cls->fields[i].type &&
               fields[i].size == cls->fields[i].size;
    for (size_t i = 0; same && i < think_count; i++) same = strcmp(thinks[i], cls->thinks[i]) == 0;
    for (size_t i = 0; same && i < input_count; i++)
        same = strcmp(inputs[i].name, cls->inputs[i].name) == 0 && inputs[i].type == cls->inputs[i].type;
    if (!same) {
        snprintf(err, errlen,
                 "%s.lua: its fields, thinks or inputs changed: they travel with entities, so changing them needs a "
                 "restart (the rest of the code may change live)",
                 name);
        return -1;
    }
    return 0;
}

/* ---- entity metatables ----------------------------------------------------------------------- */

static void lua_cell_build_metatable(lua_cell *lc, lua_cell_class *cls) {
    lua_State *L = lc->L;
    lua_createtable(L, 0, 6);
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "__entity");
    /* getmetatable() from a script gets this, not the table: no script can
     * change how entities read and write. */
    lua_pushliteral(L, "locked");
    lua_setfield(L, -2, "__metatable");
    lua_pushstring(L, cls->def->name);
    lua_setfield(L, -2, "__name");
    /* upvalues: the host, properties by name, fields by name, methods */
    lua_createtable(L, 0, (int)cls->def->property_count);
    for (size_t i = 0; i < cls->def->property_count; i++) {
        lua_pushinteger(L, (lua_Integer)i);
        lua_setfield(L, -2, cls->def->properties[i].name);
    }
    int properties = lua_gettop(L);
    lua_createtable(L, 0, (int)cls->field_count);
    for (size_t i = 0; i < cls->field_count; i++) {
        lua_pushinteger(L, (lua_Integer)i);
        lua_setfield(L, -2, cls->fields[i].name);
    }
    int fields = lua_gettop(L);
    lua_newtable(L);
    lua_pushlightuserdata(L, lc);
    luaL_setfuncs(L, lua_cell_entity_methods, 1);
    int methods = lua_gettop(L);
    for (int k = 0; k < 2; k++) {
        lua_pushlightuserdata(L, lc);
        lua_pushvalue(L, properties);
        lua_pushvalue(L, fields);
        lua_pushvalue(L, methods);
        lua_pushcclosure(L, k == 0 ? lua_cell_object_index : lua_cell_object_newindex, 4);
        lua_setfield(L, properties - 1, k == 0 ? "__index" : "__newindex");
    }
    lua_pushcfunction(L, lua_cell_object_tostring);
    lua_setfield(L, properties - 1, "__tostring");
    lua_pushcfunction(L, lua_cell_object_equal);
    lua_setfield(L, properties - 1, "__eq");
    lua_settop(L, properties - 1);
    if (cls->metatable_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, cls->metatable_ref);
    cls->metatable_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* ---- generations ----------------------------------------------------------------------------- */

/* Takes the generation on top: every scripted class's cell table, and
 * game.lua's. Returns 0, or -1 with err (the generation is left on top)
 * when a class lost its cell rules or changed its declarations. */
static int lua_cell_check_generation(lua_cell *lc, bool at_start, char *err, size_t errlen) {
    lua_State *L = lc->L;
    int generation = lua_gettop(L);
    for (size_t i = 0; i < lc->class_count; i++) {
        lua_cell_class *cls = &lc->classes[i];
        if (!cls->cls && !at_start) continue;
        lua_getfield(L, generation, "classes");
        lua_getfield(L, -1, cls->def->name);
        bool has_cell = lua_istable(L, -1) && lua_getfield(L, -1, "cell") == LUA_TTABLE;
        if (has_cell && lua_cell_declarations(lc, cls, at_start, err, errlen) != 0) {
            lua_settop(L, generation);
            return -1;
        }
        if (!has_cell && cls->cls) {
            snprintf(err, errlen, "%s.lua: no cell table any more (a class keeps its rules until a restart)",
                     cls->def->name);
            lua_settop(L, generation);
            return -1;
        }
        lua_settop(L, generation);
    }
    return 0;
}

/* Points every class and game.lua at the generation on top (kept), and
 * installs it. */
static void lua_cell_take_generation(lua_cell *lc) {
    lua_State *L = lc->L;
    int generation = lua_gettop(L);
    for (size_t i = 0; i < lc->class_count; i++) {
        lua_cell_class *cls = &lc->classes[i];
        if (cls->rules_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, cls->rules_ref);
        cls->rules_ref = LUA_NOREF;
        if (!cls->cls) continue;
        lua_getfield(L, generation, "classes");
        lua_getfield(L, -1, cls->def->name);
        lua_getfield(L, -1, "cell");
        cls->rules_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        lua_settop(L, generation);
    }
    if (lc->game_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, lc->game_ref);
    lc->game_ref = LUA_NOREF;
    if (lua_getfield(L, generation, "game") == LUA_TTABLE && lua_getfield(L, -1, "cell") == LUA_TTABLE)
        lc->game_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, generation);
    lua_runtime_install_generation(lc->rt);
}

/* ---- opening --------------------------------------------------------------------------------- */

static void lua_cell_register_world(lua_cell *lc) {
    lua_State *L = lc->L;
    lua_newtable(L);
    lua_pushlightuserdata(L, lc);
    luaL_setfuncs(L, lua_cell_world, 1);
    lua_pushstring(L, "cell");
    lua_setfield(L, -2, "side");
    /* tessera.kept: one table every generation's `tessera` shares (each
     * environment copies `tessera`, not what it holds), for the game's own
     * state that must outlive a reload. */
    lua_newtable(L);
    lua_setfield(L, -2, "kept");
    lua_runtime_set_global(lc->rt, "tessera");
}

/* Whether the rules table on top defines `name` as a function. */
static bool lua_cell_defines(lua_State *L, const char *name) {
    bool defined = lua_getfield(L, -1, name) == LUA_TFUNCTION;
    lua_pop(L, 1);
    return defined;
}

/* Registers every class whose script in the generation on top has a cell
 * table. */
static int lua_cell_register_classes(lua_cell *lc, char *err, size_t errlen) {
    const tessera_cell_api *api = lc->api;
    lua_State *L = lc->L;
    int generation = lua_gettop(L);
    for (size_t i = 0; i < lc->class_count; i++) {
        lua_cell_class *cls = &lc->classes[i];
        lua_getfield(L, generation, "classes");
        lua_getfield(L, -1, cls->def->name);
        bool scripted = lua_istable(L, -1) && lua_getfield(L, -1, "cell") == LUA_TTABLE;
        /* The view hooks make the witnesses report every enter and leave,
         * and the change hook runs on every set: only a class that defines
         * them at start gets them. */
        bool views = scripted && (lua_cell_defines(L, "entered_view") || lua_cell_defines(L, "left_view"));
        bool changes = scripted && lua_cell_defines(L, "property_changed");
        lua_settop(L, generation);
        if (!scripted) continue;
        tessera_cell_hooks hooks = {
            .created = lua_cell_hook_created,
            .destroyed = lua_cell_hook_destroyed,
            .leaving = lua_cell_hook_leaving,
            .arrived = lua_cell_hook_arrived,
            .teleported = lua_cell_hook_teleported,
            .moved = lua_cell_hook_moved,
            .got_witness = lua_cell_hook_got_witness,
            .lost_witness = lua_cell_hook_lost_witness,
            .entered_trap = lua_cell_hook_entered_trap,
            .left_trap = lua_cell_hook_left_trap,
            .timer = lua_cell_hook_timer,
            .controller_moved = lua_cell_hook_controller_moved,
            .controller_arrived = lua_cell_hook_controller_arrived,
            .controller_failed = lua_cell_hook_controller_failed,
            .restored = lua_cell_hook_restored,
            .method = lua_cell_hook_method,
            .think = lua_cell_hook_think,
            .input = lua_cell_hook_input,
        };
        if (views) {
            hooks.entered_view = lua_cell_hook_entered_view;
            hooks.left_view = lua_cell_hook_left_view;
        }
        if (changes) hooks.property_changed = lua_cell_hook_property_changed;
        cls->cls = api->register_class(lc->app, cls->def->name, &hooks, cls->data_size, cls->fields, cls->field_count);
        if (!cls->cls) {
            snprintf(err, errlen,
                     "%s.lua: class %s could not be registered (a C module registered it already, or its fields are "
                     "bad: the log says which)",
                     cls->def->name, cls->def->name);
            return -1;
        }
        for (size_t t = 0; t < cls->think_count; t++)
            if (api->register_think(lc->app, cls->cls, cls->thinks[t], NULL) != 0) {
                snprintf(err, errlen, "%s.lua: think '%s' could not be registered", cls->def->name, cls->thinks[t]);
                return -1;
            }
        for (size_t t = 0; t < cls->input_count; t++)
            if (api->register_input(lc->app, cls->cls, cls->inputs[t].name, cls->inputs[t].type, NULL) != 0) {
                snprintf(err, errlen, "%s.lua: input '%s' could not be registered", cls->def->name,
                         cls->inputs[t].name);
                return -1;
            }
    }
    return 0;
}

lua_cell *lua_cell_open(tessera_cellapp *app, const tessera_cell_api *api, const entity_def_registry *definitions,
                        const char *folder, const lua_runtime_limits *limits, char *err, size_t errlen) {
    err[0] = '\0';
    lua_runtime *rt = lua_runtime_create(folder, "cell", limits, err, errlen);
    if (!rt) return NULL;
    lua_cell *lc = xcalloc(1, sizeof *lc);
    lc->rt = rt;
    lc->L = lua_runtime_state(rt);
    lc->app = app;
    lc->api = api;
    lc->definitions = definitions;
    lc->game_ref = LUA_NOREF;
    lc->class_count = entity_def_registry_class_count(definitions);
    lc->classes = xcalloc(lc->class_count ? lc->class_count : 1, sizeof *lc->classes);
    lc->script_names = xcalloc(lc->class_count ? lc->class_count : 1, sizeof *lc->script_names);
    for (size_t i = 0; i < lc->class_count; i++) {
        const entity_def_class *def = entity_def_registry_class(definitions, (uint16_t)i);
        lua_cell_class *cls = &lc->classes[def->id];
        cls->def = def;
        cls->rules_ref = LUA_NOREF;
        cls->metatable_ref = LUA_NOREF;
        if (lua_runtime_has_class_script(rt, def->name)) lc->script_names[lc->script_count++] = def->name;
    }
    if (lc->script_count == 0 && !lua_runtime_has_game_script(rt)) {
        lua_cell_free(lc);
        return NULL; /* err empty: nothing to host */
    }
    lua_State *L = lc->L;
    lua_cell_register_world(lc);
    tessera_system system = {
        .name = "lua", .before_thinks = lua_cell_system_before, .after_thinks = lua_cell_system_after};
    if (lua_runtime_load_generation(rt, lc->script_names, lc->script_count, err, errlen) != 0 ||
        lua_cell_check_generation(lc, true, err, errlen) != 0 || lua_cell_register_classes(lc, err, errlen) != 0 ||
        api->register_system(app, &system) != 0) {
        if (!err[0]) snprintf(err, errlen, "the Lua host could not register its game system");
        lua_settop(L, 0);
        lua_cell_free(lc);
        return NULL;
    }
    for (size_t i = 0; i < lc->class_count; i++) lua_cell_build_metatable(lc, &lc->classes[i]);
    lua_cell_take_generation(lc);
    lua_settop(L, 0);
    if (lua_cell_listen(lc, true, err, errlen) != 0) {
        lua_cell_free(lc);
        return NULL;
    }
    return lc;
}

int lua_cell_start(lua_cell *lc, char *err, size_t errlen) { return lua_cell_call_game(lc, "init", 0, err, errlen); }

int lua_cell_reload(lua_cell *lc, char *err, size_t errlen) {
    uint64_t started = clock_monotonic_us();
    lua_State *L = lc->L;
    int top = lua_gettop(L);
    if (lua_runtime_load_generation(lc->rt, lc->script_names, lc->script_count, err, errlen) != 0 ||
        lua_cell_check_generation(lc, false, err, errlen) != 0) {
        lua_settop(L, top);
        lua_runtime_count_reload(lc->rt, false, clock_monotonic_us() - started);
        return -1;
    }
    /* The new game.lua's init runs before the swap: if it throws, the old
     * generation keeps running. */
    int generation = lua_gettop(L);
    if (lua_getfield(L, generation, "game") == LUA_TTABLE && lua_getfield(L, -1, "cell") == LUA_TTABLE &&
        lua_getfield(L, -1, "init") == LUA_TFUNCTION) {
        if (lua_runtime_call(lc->rt, 0, 0, "game", "init", 0, err, errlen) != 0) {
            lua_settop(L, top);
            lua_runtime_count_reload(lc->rt, false, clock_monotonic_us() - started);
            return -1;
        }
    }
    lua_settop(L, generation);
    int old_game = lc->game_ref;
    lc->game_ref = LUA_NOREF;
    if (lua_getfield(L, generation, "game") == LUA_TTABLE && lua_getfield(L, -1, "cell") == LUA_TTABLE)
        lc->game_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, generation);
    int rc = lua_cell_listen(lc, false, err, errlen);
    luaL_unref(L, LUA_REGISTRYINDEX, lc->game_ref);
    lc->game_ref = old_game;
    if (rc != 0) {
        lua_settop(L, top);
        lua_runtime_count_reload(lc->rt, false, clock_monotonic_us() - started);
        return -1;
    }
    lua_cell_take_generation(lc);
    lua_settop(L, top);
    lua_runtime_count_reload(lc->rt, true, clock_monotonic_us() - started);
    return 0;
}

void lua_cell_tick(lua_cell *lc, uint64_t now_ms) {
    lua_runtime_collect(lc->rt);
    /* Every 50 ticks (5 s at 10 Hz): the objects of entities gone. */
    lua_runtime_sweep_objects(lc->rt, lua_cell_alive, lc, 50);
    if (lua_runtime_poll(lc->rt, now_ms)) {
        char err[400];
        if (lua_cell_reload(lc, err, sizeof err) == 0)
            log_info("lua: the cell scripts of %s reloaded (generation %u) in %.1f ms", lua_runtime_folder(lc->rt),
                     lua_runtime_generation(lc->rt), (double)lua_runtime_get_figures(lc->rt).last_reload_us / 1000.0);
        else
            log_warn("lua: reload refused, the old code keeps running: %s", err);
    }
    lua_cell_call_game(lc, "tick", 0, NULL, 0);
}

void lua_cell_request_reload(lua_cell *lc) { lua_runtime_request_reload(lc->rt); }

lua_runtime *lua_cell_runtime(lua_cell *lc) { return lc->rt; }

size_t lua_cell_class_count(const lua_cell *lc) {
    size_t count = 0;
    for (size_t i = 0; i < lc->class_count; i++) count += lc->classes[i].cls != NULL;
    return count;
}

void lua_cell_free(lua_cell *lc) {
    if (!lc) return;
    for (size_t i = 0; i < lc->class_count; i++) {
        for (size_t k = 0; k < lc->classes[i].field_count; k++) free((char *)lc->classes[i].fields[k].name);
        free(lc->classes[i].fields);
    }
    free(lc->classes);
    free(lc->script_names);
    lua_runtime_free(lc->rt);
    free(lc);
}
