/* game_abi.h -- the services of include/tessera/game.h that both game hosts
 * (cellapp/game_host.c, baseapp/base_game.c) give alike, once, parameterised
 * by part: the class a registration names, a method body's slot, property
 * ids and typed access to an entity's properties, the method a call names,
 * event arguments, listeners and their delivery. Each host keeps only what
 * tells its entities apart (a cell entity or a base) and adapts the ABI's
 * opaque types to these.
 */
#ifndef TESSERA_GAME_ABI_H
#define TESSERA_GAME_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/game.h>

#include "entity_def.h"
#include "entity_state.h"
#include "game_event.h"

/* A method body or a listener as a host stores it: the ABI's typed
 * function, converted (C allows a function pointer to be converted to
 * another function pointer type and back). */
typedef void (*game_abi_function)(void);

/* The class `class_name` declares, for a registration by the `who` side
 * ("cellapp", "baseapp"); NULL logged as the game's mistake. */
const entity_def_class *game_abi_class_to_register(const entity_def_registry *definitions, const char *class_name,
                                                   const char *who);
/* Puts `body` in `bodies` (one slot per method of `part` of `cls`) for the
 * method `method_name`. Returns 0, or -1 (logged) when there is no such
 * method or it has a body already. */
int game_abi_register_body(const entity_def_class *cls, entity_def_part part, const char *method_name,
                           game_abi_function *bodies, game_abi_function body);

/* The id of property `name` of `cls`, or -1. */
int game_abi_property_id(const entity_def_class *cls, const char *name);
/* Whether `property` is one of `cls`'s. */
bool game_abi_property_ok(const entity_def_class *cls, int property);

/* Typed reads of property `property` (element `index`) of `state`, a state
 * of `cls`: 0, or -1 for a property that is not one, the wrong type, or an
 * index out of range. */
int game_abi_get_int(const entity_def_class *cls, const entity_state *state, int property, uint32_t index,
                     int64_t *value);
int game_abi_get_uint(const entity_def_class *cls, const entity_state *state, int property, uint32_t index,
                      uint64_t *value);
int game_abi_get_float(const entity_def_class *cls, const entity_state *state, int property, uint32_t index,
                       double *value);
int game_abi_get_handle(const entity_def_class *cls, const entity_state *state, int property, uint32_t index,
                        tessera_handle *value);
int game_abi_get_bool(const entity_def_class *cls, const entity_state *state, int property, uint32_t index,
                      bool *value);
int game_abi_get_string(const entity_def_class *cls, const entity_state *state, int property, uint32_t index,
                        const char **value, size_t *length);
/* Typed writes through the checked setters (the property marked dirty):
 * 0, or -1 with a refused value logged naming entity `entity_id`. */
int game_abi_set_int(const entity_def_class *cls, entity_state *state, uint64_t entity_id, int property, uint32_t index,
                     int64_t value);
int game_abi_set_uint(const entity_def_class *cls, entity_state *state, uint64_t entity_id, int property,
                      uint32_t index, uint64_t value);
int game_abi_set_float(const entity_def_class *cls, entity_state *state, uint64_t entity_id, int property,
                       uint32_t index, double value);
int game_abi_set_handle(const entity_def_class *cls, entity_state *state, uint64_t entity_id, int property,
                        uint32_t index, tessera_handle value);
int game_abi_set_bool(const entity_def_class *cls, entity_state *state, uint64_t entity_id, int property,
                      uint32_t index, bool value);
int game_abi_set_string(const entity_def_class *cls, entity_state *state, uint64_t entity_id, int property,
                        uint32_t index, const char *value, size_t length);

/* The method of `cls` a call names, when `args` were built for it (or it
 * takes none); NULL logged otherwise. */
const entity_def_method *game_abi_method_for(const entity_def_class *cls, entity_def_part part, const char *method_name,
                                             const tessera_args *args);

/* Fields for a firing of event `name` at their defaults, or NULL (logged). */
tessera_args *game_abi_event_args(const entity_def_registry *definitions, const char *name, const char *who);
/* Adds `listener` of event `name`. 0, or -1 (logged). */
int game_abi_listen(game_event_listeners *listeners, const entity_def_registry *definitions, const char *name,
                    const char *who, game_abi_function listener, void *user_data);
/* Calls every listener of `event`, in the order they listened, through
 * `call` (which converts the listener back to its typed function): the
 * firing's depth is counted meanwhile (game_event_check_firing). */
typedef void (*game_abi_listener_call)(game_abi_function listener, void *user_data, void *context);
void game_abi_deliver(game_event_listeners *listeners, const entity_def_method *event, game_abi_listener_call call,
                      void *context);

#endif
