/* game_host.c -- owns the loaded game module (dlopen handle, its state)
 * and what it registered, and implements the engine services of
 * include/tessera/game.h on top of the cellapp's modules: the entity's
 * typed properties (entity_state), its timers (entity_timer), traps and
 * calls (cell.c, cell_message.c, base_route.c), spawning (reals.c),
 * teleporting (offload.c), events (event_route.c) and entity I/O
 * (io_route.c). The tick reaches game code through the game_host_* events
 * here, every other module through the game_hooks this host fills.
 *
 * The ABI's opaque types are the engine's own: a tessera_cellapp is this
 * game host, a tessera_entity a cell_entity, a tessera_args an entity_state
 * of a method's arguments, a tessera_class this file's tessera_class.
 */
#include "game_host.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/game.h>

#include "clock.h"
#include "game_abi.h"
#include "game_args.h"
#include "game_event.h"
#include "game_module.h"
#include "log.h"
#include "lua_cell.h"
#include "method_call.h"
#include "random_unit.h"
#include "witness.h"

#define GAME_HOST_MAX_THINKS 16
#define GAME_HOST_MAX_INPUTS 32
#define GAME_HOST_MAX_SYSTEMS 16
/* property_changed hooks running inside one another (a hook that sets
 * another property, whose hook sets a third...): deeper than any chain of
 * rules a game means, shallow enough that a cycle through many entities
 * ends at once. */
#define GAME_HOST_MAX_CHANGE_DEPTH 16
/* A pending think is a timer with this tag plus its index. */
#define GAME_HOST_THINK_TAG TESSERA_TIMER_TAG_LIMIT

/* What the game registered for one class of the definitions. */
struct tessera_class {
    const entity_def_class *cls;
    bool registered;
    tessera_cell_hooks hooks;
    size_t data_size;
    tessera_field *fields;
    size_t field_count;
    game_abi_function *methods; /* tessera_cell_method by cell method id; NULL: no body */
    struct game_host_think {    /* thinks by registration order: timer tag THINK_TAG + index */
        char name[48];
        tessera_cell_think think;
    } thinks[GAME_HOST_MAX_THINKS];
    size_t think_count;
    struct game_host_input { /* entity I/O inputs by name */
        char name[ENTITY_IO_NAME_MAX];
        tessera_field_type type;
        tessera_cell_input input;
    } inputs[GAME_HOST_MAX_INPUTS];
    size_t input_count;
    id_map members; /* the reals here of this class (id -> the entity) */
};

/* The reals here that bear one name (hash of the name -> this). */
typedef struct game_host_named {
    uint64_t *ids;
    size_t count, capacity;
} game_host_named;

struct game_host {
    game_host_services services;
    char path[256];
    void *library; /* dlopen handle; NULL without a module */
    const tessera_game_module *module;
    void *game;        /* what cell_init stored */
    bool initialising; /* registration is open */
    tessera_cell_tick tick;
    tessera_cell_context context; /* handed to every hook */
    const config_group *settings;
    tessera_class *classes; /* by entity_def_class id */
    size_t class_count;
    id_map names; /* hash of a name -> game_host_named */
    tessera_system systems[GAME_HOST_MAX_SYSTEMS];
    char system_names[GAME_HOST_MAX_SYSTEMS][48];
    size_t system_count, systems_started;
    game_event_listeners listeners;
    /* The property_changed hooks running, innermost last: a write to one
     * of these properties of that entity runs no hook again. */
    struct game_host_changing {
        uint64_t entity_id;
        int property;
    } changing[GAME_HOST_MAX_CHANGE_DEPTH];
    size_t changing_count;
    lua_cell *lua; /* the classes whose rules are Lua scripts; NULL: none */
};

static void game_host_install(game_host *host);

static tessera_cellapp *game_host_handle(game_host *host) { return (tessera_cellapp *)(void *)host; }
static game_host *game_host_of(tessera_cellapp *handle) { return (game_host *)(void *)handle; }
static cell_entity *game_host_entity_of(const tessera_entity *entity) { return (cell_entity *)(void *)entity; }
static tessera_entity *game_host_entity_handle(cell_entity *entity) { return (tessera_entity *)(void *)entity; }
static entity_state *game_host_args_of(const tessera_args *args) { return game_args_state(args); }
static game_host *game_host_of_entity(const cell_entity *entity) { return entity->home->shared->host; }

static tessera_class *game_host_class_of(game_host *host, const entity_def_class *cls) {
    return host && cls && cls->id < host->class_count ? &host->classes[cls->id] : NULL;
}

/* A real that game code may change. */
static bool game_host_writable(const cell_entity *entity, const char *what) {
    if (entity->kind == CELL_ENTITY_REAL && !entity->destroyed) return true;
    log_warn("game: entity %" PRIu64 " (%s): %s refused: it is %s here", entity->id, entity->cls->name, what,
             entity->destroyed ? "destroyed" : "a ghost (its real is on another cell)");
    return false;
}

/* ---- the per-entity data ----------------------------------------------------- */

static size_t game_host_field_type_size(tessera_field_type type) {
    switch (type) {
        case TESSERA_FIELD_INT32:
        case TESSERA_FIELD_UINT32:
        case TESSERA_FIELD_FLOAT:
            return 4;
        case TESSERA_FIELD_INT64:
        case TESSERA_FIELD_UINT64:
        case TESSERA_FIELD_DOUBLE:
        case TESSERA_FIELD_HANDLE:
            return 8;
        case TESSERA_FIELD_BOOL:
            return sizeof(bool);
        case TESSERA_FIELD_VECTOR3:
            return 3 * sizeof(float);
        case TESSERA_FIELD_STRING:
            return 0; /* any size of at least 1 */
    }
    return SIZE_MAX;
}

/* The entity's data, made (zeroed) the first time a real asks. */
static void *game_host_data_of(cell_entity *entity) {
    if (entity->kind != CELL_ENTITY_REAL) return NULL;
    if (entity->real->game_data) return entity->real->game_data;
    game_host *host = game_host_of_entity(entity);
    tessera_class *cls = game_host_class_of(host, entity->cls);
    if (!cls || cls->data_size == 0) return NULL;
    entity->real->game_data = xcalloc(1, cls->data_size);
    return entity->real->game_data;
}

void game_host_save(game_host *host, const cell_entity *entity, Tessera__Cluster__CellEntityState *out) {
    tessera_class *cls = game_host_class_of(host, entity->cls);
    if (!cls || cls->field_count == 0 || !entity->real->game_data) return;
    out->game_fields = xcalloc(cls->field_count, sizeof(Tessera__Cluster__GameField *));
    for (size_t i = 0; i < cls->field_count; i++) {
        const tessera_field *field = &cls->fields[i];
        const uint8_t *at = (const uint8_t *)entity->real->game_data + field->offset;
        Tessera__Cluster__GameField *saved = xmalloc(sizeof *saved);
        tessera__cluster__game_field__init(saved);
        saved->name = (char *)field->name;
        saved->type = (uint32_t)field->type;
        size_t length = field->type == TESSERA_FIELD_STRING ? strnlen((const char *)at, field->size) : field->size;
        saved->value.len = length;
        saved->value.data = xmalloc(length ? length : 1);
        memcpy(saved->value.data, at, length);
        out->game_fields[out->n_game_fields++] = saved;
    }
}

void game_host_restore(game_host *host, cell_entity *entity, const Tessera__Cluster__CellEntityState *state) {
    tessera_class *cls = game_host_class_of(host, entity->cls);
    if (!cls || state->n_game_fields == 0) return;
    uint8_t *data = game_host_data_of(entity);
    for (size_t i = 0; i < state->n_game_fields; i++) {
        const Tessera__Cluster__GameField *saved = state->game_fields[i];
        const tessera_field *field = NULL;
        for (size_t k = 0; data && k < cls->field_count && !field; k++)
            if (saved->name && strcmp(cls->fields[k].name, saved->name) == 0) field = &cls->fields[k];
        if (!field) {
            log_info("game: entity %" PRIu64 " (%s): saved field '%s' is not in this module's table: skipped",
                     entity->id, entity->cls->name, saved->name ? saved->name : "");
            continue;
        }
        bool fits =
            field->type == TESSERA_FIELD_STRING ? saved->value.len < field->size : saved->value.len == field->size;
        if (saved->type != (uint32_t)field->type || !fits) {
            log_warn("game: entity %" PRIu64 " (%s): saved field '%s' (type %u, %zu bytes) does not fit this "
                     "module's (type %u, %zu bytes): it starts at zero",
                     entity->id, entity->cls->name, field->name, saved->type, saved->value.len, (unsigned)field->type,
                     field->size);
            continue;
        }
        memset(data + field->offset, 0, field->size);
        if (saved->value.len) memcpy(data + field->offset, saved->value.data, saved->value.len);
    }
}

