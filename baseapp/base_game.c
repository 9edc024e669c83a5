/* base_game.c -- owns the game module as the baseapp loads it (dlopen
 * handle, the state base_init made) and what it registered, and serves
 * the base side of include/tessera/game.h on top of the baseapp's modules:
 * the bases and their lives (base_entity.c, base_life.c), their clients
 * (proxy.c), entity calls (base_call.c), global names (base_mailbox.h),
 * cluster singletons (base_singleton.c), the bases' timers (base_timer.c),
 * events (base_event.c) and persistence.
 *
 * The ABI's opaque types are the engine's own: a tessera_baseapp is this
 * file's base_game, a tessera_base a base_entity, a tessera_args an
 * entity_state of a method's arguments, a tessera_base_class this file's
 * class record. A handle is the entity id; it resolves while the base is
 * here and not being destroyed.
 */
#include "base_game.h"

#include <dlfcn.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/game.h>

#include "base_singleton.h"
#include "clock.h"
#include "game_abi.h"
#include "game_args.h"
#include "game_event.h"
#include "game_module.h"
#include "log.h"
#include "lua_base.h"
#include "method_call.h"
#include "random_unit.h"

struct tessera_base_class {
    const entity_def_class *cls;
    bool registered;
    tessera_base_hooks hooks;
    game_abi_function *methods; /* tessera_base_method by base method id; NULL: no body */
};

struct base_game {
    base_game_services services;
    void *library;
    const tessera_game_module *module;
    void *game;
    bool initialising;
    tessera_base_tick tick;
    tessera_base_context context;
    const config_group *settings;
    tessera_base_class *classes; /* by entity_def_class id */
    size_t class_count;
    game_event_listeners listeners;
    uint64_t random_state;       /* random_unit (random_unit.h) */
    base_singletons *singletons; /* the cluster singletons the game takes part in */
    lua_base *lua;               /* the classes whose base rules are Lua scripts; NULL: none */
};

static tessera_baseapp *base_game_handle(base_game *game) { return (tessera_baseapp *)(void *)game; }
static base_game *base_game_of(tessera_baseapp *handle) { return (base_game *)(void *)handle; }
static base_entity *base_game_entity_of(const tessera_base *base) { return (base_entity *)(void *)base; }
static tessera_base *base_game_base_of(base_entity *base) { return (tessera_base *)(void *)base; }
/* The game serving a base handed to game code. */
static base_game *base_game_of_base(const base_entity *base) { return base_entities_host(base->set); }

static tessera_base_class *base_game_class_of(base_game *game, const entity_def_class *cls) {
    return game && cls && cls->id < game->class_count ? &game->classes[cls->id] : NULL;
}

/* A base game code may act on. */
static base_entity *base_game_live(tessera_base *handle) {
    base_entity *base = handle ? base_game_entity_of(handle) : NULL;
    return base_entity_is_live(base) ? base : NULL;
}

/* After game code ran on `handle`'s base: what it set of its
 * BASE_AND_CLIENT properties goes to its client. */
static void base_game_flush(base_game *game, entity_handle handle) {
    base_entity *base = base_entities_get(game->services.bases, handle);
    if (base) proxy_send_properties(game->services.players, base, false);
}

/* ---- registration ------------------------------------------------------------------ */

static tessera_base_class *base_api_register_class(tessera_baseapp *handle, const char *class_name,
                                                   const tessera_base_hooks *hooks) {
    base_game *game = base_game_of(handle);
    if (!game || !game->initialising) return NULL;
    const entity_def_class *def = game_abi_class_to_register(game->services.definitions, class_name, "baseapp");
    if (!def) return NULL;
    tessera_base_class *cls = &game->classes[def->id];
    if (cls->registered) {
        log_warn("game: class %s is registered twice", class_name);
        return NULL;
    }
    cls->registered = true;
    if (hooks) cls->hooks = *hooks;
    return cls;
}

static int base_api_register_method(tessera_baseapp *handle, tessera_base_class *cls, const char *method_name,
                                    tessera_base_method body) {
    base_game *game = base_game_of(handle);
    if (!game || !game->initialising || !cls || !body) return -1;
    return game_abi_register_body(cls->cls, ENTITY_DEF_PART_BASE, method_name, cls->methods, (game_abi_function)body);
}

static void base_api_set_tick(tessera_baseapp *handle, tessera_base_tick tick) {
    base_game *game = base_game_of(handle);
    if (game && game->initialising) game->tick = tick;
}

static double base_api_setting_number(tessera_baseapp *handle, const char *name, double otherwise) {
    base_game *game = base_game_of(handle);
    return game_module_setting_number(game ? game->settings : NULL, name, otherwise);
}

