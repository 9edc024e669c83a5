/* lua_values.c -- converts between Lua values and the definitions' typed
 * values (lua_values.h has the mapping). Every check raises a Lua error
 * that names the value and the rule, so a script's mistake reads as its
 * own line in the traceback; nothing here trusts what a script passes.
 */
#include "lua_values.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

/* luaL_error with printf's formats (Lua's own take only a few). */
__attribute__((noreturn, format(printf, 2, 3))) static void lua_values_fail(lua_State *L, const char *format, ...);
static void lua_values_fail(lua_State *L, const char *format, ...) {
    char message[400];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    luaL_where(L, 1);
    lua_pushstring(L, message);
    lua_concat(L, 2);
    lua_error(L);
    __builtin_unreachable();
}

void lua_values_raise(lua_State *L, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    luaL_where(L, 1);
    lua_pushvfstring(L, format, ap);
    va_end(ap);
    lua_concat(L, 2);
    lua_error(L);
    __builtin_unreachable();
}

static bool lua_values_is_signed(entity_def_kind kind) { return kind <= ENTITY_DEF_INT64; }
static bool lua_values_is_unsigned(entity_def_kind kind) {
    return kind >= ENTITY_DEF_UINT8 && kind <= ENTITY_DEF_UINT64;
}

bool lua_values_is_scalar(const entity_def_type *type) {
    return type->kind != ENTITY_DEF_ARRAY && type->kind != ENTITY_DEF_STRUCT;
}

/* The integer at `idx` (a float with no fraction counts), or a Lua error. */
static lua_Integer lua_values_integer(lua_State *L, int idx, const char *what, const char *kind) {
    int is_integer = 0;
    lua_Integer value = lua_tointegerx(L, idx, &is_integer);
    if (!is_integer)
        lua_values_raise(L, "%s: %s is not an integer (%s expected)", what,
                         lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx), kind);
    return value;
}

static double lua_values_number(lua_State *L, int idx, const char *what, const char *kind) {
    if (lua_type(L, idx) != LUA_TNUMBER)
        lua_values_raise(L, "%s: a %s is not a number (%s expected)", what, luaL_typename(L, idx), kind);
    return lua_tonumber(L, idx);
}

/* A quantized component must lie in its declared range. */
static void lua_values_check_quantized(lua_State *L, const entity_def_type *type, double value, const char *what) {
    if (!isfinite(value)) lua_values_fail(L, "%s: %f is not a finite number", what, value);
    if (type->quantized && (value < type->quant_min || value > type->quant_max))
        lua_values_fail(L, "%s: %g is outside its declared range [%g, %g]", what, value, type->quant_min,
                        type->quant_max);
}