const tessera_field *game_host_find_field(game_host *host, const entity_def_class *cls, const char *name) {
    tessera_class *registered = game_host_class_of(host, cls);
    for (size_t i = 0; registered && name && i < registered->field_count; i++)
        if (strcmp(registered->fields[i].name, name) == 0) return &registered->fields[i];
    return NULL;
}

void *game_host_data(cell_entity *entity) { return game_host_data_of(entity); }

/* ---- registration -------------------------------------------------------------- */

static int game_host_check_fields(const char *class_name, size_t data_size, const tessera_field *fields, size_t count) {
    for (size_t i = 0; i < count; i++) {
        const tessera_field *field = &fields[i];
        size_t expected = game_host_field_type_size(field->type);
        if (!field->name || !field->name[0]) {
            log_warn("game: class %s: field %zu has no name", class_name, i);
            return -1;
        }
        if (expected == SIZE_MAX || (expected && field->size != expected) || field->size == 0) {
            log_warn("game: class %s: field '%s' has type %d and %zu bytes, which do not match", class_name,
                     field->name, (int)field->type, field->size);
            return -1;
        }
        if (field->offset > data_size || field->size > data_size - field->offset) {
            log_warn("game: class %s: field '%s' (offset %zu, %zu bytes) lies outside its %zu bytes of data",
                     class_name, field->name, field->offset, field->size, data_size);
            return -1;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(fields[k].name, field->name) == 0) {
                log_warn("game: class %s: field '%s' is declared twice", class_name, field->name);
                return -1;
            }
    }
    return 0;
}

static tessera_class *game_api_register_class(tessera_cellapp *handle, const char *class_name,
                                              const tessera_cell_hooks *hooks, size_t data_size,
                                              const tessera_field *fields, size_t field_count) {
    game_host *host = game_host_of(handle);
    if (!host || !host->initialising) {
        log_warn("game: register_class('%s') outside cell_init: refused", class_name ? class_name : "");
        return NULL;
    }
    const entity_def_class *def = game_abi_class_to_register(host->services.shared->definitions, class_name, "cellapp");
    if (!def) return NULL;
    tessera_class *cls = &host->classes[def->id];
    if (cls->registered) {
        log_warn("game: class %s is registered twice", class_name);
        return NULL;
    }
    if (field_count && !fields) return NULL;
    if (game_host_check_fields(class_name, data_size, fields, field_count) != 0) return NULL;
    cls->registered = true;
    if (hooks) cls->hooks = *hooks;
    cls->data_size = data_size;
    if (field_count) {
        cls->fields = xcalloc(field_count, sizeof *cls->fields);
        memcpy(cls->fields, fields, field_count * sizeof *fields);
        for (size_t i = 0; i < field_count; i++) cls->fields[i].name = xstrdup(fields[i].name);
    }
    cls->field_count = field_count;
    return cls;
}

static int game_api_register_method(tessera_cellapp *handle, tessera_class *cls, const char *method_name,
                                    tessera_cell_method body) {
    game_host *host = game_host_of(handle);
    if (!host || !host->initialising || !cls || !body) return -1;
    return game_abi_register_body(cls->cls, ENTITY_DEF_PART_CELL, method_name, cls->methods, (game_abi_function)body);
}

static int game_api_register_think(tessera_cellapp *handle, tessera_class *cls, const char *name,
                                   tessera_cell_think think) {
    game_host *host = game_host_of(handle);
    /* A NULL think runs the class's think hook, named. */
    if (!host || !host->initialising || !cls || (!think && !cls->hooks.think) || !name || !name[0] ||
        strlen(name) >= sizeof cls->thinks[0].name)
        return -1;
    for (size_t i = 0; i < cls->think_count; i++)
        if (strcmp(cls->thinks[i].name, name) == 0) {
            log_warn("game: class %s has a think '%s' already", cls->cls->name, name);
            return -1;
        }
    if (cls->think_count == GAME_HOST_MAX_THINKS) {
        log_warn("game: class %s has %d thinks: '%s' is one too many", cls->cls->name, GAME_HOST_MAX_THINKS, name);
        return -1;
    }
    struct game_host_think *slot = &cls->thinks[cls->think_count++];
    snprintf(slot->name, sizeof slot->name, "%s", name);
    slot->think = think;
    return 0;
}

static int game_api_register_system(tessera_cellapp *handle, const tessera_system *system) {
    game_host *host = game_host_of(handle);
    if (!host || !host->initialising || !system || !system->name || !system->name[0] ||
        host->system_count == GAME_HOST_MAX_SYSTEMS)
        return -1;
    size_t i = host->system_count++;
    host->systems[i] = *system;
    snprintf(host->system_names[i], sizeof host->system_names[i], "%s", system->name);
    host->systems[i].name = host->system_names[i];
    return 0;
}

static void game_api_set_tick(tessera_cellapp *handle, tessera_cell_tick tick) {
    game_host *host = game_host_of(handle);
    if (host && host->initialising) host->tick = tick;
}

static double game_api_setting_number(tessera_cellapp *handle, const char *name, double otherwise) {
    game_host *host = game_host_of(handle);
    return game_module_setting_number(host ? host->settings : NULL, name, otherwise);
}

/* ---- classes and properties ---------------------------------------------------- */

static tessera_class *game_api_find_class(tessera_cellapp *handle, const char *class_name) {
    game_host *host = game_host_of(handle);
    const entity_def_class *def =
        class_name ? entity_def_registry_find_class(host->services.shared->definitions, class_name) : NULL;
    tessera_class *cls = game_host_class_of(host, def);
    return cls && cls->registered ? cls : NULL;
}

static int game_api_property_id(const tessera_class *cls, const char *name) {
    return cls ? game_abi_property_id(cls->cls, name) : -1;
}

static int game_api_property_index(const tessera_class *cls, int property, const char *path, uint32_t *index) {
    if (!cls || !path || !index || !game_abi_property_ok(cls->cls, property)) return -1;
    return entity_state_index(cls->cls, (uint16_t)property, path, index) == 0 ? 0 : -1;
}

/* ---- entities --------------------------------------------------------------------- */

static tessera_entity *game_api_resolve(tessera_cellapp *handle, tessera_handle id) {
    cell_entity *entity = id ? spaces_find_entity(game_host_of(handle)->services.spaces, id) : NULL;
    return entity ? game_host_entity_handle(entity) : NULL;
}

static tessera_handle game_api_handle(const tessera_entity *entity) {
    return entity ? game_host_entity_of(entity)->id : TESSERA_HANDLE_NONE;
}

static tessera_class *game_api_class_of(const tessera_entity *entity) {
    const cell_entity *e = game_host_entity_of(entity);
    return game_host_class_of(game_host_of_entity(e), e->cls);
}

static const char *game_api_class_name(const tessera_entity *entity) { return game_host_entity_of(entity)->cls->name; }

static void *game_api_data(tessera_entity *entity) { return game_host_data_of(game_host_entity_of(entity)); }

static bool game_api_is_real(const tessera_entity *entity) {
    const cell_entity *e = game_host_entity_of(entity);
    return e->kind == CELL_ENTITY_REAL && !e->destroyed;
}

static bool game_api_has_client(const tessera_entity *entity) {
    return cell_entity_witness(game_host_entity_of(entity)) != NULL;
}

static void game_api_position(const tessera_entity *entity, float position[3], float *yaw) {
    const cell_entity *e = game_host_entity_of(entity);
    if (position) {
        position[0] = e->x;
        position[1] = e->y;
        position[2] = e->z;
    }
    if (yaw) *yaw = e->yaw;
}

static uint32_t game_api_tick(const tessera_entity *entity) { return game_host_entity_of(entity)->home->tick; }
static uint64_t game_api_now_ms(tessera_cellapp *handle) {
    (void)handle;
    return clock_monotonic_us() / 1000;
}
static uint64_t game_api_wall_ms(tessera_cellapp *handle) {
    (void)handle;
    return clock_wall_us() / 1000;
}
static double game_api_random_unit(tessera_cellapp *handle) {
    return random_unit(game_host_of(handle)->services.random_state);
}

/* ---- properties --------------------------------------------------------------------- */

/* NOLINTBEGIN(bugprone-macro-parentheses): `type` names a type, which
 * cannot be put in parentheses. */
#define GAME_HOST_GETTER(name, type)                                                                          \
    static int game_api_get_##name(const tessera_entity *entity, int property, uint32_t index, type *value) { \
        const cell_entity *e = game_host_entity_of(entity);                                                   \
        return game_abi_get_##name(e->cls, e->state, property, index, value);                                 \
    }
GAME_HOST_GETTER(int, int64_t)
GAME_HOST_GETTER(uint, uint64_t)
GAME_HOST_GETTER(float, double)
GAME_HOST_GETTER(handle, tessera_handle)
GAME_HOST_GETTER(bool, bool)

