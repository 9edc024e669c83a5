/* game_args.c -- a method's arguments as game code reads and writes them
 * (game_args.h): bounds-checked by index, typed by the definitions, with
 * every refusal a -1 rather than an abort. */
#include "game_args.h"

static bool game_args_index_ok(const entity_state *state, unsigned index) {
    return state && index < entity_state_class(state)->property_count;
}

/* NOLINTBEGIN(bugprone-macro-parentheses): `type` names a type, which
 * cannot be put in parentheses. */
#define GAME_ARGS_GETTER(name, type, getter)                                                 \
    static int game_args_get_##name(const tessera_args *args, unsigned index, type *value) { \
        const entity_state *state = game_args_state(args);                                   \
        if (!game_args_index_ok(state, index) || !value) return -1;                          \
        return getter(state, (uint16_t)index, 0, value) == 0 ? 0 : -1;                       \
    }
GAME_ARGS_GETTER(int, int64_t, entity_state_get_int)
GAME_ARGS_GETTER(uint, uint64_t, entity_state_get_uint)
GAME_ARGS_GETTER(float, double, entity_state_get_float)
GAME_ARGS_GETTER(handle, tessera_handle, entity_state_get_entity)
GAME_ARGS_GETTER(bool, bool, entity_state_get_bool)
/* NOLINTEND(bugprone-macro-parentheses) */

static int game_args_get_string(const tessera_args *args, unsigned index, const char **value, size_t *length) {
    const entity_state *state = game_args_state(args);
    if (!game_args_index_ok(state, index) || !value) return -1;
    return entity_state_get_string(state, (uint16_t)index, 0, value, length) == 0 ? 0 : -1;
}

#define GAME_ARGS_SETTER(name, type, setter)                                          \
    static int game_args_set_##name(tessera_args *args, unsigned index, type value) { \
        entity_state *state = game_args_state(args);                                  \
        if (!game_args_index_ok(state, index)) return -1;                             \
        return setter(state, (uint16_t)index, 0, value) == 0 ? 0 : -1;                \
    }
GAME_ARGS_SETTER(int, int64_t, entity_state_set_int)
GAME_ARGS_SETTER(uint, uint64_t, entity_state_set_uint)
GAME_ARGS_SETTER(float, double, entity_state_set_float)
GAME_ARGS_SETTER(handle, tessera_handle, entity_state_set_entity)
GAME_ARGS_SETTER(bool, bool, entity_state_set_bool)

static int game_args_set_string(tessera_args *args, unsigned index, const char *value, size_t length) {
    entity_state *state = game_args_state(args);
    if (!value || !game_args_index_ok(state, index)) return -1;
    return entity_state_set_string(state, (uint16_t)index, 0, value, length) == 0 ? 0 : -1;
}

static void game_args_free(tessera_args *args) { entity_state_free(game_args_state(args)); }

const tessera_args_api game_args_api = {
    .free = game_args_free,
    .get_int = game_args_get_int,
    .get_uint = game_args_get_uint,
    .get_float = game_args_get_float,
    .get_handle = game_args_get_handle,
    .get_bool = game_args_get_bool,
    .get_string = game_args_get_string,
    .set_int = game_args_set_int,
    .set_uint = game_args_set_uint,
    .set_float = game_args_set_float,
    .set_handle = game_args_set_handle,
    .set_bool = game_args_set_bool,
    .set_string = game_args_set_string,
};
