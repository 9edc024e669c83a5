/* game_abi.c -- what both game hosts serve alike (game_abi.h). It owns no
 * state: the class records, bodies and listeners are the hosts'. */
#include "game_abi.h"

#include <inttypes.h>

#include "game_args.h"
#include "game_module.h"
#include "log.h"
#include "method_call.h"

const entity_def_class *game_abi_class_to_register(const entity_def_registry *definitions, const char *class_name,
                                                   const char *who) {
    const entity_def_class *cls = class_name ? entity_def_registry_find_class(definitions, class_name) : NULL;
    if (!cls)
        log_warn("game (%s): register_class: the definitions declare no class '%s'", who, class_name ? class_name : "");
    return cls;
}

int game_abi_register_body(const entity_def_class *cls, entity_def_part part, const char *method_name,
                           game_abi_function *bodies, game_abi_function body) {
    const entity_def_method *method = game_module_find_method(cls, part, method_name);
    if (!method) return -1;
    if (bodies[method->id]) {
        log_warn("game: %s.%s has a body already", cls->name, method_name);
        return -1;
    }
    bodies[method->id] = body;
    return 0;
}

int game_abi_property_id(const entity_def_class *cls, const char *name) {
    const entity_def_property *p = cls && name ? entity_def_class_find_property(cls, name) : NULL;
    return p ? (int)p->id : -1;
}

bool game_abi_property_ok(const entity_def_class *cls, int property) {
    return cls && property >= 0 && (size_t)property < cls->property_count;
}

/* NOLINTBEGIN(bugprone-macro-parentheses): `type` names a type, which
 * cannot be put in parentheses. */
#define GAME_ABI_GETTER(name, type, getter)                                                                       \
    int game_abi_get_##name(const entity_def_class *cls, const entity_state *state, int property, uint32_t index, \
                            type *value) {                                                                        \
        if (!state || !game_abi_property_ok(cls, property)) return -1;                                            \
        return getter(state, (uint16_t)property, index, value) == 0 ? 0 : -1;                                     \
    }
GAME_ABI_GETTER(int, int64_t, entity_state_get_int)
GAME_ABI_GETTER(uint, uint64_t, entity_state_get_uint)
GAME_ABI_GETTER(float, double, entity_state_get_float)
GAME_ABI_GETTER(handle, tessera_handle, entity_state_get_entity)
GAME_ABI_GETTER(bool, bool, entity_state_get_bool)

/* NOLINTEND(bugprone-macro-parentheses) */

int game_abi_get_string(const entity_def_class *cls, const entity_state *state, int property, uint32_t index,
                        const char **value, size_t *length) {
    if (!state || !game_abi_property_ok(cls, property)) return -1;
    return entity_state_get_string(state, (uint16_t)property, index, value, length) == 0 ? 0 : -1;
}

/* Logs a refused write, naming the entity and the property. */
static int game_abi_set_result(const entity_def_class *cls, uint64_t entity_id, int property, int rc) {
    if (rc == 0) return 0;
    log_warn("game: entity %" PRIu64 " %s.%s: the value is refused: %s", entity_id, cls->name,
             cls->properties[property].name, entity_state_strerror(rc));
    return -1;
}

/* NOLINTBEGIN(bugprone-macro-parentheses): as above. */
#define GAME_ABI_SETTER(name, type, setter)                                                                     \
    int game_abi_set_##name(const entity_def_class *cls, entity_state *state, uint64_t entity_id, int property, \
                            uint32_t index, type value) {                                                       \
        if (!state || !game_abi_property_ok(cls, property)) return -1;                                          \
        return game_abi_set_result(cls, entity_id, property, setter(state, (uint16_t)property, index, value));  \
    }
GAME_ABI_SETTER(int, int64_t, entity_state_set_int)
GAME_ABI_SETTER(uint, uint64_t, entity_state_set_uint)
GAME_ABI_SETTER(float, double, entity_state_set_float)
GAME_ABI_SETTER(handle, tessera_handle, entity_state_set_entity)
GAME_ABI_SETTER(bool, bool, entity_state_set_bool)

/* NOLINTEND(bugprone-macro-parentheses) */

int game_abi_set_string(const entity_def_class *cls, entity_state *state, uint64_t entity_id, int property,
                        uint32_t index, const char *value, size_t length) {
    if (!state || !value || !game_abi_property_ok(cls, property)) return -1;
    return game_abi_set_result(cls, entity_id, property,
                               entity_state_set_string(state, (uint16_t)property, index, value, length));
}

const entity_def_method *game_abi_method_for(const entity_def_class *cls, entity_def_part part, const char *method_name,
                                             const tessera_args *args) {
    const entity_def_method *method = game_module_find_method(cls, part, method_name);
    if (method && !game_module_args_fit(method, args)) {
        log_warn("game: %s.%s called with arguments made for another method", cls->name, method->name);
        return NULL;
    }
    return method;
}

tessera_args *game_abi_event_args(const entity_def_registry *definitions, const char *name, const char *who) {
    const entity_def_method *event = game_event_find(definitions, name, who);
    return event ? game_args_of(method_call_args_create(event)) : NULL;
}

int game_abi_listen(game_event_listeners *listeners, const entity_def_registry *definitions, const char *name,
                    const char *who, game_abi_function listener, void *user_data) {
    const entity_def_method *event = game_event_find(definitions, name, who);
    if (!event || !listener) return -1;
    return game_event_listen(listeners, event, listener, user_data);
}

void game_abi_deliver(game_event_listeners *listeners, const entity_def_method *event, game_abi_listener_call call,
                      void *context) {
    listeners->depth++;
    for (size_t i = 0; i < listeners->count; i++) {
        const game_event_listener *entry = &listeners->entries[i];
        if (entry->event_id == event->id) call(entry->function, entry->user_data, context);
    }
    listeners->depth--;
}
