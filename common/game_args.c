/* game_args.c -- a method's arguments as game code reads and writes them
 * (game_args.h): bounds-checked by index or found by name, typed by the
 * definitions, with every refusal a -1 rather than an abort. */
#include "game_args.h"

#include "log.h"

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

/* ---- by name ---------------------------------------------------------------- */

static int game_args_index_of(const tessera_args *args, const char *name) {
    const entity_state *state = game_args_state(args);
    const entity_def_property *arg =
        state && name ? entity_def_class_find_property(entity_state_class(state), name) : NULL;
    return arg ? (int)arg->id : -1;
}

/* The position of `name` in *index, or -1 logged as the game's mistake. */
static int game_args_position(const tessera_args *args, const char *name, unsigned *index) {
    int found = game_args_index_of(args, name);
    if (found < 0) {
        const entity_state *state = game_args_state(args);
        if (state)
            log_warn("game: '%s' declares no argument or field '%s'", entity_state_class(state)->name,
                     name ? name : "(null)");
        return -1;
    }
    *index = (unsigned)found;
    return 0;
}

/* NOLINTBEGIN(bugprone-macro-parentheses): as above. */
#define GAME_ARGS_NAMED_GETTER(name, type)                                                                   \
    static int game_args_get_##name##_named(const tessera_args *args, const char *field, type *value) {      \
        unsigned index;                                                                                      \
        return game_args_position(args, field, &index) == 0 ? game_args_get_##name(args, index, value) : -1; \
    }
GAME_ARGS_NAMED_GETTER(int, int64_t)
GAME_ARGS_NAMED_GETTER(uint, uint64_t)
GAME_ARGS_NAMED_GETTER(float, double)
GAME_ARGS_NAMED_GETTER(handle, tessera_handle)
GAME_ARGS_NAMED_GETTER(bool, bool)

#define GAME_ARGS_NAMED_SETTER(name, type)                                                                   \
    static int game_args_set_##name##_named(tessera_args *args, const char *field, type value) {             \
        unsigned index;                                                                                      \
        return game_args_position(args, field, &index) == 0 ? game_args_set_##name(args, index, value) : -1; \
    }
GAME_ARGS_NAMED_SETTER(int, int64_t)
GAME_ARGS_NAMED_SETTER(uint, uint64_t)
GAME_ARGS_NAMED_SETTER(float, double)
GAME_ARGS_NAMED_SETTER(handle, tessera_handle)
GAME_ARGS_NAMED_SETTER(bool, bool)
/* NOLINTEND(bugprone-macro-parentheses) */

static int game_args_get_string_named(const tessera_args *args, const char *field, const char **value, size_t *length) {
    unsigned index;
    return game_args_position(args, field, &index) == 0 ? game_args_get_string(args, index, value, length) : -1;
}

static int game_args_set_string_named(tessera_args *args, const char *field, const char *value, size_t length) {
    unsigned index;
    return game_args_position(args, field, &index) == 0 ? game_args_set_string(args, index, value, length) : -1;
}

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
    .index_of = game_args_index_of,
    .get_int_named = game_args_get_int_named,
    .get_uint_named = game_args_get_uint_named,
    .get_float_named = game_args_get_float_named,
    .get_handle_named = game_args_get_handle_named,
    .get_bool_named = game_args_get_bool_named,
    .get_string_named = game_args_get_string_named,
    .set_int_named = game_args_set_int_named,
    .set_uint_named = game_args_set_uint_named,
    .set_float_named = game_args_set_float_named,
    .set_handle_named = game_args_set_handle_named,
    .set_bool_named = game_args_set_bool_named,
    .set_string_named = game_args_set_string_named,
};