/* ---- classes, bases, properties --------------------------------------------------- */

static tessera_base_class *base_api_find_class(tessera_baseapp *handle, const char *class_name) {
    base_game *game = base_game_of(handle);
    const entity_def_class *def =
        class_name ? entity_def_registry_find_class(game->services.definitions, class_name) : NULL;
    tessera_base_class *cls = base_game_class_of(game, def);
    return cls && cls->registered ? cls : NULL;
}

static int base_api_property_id(const tessera_base_class *cls, const char *name) {
    return cls ? game_abi_property_id(cls->cls, name) : -1;
}

static tessera_base *base_api_resolve(tessera_baseapp *handle, tessera_handle id) {
    base_entity *base = id ? base_entities_find(base_game_of(handle)->services.bases, id) : NULL;
    return base_entity_is_live(base) ? base_game_base_of(base) : NULL;
}

static tessera_handle base_api_handle(const tessera_base *base) { return base_game_entity_of(base)->entity_id; }

static tessera_base_class *base_api_class_of(const tessera_base *base) {
    const base_entity *e = base_game_entity_of(base);
    return base_game_class_of(base_game_of_base(e), e->cls);
}

static const char *base_api_class_name(const tessera_base *base) { return base_game_entity_of(base)->cls->name; }
static const char *base_api_account(const tessera_base *base) { return base_game_entity_of(base)->name; }
static bool base_api_has_client(const tessera_base *base) {
    const base_entity *e = base_game_entity_of(base);
    return e->proxy && e->proxy->link;
}

static bool base_api_stopping(tessera_baseapp *handle) {
    const base_game *game = base_game_of(handle);
    return *game->services.draining || game->services.self->stopping;
}

/* NOLINTBEGIN(bugprone-macro-parentheses): `type` names a type, which
 * cannot be put in parentheses. */
#define BASE_GAME_GETTER(name, type)                                                                      \
    static int base_api_get_##name(const tessera_base *base, int property, uint32_t index, type *value) { \
        const base_entity *e = base_game_entity_of(base);                                                 \
        return game_abi_get_##name(e->cls, e->properties, property, index, value);                        \
    }
BASE_GAME_GETTER(int, int64_t)
BASE_GAME_GETTER(uint, uint64_t)
BASE_GAME_GETTER(float, double)
BASE_GAME_GETTER(handle, tessera_handle)
BASE_GAME_GETTER(bool, bool)

/* NOLINTEND(bugprone-macro-parentheses) */

static int base_api_get_string(const tessera_base *base, int property, uint32_t index, const char **value,
                               size_t *length) {
    const base_entity *e = base_game_entity_of(base);
    return game_abi_get_string(e->cls, e->properties, property, index, value, length);
}

/* NOLINTBEGIN(bugprone-macro-parentheses): as above. */
#define BASE_GAME_SETTER(name, type)                                                                      \
    static int base_api_set_##name(tessera_base *base, int property, uint32_t index, type value) {        \
        base_entity *e = base_game_live(base);                                                            \
        return e ? game_abi_set_##name(e->cls, e->properties, e->entity_id, property, index, value) : -1; \
    }
BASE_GAME_SETTER(int, int64_t)
BASE_GAME_SETTER(uint, uint64_t)
BASE_GAME_SETTER(float, double)
BASE_GAME_SETTER(handle, tessera_handle)
BASE_GAME_SETTER(bool, bool)

/* NOLINTEND(bugprone-macro-parentheses) */

static int base_api_set_string(tessera_base *base, int property, uint32_t index, const char *value, size_t length) {
    base_entity *e = base_game_live(base);
    return e ? game_abi_set_string(e->cls, e->properties, e->entity_id, property, index, value, length) : -1;
}

/* ---- calls ------------------------------------------------------------------------------ */

static tessera_args *base_api_args_create(const tessera_base_class *cls, tessera_part part, const char *method_name) {
    return cls ? game_module_args_create(cls->cls, part, method_name) : NULL;
}

static int base_api_call_cell(tessera_base *handle, const char *method_name, const tessera_args *args) {
    base_entity *player = base_game_live(handle);
    const entity_def_method *method =
        player ? game_abi_method_for(player->cls, ENTITY_DEF_PART_CELL, method_name, args) : NULL;
    if (!method) return -1;
    entity_state *owned = args ? NULL : method_call_args_create(method);
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(args ? game_args_state(args) : owned, &w);
    Tessera__Cluster__CellCall call = TESSERA__CLUSTER__CELL_CALL__INIT;
    call.caller_id = player->entity_id;
    call.method_id = method->id;
    call.args.data = (uint8_t *)bit_writer_data(&w);
    call.args.len = bit_writer_bytes(&w);
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL;
    message.call = &call;
    int rc = cell_link_send(base_game_of_base(player)->services.cells, player, &message);
    bit_writer_close(&w);
    entity_state_free(owned);
    return rc;
}