void lua_values_check(lua_State *L, int idx, const entity_def_type *type, const char *what,
                      uint64_t (*entity_id)(lua_State *L, int idx), lua_values_scalar *out) {
    memset(out, 0, sizeof *out);
    const char *kind = entity_def_kind_name(type->kind);
    if (lua_values_is_signed(type->kind)) {
        lua_Integer value = lua_values_integer(L, idx, what, kind);
        if (value < type->int_min || (value > 0 && (uint64_t)value > type->int_max))
            lua_values_fail(L, "%s: %lld is outside %s's range [%" PRId64 ", %" PRIu64 "]", what, (long long)value,
                            kind, type->int_min, type->int_max);
        out->i = value;
    } else if (lua_values_is_unsigned(type->kind)) {
        lua_Integer value = lua_values_integer(L, idx, what, kind);
        if ((value < 0 && type->kind != ENTITY_DEF_UINT64) || (value >= 0 && (uint64_t)value > type->int_max))
            lua_values_fail(L, "%s: %lld is outside %s's range [0, %" PRIu64 "]", what, (long long)value, kind,
                            type->int_max);
        out->u = (uint64_t)value;
    } else {
        switch (type->kind) {
            case ENTITY_DEF_FLOAT:
            case ENTITY_DEF_DOUBLE:
                out->f = lua_values_number(L, idx, what, kind);
                lua_values_check_quantized(L, type, out->f, what);
                break;
            case ENTITY_DEF_BOOL:
                if (!lua_isboolean(L, idx))
                    lua_values_raise(L, "%s: a %s is not a boolean", what, luaL_typename(L, idx));
                out->b = lua_toboolean(L, idx);
                break;
            case ENTITY_DEF_STRING:
            case ENTITY_DEF_BYTES:
                if (lua_type(L, idx) != LUA_TSTRING)
                    lua_values_raise(L, "%s: a %s is not a string", what, luaL_typename(L, idx));
                out->s = lua_tolstring(L, idx, &out->length);
                if (out->length > type->max_length)
                    lua_values_fail(L, "%s: %zu bytes is longer than its %u", what, out->length, type->max_length);
                break;
            case ENTITY_DEF_ENTITY:
                if (lua_isnil(L, idx))
                    out->h = 0;
                else if (lua_type(L, idx) == LUA_TNUMBER)
                    out->h = (uint64_t)lua_values_integer(L, idx, what, "entity id");
                else if (entity_id && (out->h = entity_id(L, idx)) != 0)
                    break;
                else
                    lua_values_raise(L, "%s: a %s is not an entity (an entity or its id expected)", what,
                                     luaL_typename(L, idx));
                break;
            case ENTITY_DEF_VECTOR2:
            case ENTITY_DEF_VECTOR3: {
                int components = type->kind == ENTITY_DEF_VECTOR2 ? 2 : 3;
                if (!lua_istable(L, idx))
                    lua_values_raise(L, "%s: a %s is not a %s table", what, luaL_typename(L, idx), kind);
                static const char *const names[] = {"x", "y", "z"};
                for (int c = 0; c < components; c++) {
                    if (lua_getfield(L, idx, names[c]) == LUA_TNIL) {
                        lua_pop(L, 1);
                        lua_rawgeti(L, idx, c + 1);
                    }
                    out->v[c] = lua_values_number(L, -1, what, kind);
                    lua_values_check_quantized(L, type, out->v[c], what);
                    lua_pop(L, 1);
                }
                break;
            }
            default:
                lua_values_raise(L, "%s: a %s is not one value: reach its elements by path", what, kind);
        }
    }
}

void lua_values_push_scalar(lua_State *L, entity_def_kind kind, const lua_values_scalar *value) {
    if (lua_values_is_signed(kind)) {
        lua_pushinteger(L, value->i);
        return;
    }
    if (lua_values_is_unsigned(kind)) {
        lua_pushinteger(L, (lua_Integer)value->u);
        return;
    }
    switch (kind) {
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE:
            lua_pushnumber(L, value->f);
            break;
        case ENTITY_DEF_BOOL:
            lua_pushboolean(L, value->b);
            break;
        case ENTITY_DEF_STRING:
        case ENTITY_DEF_BYTES:
            lua_pushlstring(L, value->s ? value->s : "", value->length);
            break;
        case ENTITY_DEF_ENTITY:
            lua_pushinteger(L, (lua_Integer)value->h);
            break;
        case ENTITY_DEF_VECTOR2:
        case ENTITY_DEF_VECTOR3: {
            int components = kind == ENTITY_DEF_VECTOR2 ? 2 : 3;
            static const char *const names[] = {"x", "y", "z"};
            lua_createtable(L, 0, components);
            for (int c = 0; c < components; c++) {
                lua_pushnumber(L, value->v[c]);
                lua_setfield(L, -2, names[c]);
            }
            break;
        }
        default:
            lua_pushnil(L);
    }
}

void lua_values_push_state(lua_State *L, const entity_state *state, uint16_t prop, uint32_t index,
                           const entity_def_type *type) {
    lua_values_scalar value = {0};
    entity_def_kind kind = type->kind;
    if (lua_values_is_signed(kind)) {
        entity_state_get_int(state, prop, index, &value.i);
    } else if (lua_values_is_unsigned(kind)) {
        entity_state_get_uint(state, prop, index, &value.u);
    } else {
        switch (kind) {
            case ENTITY_DEF_FLOAT:
            case ENTITY_DEF_DOUBLE:
                entity_state_get_float(state, prop, index, &value.f);
                break;
            case ENTITY_DEF_BOOL:
                entity_state_get_bool(state, prop, index, &value.b);
                break;
            case ENTITY_DEF_STRING:
                entity_state_get_string(state, prop, index, &value.s, &value.length);
                break;
            case ENTITY_DEF_BYTES: {
                const uint8_t *bytes = NULL;
                entity_state_get_bytes(state, prop, index, &bytes, &value.length);
                value.s = (const char *)bytes;
                break;
            }
            case ENTITY_DEF_ENTITY:
                entity_state_get_entity(state, prop, index, &value.h);
                break;
            case ENTITY_DEF_VECTOR2:
                entity_state_get_vector2(state, prop, index, value.v);
                break;
            case ENTITY_DEF_VECTOR3:
                entity_state_get_vector3(state, prop, index, value.v);
                break;
            default:
                lua_pushnil(L);
                return;
        }
    }
    lua_values_push_scalar(L, kind, &value);
}

