/* game_event.h -- what both game hosts (cellapp/game_host.c,
 * baseapp/base_game.c) do alike with game events (include/tessera/game.h,
 * "game events"): find the declared event a firing names, check and code
 * its fields into a GameEvent (proto/client.proto), check and decode one
 * that arrived from another process, and keep the server listeners.
 *
 * Where an event goes is each side's own business: cellapp/event_route.c
 * for the cell side (viewers, space, everyone, chosen clients), base_game.c
 * for the base side. */
#ifndef TESSERA_GAME_EVENT_H
#define TESSERA_GAME_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/game.h>

#include "client.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"

/* Listeners per process: game_event_listen refuses the 65th. */
#define GAME_EVENT_MAX_LISTENERS 64
/* Listeners that fire events that reach listeners...: a firing this deep
 * inside listeners is refused, so a loop of events ends. */
#define GAME_EVENT_MAX_DEPTH 8

/* A listener, either side's: the host casts `function` back to its own
 * listener type before the call. */
typedef struct game_event_listener {
    uint32_t event_id;
    void (*function)(void);
    void *user_data;
} game_event_listener;

typedef struct game_event_listeners {
    game_event_listener entries[GAME_EVENT_MAX_LISTENERS];
    size_t count;
    unsigned depth; /* firings in progress, nested in listeners */
} game_event_listeners;

/* The event `name`, or NULL logged as the game's mistake ("no event 'x' is
 * declared"), `who` naming the side ("cellapp", "baseapp"). */
const entity_def_method *game_event_find(const entity_def_registry *definitions, const char *name, const char *who);

/* Adds a listener of `event`. -1 (logged) when full. */
int game_event_listen(game_event_listeners *listeners, const entity_def_method *event, void (*function)(void),
                      void *user_data);

/* Every check a firing passes on either side: `name` is a declared event
 * (*event), the firing is not GAME_EVENT_MAX_DEPTH deep in `listeners`,
 * and `fields` fit it. Returns the fields to code (*owned: the caller
 * frees it), or NULL with the reason logged. */
entity_state *game_event_check_firing(const entity_def_registry *definitions, const game_event_listeners *listeners,
                                      const char *name, const tessera_args *fields, const char *who,
                                      const entity_def_method **event, entity_state **owned);

/* The fields a firing carries: `fields` itself when it was made for
 * `event`, a fresh state at the defaults when it is NULL (*owned set: the
 * caller frees it), or NULL (logged) when it was made for another event or
 * method. */
entity_state *game_event_fields(const entity_def_method *event, const tessera_args *fields, entity_state **owned);

/* Codes one firing: out->args.data is malloc'd (the caller frees it). */
void game_event_encode(const entity_def_method *event, uint64_t source_id, const entity_state *fields,
                       Tessera__Client__GameEvent *out);

/* Checks and decodes a GameEvent that arrived: *event is its declaration
 * and the result its fields (the caller frees them), or NULL with why in
 * `why` (an unknown id, fields that are not the declared types). */
entity_state *game_event_decode(const entity_def_registry *definitions, const Tessera__Client__GameEvent *in,
                                const entity_def_method **event, char *why, size_t why_size);

#endif