static int base_api_call_base(tessera_base *from, tessera_handle target, const char *class_name, tessera_part part,
                              const char *method_name, const tessera_args *args) {
    base_entity *player = from ? base_game_entity_of(from) : NULL;
    if (!player || !class_name || !method_name || (part != TESSERA_PART_BASE && part != TESSERA_PART_CLIENT)) return -1;
    base_game *game = base_game_of_base(player);
    const entity_def_class *cls = entity_def_registry_find_class(game->services.definitions, class_name);
    if (cls && !game_abi_method_for(cls, (entity_def_part)part, method_name, args)) return -1;
    return base_call(game->services.calls, player->entity_id, target, class_name, (entity_def_part)part, method_name,
                     args ? game_args_state(args) : NULL);
}

/* ---- global names ------------------------------------------------------------------------ */

typedef struct base_game_global_request {
    base_game *game;
    tessera_global_callback done;
    void *user_data;
} base_game_global_request;

static base_game_global_request *base_game_global_request_new(base_game *game, tessera_global_callback done,
                                                              void *user_data) {
    base_game_global_request *request = xmalloc(sizeof *request);
    *request = (base_game_global_request){game, done, user_data};
    return request;
}

static void base_game_on_registered(bool ok, uint64_t holder_id, void *context) {
    base_game_global_request *request = context;
    base_game *game = request->game;
    if (!game->services.self->stopping && request->done)
        request->done(&game->context, ok, holder_id, request->user_data);
    free(request);
}

static void base_game_on_found(uint64_t entity_id, void *context) {
    base_game_global_request *request = context;
    base_game *game = request->game;
    if (!game->services.self->stopping && request->done)
        request->done(&game->context, entity_id != 0, entity_id, request->user_data);
    free(request);
}

static base_mailbox *base_game_addresses(base_game *game) { return base_calls_mailbox(game->services.calls); }

static int base_api_register_global(tessera_baseapp *handle, const char *name, tessera_base *base,
                                    tessera_global_callback done, void *user_data) {
    base_game *game = base_game_of(handle);
    base_entity *player = base_game_live(base);
    if (!name || !player || game->services.self->stopping) return -1;
    base_game_global_request *request = base_game_global_request_new(game, done, user_data);
    if (base_mailbox_register_global(base_game_addresses(game), name, player->entity_id, base_game_on_registered,
                                     request) != 0) {
        free(request);
        return -1;
    }
    return 0;
}

static int base_api_find_global(tessera_baseapp *handle, const char *name, tessera_global_callback done,
                                void *user_data) {
    base_game *game = base_game_of(handle);
    if (!name || game->services.self->stopping) return -1;
    base_game_global_request *request = base_game_global_request_new(game, done, user_data);
    if (base_mailbox_find_global(base_game_addresses(game), name, base_game_on_found, request) != 0) {
        free(request);
        return -1;
    }
    return 0;
}