/* NOLINTEND(bugprone-macro-parentheses) */

static int game_api_get_string(const tessera_entity *entity, int property, uint32_t index, const char **value,
                               size_t *length) {
    const cell_entity *e = game_host_entity_of(entity);
    return game_abi_get_string(e->cls, e->state, property, index, value, length);
}

static void game_host_property_changed(cell_entity *entity, int property, uint32_t index);

/* Writes go through the real only (a ghost's properties are its real's). A
 * write that stores another value than the one held (read back: a float
 * is stored rounded) runs the property_changed hook.
 * NOLINTBEGIN(bugprone-macro-parentheses): as above. */
#define GAME_HOST_SETTER(name, type)                                                                   \
    static int game_api_set_##name(tessera_entity *entity, int property, uint32_t index, type value) { \
        cell_entity *e = game_host_entity_of(entity);                                                  \
        if (!game_host_writable(e, "a property write")) return -1;                                     \
        type before = 0, after = 0;                                                                    \
        (void)game_abi_get_##name(e->cls, e->state, property, index, &before);                         \
        if (game_abi_set_##name(e->cls, e->state, e->id, property, index, value) != 0) return -1;      \
        (void)game_abi_get_##name(e->cls, e->state, property, index, &after);                          \
        if (after != before) game_host_property_changed(e, property, index);                           \
        return 0;                                                                                      \
    }
GAME_HOST_SETTER(int, int64_t)
GAME_HOST_SETTER(uint, uint64_t)
GAME_HOST_SETTER(float, double)
GAME_HOST_SETTER(handle, tessera_handle)
GAME_HOST_SETTER(bool, bool)

/* NOLINTEND(bugprone-macro-parentheses) */

static int game_api_set_string(tessera_entity *entity, int property, uint32_t index, const char *value, size_t length) {
    cell_entity *e = game_host_entity_of(entity);
    if (!game_host_writable(e, "a property write")) return -1;
    const char *held = NULL;
    size_t held_length = 0;
    bool same = value && game_abi_get_string(e->cls, e->state, property, index, &held, &held_length) == 0 &&
                held_length == length && memcmp(held, value, length) == 0;
    if (game_abi_set_string(e->cls, e->state, e->id, property, index, value, length) != 0) return -1;
    if (!same) game_host_property_changed(e, property, index);
    return 0;
}

/* ---- timers and traps --------------------------------------------------------------- */

static uint64_t game_api_add_timer(tessera_entity *entity, uint64_t delay_ms, uint64_t repeat_ms, uint32_t tag,
                                   uint64_t user_data) {
    cell_entity *e = game_host_entity_of(entity);
    if (!game_host_writable(e, "a timer")) return 0;
    if (tag >= TESSERA_TIMER_TAG_LIMIT) {
        log_warn("game: entity %" PRIu64 ": timer tag %u is the engine's (at most %u)", e->id, tag,
                 TESSERA_TIMER_TAG_LIMIT - 1);
        return 0;
    }
    return entity_timers_add(e->home->timers, e->id, clock_monotonic_us(), delay_ms * 1000, repeat_ms * 1000, tag,
                             user_data);
}

static int game_api_cancel_timer(tessera_entity *entity, uint64_t timer_id) {
    cell_entity *e = game_host_entity_of(entity);
    if (e->kind != CELL_ENTITY_REAL) return -1;
    return entity_timers_cancel(e->home->timers, timer_id);
}

/* The index of think `name` of the entity's class, or -1. */
static int game_host_think_index(const cell_entity *e, const char *name) {
    const tessera_class *cls = game_host_class_of(game_host_of_entity(e), e->cls);
    for (size_t i = 0; cls && name && i < cls->think_count; i++)
        if (strcmp(cls->thinks[i].name, name) == 0) return (int)i;
    return -1;
}

/* Cancels the entity's pending think of tag `tag`. Returns 0, or -1. */
static int game_host_cancel_tagged(cell_entity *e, uint32_t tag) {
    entity_timer_state timers[64];
    size_t count = entity_timers_of(e->home->timers, e->id, clock_monotonic_us(), timers, 64);
    if (count > 64) count = 64;
    for (size_t i = 0; i < count; i++)
        if (timers[i].tag == tag) return entity_timers_cancel(e->home->timers, timers[i].timer_id);
    return -1;
}

static int game_api_set_think(tessera_entity *entity, const char *name, uint64_t delay_ms) {
    cell_entity *e = game_host_entity_of(entity);
    int index = game_host_think_index(e, name);
    if (index < 0) {
        log_warn("game: entity %" PRIu64 " (%s): no think '%s'", e->id, e->cls->name, name ? name : "");
        return -1;
    }
    if (!game_host_writable(e, "a think")) return -1;
    uint32_t tag = GAME_HOST_THINK_TAG + (uint32_t)index;
    game_host_cancel_tagged(e, tag);
    entity_timers_add(e->home->timers, e->id, clock_monotonic_us(), delay_ms * 1000, 0, tag, 0);
    return 0;
}

static int game_api_cancel_think(tessera_entity *entity, const char *name) {
    cell_entity *e = game_host_entity_of(entity);
    int index = game_host_think_index(e, name);
    if (index < 0 || e->kind != CELL_ENTITY_REAL) return -1;
    return game_host_cancel_tagged(e, GAME_HOST_THINK_TAG + (uint32_t)index);
}

/* The coordinate system's shape for the game's (the same three, named
 * apart so that game.h stays the engine's only contract): -1 if unknown.
 * A saved trap carries the number (proto/cluster.proto, TrapState.shape). */
_Static_assert((int)TESSERA_TRAP_BOX == (int)COORD_SHAPE_BOX && (int)TESSERA_TRAP_CIRCLE == (int)COORD_SHAPE_CIRCLE &&
                   (int)TESSERA_TRAP_SPHERE == (int)COORD_SHAPE_SPHERE,
               "a saved trap's shape is one number for the game and the cell");
static int game_host_shape(tessera_trap_shape shape, coord_shape *out) {
    switch (shape) {
        case TESSERA_TRAP_BOX:
            *out = COORD_SHAPE_BOX;
            return 0;
        case TESSERA_TRAP_CIRCLE:
            *out = COORD_SHAPE_CIRCLE;
            return 0;
        case TESSERA_TRAP_SPHERE:
            *out = COORD_SHAPE_SPHERE;
            return 0;
    }
    return -1;
}

static uint32_t game_api_add_trap_shaped(tessera_entity *entity, uint32_t tag, tessera_trap_shape shape, float radius) {
    cell_entity *e = game_host_entity_of(entity);
    if (!game_host_writable(e, "a trap")) return 0;
    coord_shape rule;
    if (game_host_shape(shape, &rule) != 0) {
        log_warn("game: entity %" PRIu64 ": a trap of unknown shape %d refused", e->id, (int)shape);
        return 0;
    }
    if (!isfinite(radius) || radius <= 0) {
        log_warn("game: entity %" PRIu64 ": a trap of radius %g refused", e->id, (double)radius);
        return 0;
    }
    uint32_t id = controller_new_id(e);
    return cell_add_trap(e->home, e, id, tag, rule, radius, NULL, 0) == 0 ? id : 0;
}

static uint32_t game_api_add_trap(tessera_entity *entity, uint32_t tag, float radius) {
    return game_api_add_trap_shaped(entity, tag, TESSERA_TRAP_BOX, radius);
}

/* ---- controllers ---------------------------------------------------------------------- */

static uint32_t game_api_move_to_point(tessera_entity *entity, const float destination[3], float speed, float distance,
                                       bool face, uint64_t user_data) {
    cell_entity *e = game_host_entity_of(entity);
    if (!game_host_writable(e, "a move")) return 0;
    uint32_t id = controller_move_to_point(e->home, e, destination, speed, distance, face, user_data);
    if (!id)
        log_info("game: entity %" PRIu64 ": move_to_point refused (a bad speed or distance, or a point outside "
                 "the space)",
                 e->id);
    return id;
}

static uint32_t game_api_move_to_entity(tessera_entity *entity, tessera_handle target, float speed, float distance,
                                        bool face, uint64_t user_data) {
    cell_entity *e = game_host_entity_of(entity);
    if (!game_host_writable(e, "a move")) return 0;
    uint32_t id = controller_move_to_entity(e->home, e, target, speed, distance, face, user_data);
    if (!id)
        log_info("game: entity %" PRIu64 ": move_to_entity %" PRIu64 " refused (not in this cell, itself, or a "
                 "bad speed or distance)",
                 e->id, target);
    return id;
}

/* The most corners a navigate follows. */
#define GAME_HOST_PATH_POINTS 256

