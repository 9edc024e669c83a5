/* base_game.c -- owns the game module as the baseapp loads it (dlopen
 * handle, the state base_init made) and what it registered, and serves
 * the base side of include/tessera/game.h on top of the baseapp's modules:
 * proxies (proxy.c), their properties (base_entity.c), entity calls
 * (base_call.c), global names (base_mailbox.h) and persistence.
 *
 * The ABI's opaque types are the engine's own: a tessera_baseapp is the
 * baseapp, a tessera_base a proxy, a tessera_args an entity_state of a
 * method's arguments, a tessera_base_class this file's base_game_class.
 * A handle is the entity id; it resolves while the proxy is here and not
 * being destroyed.
 */
#include "base_game.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/game.h>

#include "base_event.h"
#include "baseapp.h"
#include "game_args.h"
#include "game_event.h"
#include "game_module.h"
#include "log.h"
#include "method_call.h"

struct tessera_base_class {
    const entity_def_class *cls;
    bool registered;
    tessera_base_hooks hooks;
    tessera_base_method *methods; /* by base method id; NULL: no body */
};

struct base_game {
    baseapp *app;
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
};

static tessera_baseapp *base_game_app_handle(baseapp *app) { return (tessera_baseapp *)(void *)app; }
static baseapp *base_game_app_of(tessera_baseapp *app) { return (baseapp *)(void *)app; }
static proxy *base_game_proxy_of(const tessera_base *base) { return (proxy *)(void *)base; }
static tessera_base *base_game_base_of(proxy *player) { return (tessera_base *)(void *)player; }

/* The game being loaded (during base_init) or loaded. */
static base_game *base_game_of(baseapp *app) { return app->game_loading ? app->game_loading : app->game; }

static tessera_base_class *base_game_class_of(base_game *game, const entity_def_class *cls) {
    return game && cls && cls->id < game->class_count ? &game->classes[cls->id] : NULL;
}

/* A proxy game code may act on. */
static proxy *base_game_live(tessera_base *base) {
    proxy *player = base ? base_game_proxy_of(base) : NULL;
    return player && player->state != PROXY_DESTROYING ? player : NULL;
}

/* After game code ran on `handle`'s base: what it set of its
 * BASE_AND_CLIENT properties goes to its client. */
static void base_game_flush(baseapp *app, entity_handle handle) {
    proxy *player = entity_list_get(app->proxies, handle);
    if (player) base_entity_send_properties(player, false);
}

/* ---- registration ------------------------------------------------------------------ */

static tessera_base_class *base_api_register_class(tessera_baseapp *handle, const char *class_name,
                                                   const tessera_base_hooks *hooks) {
    base_game *game = base_game_app_of(handle)->game_loading;
    if (!game || !game->initialising) return NULL;
    const entity_def_class *def =
        class_name ? entity_def_registry_find_class(game->app->definitions, class_name) : NULL;
    if (!def) {
        log_warn("game: register_class: the definitions declare no class '%s'", class_name ? class_name : "");
        return NULL;
    }
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
    base_game *game = base_game_app_of(handle)->game_loading;
    if (!game || !game->initialising || !cls || !body) return -1;
    const entity_def_method *method = game_module_find_method(cls->cls, ENTITY_DEF_PART_BASE, method_name);
    if (!method) return -1;
    if (cls->methods[method->id]) {
        log_warn("game: %s.%s has a body already", cls->cls->name, method_name);
        return -1;
    }
    cls->methods[method->id] = body;
    return 0;
}

static void base_api_set_tick(tessera_baseapp *handle, tessera_base_tick tick) {
    base_game *game = base_game_app_of(handle)->game_loading;
    if (game && game->initialising) game->tick = tick;
}

static double base_api_setting_number(tessera_baseapp *handle, const char *name, double otherwise) {
    base_game *game = base_game_of(base_game_app_of(handle));
    return game_module_setting_number(game ? game->settings : NULL, name, otherwise);
}

/* ---- classes, bases, properties --------------------------------------------------- */

static tessera_base_class *base_api_find_class(tessera_baseapp *handle, const char *class_name) {
    baseapp *app = base_game_app_of(handle);
    const entity_def_class *def = class_name ? entity_def_registry_find_class(app->definitions, class_name) : NULL;
    tessera_base_class *cls = base_game_class_of(base_game_of(app), def);
    return cls && cls->registered ? cls : NULL;
}