static void base_api_unregister_global(tessera_baseapp *handle, const char *name, tessera_handle holder) {
    base_game *game = base_game_of(handle);
    if (name && holder && !game->services.self->stopping)
        base_mailbox_unregister_global(base_game_addresses(game), name, holder);
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

/* A base made by game code: with its cell part asked for (no client yet),
 * as entity `entity_id` (0: a fresh one). NULL with why when none can be
 * made. */
static base_entity *base_game_make(base_game *game, const entity_def_class *cls, const char *key, const cJSON *stored,
                                   uint64_t entity_id, char *why, size_t why_size) {
    base_life *life = game->services.life;
    if (strlen(key) > BASE_ENTITY_NAME_MAX) {
        snprintf(why, why_size, "the key is longer than %d bytes", BASE_ENTITY_NAME_MAX);
        return NULL;
    }
    base_entity *base = entity_id ? base_life_make_as(life, entity_id, cls, key, stored, why, why_size)
                                  : base_life_make(life, cls, key, stored, why, why_size);
    if (base && base->state == BASE_ENTITY_CREATING_CELL && base_life_create_cell(life, base, false, 0) != 0) {
        base_life_destroy(life, base, false, "no cellapp for its cell part");
        snprintf(why, why_size, "no cellapp for its cell part");
        return NULL;
    }
    return base;
}

static tessera_handle base_api_create_base(tessera_baseapp *handle, const char *class_name, const char *key) {
    base_game *game = base_game_of(handle);
    const entity_def_class *cls =
        class_name ? entity_def_registry_find_class(game->services.definitions, class_name) : NULL;
    if (!cls || !key) {
        log_warn("game: create_base: no class '%s'", class_name ? class_name : "");
        return TESSERA_HANDLE_NONE;
    }
    char why[160];
    base_entity *base = base_game_make(game, cls, key, NULL, 0, why, sizeof why);
    if (!base) {
        log_warn("game: create_base of a %s for '%s': %s", class_name, key, why);
        return TESSERA_HANDLE_NONE;
    }
    return base->entity_id;
}

typedef struct base_game_load_request {
    base_game *game;
    entity_handle from;
    char class_name[64];
    char key[BASE_ENTITY_NAME_MAX + 1];
    tessera_loaded_callback done;
    void *user_data;
} base_game_load_request;

static void base_game_on_loaded(persistence_outcome outcome, const cJSON *stored, void *context) {
    base_game_load_request *request = context;
    base_game *game = request->game;
    if (game->services.self->stopping) {
        free(request);
        return;
    }
    base_entity *from = base_entities_get(game->services.bases, request->from);
    tessera_handle loaded = TESSERA_HANDLE_NONE;
    char why[160] = "";
    if (from) from->loading = false;
    if (!base_entity_is_live(from)) {
        snprintf(why, sizeof why, "the base that asked is gone");
    } else if (outcome == PERSISTENCE_UNAVAILABLE || outcome == PERSISTENCE_DAMAGED) {
        snprintf(why, sizeof why, "%s",
                 outcome == PERSISTENCE_DAMAGED ? "its record is damaged" : "Redis is unavailable");
    } else {
        const entity_def_class *cls = entity_def_registry_find_class(game->services.definitions, request->class_name);
        base_entity *made = cls ? base_game_make(game, cls, request->key, stored, 0, why, sizeof why) : NULL;
        if (!cls) snprintf(why, sizeof why, "the definitions have no class '%s'", request->class_name);
        if (made) loaded = made->entity_id;
    }
    if (request->done) request->done(&game->context, loaded, why, request->user_data);
    if (from) base_game_flush(game, request->from);
    free(request);
}

static int base_api_load_base(tessera_base *from, const char *class_name, const char *key, tessera_loaded_callback done,
                              void *user_data) {
    base_entity *player = base_game_live(from);
    if (!player || !class_name || !key || player->loading || strlen(class_name) >= 64 ||
        strlen(key) > BASE_ENTITY_NAME_MAX)
        return -1;
    base_game *game = base_game_of_base(player);
    base_game_load_request *request = xcalloc(1, sizeof *request);
    request->game = game;
    request->from = player->handle;
    snprintf(request->class_name, sizeof request->class_name, "%s", class_name);
    snprintf(request->key, sizeof request->key, "%s", key);
    request->done = done;
    request->user_data = user_data;
    if (persistence_load(game->services.store, class_name, key, base_game_on_loaded, request) != 0) {
        free(request);
        return -1;
    }
    player->loading = true;
    return 0;
}

static int base_api_give_client(tessera_base *from, tessera_base *to) {
    base_entity *source = base_game_live(from), *target = base_game_live(to);
    if (!source || !target) return -1;
    char why[160];
    if (proxy_give_client_to(base_game_of_base(source)->services.players, source, target, why, sizeof why) != 0) {
        log_info("game: entity %" PRIu64 ": giveClientTo entity %" PRIu64 " refused: %s", source->entity_id,
                 target->entity_id, why);
        return -1;
    }
    return 0;
}

static void base_api_destroy(tessera_base *base, bool write, const char *reason) {
    base_entity *player = base_game_live(base);
    if (player)
        base_life_destroy(base_game_of_base(player)->services.life, player, write,
                          reason ? reason : "its game destroyed it");
}

static void base_api_log(tessera_baseapp *handle, tessera_log_level level, const tessera_base *base, const char *format,
                         ...) {
    (void)handle;
    char subject[160];
    if (base) {
        const base_entity *e = base_game_entity_of(base);
        snprintf(subject, sizeof subject, "entity %" PRIu64 " (%s of '%s')", e->entity_id, e->cls->name, e->name);
    }
    va_list args;
    va_start(args, format);
    game_module_log(level, base ? subject : NULL, format, args);
    va_end(args);
}

/* ---- game events ------------------------------------------------------------------------------ */

static tessera_args *base_api_event_args_create(tessera_baseapp *handle, const char *name) {
    return game_abi_event_args(base_game_of(handle)->services.definitions, name, "baseapp");
}

static int base_api_listen_event(tessera_baseapp *handle, const char *name, tessera_base_event_listener listener,
                                 void *user_data) {
    base_game *game = base_game_of(handle);
    return game_abi_listen(&game->listeners, game->services.definitions, name, "baseapp", (game_abi_function)listener,
                           user_data);
}

/* One listener of a firing being delivered. */
typedef struct base_game_firing {
    base_game *game;
    const char *name;
    uint64_t source_id;
    const tessera_args *fields;
} base_game_firing;

static void base_game_call_listener(game_abi_function listener, void *user_data, void *context) {
    const base_game_firing *firing = context;
    ((tessera_base_event_listener)listener)(&firing->game->context, firing->name, firing->source_id, firing->fields,
                                            user_data);
}

static void base_game_event_heard(base_game *game, const entity_def_method *event, uint64_t source_id,
                                  const entity_state *fields) {
    base_game_firing firing = {game, event->name, source_id, (const tessera_args *)(const void *)fields};
    game_abi_deliver(&game->listeners, event, base_game_call_listener, &firing);
}

/* The event and its fields, checked; NULL (logged) when refused. */
static entity_state *base_game_event_checks(base_game *game, const char *name, const tessera_args *fields,
                                            const entity_def_method **event, entity_state **owned) {
    *owned = NULL;
    return game_event_check_firing(game->services.definitions, &game->listeners, name, fields, "baseapp", event, owned);
}

static int base_api_fire_event(tessera_baseapp *handle, tessera_base *source, const char *name,
                               const tessera_args *fields, tessera_event_scope scope) {
    base_game *game = base_game_of(handle);
    if (scope != TESSERA_EVENT_SERVER && scope != TESSERA_EVENT_EVERYONE && scope != TESSERA_EVENT_SERVERS) {
        log_warn("game: event '%s' fired from a base to a scope other than SERVER, EVERYONE or SERVERS (%d): refused",
                 name ? name : "(null)", (int)scope);
        return -1;
    }
    const entity_def_method *event;
    entity_state *owned;
    entity_state *state = base_game_event_checks(game, name, fields, &event, &owned);
    if (!state) return -1;
    uint64_t source_id = source ? base_game_entity_of(source)->entity_id : 0;
    base_game_event_heard(game, event, source_id, state);
    if (scope != TESSERA_EVENT_SERVER) {
        Tessera__Client__GameEvent coded;
        game_event_encode(event, source_id, state, &coded);
        base_event_fire_cluster(game->services.events, &coded, scope == TESSERA_EVENT_EVERYONE);
        free(coded.args.data);
    }
    entity_state_free(owned);
    return 0;
}

static int base_api_send_event(tessera_base *base, const char *name, const tessera_args *fields) {
    base_entity *player = base_game_live(base);
    if (!player) return -1;
    const entity_def_method *event;
    entity_state *owned;
    entity_state *state = base_game_event_checks(base_game_of_base(player), name, fields, &event, &owned);
    if (!state) return -1;
    int rc = -1;
    client_link *link = player->proxy ? player->proxy->link : NULL;
    if (link && link->state == CLIENT_LINK_IN_WORLD) {
        Tessera__Client__GameEvent coded;
        game_event_encode(event, player->entity_id, state, &coded);
        base_event_to_client(link, &coded);
        free(coded.args.data);
        rc = 0;
    }
    entity_state_free(owned);
    return rc;
}

/* ---- base services (ABI 4): clocks, random, timers, bases by class, singletons -------------- */

static uint64_t base_api_now_ms(tessera_baseapp *handle) {
    (void)handle;
    return clock_monotonic_us() / 1000;
}

static uint64_t base_api_wall_ms(tessera_baseapp *handle) {
    (void)handle;
    return clock_wall_us() / 1000;
}

static double base_api_random_unit(tessera_baseapp *handle) { return random_unit(&base_game_of(handle)->random_state); }

static uint64_t base_api_add_timer(tessera_base *handle, uint64_t delay_ms, uint64_t repeat_ms, uint32_t tag,
                                   uint64_t user_data) {
    base_entity *base = base_game_live(handle);
    if (!base) return 0;
    if (tag >= TESSERA_TIMER_TAG_LIMIT) {
        log_warn("game: entity %" PRIu64 " (%s): timer tag %u is the engine's (at most %u)", base->entity_id,
                 base->cls->name, tag, TESSERA_TIMER_TAG_LIMIT - 1);
        return 0;
    }
    return base_timers_add(base_game_of_base(base)->services.timers, base->entity_id, delay_ms, repeat_ms, tag,
                           user_data);
}

static int base_api_cancel_timer(tessera_base *handle, uint64_t timer_id) {
    const base_entity *base = handle ? base_game_entity_of(handle) : NULL;
    return base ? base_timers_cancel(base_game_of_base(base)->services.timers, base->entity_id, timer_id) : -1;
}

static size_t base_api_find_by_class(tessera_baseapp *handle, const char *class_name, tessera_handle *out, size_t max) {
    base_game *game = base_game_of(handle);
    const entity_def_class *cls =
        class_name ? entity_def_registry_find_class(game->services.definitions, class_name) : NULL;
    return cls ? base_entities_of_class(game->services.bases, cls, out, max) : 0;
}

static int base_api_singleton(tessera_baseapp *handle, const char *name, const char *class_name,
                              tessera_global_callback ready, void *user_data) {
    base_game *game = base_game_of(handle);
    const entity_def_class *cls =
        class_name ? entity_def_registry_find_class(game->services.definitions, class_name) : NULL;
    if (!cls) {
        log_warn("game: singleton '%s': the definitions have no class '%s'", name ? name : "",
                 class_name ? class_name : "");
        return -1;
    }
    base_singleton_waiter waiter = {(game_abi_function)ready, user_data};
    return base_singletons_join(game->singletons, name, cls, &waiter);
}

/* The singleton module's callbacks (base_singleton.h): it makes the base
 * here, and tells the game's waiters. */
static int base_game_make_singleton(void *owner, const entity_def_class *cls, const char *name, uint64_t entity_id) {
    char why[160];
    if (base_game_make(owner, cls, name, NULL, entity_id, why, sizeof why)) return 0;
    log_warn("singleton '%s': its %s could not be made here: %s", name, cls->name, why);
    return -1;
}

static void base_game_notify_singleton(void *owner, const base_singleton_waiter *waiter, const char *name,
                                       uint64_t holder) {
    base_game *game = owner;
    (void)name;
    if (waiter->ready) ((tessera_global_callback)waiter->ready)(&game->context, true, holder, waiter->user_data);
}

static const tessera_base_api base_game_api = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .register_class = base_api_register_class,
    .register_method = base_api_register_method,
    .set_tick = base_api_set_tick,
    .setting_number = base_api_setting_number,
    .find_class = base_api_find_class,
    .property_id = base_api_property_id,
    .resolve = base_api_resolve,
    .handle = base_api_handle,
    .class_of = base_api_class_of,
    .class_name = base_api_class_name,
    .account = base_api_account,
    .has_client = base_api_has_client,
    .stopping = base_api_stopping,
    .get_int = base_api_get_int,
    .get_uint = base_api_get_uint,
    .get_float = base_api_get_float,
    .get_handle = base_api_get_handle,
    .get_bool = base_api_get_bool,
    .get_string = base_api_get_string,
    .set_int = base_api_set_int,
    .set_uint = base_api_set_uint,
    .set_float = base_api_set_float,
    .set_handle = base_api_set_handle,
    .set_bool = base_api_set_bool,
    .set_string = base_api_set_string,
    .args_create = base_api_args_create,
    .args = &game_args_api,
    .call_cell = base_api_call_cell,
    .call_base = base_api_call_base,
    .register_global = base_api_register_global,
    .find_global = base_api_find_global,
    .unregister_global = base_api_unregister_global,
    .create_base = base_api_create_base,
    .load_base = base_api_load_base,
    .give_client = base_api_give_client,
    .destroy = base_api_destroy,
    .log = base_api_log,
    .event_args_create = base_api_event_args_create,
    .listen_event = base_api_listen_event,
    .fire_event = base_api_fire_event,
    .send_event = base_api_send_event,
    .now_ms = base_api_now_ms,
    .wall_ms = base_api_wall_ms,
    .random_unit = base_api_random_unit,
    .add_timer = base_api_add_timer,
    .cancel_timer = base_api_cancel_timer,
    .find_by_class = base_api_find_by_class,
    .singleton = base_api_singleton,
};

