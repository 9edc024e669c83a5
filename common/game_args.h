/* game_args.h -- the game ABI's method-argument table (tessera_args_api in
 * include/tessera/game.h), shared by the cellapp's and the baseapp's game
 * hosts. A tessera_args is an entity_state of a method's args_class
 * (method_call.h); these functions read and write it by argument index. */
#ifndef TESSERA_GAME_ARGS_H
#define TESSERA_GAME_ARGS_H

#include <tessera/game.h>

#include "entity_state.h"

extern const tessera_args_api game_args_api;

static inline entity_state *game_args_state(const tessera_args *args) { return (entity_state *)(void *)args; }
static inline tessera_args *game_args_of(entity_state *state) { return (tessera_args *)(void *)state; }

#endif