static int base_api_property_id(const tessera_base_class *cls, const char *name) {
    const entity_def_property *p = cls && name ? entity_def_class_find_property(cls->cls, name) : NULL;
    return p ? (int)p->id : -1;
}

static tessera_base *base_api_resolve(tessera_baseapp *handle, tessera_handle id) {
    proxy *player = id ? proxy_find_by_entity(base_game_app_of(handle), id) : NULL;
    return player && player->state != PROXY_DESTROYING ? base_game_base_of(player) : NULL;
}

static tessera_handle base_api_handle(const tessera_base *base) { return base_game_proxy_of(base)->entity_id; }

static tessera_base_class *base_api_class_of(const tessera_base *base) {
    const proxy *player = base_game_proxy_of(base);
    return base_game_class_of(player->app->game, player->cls);
}

static const char *base_api_class_name(const tessera_base *base) { return base_game_proxy_of(base)->cls->name; }
static const char *base_api_account(const tessera_base *base) { return base_game_proxy_of(base)->account; }
static bool base_api_has_client(const tessera_base *base) { return base_game_proxy_of(base)->link != NULL; }

static bool base_api_stopping(tessera_baseapp *handle) {
    const baseapp *app = base_game_app_of(handle);
    return app->draining || app->shutting_down;
}

static bool base_game_property_ok(const proxy *player, int property) {
    return player->properties && property >= 0 && (size_t)property < player->cls->property_count;
}

#define BASE_GAME_GETTER(name, type, getter)                                                              \
    static int base_api_get_##name(const tessera_base *base, int property, uint32_t index, type *value) { \
        const proxy *player = base_game_proxy_of(base);                                                   \
        if (!base_game_property_ok(player, property)) return -1;                                          \
        return getter(player->properties, (uint16_t)property, index, value) == 0 ? 0 : -1;                \
    }
BASE_GAME_GETTER(int, int64_t, entity_state_get_int)
BASE_GAME_GETTER(uint, uint64_t, entity_state_get_uint)
BASE_GAME_GETTER(float, double, entity_state_get_float)
BASE_GAME_GETTER(handle, tessera_handle, entity_state_get_entity)
BASE_GAME_GETTER(bool, bool, entity_state_get_bool)

static int base_api_get_string(const tessera_base *base, int property, uint32_t index, const char **value,
                               size_t *length) {
    const proxy *player = base_game_proxy_of(base);
    if (!base_game_property_ok(player, property)) return -1;
    return entity_state_get_string(player->properties, (uint16_t)property, index, value, length) == 0 ? 0 : -1;
}

static int base_game_set_result(const proxy *player, int property, int rc) {
    if (rc == 0) return 0;
    log_warn("game: entity %" PRIu64 " %s.%s: the value is refused: %s", player->entity_id, player->cls->name,
             player->cls->properties[property].name, entity_state_strerror(rc));
    return -1;
}

#define BASE_GAME_SETTER(name, type, setter)                                                                         \
    static int base_api_set_##name(tessera_base *base, int property, uint32_t index, type value) {                   \
        proxy *player = base_game_live(base);                                                                        \
        if (!player || !base_game_property_ok(player, property)) return -1;                                          \
        return base_game_set_result(player, property, setter(player->properties, (uint16_t)property, index, value)); \
    }
BASE_GAME_SETTER(int, int64_t, entity_state_set_int)
BASE_GAME_SETTER(uint, uint64_t, entity_state_set_uint)
BASE_GAME_SETTER(float, double, entity_state_set_float)
BASE_GAME_SETTER(handle, tessera_handle, entity_state_set_entity)
BASE_GAME_SETTER(bool, bool, entity_state_set_bool)

static int base_api_set_string(tessera_base *base, int property, uint32_t index, const char *value, size_t length) {
    proxy *player = base_game_live(base);
    if (!player || !value || !base_game_property_ok(player, property)) return -1;
    return base_game_set_result(player, property,
                                entity_state_set_string(player->properties, (uint16_t)property, index, value, length));
}

/* ---- calls ------------------------------------------------------------------------------ */

static tessera_args *base_api_args_create(const tessera_base_class *cls, tessera_part part, const char *method_name) {
    return cls ? game_module_args_create(cls->cls, part, method_name) : NULL;
}