/* ---- loading ------------------------------------------------------------------------------- */

static void base_game_release(base_game *game) {
    for (size_t i = 0; i < game->class_count; i++) free(game->classes[i].methods);
    free(game->classes);
    if (game->library) dlclose(game->library);
    base_singletons_free(game->singletons);
    *game->services.hooks = (base_hooks){0};
    base_entities_set_host(game->services.bases, NULL);
    free(game);
}

static void base_game_install_hooks(base_game *game);

base_game *base_game_load(const base_game_services *services, const char *path, const config_group *settings, char *err,
                          size_t errlen) {
    base_game *game = xcalloc(1, sizeof *game);
    game->services = *services;
    game->settings = settings;
    game->context.app = base_game_handle(game);
    game->context.api = &base_game_api;
    base_entities_set_host(services->bases, game);
    base_game_install_hooks(game);
    /* Any seed but 0 (random_unit.h): the clock and the process id. */
    game->random_state = (clock_monotonic_us() ^ ((uint64_t)getpid() << 32)) | 1;
    base_singletons_context singleton_needs = {services->redis,
                                               services->cluster_name,
                                               base_calls_mailbox(services->calls),
                                               services->bases,
                                               services->life,
                                               services->self,
                                               services->draining,
                                               game,
                                               base_game_make_singleton,
                                               base_game_notify_singleton};
    game->singletons = base_singletons_create(&singleton_needs);
    game->class_count = entity_def_registry_class_count(services->definitions);
    game->classes = xcalloc(game->class_count ? game->class_count : 1, sizeof *game->classes);
    for (size_t i = 0; i < game->class_count; i++) {
        const entity_def_class *cls = entity_def_registry_class(services->definitions, i);
        game->classes[cls->id].cls = cls;
        size_t methods = cls->method_count[ENTITY_DEF_PART_BASE];
        game->classes[cls->id].methods = xcalloc(methods ? methods : 1, sizeof(game_abi_function));
    }
    if (!path || !path[0]) return game;
    const tessera_game_module *module = game_module_open(path, "baseapp", &game->library, err, errlen);
    if (!module) {
        base_game_release(game);
        return NULL;
    }
    game->module = module;
    if (module->base_init) {
        game->initialising = true;
        int rc = module->base_init(base_game_handle(game), &base_game_api, &game->game);
        game->initialising = false;
        game->context.game = game->game;
        if (rc != 0) {
            snprintf(err, errlen, "game_module '%s' (%s): its base_init failed (returned %d; its log lines say why)",
                     path, game_module_name(module), rc);
            if (module->base_shutdown) module->base_shutdown(base_game_handle(game), game->game);
            base_game_release(game);
            return NULL;
        }
    }
    size_t registered = 0;
    for (size_t i = 0; i < game->class_count; i++) registered += game->classes[i].registered;
    log_info("game module '%s' loaded from %s: %zu classes with base rules", game_module_name(module), path,
             registered);
    return game;
}