static uint32_t game_api_navigate(tessera_entity *entity, const float destination[3], float speed, float distance,
                                  bool face, uint64_t user_data, char *why, size_t why_size) {
    cell_entity *e = game_host_entity_of(entity);
    char reason[160] = "";
    uint32_t id = 0;
    const navmesh *mesh = space_maps_navmesh(game_host_of_entity(e)->services.maps, e->home->space_name);
    float points[3 * GAME_HOST_PATH_POINTS];
    size_t count = 0;
    if (!game_host_writable(e, "a navigate")) {
        snprintf(reason, sizeof reason, "the entity is not a real here");
    } else if (!destination) {
        snprintf(reason, sizeof reason, "no destination");
    } else if (!mesh) {
        snprintf(reason, sizeof reason, "space '%s' has no navigation mesh (no map in the cellapp's maps)",
                 e->home->space_name);
    } else if (navmesh_find_path(mesh, (const float[3]){e->x, e->y, e->z}, destination, points, GAME_HOST_PATH_POINTS,
                                 &count, reason, sizeof reason) == 0) {
        /* The first corner is where it stands. */
        const float *corners = count > 1 ? points + 3 : points;
        size_t corner_count = count > 1 ? count - 1 : 1;
        id = controller_follow_path(e->home, e, corners, corner_count, speed, distance, face, user_data);
        if (!id) snprintf(reason, sizeof reason, "a bad speed or distance, or a corner outside the space");
    }
    if (!id && why && why_size) snprintf(why, why_size, "%s", reason);
    return id;
}

static uint32_t game_api_turn_to(tessera_entity *entity, float yaw, float speed, uint64_t user_data) {
    cell_entity *e = game_host_entity_of(entity);
    if (!game_host_writable(e, "a turn")) return 0;
    return controller_turn_to(e->home, e, yaw, speed, user_data);
}

static int game_api_cancel_controller(tessera_entity *entity, uint32_t controller_id) {
    cell_entity *e = game_host_entity_of(entity);
    if (e->kind != CELL_ENTITY_REAL) return -1;
    return controller_cancel(e->home, e, controller_id);
}

static void game_api_stop_movement(tessera_entity *entity) {
    cell_entity *e = game_host_entity_of(entity);
    if (e->kind == CELL_ENTITY_REAL) controller_stop(e);
}

/* ---- reach -------------------------------------------------------------------------- */

static bool game_api_in_view(const tessera_entity *viewer, const tessera_entity *target) {
    const cell_entity *v = game_host_entity_of(viewer), *t = game_host_entity_of(target);
    if (!cell_entity_witness(v)) return false;
    return v == t || witness_sees(cell_entity_witness(v), t->id);
}

static double game_api_distance(const tessera_entity *a, const tessera_entity *b) {
    const cell_entity *x = game_host_entity_of(a), *y = game_host_entity_of(b);
    return hypot((double)x->x - (double)y->x, (double)x->z - (double)y->z);
}

static size_t game_api_query_range(const tessera_entity *around, tessera_trap_shape shape, float radius,
                                   tessera_handle *out, size_t max) {
    const cell_entity *e = game_host_entity_of(around);
    coord_shape rule;
    if (game_host_shape(shape, &rule) != 0 || !isfinite(radius) || radius < 0) {
        log_warn("game: entity %" PRIu64 ": a range query of shape %d, radius %g refused", e->id, (int)shape,
                 (double)radius);
        return 0;
    }
    /* tessera_handle is the entity id, as the cell's ids are. */
    return cell_query_range(e->home, e, rule, radius, out, max);
}

/* ---- arguments and calls ------------------------------------------------------------ */

static tessera_args *game_api_args_create(const tessera_class *cls, tessera_part part, const char *method_name) {
    return cls ? game_module_args_create(cls->cls, part, method_name) : NULL;
}

static int game_api_call_cell(tessera_entity *from, tessera_entity *target, const char *method_name,
                              const tessera_args *args) {
    if (!target) return -1;
    cell_entity *t = game_host_entity_of(target);
    const entity_def_method *method = game_abi_method_for(t->cls, ENTITY_DEF_PART_CELL, method_name, args);
    if (!method) return -1;
    entity_state *owned = NULL;
    if (!args) owned = method_call_args_create(method);
    cell_message_call(game_host_of_entity(t)->services.messages, t, method, from ? game_host_entity_of(from)->id : 0,
                      args ? game_host_args_of(args) : owned);
    entity_state_free(owned);
    return 0;
}

static int game_api_call_base(tessera_entity *from, tessera_handle target, const char *class_name, tessera_part part,
                              const char *method_name, const tessera_args *args) {
    if (!from || !class_name || !method_name || (part != TESSERA_PART_BASE && part != TESSERA_PART_CLIENT)) return -1;
    cell_entity *f = game_host_entity_of(from);
    game_host *host = game_host_of_entity(f);
    const entity_def_class *cls = entity_def_registry_find_class(host->services.shared->definitions, class_name);
    if (!cls || !game_abi_method_for(cls, (entity_def_part)part, method_name, args)) return -1;
    return base_route_call(host->services.bases, f->id, target, class_name, (entity_def_part)part, method_name,
                           args ? game_host_args_of(args) : NULL);
}

static int game_api_call_clients(tessera_entity *entity, const char *method_name, const tessera_args *args,
                                 bool every_observer) {
    cell_entity *e = game_host_entity_of(entity);
    if (!game_host_writable(e, "a client call")) return -1;
    const entity_def_method *method = game_abi_method_for(e->cls, ENTITY_DEF_PART_CLIENT, method_name, args);
    if (!method) return -1;
    entity_state *owned = NULL;
    if (!args) owned = method_call_args_create(method);
    cell_message_call_client(e, method, args ? game_host_args_of(args) : owned, every_observer);
    entity_state_free(owned);
    return 0;
}

/* ---- game events and user messages ------------------------------------------------------ */

static tessera_args *game_api_event_args_create(tessera_cellapp *handle, const char *name) {
    return game_abi_event_args(game_host_of(handle)->services.shared->definitions, name, "cellapp");
}

static int game_api_listen_event(tessera_cellapp *handle, const char *name, tessera_cell_event_listener listener,
                                 void *user_data) {
    game_host *host = game_host_of(handle);
    return game_abi_listen(&host->listeners, host->services.shared->definitions, name, "cellapp",
                           (game_abi_function)listener, user_data);
}

/* One firing being delivered to the listeners. */
typedef struct game_host_firing {
    game_host *host;
    const char *name;
    uint64_t source_id;
    const tessera_args *fields;
} game_host_firing;

static void game_host_call_listener(game_abi_function listener, void *user_data, void *context) {
    const game_host_firing *firing = context;
    ((tessera_cell_event_listener)listener)(&firing->host->context, firing->name, firing->source_id, firing->fields,
                                            user_data);
}

void game_host_event_heard(game_host *host, const entity_def_method *event, uint64_t source_id,
                           const entity_state *fields) {
    if (!host) return;
    game_host_firing firing = {host, event->name, source_id, (const tessera_args *)(const void *)fields};
    game_abi_deliver(&host->listeners, event, game_host_call_listener, &firing);
}

/* What fire_event and send_event check alike: the event, its fields, the
 * source. Returns the fields to code (*owned to free), or NULL. */
static entity_state *game_host_event_checks(game_host *host, tessera_entity *source, const char *name,
                                            const tessera_args *fields, const entity_def_method **event,
                                            entity_state **owned) {
    *owned = NULL;
    if ((source && !game_host_writable(game_host_entity_of(source), "firing an event"))) return NULL;
    return game_event_check_firing(host->services.shared->definitions, &host->listeners, name, fields, "cellapp", event,
                                   owned);
}

static int game_api_fire_event(tessera_cellapp *handle, tessera_entity *source, const char *name,
                               const tessera_args *fields, tessera_event_scope scope) {
    game_host *host = game_host_of(handle);
    if (!source && (scope == TESSERA_EVENT_VIEWERS || scope == TESSERA_EVENT_SPACE)) {
        log_warn("game: event '%s' fired to %s without a source: refused", name ? name : "(null)",
                 scope == TESSERA_EVENT_VIEWERS ? "the viewers" : "a space");
        return -1;
    }
    if ((unsigned)scope > TESSERA_EVENT_SERVERS) {
        log_warn("game: event '%s' fired to an unknown scope %d: refused", name ? name : "(null)", (int)scope);
        return -1;
    }
    const entity_def_method *event;
    entity_state *owned;
    entity_state *state = game_host_event_checks(host, source, name, fields, &event, &owned);
    if (!state) return -1;
    cell_entity *s = source ? game_host_entity_of(source) : NULL;
    game_host_event_heard(host, event, s ? s->id : 0, state);
    Tessera__Client__GameEvent coded;
    game_event_encode(event, s ? s->id : 0, state, &coded);
    event_route_fire(host->services.events, s, scope, &coded);
    free(coded.args.data);
    entity_state_free(owned);
    host->services.counters->game_events++;
    return 0;
}