static int base_api_call_cell(tessera_base *base, const char *method_name, const tessera_args *args) {
    proxy *player = base_game_live(base);
    const entity_def_method *method =
        player && method_name ? entity_def_class_find_method(player->cls, ENTITY_DEF_PART_CELL, method_name) : NULL;
    if (!method || !game_module_args_fit(method, args)) {
        log_warn("game: entity %" PRIu64 ": no cell method '%s' to call with these arguments",
                 player ? player->entity_id : 0, method_name ? method_name : "");
        return -1;
    }
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
    int rc = cell_link_send(player, &message);
    bit_writer_close(&w);
    entity_state_free(owned);
    return rc;
}

static int base_api_call_base(tessera_base *from, tessera_handle target, const char *class_name, tessera_part part,
                              const char *method_name, const tessera_args *args) {
    proxy *player = from ? base_game_proxy_of(from) : NULL;
    if (!player || !class_name || !method_name || (part != TESSERA_PART_BASE && part != TESSERA_PART_CLIENT)) return -1;
    const entity_def_class *cls = entity_def_registry_find_class(player->app->definitions, class_name);
    const entity_def_method *method =
        cls ? entity_def_class_find_method(cls, (entity_def_part)part, method_name) : NULL;
    if (method && !game_module_args_fit(method, args)) {
        log_warn("game: %s.%s called with arguments made for another method", class_name, method_name);
        return -1;
    }
    return base_call(player->app, player->entity_id, target, class_name, (entity_def_part)part, method_name,
                     args ? game_args_state(args) : NULL);
}

/* ---- global names ------------------------------------------------------------------------ */

typedef struct base_game_global_request {
    baseapp *app;
    tessera_global_callback done;
    void *user_data;
} base_game_global_request;

static base_game_global_request *base_game_global_request_new(baseapp *app, tessera_global_callback done,
                                                              void *user_data) {
    base_game_global_request *request = xmalloc(sizeof *request);
    *request = (base_game_global_request){app, done, user_data};
    return request;
}

static void base_game_on_registered(bool ok, uint64_t holder_id, void *context) {
    base_game_global_request *request = context;
    base_game *game = request->app->game;
    if (game && request->done) request->done(&game->context, ok, holder_id, request->user_data);
    free(request);
}

static void base_game_on_found(uint64_t entity_id, void *context) {
    base_game_global_request *request = context;
    base_game *game = request->app->game;
    if (game && request->done) request->done(&game->context, entity_id != 0, entity_id, request->user_data);
    free(request);
}

static int base_api_register_global(tessera_baseapp *handle, const char *name, tessera_base *base,
                                    tessera_global_callback done, void *user_data) {
    baseapp *app = base_game_app_of(handle);
    proxy *player = base_game_live(base);
    if (!name || !player || !app->bases) return -1;
    base_game_global_request *request = base_game_global_request_new(app, done, user_data);
    if (base_mailbox_register_global(app->bases, name, player->entity_id, base_game_on_registered, request) != 0) {
        free(request);
        return -1;
    }
    return 0;
}

static int base_api_find_global(tessera_baseapp *handle, const char *name, tessera_global_callback done,
                                void *user_data) {
    baseapp *app = base_game_app_of(handle);
    if (!name || !app->bases) return -1;
    base_game_global_request *request = base_game_global_request_new(app, done, user_data);
    if (base_mailbox_find_global(app->bases, name, base_game_on_found, request) != 0) {
        free(request);
        return -1;
    }
    return 0;
}