void base_game_free(base_game *game) {
    if (!game) return;
    lua_base_free(game->lua);
    game->lua = NULL;
    if (game->module && game->module->base_shutdown) game->module->base_shutdown(base_game_handle(game), game->game);
    base_game_release(game);
}

int base_game_open_scripts(base_game *game, const char *folder, const lua_runtime_limits *limits, char *err,
                           size_t errlen) {
    if (!folder || !folder[0]) return 0;
    char why[600];
    game->initialising = true;
    game->lua = lua_base_open(base_game_handle(game), &base_game_api, game->services.definitions, folder, limits, why,
                              sizeof why);
    game->initialising = false;
    if (!game->lua && why[0]) {
        snprintf(err, errlen, "game_scripts '%s': %s", folder, why);
        return -1;
    }
    if (game->lua && lua_base_start(game->lua, why, sizeof why) != 0) {
        snprintf(err, errlen, "game_scripts '%s': game.lua's base.init failed: %s", folder, why);
        return -1;
    }
    if (game->lua)
        log_info("game scripts loaded from %s: %zu classes run Lua on the base side",
                 lua_runtime_folder(lua_base_runtime(game->lua)), lua_base_class_count(game->lua));
    return 0;
}

struct lua_base *base_game_lua(tessera_baseapp *app) {
    base_game *game = base_game_of(app);
    return game ? game->lua : NULL;
}

