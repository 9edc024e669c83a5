/* base_game.h -- the baseapp's side of the game ABI (include/tessera/game.h):
 * loads the game module, keeps what its base_init registered (per class:
 * hooks and base method bodies), and is the one place the baseapp calls
 * into game code. After every hook and method body, what the game set of
 * a base's BASE_AND_CLIENT properties goes to its own client.
 *
 * With no module, or a module without base rules, bases keep their
 * properties and persistence, and a base method a client calls is checked
 * and then logged as having no body.
 */
#ifndef TESSERA_BASE_GAME_H
#define TESSERA_BASE_GAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "entity_def.h"
#include "entity_state.h"

typedef struct base_game base_game;
struct baseapp;
struct proxy;

/* Loads the module at `path` ("" for none) and runs its base_init with
 * `settings` (the config's "game" group). NULL with why in err. */
base_game *base_game_load(struct baseapp *app, const char *path, const config_group *settings, char *err,
                          size_t errlen);
/* Runs base_shutdown and unloads the module. NULL is ignored. */
void base_game_free(base_game *game);

void base_game_tick(base_game *game);
void base_game_created(base_game *game, struct proxy *base);
void base_game_destroyed(base_game *game, struct proxy *base);
void base_game_client_enabled(base_game *game, struct proxy *base);
void base_game_written(base_game *game, struct proxy *base, bool ok, const char *detail);
void base_game_handover_refused(base_game *game, struct proxy *base, uint64_t target_id, const char *rule);
/* A call `caller_id` made did not reach `target_id` (its method named by
 * class, part and id). */
void base_game_call_failed(base_game *game, uint64_t caller_id, uint64_t target_id, const char *class_name,
                           entity_def_part part, uint32_t method_id);
/* The game event `event` was fired here or arrived here: its listeners
 * hear it. */
void base_game_event_heard(base_game *game, const entity_def_method *event, uint64_t source_id,
                           const entity_state *fields);
/* Runs the body of base method `method` of `base` for `caller_id`.
 * Returns false (logged) when the game gave it none. */
bool base_game_call(base_game *game, struct proxy *base, const entity_def_method *method, const entity_state *args,
                    uint64_t caller_id);

#endif
