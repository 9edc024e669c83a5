/* lua_values.h -- values between Lua and the definitions' types: a Lua
 * value checked against a property's or an argument's declared type (its
 * range, its length) and stored, and a stored value pushed to Lua.
 *
 * The mapping (docs/lua.md): every integer kind is a Lua integer (uint64
 * above 2^63 wraps to a negative one); float and double a number; bool a
 * boolean; string and bytes a string; entity an integer id (an entity
 * object is accepted where one is stored); vector2 and vector3 a table
 * {x, y[, z]} (also read as {[1], [2], [3]}). Arrays and structs are
 * reached element by element, by path (entity:get("slots[2].count")).
 */
#ifndef TESSERA_LUA_VALUES_H
#define TESSERA_LUA_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "entity_def.h"
#include "entity_state.h"

/* luaL_error (Lua's formats: %s %d %I %f %p %c %U %%), declared as never
 * returning: it unwinds to the protected call, so neither the compiler nor
 * the analyzer should think the code after it runs. */
__attribute__((noreturn)) void lua_values_raise(lua_State *L, const char *format, ...);

/* One checked value of a scalar kind. `s` points into the Lua string
 * (valid while it is on the stack). */
typedef struct lua_values_scalar {
    int64_t i;
    uint64_t u;
    double f;
    bool b;
    uint64_t h;
    double v[3];
    const char *s;
    size_t length;
} lua_values_scalar;

/* Reads the Lua value at `idx` as `type` into `out`. Raises a Lua error
 * naming `what` ("Runner.score") and the rule broken (outside int8's range
 * [-128, 127], longer than 32 bytes, not a number) when it does not fit.
 * `entity_id` turns an entity object into its id (NULL: integers only). */
void lua_values_check(lua_State *L, int idx, const entity_def_type *type, const char *what,
                      uint64_t (*entity_id)(lua_State *L, int idx), lua_values_scalar *out);
/* Pushes `value` as `kind`. */
void lua_values_push_scalar(lua_State *L, entity_def_kind kind, const lua_values_scalar *value);

/* Whether a value of `type` is one Lua value (no array or struct). */
bool lua_values_is_scalar(const entity_def_type *type);

/* Pushes element `index` of property (or argument) `prop` of `state`. */
void lua_values_push_state(lua_State *L, const entity_state *state, uint16_t prop, uint32_t index,
                           const entity_def_type *type);
/* Checks the Lua value at `idx` and stores it in `state` (an argument's or
 * an event field's: no entity involved). Raises a Lua error when it does
 * not fit. */
void lua_values_store_state(lua_State *L, int idx, entity_state *state, uint16_t prop, const entity_def_type *type,
                            const char *what, uint64_t (*entity_id)(lua_State *L, int idx));

/* Fills `state`, the arguments of `method`, from `count` Lua values from
 * stack index `first` (missing ones keep their defaults; extra ones are an
 * error). */
void lua_values_fill_args(lua_State *L, int first, int count, const entity_def_method *method, entity_state *state,
                          uint64_t (*entity_id)(lua_State *L, int idx));
/* Fills `state` from the table at `idx` by argument name (unknown names
 * are an error). */
void lua_values_fill_named(lua_State *L, int idx, const entity_def_method *method, entity_state *state,
                           uint64_t (*entity_id)(lua_State *L, int idx));
/* Pushes every argument of `state` (of `method`), in order; returns how
 * many. */
int lua_values_push_args(lua_State *L, const entity_def_method *method, const entity_state *state);
/* Pushes a table of the arguments by name. */
void lua_values_push_named(lua_State *L, const entity_def_method *method, const entity_state *state);

#endif