void base_game_request_reload(base_game *game) {
    if (game && game->lua) lua_base_request_reload(game->lua);
}

/* ---- events --------------------------------------------------------------------------------- */

static const tessera_base_hooks *base_game_hooks(base_game *game, const base_entity *base) {
    tessera_base_class *cls = base_game_class_of(game, base->cls);
    return cls && cls->registered ? &cls->hooks : NULL;
}

/* Runs one hook of `player`'s class, then sends what it changed. */
#define BASE_GAME_CALL(game, player, hook, ...)                                       \
    do {                                                                              \
        const tessera_base_hooks *hooks_ = base_game_hooks(game, player);             \
        if (hooks_ && hooks_->hook) {                                                 \
            entity_handle handle_ = (player)->handle;                                 \
            hooks_->hook(&(game)->context, base_game_base_of(player), ##__VA_ARGS__); \
            base_game_flush((game), handle_);                                         \
        }                                                                             \
    } while (0)

void base_game_tick(base_game *game) {
    if (!game || *game->services.draining || game->services.self->stopping) return;
    base_singletons_poll(game->singletons, clock_monotonic_us());
    if (game->tick) game->tick(&game->context);
    if (game->lua) lua_base_tick(game->lua, clock_monotonic_us() / 1000);
}

/* A timer may fire for a base that is here and not being destroyed. */
static bool base_game_timer_live(uint64_t entity_id, void *context) {
    const base_game *game = context;
    return base_entity_is_live(base_entities_find(game->services.bases, entity_id));
}

static void base_game_timer_fire(uint64_t entity_id, uint64_t timer_id, uint32_t tag, uint64_t user_data,
                                 void *context) {
    base_game *game = context;
    base_entity *base = base_entities_find(game->services.bases, entity_id);
    if (base_entity_is_live(base)) BASE_GAME_CALL(game, base, timer, timer_id, tag, user_data);
}

void base_game_run_timers(base_game *game, uint64_t now_us) {
    if (!game || game->services.self->stopping) return;
    base_timers_run(game->services.timers, now_us, base_game_timer_live, base_game_timer_fire, game);
}

static void base_game_created(void *host, base_entity *base) { BASE_GAME_CALL((base_game *)host, base, created); }
/* The base is being freed: after its destroyed hook, its timers go, and a
 * singleton's name it holds is given up. */
static void base_game_destroyed(void *host, base_entity *base) {
    base_game *game = host;
    BASE_GAME_CALL(game, base, destroyed);
    base_timers_drop(game->services.timers, base->entity_id);
    base_singletons_on_freed(game->singletons, base);
}
static void base_game_client_enabled(void *host, base_entity *base) {
    BASE_GAME_CALL((base_game *)host, base, client_enabled);
}

static void base_game_written(void *host, base_entity *base, bool ok, const char *detail) {
    base_game *game = host;
    if (!ok)
        log_warn("entity %" PRIu64 " (%s '%s'): its save failed and is being retried: %s", base->entity_id,
                 base->cls->name, base->name, detail ? detail : "");
    BASE_GAME_CALL(game, base, written, ok, detail);
}

static void base_game_handover_refused(void *host, base_entity *base, uint64_t target_id, const char *rule) {
    base_game *game = host;
    log_warn("entity %" PRIu64 " (%s '%s') keeps its client: giveClientTo entity %" PRIu64 " refused: %s",
             base->entity_id, base->cls->name, base->name, target_id, rule);
    BASE_GAME_CALL(game, base, handover_refused, target_id, rule);
}

static void base_game_call_failed(void *host, uint64_t caller_id, uint64_t target_id, const char *class_name,
                                  entity_def_part part, uint32_t method_id) {
    base_game *game = host;
    base_entity *caller = base_entities_find(game->services.bases, caller_id);
    if (!base_entity_is_live(caller)) return;
    const entity_def_class *cls =
        class_name && class_name[0] ? entity_def_registry_find_class(game->services.definitions, class_name) : NULL;
    const char *method_name = cls && method_id < cls->method_count[part] ? cls->methods[part][method_id].name : "";
    BASE_GAME_CALL(game, caller, call_failed, target_id, (tessera_part)part, method_name);
}

static bool base_game_call(void *host, base_entity *base, const entity_def_method *method, const entity_state *args,
                           uint64_t caller_id) {
    base_game *game = host;
    tessera_base_class *cls = base_game_class_of(game, base->cls);
    tessera_base_method body =
        cls && method->part == ENTITY_DEF_PART_BASE && method->id < base->cls->method_count[ENTITY_DEF_PART_BASE]
            ? (tessera_base_method)cls->methods[method->id]
            : NULL;
    const tessera_base_hooks *hooks = cls && cls->registered ? &cls->hooks : NULL;
    bool named = !body && hooks && hooks->method && method->part == ENTITY_DEF_PART_BASE;
    if (!body && !named) {
        log_info("entity %" PRIu64 ": %s.%s has no body in this game: ignored", base->entity_id, base->cls->name,
                 method->name);
        return false;
    }
    entity_handle handle = base->handle;
    if (named)
        hooks->method(&game->context, base_game_base_of(base), method->name, caller_id,
                      (const tessera_args *)(const void *)args);
    else
        body(&game->context, base_game_base_of(base), caller_id, (const tessera_args *)(const void *)args);
    base_game_flush(game, handle);
    return true;
}

static void base_game_hook_event_heard(void *host, const entity_def_method *event, uint64_t source_id,
                                       const entity_state *fields) {
    base_game_event_heard(host, event, source_id, fields);
}

static void base_game_install_hooks(base_game *game) {
    *game->services.hooks = (base_hooks){
        .host = game,
        .created = base_game_created,
        .destroyed = base_game_destroyed,
        .client_enabled = base_game_client_enabled,
        .written = base_game_written,
        .handover_refused = base_game_handover_refused,
        .call = base_game_call,
        .call_failed = base_game_call_failed,
        .event_heard = base_game_hook_event_heard,
    };
}