static int game_api_send_event(tessera_cellapp *handle, tessera_entity *source, const char *name,
                               const tessera_args *fields, const tessera_handle *recipients, size_t count) {
    game_host *host = game_host_of(handle);
    if (count && !recipients) return -1;
    const entity_def_method *event;
    entity_state *owned;
    entity_state *state = game_host_event_checks(host, source, name, fields, &event, &owned);
    if (!state) return -1;
    Tessera__Client__GameEvent coded;
    game_event_encode(event, source ? game_host_entity_of(source)->id : 0, state, &coded);
    size_t sent = event_route_send(host->services.events, &coded, recipients, count);
    free(coded.args.data);
    entity_state_free(owned);
    host->services.counters->game_events++;
    return (int)(sent > INT32_MAX ? INT32_MAX : sent);
}

/* ---- the world ------------------------------------------------------------------------ */

static const char *game_api_default_space(tessera_cellapp *handle) {
    return game_host_of(handle)->services.default_space;
}

static int game_api_spawn_area(tessera_cellapp *handle, const char *space, float *x, float *z, float *radius) {
    const space_layout *layout = spaces_layout(game_host_of(handle)->services.spaces, space);
    if (!layout) return -1;
    if (x) *x = (float)layout->spawn_x;
    if (z) *z = (float)layout->spawn_z;
    if (radius) *radius = (float)layout->spawn_radius;
    return 0;
}

static tessera_handle game_api_spawn(tessera_cellapp *handle, const char *class_name, const char *space, float x,
                                     float y, float z, float yaw) {
    game_host *host = game_host_of(handle);
    const entity_def_class *cls =
        class_name ? entity_def_registry_find_class(host->services.shared->definitions, class_name) : NULL;
    if (!cls) {
        log_warn("game: spawn: no class '%s'", class_name ? class_name : "");
        return TESSERA_HANDLE_NONE;
    }
    cell *c =
        space && spaces_layout(host->services.spaces, space) ? spaces_cell(host->services.spaces, space, true) : NULL;
    if (!c || !host->services.ids) return TESSERA_HANDLE_NONE;
    if (!cell_in_bounds(c, x, y, z) || !isfinite(yaw)) {
        log_warn("game: spawn of a %s at (%.1f, %.1f, %.1f): outside space '%s'", class_name, (double)x, (double)y,
                 (double)z, space);
        return TESSERA_HANDLE_NONE;
    }
    uint64_t id;
    if (id_block_take(host->services.ids, &id) != 0) {
        id_block_refill(host->services.ids);
        return TESSERA_HANDLE_NONE;
    }
    id_block_refill(host->services.ids);
    cell_entity *entity = reals_create_real(host->services.reals, c, id, cls, x, y, z, yaw, 0);
    if (!entity) log_panic("spawn: entity id %" PRIu64 " from a fresh block is taken", id);
    game_host_created(host, entity);
    return id;
}

static int game_api_destroy(tessera_entity *entity) {
    cell_entity *e = game_host_entity_of(entity);
    if (e->kind != CELL_ENTITY_REAL || e->real->baseapp_id) {
        log_warn("game: entity %" PRIu64 " (%s): destroy refused: %s", e->id, e->cls->name,
                 e->kind != CELL_ENTITY_REAL ? "it is a ghost here" : "a player's entity is destroyed by its base");
        return -1;
    }
    cell_doom(e->home, e);
    return 0;
}

static int game_api_teleport(tessera_entity *entity, const char *space, float x, float y, float z) {
    cell_entity *e = game_host_entity_of(entity);
    if (!game_host_writable(e, "a teleport")) return -1;
    char err[256];
    if (offload_teleport(game_host_of_entity(e)->services.offloads, e, space ? space : "", x, y, z, e->yaw, err,
                         sizeof err) != 0) {
        log_info("game: entity %" PRIu64 ": teleport refused: %s", e->id, err);
        return -1;
    }
    return 0;
}

static void game_api_log(tessera_cellapp *handle, tessera_log_level level, const tessera_entity *entity,
                         const char *format, ...) {
    (void)handle;
    char subject[96];
    if (entity) {
        const cell_entity *e = game_host_entity_of(entity);
        snprintf(subject, sizeof subject, "entity %" PRIu64 " (%s)", e->id, e->cls->name);
    }
    va_list args;
    va_start(args, format);
    game_module_log(level, entity ? subject : NULL, format, args);
    va_end(args);
}

/* ---- names, classes, entity I/O ------------------------------------------------------- */

static uint64_t game_host_name_hash(const char *name) {
    uint64_t hash = 14695981039346656037ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) hash = (hash ^ *p) * 1099511628211ull;
    return hash ? hash : 1;
}

static void game_host_index_name(game_host *host, const cell_entity *entity) {
    const char *name = cell_entity_name(entity);
    if (!name[0]) return;
    uint64_t key = game_host_name_hash(name);
    game_host_named *named = id_map_get(&host->names, key);
    if (!named) {
        named = xcalloc(1, sizeof *named);
        id_map_put(&host->names, key, named);
    }
    for (size_t i = 0; i < named->count; i++)
        if (named->ids[i] == entity->id) return;
    if (named->count == named->capacity) {
        named->capacity = named->capacity ? named->capacity * 2 : 4;
        named->ids = xrealloc(named->ids, named->capacity * sizeof *named->ids);
    }
    named->ids[named->count++] = entity->id;
}

static void game_host_unindex_name(game_host *host, const cell_entity *entity) {
    const char *name = cell_entity_name(entity);
    if (!name[0]) return;
    uint64_t key = game_host_name_hash(name);
    game_host_named *named = id_map_get(&host->names, key);
    for (size_t i = 0; named && i < named->count; i++)
        if (named->ids[i] == entity->id) {
            named->ids[i] = named->ids[--named->count];
            break;
        }
    if (named && named->count == 0) {
        id_map_remove(&host->names, key);
        free(named->ids);
        free(named);
    }
}

/* The entity is a real here now (created, arrived), or no longer. */
static void game_host_index(game_host *host, cell_entity *entity, bool here) {
    tessera_class *cls = game_host_class_of(host, entity->cls);
    if (!cls) return;
    if (here) {
        id_map_put(&cls->members, entity->id, entity);
        game_host_index_name(host, entity);
    } else {
        id_map_remove(&cls->members, entity->id);
        game_host_unindex_name(host, entity);
    }
}

static int game_api_set_name(tessera_entity *entity, const char *name) {
    cell_entity *e = game_host_entity_of(entity);
    if (!name || strlen(name) >= sizeof e->real->name || !game_host_writable(e, "a name")) return -1;
    game_host *host = game_host_of_entity(e);
    char old[sizeof e->real->name];
    snprintf(old, sizeof old, "%s", e->real->name);
    game_host_unindex_name(host, e);
    snprintf(e->real->name, sizeof e->real->name, "%s", name);
    game_host_index_name(host, e);
    if (strcmp(old, e->real->name) != 0) io_route_named(host->services.io_route, e, old);
    return 0;
}

static const char *game_api_name(const tessera_entity *entity) { return cell_entity_name(game_host_entity_of(entity)); }

static size_t game_api_find_by_name(tessera_cellapp *handle, const char *name, tessera_handle *out, size_t max) {
    game_host *host = game_host_of(handle);
    game_host_named *named = name && name[0] ? id_map_get(&host->names, game_host_name_hash(name)) : NULL;
    size_t found = 0;
    for (size_t i = 0; named && i < named->count; i++) {
        const cell_entity *e = spaces_find_entity(host->services.spaces, named->ids[i]);
        if (!e || e->kind != CELL_ENTITY_REAL || strcmp(e->real->name, name) != 0)
            continue; /* another name, same hash */
        if (found < max && out) out[found] = e->id;
        found++;
    }
    return found;
}

static size_t game_api_find_by_class(tessera_cellapp *handle, const char *class_name, tessera_handle *out, size_t max) {
    game_host *host = game_host_of(handle);
    const entity_def_class *def =
        class_name ? entity_def_registry_find_class(host->services.shared->definitions, class_name) : NULL;
    tessera_class *cls = game_host_class_of(host, def);
    if (!cls) return 0;
    size_t found = 0, cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&cls->members, &cursor, &id, &value)) {
        if (found < max && out) out[found] = id;
        found++;
    }
    return found;
}

static int game_api_register_input(tessera_cellapp *handle, tessera_class *cls, const char *name,
                                   tessera_field_type type, tessera_cell_input input) {
    game_host *host = game_host_of(handle);
    /* A NULL input runs the class's input hook, named. */
    if (!host || !host->initialising || !cls || (!input && !cls->hooks.input) || !name || !name[0] ||
        strlen(name) >= ENTITY_IO_NAME_MAX || type > TESSERA_FIELD_STRING || cls->input_count == GAME_HOST_MAX_INPUTS)
        return -1;
    for (size_t i = 0; i < cls->input_count; i++)
        if (strcmp(cls->inputs[i].name, name) == 0) return -1;
    struct game_host_input *slot = &cls->inputs[cls->input_count++];
    snprintf(slot->name, sizeof slot->name, "%s", name);
    slot->type = type;
    slot->input = input;
    return 0;
}