void lua_values_store_state(lua_State *L, int idx, entity_state *state, uint16_t prop, const entity_def_type *type,
                            const char *what, uint64_t (*entity_id)(lua_State *L, int idx)) {
    lua_values_scalar value;
    lua_values_check(L, idx, type, what, entity_id, &value);
    int rc = 0;
    entity_def_kind kind = type->kind;
    if (lua_values_is_signed(kind))
        rc = entity_state_set_int(state, prop, 0, value.i);
    else if (lua_values_is_unsigned(kind))
        rc = entity_state_set_uint(state, prop, 0, value.u);
    else if (kind == ENTITY_DEF_FLOAT || kind == ENTITY_DEF_DOUBLE)
        rc = entity_state_set_float(state, prop, 0, value.f);
    else if (kind == ENTITY_DEF_BOOL)
        rc = entity_state_set_bool(state, prop, 0, value.b);
    else if (kind == ENTITY_DEF_STRING)
        rc = entity_state_set_string(state, prop, 0, value.s, value.length);
    else if (kind == ENTITY_DEF_BYTES)
        rc = entity_state_set_bytes(state, prop, 0, value.s, value.length);
    else if (kind == ENTITY_DEF_ENTITY)
        rc = entity_state_set_entity(state, prop, 0, value.h);
    else if (kind == ENTITY_DEF_VECTOR2)
        rc = entity_state_set_vector2(state, prop, 0, value.v[0], value.v[1]);
    else if (kind == ENTITY_DEF_VECTOR3)
        rc = entity_state_set_vector3(state, prop, 0, value.v[0], value.v[1], value.v[2]);
    if (rc != 0) lua_values_raise(L, "%s: the value is refused: %s", what, entity_state_strerror(rc));
}

void lua_values_fill_args(lua_State *L, int first, int count, const entity_def_method *method, entity_state *state,
                          uint64_t (*entity_id)(lua_State *L, int idx)) {
    if (count > (int)method->arg_count)
        lua_values_fail(L, "%s takes %d argument%s, %d given", method->name, (int)method->arg_count,
                        method->arg_count == 1 ? "" : "s", count);
    for (int i = 0; i < count; i++) {
        char what[160];
        snprintf(what, sizeof what, "%s(%s)", method->name, method->args[i].name);
        lua_values_store_state(L, first + i, state, (uint16_t)i, &method->args[i].type, what, entity_id);
    }
}

void lua_values_fill_named(lua_State *L, int idx, const entity_def_method *method, entity_state *state,
                           uint64_t (*entity_id)(lua_State *L, int idx)) {
    idx = lua_absindex(L, idx);
    if (lua_isnoneornil(L, idx)) return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *name = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        size_t found = method->arg_count;
        for (size_t i = 0; name && i < method->arg_count; i++)
            if (strcmp(method->args[i].name, name) == 0) found = i;
        if (found == method->arg_count)
            lua_values_raise(L, "%s has no field '%s'", method->name, name ? name : "(not a name)");
        char what[160];
        snprintf(what, sizeof what, "%s.%s", method->name, name);
        lua_values_store_state(L, -1, state, (uint16_t)found, &method->args[found].type, what, entity_id);
        lua_pop(L, 1);
    }
}

int lua_values_push_args(lua_State *L, const entity_def_method *method, const entity_state *state) {
    luaL_checkstack(L, (int)method->arg_count + 2, "a method's arguments");
    for (size_t i = 0; i < method->arg_count; i++)
        lua_values_push_state(L, state, (uint16_t)i, 0, &method->args[i].type);
    return (int)method->arg_count;
}

void lua_values_push_named(lua_State *L, const entity_def_method *method, const entity_state *state) {
    lua_createtable(L, 0, (int)method->arg_count);
    for (size_t i = 0; i < method->arg_count; i++) {
        lua_values_push_state(L, state, (uint16_t)i, 0, &method->args[i].type);
        lua_setfield(L, -2, method->args[i].name);
    }
}