static void base_api_unregister_global(tessera_baseapp *handle, const char *name, tessera_handle holder) {
    baseapp *app = base_game_app_of(handle);
    if (name && holder && app->bases) base_mailbox_unregister_global(app->bases, name, holder);
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

static tessera_handle base_api_create_base(tessera_baseapp *handle, const char *class_name, const char *key) {
    baseapp *app = base_game_app_of(handle);
    const entity_def_class *cls = class_name ? entity_def_registry_find_class(app->definitions, class_name) : NULL;
    if (!cls || !key) {
        log_warn("game: create_base: no class '%s'", class_name ? class_name : "");
        return TESSERA_HANDLE_NONE;
    }
    char why[160];
    proxy *player = proxy_make(app, cls, key, NULL, why, sizeof why);
    if (!player) {
        log_warn("game: create_base of a %s for '%s': %s", class_name, key, why);
        return TESSERA_HANDLE_NONE;
    }
    if (player->state == PROXY_CREATING_CELL && proxy_create_cell(player, false) != 0) {
        proxy_destroy(player, false, "no cellapp for its cell part");
        return TESSERA_HANDLE_NONE;
    }
    return player->entity_id;
}

typedef struct base_game_load_request {
    entity_handle from;
    char class_name[64];
    tessera_loaded_callback done;
    void *user_data;
} base_game_load_request;

static void base_game_on_loaded(baseapp *app, persistence_outcome outcome, const cJSON *stored, void *context) {
    base_game_load_request *request = context;
    proxy *from = entity_list_get(app->proxies, request->from);
    base_game *game = app->game;
    tessera_handle loaded = TESSERA_HANDLE_NONE;
    char why[160] = "";
    if (from) from->entering = false;
    if (!from || from->state == PROXY_DESTROYING) {
        snprintf(why, sizeof why, "the base that asked is gone");
    } else if (outcome == PERSISTENCE_UNAVAILABLE || outcome == PERSISTENCE_DAMAGED) {
        snprintf(why, sizeof why, "%s",
                 outcome == PERSISTENCE_DAMAGED ? "its record is damaged" : "Redis is unavailable");
    } else {
        const entity_def_class *cls = entity_def_registry_find_class(app->definitions, request->class_name);
        proxy *made = cls ? proxy_make(app, cls, from->account, stored, why, sizeof why) : NULL;
        if (!cls) snprintf(why, sizeof why, "the definitions have no class '%s'", request->class_name);
        if (made && made->state == PROXY_CREATING_CELL && proxy_create_cell(made, false) != 0) {
            proxy_destroy(made, false, "no cellapp for its cell part");
            snprintf(why, sizeof why, "no cellapp for its cell part");
            made = NULL;
        }
        if (made) loaded = made->entity_id;
    }
    if (game && request->done) request->done(&game->context, loaded, why, request->user_data);
    if (from) base_game_flush(app, request->from);
    free(request);
}

static int base_api_load_base(tessera_base *from, const char *class_name, const char *key, tessera_loaded_callback done,
                              void *user_data) {
    proxy *player = base_game_live(from);
    if (!player || !class_name || !key || player->entering || strlen(class_name) >= 64) return -1;
    base_game_load_request *request = xcalloc(1, sizeof *request);
    request->from = player->handle;
    snprintf(request->class_name, sizeof request->class_name, "%s", class_name);
    request->done = done;
    request->user_data = user_data;
    if (persistence_load(player->app, class_name, key, base_game_on_loaded, request) != 0) {
        free(request);
        return -1;
    }
    player->entering = true;
    return 0;
}

static int base_api_give_client(tessera_base *from, tessera_base *to) {
    proxy *source = base_game_live(from), *target = base_game_live(to);
    if (!source || !target) return -1;
    char why[160];
    if (proxy_give_client_to(source, target, why, sizeof why) != 0) {
        log_info("game: entity %" PRIu64 ": giveClientTo entity %" PRIu64 " refused: %s", source->entity_id,
                 target->entity_id, why);
        return -1;
    }
    return 0;
}

static void base_api_destroy(tessera_base *base, bool write, const char *reason) {
    proxy *player = base_game_live(base);
    if (player) proxy_destroy(player, write, reason ? reason : "its game destroyed it");
}

static void base_api_log(tessera_baseapp *handle, tessera_log_level level, const tessera_base *base, const char *format,
                         ...) {
    (void)handle;
    char subject[160];
    if (base) {
        const proxy *player = base_game_proxy_of(base);
        snprintf(subject, sizeof subject, "entity %" PRIu64 " (%s of '%s')", player->entity_id, player->cls->name,
                 player->account);
    }
    va_list args;
    va_start(args, format);
    game_module_log(level, base ? subject : NULL, format, args);
    va_end(args);
}

/* ---- game events ------------------------------------------------------------------------------ */

static tessera_args *base_api_event_args_create(tessera_baseapp *handle, const char *name) {
    const entity_def_method *event = game_event_find(base_game_app_of(handle)->definitions, name, "baseapp");
    return event ? game_args_of(method_call_args_create(event)) : NULL;
}

static int base_api_listen_event(tessera_baseapp *handle, const char *name, tessera_base_event_listener listener,
                                 void *user_data) {
    baseapp *app = base_game_app_of(handle);
    base_game *game = base_game_of(app);
    const entity_def_method *event = game_event_find(app->definitions, name, "baseapp");
    if (!game || !event || !listener) return -1;
    return game_event_listen(&game->listeners, event, (void (*)(void))listener, user_data);
}

void base_game_event_heard(base_game *game, const entity_def_method *event, uint64_t source_id,
                           const entity_state *fields) {
    if (!game) return;
    game->listeners.depth++;
    for (size_t i = 0; i < game->listeners.count; i++) {
        const game_event_listener *entry = &game->listeners.entries[i];
        if (entry->event_id != event->id) continue;
        ((tessera_base_event_listener)entry->function)(&game->context, event->name, source_id,
                                                       (const tessera_args *)(const void *)fields, entry->user_data);
    }
    game->listeners.depth--;
}

/* The event and its fields, checked; NULL (logged) when refused. */
static entity_state *base_game_event_checks(baseapp *app, const char *name, const tessera_args *fields,
                                            const entity_def_method **event, entity_state **owned) {
    *owned = NULL;
    if (!app->game) return NULL;
    return game_event_check_firing(app->definitions, &app->game->listeners, name, fields, "baseapp", event, owned);
}

static int base_api_fire_event(tessera_baseapp *handle, tessera_base *source, const char *name,
                               const tessera_args *fields, tessera_event_scope scope) {
    baseapp *app = base_game_app_of(handle);
    if (scope != TESSERA_EVENT_SERVER && scope != TESSERA_EVENT_EVERYONE) {
        log_warn("game: event '%s' fired from a base to a scope other than SERVER or EVERYONE (%d): refused",
                 name ? name : "(null)", (int)scope);
        return -1;
    }
    const entity_def_method *event;
    entity_state *owned;
    entity_state *state = base_game_event_checks(app, name, fields, &event, &owned);
    if (!state) return -1;
    uint64_t source_id = source ? base_game_proxy_of(source)->entity_id : 0;
    base_game_event_heard(app->game, event, source_id, state);
    if (scope == TESSERA_EVENT_EVERYONE) {
        Tessera__Client__GameEvent coded;
        game_event_encode(event, source_id, state, &coded);
        base_event_fire_everyone(app, &coded);
        free(coded.args.data);
    }
    entity_state_free(owned);
    return 0;
}

static int base_api_send_event(tessera_base *base, const char *name, const tessera_args *fields) {
    proxy *player = base_game_live(base);
    if (!player) return -1;
    baseapp *app = player->app;
    const entity_def_method *event;
    entity_state *owned;
    entity_state *state = base_game_event_checks(app, name, fields, &event, &owned);
    if (!state) return -1;
    int rc = -1;
    if (player->link && player->link->state == CLIENT_LINK_IN_WORLD) {
        Tessera__Client__GameEvent coded;
        game_event_encode(event, player->entity_id, state, &coded);
        base_event_to_client(player->link, &coded);
        free(coded.args.data);
        rc = 0;
    }
    entity_state_free(owned);
    return rc;
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
};

/* ---- loading ------------------------------------------------------------------------------- */

static void base_game_release(base_game *game) {
    for (size_t i = 0; i < game->class_count; i++) free(game->classes[i].methods);
    free(game->classes);
    if (game->library) dlclose(game->library);
    free(game);
}

base_game *base_game_load(baseapp *app, const char *path, const config_group *settings, char *err, size_t errlen) {
    base_game *game = xcalloc(1, sizeof *game);
    game->app = app;
    game->settings = settings;
    game->context.app = base_game_app_handle(app);
    game->context.api = &base_game_api;
    game->class_count = entity_def_registry_class_count(app->definitions);
    game->classes = xcalloc(game->class_count ? game->class_count : 1, sizeof *game->classes);
    for (size_t i = 0; i < game->class_count; i++) {
        const entity_def_class *cls = entity_def_registry_class(app->definitions, i);
        game->classes[cls->id].cls = cls;
        size_t methods = cls->method_count[ENTITY_DEF_PART_BASE];
        game->classes[cls->id].methods = xcalloc(methods ? methods : 1, sizeof(tessera_base_method));
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
        app->game_loading = game;
        int rc = module->base_init(base_game_app_handle(app), &base_game_api, &game->game);
        app->game_loading = NULL;
        game->initialising = false;
        game->context.game = game->game;
        if (rc != 0) {
            snprintf(err, errlen, "game_module '%s' (%s): its base_init failed (returned %d; its log lines say why)",
                     path, game_module_name(module), rc);
            if (module->base_shutdown) module->base_shutdown(base_game_app_handle(app), game->game);
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
    if (game->module && game->module->base_shutdown)
        game->module->base_shutdown(base_game_app_handle(game->app), game->game);
    base_game_release(game);
}

/* ---- events --------------------------------------------------------------------------------- */

static const tessera_base_hooks *base_game_hooks(base_game *game, const proxy *player) {
    tessera_base_class *cls = base_game_class_of(game, player->cls);
    return cls && cls->registered ? &cls->hooks : NULL;
}

/* Runs one hook of `player`'s class, then sends what it changed. */
#define BASE_GAME_CALL(game, player, hook, ...)                                       \
    do {                                                                              \
        const tessera_base_hooks *hooks_ = base_game_hooks(game, player);             \
        if (hooks_ && hooks_->hook) {                                                 \
            entity_handle handle_ = (player)->handle;                                 \
            hooks_->hook(&(game)->context, base_game_base_of(player), ##__VA_ARGS__); \
            base_game_flush((game)->app, handle_);                                    \
        }                                                                             \
    } while (0)

void base_game_tick(base_game *game) {
    if (game && game->tick && !game->app->draining && !game->app->shutting_down) game->tick(&game->context);
}

void base_game_created(base_game *game, proxy *base) { BASE_GAME_CALL(game, base, created); }
void base_game_destroyed(base_game *game, proxy *base) { BASE_GAME_CALL(game, base, destroyed); }
void base_game_client_enabled(base_game *game, proxy *base) { BASE_GAME_CALL(game, base, client_enabled); }

void base_game_written(base_game *game, proxy *base, bool ok, const char *detail) {
    if (!ok)
        log_warn("entity %" PRIu64 " (account '%s'): its save failed and is being retried: %s", base->entity_id,
                 base->account, detail ? detail : "");
    BASE_GAME_CALL(game, base, written, ok, detail);
}

void base_game_handover_refused(base_game *game, proxy *base, uint64_t target_id, const char *rule) {
    log_warn("entity %" PRIu64 " (account '%s') keeps its client: giveClientTo entity %" PRIu64 " refused: %s",
             base->entity_id, base->account, target_id, rule);
    BASE_GAME_CALL(game, base, handover_refused, target_id, rule);
}

void base_game_call_failed(base_game *game, uint64_t caller_id, uint64_t target_id, const char *class_name,
                           entity_def_part part, uint32_t method_id) {
    proxy *caller = game ? proxy_find_by_entity(game->app, caller_id) : NULL;
    if (!caller || caller->state == PROXY_DESTROYING) return;
    const entity_def_class *cls =
        class_name && class_name[0] ? entity_def_registry_find_class(game->app->definitions, class_name) : NULL;
    const char *method_name = cls && method_id < cls->method_count[part] ? cls->methods[part][method_id].name : "";
    BASE_GAME_CALL(game, caller, call_failed, target_id, (tessera_part)part, method_name);
}

bool base_game_call(base_game *game, proxy *base, const entity_def_method *method, const entity_state *args,
                    uint64_t caller_id) {
    tessera_base_class *cls = base_game_class_of(game, base->cls);
    tessera_base_method body =
        cls && method->part == ENTITY_DEF_PART_BASE && method->id < base->cls->method_count[ENTITY_DEF_PART_BASE]
            ? cls->methods[method->id]
            : NULL;
    if (!body) {
        log_info("entity %" PRIu64 ": %s.%s has no body in this game: ignored", base->entity_id, base->cls->name,
                 method->name);
        return false;
    }
    entity_handle handle = base->handle;
    body(&game->context, base_game_base_of(base), caller_id, (const tessera_args *)(const void *)args);
    base_game_flush(game->app, handle);
    return true;
}