static int game_api_connect(tessera_entity *entity, const char *output, const char *target, const char *input,
                            const char *parameter, uint32_t delay_ms, int32_t times) {
    cell_entity *e = game_host_entity_of(entity);
    if (!game_host_writable(e, "a connection")) return -1;
    if (entity_io_connect(&e->real->outputs, output, target, input, parameter, delay_ms, times) != 0) {
        log_warn("game: entity %" PRIu64 ": connection %s -> %s.%s refused (an empty or long name, or times 0)", e->id,
                 output ? output : "", target ? target : "", input ? input : "");
        return -1;
    }
    return 0;
}

static size_t game_api_fire_output(tessera_entity *entity, const char *output, tessera_handle activator,
                                   tessera_handle caller, const char *parameter) {
    cell_entity *e = game_host_entity_of(entity);
    if (e->kind != CELL_ENTITY_REAL) return 0;
    game_host *host = game_host_of_entity(e);
    return entity_io_fire(host->services.io, &e->real->outputs, e->id, output, activator, caller, parameter,
                          clock_monotonic_us() / 1000);
}

/* A parameter's text as `type`. Returns 0, or -1 if it does not convert. */
int game_host_convert(const char *text, tessera_field_type type, tessera_value *out) {
    memset(out, 0, sizeof *out);
    out->type = type;
    out->s = text;
    char *end = NULL;
    switch (type) {
        case TESSERA_FIELD_INT32:
        case TESSERA_FIELD_INT64:
            out->i = strtoll(text, &end, 10);
            break;
        case TESSERA_FIELD_UINT32:
        case TESSERA_FIELD_UINT64:
        case TESSERA_FIELD_HANDLE:
            if (text[0] == '-') return -1;
            out->u = strtoull(text, &end, 10);
            out->h = out->u;
            break;
        case TESSERA_FIELD_FLOAT:
        case TESSERA_FIELD_DOUBLE:
            out->f = strtod(text, &end);
            if (!isfinite(out->f)) return -1;
            break;
        case TESSERA_FIELD_BOOL:
            if (strcmp(text, "1") == 0 || strcmp(text, "true") == 0)
                out->b = true;
            else if (strcmp(text, "0") == 0 || strcmp(text, "false") == 0)
                out->b = false;
            else
                return -1;
            return 0;
        case TESSERA_FIELD_VECTOR3: {
            /* Three numbers apart by white space, and nothing after them. */
            const char *at = text;
            for (int axis = 0; axis < 3; axis++) {
                char *after;
                errno = 0;
                out->v[axis] = strtof(at, &after);
                if (after == at || errno == ERANGE || !isfinite(out->v[axis])) return -1;
                at = after;
            }
            while (*at == ' ' || *at == '\t') at++;
            return *at == '\0' ? 0 : -1;
        }
        case TESSERA_FIELD_STRING:
            return 0;
    }
    return end && end != text && *end == '\0' ? 0 : -1;
}

/* Input `input` of one target, with the parameter converted. */
void game_host_io_input(game_host *host, cell_entity *target, uint64_t activator_id, uint64_t self_id,
                        const char *input, const char *parameter) {
    if (target->kind != CELL_ENTITY_REAL || target->destroyed) return;
    tessera_class *cls = game_host_class_of(host, target->cls);
    const struct game_host_input *slot = NULL;
    for (size_t i = 0; cls && i < cls->input_count && !slot; i++)
        if (strcmp(cls->inputs[i].name, input) == 0) slot = &cls->inputs[i];
    if (!slot) {
        log_warn("entity I/O: entity %" PRIu64 " (%s) has no input '%s': event skipped", target->id, target->cls->name,
                 input);
        return;
    }
    tessera_value value;
    if (game_host_convert(parameter, slot->type, &value) != 0) {
        log_warn("entity I/O: entity %" PRIu64 " (%s) input '%s': parameter '%s' does not convert: event skipped",
                 target->id, target->cls->name, input, parameter);
        return;
    }
    if (slot->input)
        slot->input(&host->context, game_host_entity_handle(target), game_host_data_of(target), activator_id, self_id,
                    &value);
    else
        cls->hooks.input(&host->context, game_host_entity_handle(target), game_host_data_of(target), slot->name,
                         activator_id, self_id, &value);
}

void game_host_io_deliver(const char *target, uint64_t self_id, uint64_t activator_id, uint64_t caller_id,
                          const char *input, const char *parameter, void *context) {
    game_host *host = context;
    uint64_t single = 0;
    if (strcmp(target, "!self") == 0)
        single = self_id;
    else if (strcmp(target, "!activator") == 0)
        single = activator_id;
    else if (strcmp(target, "!caller") == 0)
        single = caller_id;
    if (target[0] == '!') {
        if (!single) {
            log_info("entity I/O: %s is nobody: '%s' skipped", target, input);
            return;
        }
        /* Here, or wherever its real is. */
        io_route_to_entity(host->services.io_route, single, activator_id, self_id, input, parameter);
        return;
    }
    tessera_cellapp *handle = game_host_handle(host);
    tessera_handle ids[64];
    size_t count = game_api_find_by_name(handle, target, ids, 64);
    if (count == 0 && entity_def_registry_find_class(host->services.shared->definitions, target)) {
        /* No entity here bears the name, and it is a class: the class's
         * entities here. */
        count = game_api_find_by_class(handle, target, ids, 64);
        if (count == 0) log_info("entity I/O: no entity here is named or of class '%s': '%s' skipped", target, input);
        for (size_t i = 0; i < count && i < 64; i++) {
            cell_entity *e = spaces_find_entity(host->services.spaces, ids[i]);
            if (e) game_host_io_input(host, e, activator_id, self_id, input, parameter);
        }
        return;
    }
    if (count > 64) count = 64;
    for (size_t i = 0; i < count; i++) {
        cell_entity *e = spaces_find_entity(host->services.spaces, ids[i]);
        if (e) game_host_io_input(host, e, activator_id, self_id, input, parameter);
    }
    /* Those of the name elsewhere in the cluster. */
    io_route_to_name(host->services.io_route, target, ids, count, activator_id, self_id, input, parameter);
}

static const tessera_cell_api game_host_api = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .register_class = game_api_register_class,
    .register_method = game_api_register_method,
    .set_tick = game_api_set_tick,
    .register_think = game_api_register_think,
    .register_input = game_api_register_input,
    .register_system = game_api_register_system,
    .setting_number = game_api_setting_number,
    .find_class = game_api_find_class,
    .property_id = game_api_property_id,
    .property_index = game_api_property_index,
    .resolve = game_api_resolve,
    .handle = game_api_handle,
    .class_of = game_api_class_of,
    .class_name = game_api_class_name,
    .data = game_api_data,
    .is_real = game_api_is_real,
    .has_client = game_api_has_client,
    .position = game_api_position,
    .tick = game_api_tick,
    .now_ms = game_api_now_ms,
    .wall_ms = game_api_wall_ms,
    .random_unit = game_api_random_unit,
    .get_int = game_api_get_int,
    .get_uint = game_api_get_uint,
    .get_float = game_api_get_float,
    .get_handle = game_api_get_handle,
    .get_bool = game_api_get_bool,
    .get_string = game_api_get_string,
    .set_int = game_api_set_int,
    .set_uint = game_api_set_uint,
    .set_float = game_api_set_float,
    .set_handle = game_api_set_handle,
    .set_bool = game_api_set_bool,
    .set_string = game_api_set_string,
    .add_timer = game_api_add_timer,
    .cancel_timer = game_api_cancel_timer,
    .set_think = game_api_set_think,
    .cancel_think = game_api_cancel_think,
    .add_trap = game_api_add_trap,
    .move_to_point = game_api_move_to_point,
    .move_to_entity = game_api_move_to_entity,
    .navigate = game_api_navigate,
    .turn_to = game_api_turn_to,
    .cancel_controller = game_api_cancel_controller,
    .stop_movement = game_api_stop_movement,
    .in_view = game_api_in_view,
    .distance = game_api_distance,
    .args_create = game_api_args_create,
    .args = &game_args_api,
    .call_cell = game_api_call_cell,
    .call_base = game_api_call_base,
    .call_clients = game_api_call_clients,
    .default_space = game_api_default_space,
    .spawn_area = game_api_spawn_area,
    .spawn = game_api_spawn,
    .set_name = game_api_set_name,
    .name = game_api_name,
    .find_by_name = game_api_find_by_name,
    .find_by_class = game_api_find_by_class,
    .connect = game_api_connect,
    .fire_output = game_api_fire_output,
    .destroy = game_api_destroy,
    .teleport = game_api_teleport,
    .log = game_api_log,
    .event_args_create = game_api_event_args_create,
    .listen_event = game_api_listen_event,
    .fire_event = game_api_fire_event,
    .send_event = game_api_send_event,
    .add_trap_shaped = game_api_add_trap_shaped,
    .query_range = game_api_query_range,
};

/* ---- loading ---------------------------------------------------------------------------- */

static game_host *game_host_new(const game_host_services *services, const char *path, const config_group *settings) {
    game_host *host = xcalloc(1, sizeof *host);
    host->services = *services;
    snprintf(host->path, sizeof host->path, "%s", path ? path : "");
    host->settings = settings;
    host->context.app = game_host_handle(host);
    host->context.api = &game_host_api;
    id_map_init(&host->names);
    host->class_count = entity_def_registry_class_count(host->services.shared->definitions);
    host->classes = xcalloc(host->class_count ? host->class_count : 1, sizeof *host->classes);
    for (size_t i = 0; i < host->class_count; i++) {
        const entity_def_class *cls = entity_def_registry_class(host->services.shared->definitions, i);
        host->classes[cls->id].cls = cls;
        id_map_init(&host->classes[cls->id].members);
        size_t methods = cls->method_count[ENTITY_DEF_PART_CELL];
        host->classes[cls->id].methods = xcalloc(methods ? methods : 1, sizeof(game_abi_function));
    }
    return host;
}

/* Stops the started systems, last first. */
static void game_host_stop_systems(game_host *host) {
    while (host->systems_started > 0) {
        const tessera_system *system = &host->systems[--host->systems_started];
        if (system->shutdown) system->shutdown(&host->context);
        log_info("game system '%s' stopped", system->name);
    }
}

static void game_host_release(game_host *host) {
    for (size_t i = 0; i < host->class_count; i++) {
        tessera_class *cls = &host->classes[i];
        for (size_t k = 0; k < cls->field_count; k++) free((char *)cls->fields[k].name);
        free(cls->fields);
        free(cls->methods);
        id_map_close(&cls->members);
    }
    free(host->classes);
    size_t cursor = 0;
    uint64_t key;
    void *value;
    while (id_map_next(&host->names, &cursor, &key, &value)) {
        game_host_named *named = value;
        free(named->ids);
        free(named);
    }
    id_map_close(&host->names);
    if (host->library) dlclose(host->library);
    free(host);
}

/* Stops what game_host_load started before it failed, and frees the host. */
static void game_host_abandon(game_host *host) {
    game_host_stop_systems(host);
    lua_cell_free(host->lua);
    host->lua = NULL;
    if (host->module && host->module->cell_shutdown) host->module->cell_shutdown(game_host_handle(host), host->game);
    game_host_release(host);
}

game_host *game_host_load(const game_host_services *services, const char *path, const config_group *settings,
                          const game_host_scripts *scripts, char *err, size_t errlen) {
    game_host *host = game_host_new(services, path, settings);
    game_host_install(host);
    const char *module_name = "";
    if (path && path[0]) {
        const tessera_game_module *module = game_module_open(path, "cellapp", &host->library, err, errlen);
        if (!module) {
            game_host_release(host);
            return NULL;
        }
        host->module = module;
        module_name = game_module_name(module);
    }
    host->initialising = true;
    if (host->module && host->module->cell_init) {
        int rc = host->module->cell_init(game_host_handle(host), &game_host_api, &host->game);
        host->context.game = host->game;
        if (rc != 0) {
            snprintf(err, errlen, "game_module '%s' (%s): its cell_init failed (returned %d; its log lines say why)",
                     path, module_name, rc);
            host->initialising = false;
            game_host_abandon(host);
            return NULL;
        }
    }
    const char *scripts_folder = scripts && scripts->folder ? scripts->folder : "";
    if (scripts_folder[0]) {
        char why[600];
        host->lua = lua_cell_open(game_host_handle(host), &game_host_api, host->services.shared->definitions,
                                  scripts_folder, &scripts->limits, why, sizeof why);
        if (!host->lua && why[0]) {
            snprintf(err, errlen, "game_scripts '%s': %s", scripts_folder, why);
            host->initialising = false;
            game_host_abandon(host);
            return NULL;
        }
    }
    host->initialising = false;
    /* Its systems, in order; one that fails stops the start. */
    for (size_t i = 0; i < host->system_count; i++) {
        const tessera_system *system = &host->systems[i];
        if (system->init && system->init(&host->context) != 0) {
            snprintf(err, errlen, "game_module '%s' (%s): game system '%s' failed to start", path ? path : "",
                     module_name, system->name);
            game_host_abandon(host);
            return NULL;
        }
        host->systems_started = i + 1;
        log_info("game system '%s' started", system->name);
    }
    char why[600] = "";
    if (host->lua && lua_cell_start(host->lua, why, sizeof why) != 0) {
        snprintf(err, errlen, "game_scripts '%s': game.lua's cell.init failed: %s", scripts_folder, why);
        game_host_abandon(host);
        return NULL;
    }
    size_t registered = 0;
    for (size_t i = 0; i < host->class_count; i++) registered += host->classes[i].registered;
    if (host->module)
        log_info("game module '%s' loaded from %s: %zu classes with rules, %zu systems", module_name, path, registered,
                 host->system_count);
    if (host->lua)
        log_info("game scripts loaded from %s: %zu classes run Lua", lua_runtime_folder(lua_cell_runtime(host->lua)),
                 lua_cell_class_count(host->lua));
    host->services.shared->report_views = game_host_wants_views(host);
    return host;
}

struct lua_cell *game_host_lua(tessera_cellapp *app) {
    game_host *host = game_host_of(app);
    return host ? host->lua : NULL;
}

bool game_host_lua_figures(const game_host *host, lua_runtime_figures *out) {
    if (!host || !host->lua) return false;
    *out = lua_runtime_get_figures(lua_cell_runtime(host->lua));
    return true;
}

void game_host_request_reload(game_host *host) {
    if (host && host->lua) lua_cell_request_reload(host->lua);
}

void game_host_free(game_host *host) {
    if (!host) return;
    game_host_stop_systems(host);
    lua_cell_free(host->lua);
    host->lua = NULL;
    if (host->module && host->module->cell_shutdown) host->module->cell_shutdown(game_host_handle(host), host->game);
    game_host_release(host);
}

const char *game_host_name(const game_host *host) {
    return host && host->module && host->module->name ? host->module->name : "";
}

/* ---- events ------------------------------------------------------------------------------ */

/* The hooks of a real's class, or NULL when the game has none for it. */
static const tessera_cell_hooks *game_host_hooks(game_host *host, const cell_entity *entity) {
    if (!host || entity->kind != CELL_ENTITY_REAL) return NULL;
    tessera_class *cls = game_host_class_of(host, entity->cls);
    return cls && cls->registered ? &cls->hooks : NULL;
}

#define GAME_HOST_CALL(host, entity, hook, ...)                                                                        \
    do {                                                                                                               \
        const tessera_cell_hooks *hooks_ = game_host_hooks(host, entity);                                              \
        if (hooks_ && hooks_->hook)                                                                                    \
            hooks_->hook(&(host)->context, game_host_entity_handle(entity), game_host_data_of(entity), ##__VA_ARGS__); \
    } while (0)

/* A game write changed `property` (element `index`) of the real `entity`:
 * its class's property_changed hook runs, unless one is running already
 * for that property of that entity (a set from inside a hook does not call
 * it again), or GAME_HOST_MAX_CHANGE_DEPTH hooks are (logged). */
static void game_host_property_changed(cell_entity *entity, int property, uint32_t index) {
    game_host *host = game_host_of_entity(entity);
    const tessera_cell_hooks *hooks = game_host_hooks(host, entity);
    if (!hooks || !hooks->property_changed) return;
    for (size_t i = 0; i < host->changing_count; i++)
        if (host->changing[i].entity_id == entity->id && host->changing[i].property == property) return;
    if (host->changing_count == GAME_HOST_MAX_CHANGE_DEPTH) {
        log_warn("game: entity %" PRIu64 " %s.%s changed %d property_changed hooks deep: its hook is not run (a "
                 "cycle of changes?)",
                 entity->id, entity->cls->name, entity->cls->properties[property].name, GAME_HOST_MAX_CHANGE_DEPTH);
        return;
    }
    host->changing[host->changing_count++] = (struct game_host_changing){entity->id, property};
    hooks->property_changed(&host->context, game_host_entity_handle(entity), game_host_data_of(entity), property,
                            index);
    host->changing_count--;
}

void game_host_tick(game_host *host) {
    if (host && host->tick) host->tick(&host->context);
    if (host && host->lua) lua_cell_tick(host->lua, clock_monotonic_us() / 1000);
}

void game_host_before_thinks(game_host *host) {
    for (size_t i = 0; host && i < host->systems_started; i++)
        if (host->systems[i].before_thinks) host->systems[i].before_thinks(&host->context);
}

void game_host_after_thinks(game_host *host) {
    for (size_t i = 0; host && i < host->systems_started; i++)
        if (host->systems[i].after_thinks) host->systems[i].after_thinks(&host->context);
}

void game_host_created(game_host *host, cell_entity *entity) {
    if (host) {
        game_host_index(host, entity, true);
        if (entity->real->name[0]) io_route_named(host->services.io_route, entity, NULL);
    }
    GAME_HOST_CALL(host, entity, created);
}

void game_host_destroyed(game_host *host, cell_entity *entity) {
    GAME_HOST_CALL(host, entity, destroyed);
    if (host) {
        game_host_index(host, entity, false);
        io_route_unnamed(host->services.io_route, entity);
    }
}

void game_host_leaving(game_host *host, cell_entity *entity) {
    GAME_HOST_CALL(host, entity, leaving);
    if (host) game_host_index(host, entity, false);
}

void game_host_arrived(game_host *host, cell_entity *entity) {
    if (host) game_host_index(host, entity, true);
    GAME_HOST_CALL(host, entity, arrived);
}

void game_host_restored(game_host *host, cell_entity *entity, uint32_t state_age_ms, bool from_ghost) {
    if (host) game_host_index(host, entity, true);
    GAME_HOST_CALL(host, entity, restored, state_age_ms, from_ghost);
}

void game_host_teleported(game_host *host, cell_entity *entity, bool space_changed) {
    GAME_HOST_CALL(host, entity, teleported, space_changed);
}

void game_host_moved(game_host *host, cell_entity *entity, double metres) {
    if (isfinite(metres)) GAME_HOST_CALL(host, entity, moved, metres);
}

void game_host_witness(game_host *host, cell_entity *entity, bool got) {
    if (got)
        GAME_HOST_CALL(host, entity, got_witness);
    else
        GAME_HOST_CALL(host, entity, lost_witness);
}

void game_host_view(game_host *host, cell_entity *owner, uint64_t other_id, bool entered) {
    if (entered) {
        cell_entity *other = spaces_find_entity(host->services.spaces, other_id);
        if (other) GAME_HOST_CALL(host, owner, entered_view, game_host_entity_handle(other));
    } else {
        GAME_HOST_CALL(host, owner, left_view, other_id);
    }
}

bool game_host_wants_views(const game_host *host) {
    for (size_t i = 0; host && i < host->class_count; i++)
        if (host->classes[i].registered && (host->classes[i].hooks.entered_view || host->classes[i].hooks.left_view))
            return true;
    return false;
}

void game_host_trap(game_host *host, cell_entity *owner, uint32_t tag, cell_entity *visitor, bool entered) {
    if (entered)
        GAME_HOST_CALL(host, owner, entered_trap, tag, game_host_entity_handle(visitor));
    else
        GAME_HOST_CALL(host, owner, left_trap, tag, game_host_entity_handle(visitor));
}

void game_host_timer(game_host *host, cell_entity *entity, uint64_t timer_id, uint32_t tag, uint64_t user_data) {
    if (tag >= GAME_HOST_THINK_TAG) {
        tessera_class *cls = game_host_class_of(host, entity->cls);
        size_t index = tag - GAME_HOST_THINK_TAG;
        if (!cls || entity->kind != CELL_ENTITY_REAL || index >= cls->think_count) return;
        if (cls->thinks[index].think)
            cls->thinks[index].think(&host->context, game_host_entity_handle(entity), game_host_data_of(entity));
        else
            cls->hooks.think(&host->context, game_host_entity_handle(entity), game_host_data_of(entity),
                             cls->thinks[index].name);
        return;
    }
    GAME_HOST_CALL(host, entity, timer, timer_id, tag, user_data);
}

void game_host_controller_event(cell *c, cell_entity *entity, controller_event event, uint32_t controller_id,
                                uint64_t user_data, const char *reason, void *context) {
    game_host *host = context;
    (void)c;
    switch (event) {
        case CONTROLLER_MOVED:
            GAME_HOST_CALL(host, entity, controller_moved, controller_id, user_data);
            break;
        case CONTROLLER_ARRIVED:
            GAME_HOST_CALL(host, entity, controller_arrived, controller_id, user_data);
            break;
        case CONTROLLER_FAILED:
            GAME_HOST_CALL(host, entity, controller_failed, controller_id, user_data, reason ? reason : "");
            break;
    }
}

bool game_host_call(game_host *host, cell_entity *entity, const entity_def_method *method, uint64_t caller_id,
                    const entity_state *args) {
    tessera_class *cls = game_host_class_of(host, entity->cls);
    tessera_cell_method body =
        cls && method->part == ENTITY_DEF_PART_CELL && method->id < entity->cls->method_count[ENTITY_DEF_PART_CELL]
            ? (tessera_cell_method)cls->methods[method->id]
            : NULL;
    const tessera_cell_hooks *hooks = cls && cls->registered ? &cls->hooks : NULL;
    bool named = !body && hooks && hooks->method && method->part == ENTITY_DEF_PART_CELL;
    if ((!body && !named) || entity->kind != CELL_ENTITY_REAL) {
        log_info("entity %" PRIu64 ": %s.%s has no body in this game: ignored", entity->id, entity->cls->name,
                 method->name);
        return false;
    }
    if (named)
        hooks->method(&host->context, game_host_entity_handle(entity), game_host_data_of(entity), method->name,
                      caller_id, (const tessera_args *)(const void *)args);
    else
        body(&host->context, game_host_entity_handle(entity), game_host_data_of(entity), caller_id,
             (const tessera_args *)(const void *)args);
    return true;
}

/* ---- the hooks the engine's modules reach the game through ---------------------------------- */

static void game_host_hook_created(void *host, cell_entity *entity) { game_host_created(host, entity); }
static void game_host_hook_destroyed(void *host, cell_entity *entity) { game_host_destroyed(host, entity); }
static void game_host_hook_leaving(void *host, cell_entity *entity) { game_host_leaving(host, entity); }
static void game_host_hook_arrived(void *host, cell_entity *entity) { game_host_arrived(host, entity); }
static void game_host_hook_restored(void *host, cell_entity *entity, uint32_t state_age_ms, bool from_ghost) {
    game_host_restored(host, entity, state_age_ms, from_ghost);
}
static void game_host_hook_teleported(void *host, cell_entity *entity, bool space_changed) {
    game_host_teleported(host, entity, space_changed);
}
static void game_host_hook_moved(void *host, cell_entity *entity, double metres) {
    game_host_moved(host, entity, metres);
}
static void game_host_hook_witness(void *host, cell_entity *entity, bool got) { game_host_witness(host, entity, got); }
static bool game_host_hook_call(void *host, cell_entity *entity, const entity_def_method *method, uint64_t caller_id,
                                const entity_state *args) {
    return game_host_call(host, entity, method, caller_id, args);
}
static void game_host_hook_event_heard(void *host, const entity_def_method *event, uint64_t source_id,
                                       const entity_state *fields) {
    game_host_event_heard(host, event, source_id, fields);
}
static void game_host_hook_io_input(void *host, cell_entity *target, uint64_t activator_id, uint64_t self_id,
                                    const char *input, const char *parameter) {
    game_host_io_input(host, target, activator_id, self_id, input, parameter);
}
static void game_host_hook_save(void *host, const cell_entity *entity, Tessera__Cluster__CellEntityState *out) {
    game_host_save(host, entity, out);
}
static void game_host_hook_restore(void *host, cell_entity *entity, const Tessera__Cluster__CellEntityState *state) {
    game_host_restore(host, entity, state);
}
static void game_host_hook_trap(void *host, cell_entity *owner, uint32_t tag, cell_entity *visitor, bool entered) {
    game_host_trap(host, owner, tag, visitor, entered);
}

/* The host becomes what the cells report traps to and what an entity
 * handle leads back to (shared->host), and fills the modules' hooks. */
static void game_host_install(game_host *host) {
    cell_shared *shared = host->services.shared;
    shared->host = host;
    shared->on_trap = game_host_hook_trap;
    *host->services.hooks = (game_hooks){
        .host = host,
        .created = game_host_hook_created,
        .destroyed = game_host_hook_destroyed,
        .leaving = game_host_hook_leaving,
        .arrived = game_host_hook_arrived,
        .restored = game_host_hook_restored,
        .teleported = game_host_hook_teleported,
        .moved = game_host_hook_moved,
        .witness = game_host_hook_witness,
        .call = game_host_hook_call,
        .event_heard = game_host_hook_event_heard,
        .io_input = game_host_hook_io_input,
        .save = game_host_hook_save,
        .restore = game_host_hook_restore,
    };
}
