/* events.c -- a game module for test_game_events.py, over the demo's
 * definitions (their events player_joined, door_changed, spell_hit): the
 * rules of game events, reported in log lines the test reads
 * ("events: ...").
 *
 * On its first tick it checks the refusals and logs one line of results:
 * an unknown event (fire and event_args_create), a field set with the
 * wrong type and one out of its range, fields made for another event, a
 * scope that needs a source fired without one, a good SERVER firing, and
 * how deep a listener that fires its own event again gets before the
 * engine stops it.
 *
 * A player's avatar, when it gets its client, goes to x = -4 (an even
 * entity id) or +4 (an odd one), z = 0: with the space split at x = 0
 * (grid 2x1) players of both kinds are on different cellapps and see each
 * other through ghosts. 2 s later it fires spell_hit with spell_id
 * 1 to its VIEWERS, 2 to its SPACE, 3 to EVERYONE, 5 to the SERVER only,
 * 6 to the SERVERS (every process's listeners, no client), and sends it as
 * a user message with spell_id 4 to itself and to an entity that does not
 * exist. Its listeners log each spell_hit and player_joined they hear. The
 * test's clients decode what reached them.
 *
 * The base side is the demo's (demo/game/demo_base.c: its Avatar fires
 * player_joined, its base sends welcome) with a listener of its own that
 * logs each spell_hit the baseapp hears ("events: base heard ...") and
 * answers a 6 by firing spell_hit 7 from the same Avatar's base to the
 * SERVERS: the base side's fire_event to that scope. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/game.h>

#include "demo.h"

enum { EVENTS_FIRE_TIMER = 1 };

typedef struct events_game {
    bool checked;
    int depth;      /* the recursive listener's current depth */
    int deepest;    /* the deepest firing that was accepted */
    int refused_at; /* the depth of the first refused one (0: none) */
} events_game;

static tessera_args *events_spell(const tessera_cell_api *api, tessera_cellapp *app, tessera_handle caster,
                                  uint64_t spell_id) {
    tessera_args *fields = api->event_args_create(app, "spell_hit");
    if (!fields) return NULL;
    /* By name here, by position in the base's answer below. */
    api->args->set_handle_named(fields, "caster", caster);
    api->args->set_handle_named(fields, "target", caster);
    api->args->set_uint_named(fields, "spell_id", spell_id);
    api->args->set_int_named(fields, "amount", -7);
    return fields;
}

static void events_check_refusals(const tessera_cell_context *ctx) {
    const tessera_cell_api *api = ctx->api;
    events_game *g = ctx->game;
    int unknown = api->fire_event(ctx->app, NULL, "no_such_event", NULL, TESSERA_EVENT_SERVER);
    tessera_args *none = api->event_args_create(ctx->app, "no_such_event");
    tessera_args *spell = api->event_args_create(ctx->app, "spell_hit");
    int wrong_type = api->args->set_string(spell, 2, "seven", 5); /* spell_id is a uint16 */
    int out_of_range = api->args->set_uint(spell, 2, 70000);      /* above 65535 */
    int entity_as_bool = api->args->set_bool(spell, 0, true);     /* caster is an entity */
    int good = api->args->set_uint(spell, 2, 7);
    int mismatched = api->fire_event(ctx->app, NULL, "door_changed", spell, TESSERA_EVENT_SERVER);
    int no_source = api->fire_event(ctx->app, NULL, "door_changed", NULL, TESSERA_EVENT_SPACE);
    int no_source_viewers = api->fire_event(ctx->app, NULL, "door_changed", NULL, TESSERA_EVENT_VIEWERS);
    int bad_scope = api->fire_event(ctx->app, NULL, "spell_hit", spell, (tessera_event_scope)9);
    g->depth = 0;
    int server = api->fire_event(ctx->app, NULL, "door_changed", NULL, TESSERA_EVENT_SERVER);
    api->log(ctx->app, TESSERA_LOG_INFO, NULL,
             "events: checks unknown %d args %s wrong-type %d range %d entity-as-bool %d good %d mismatched %d "
             "no-source %d %d bad-scope %d server %d deepest %d refused-at %d",
             unknown, none ? "made" : "null", wrong_type, out_of_range, entity_as_bool, good, mismatched, no_source,
             no_source_viewers, bad_scope, server, g->deepest, g->refused_at);
    if (spell) api->args->free(spell);
    if (none) api->args->free(none);
}

static void events_tick(const tessera_cell_context *ctx) {
    events_game *g = ctx->game;
    if (g->checked) return;
    g->checked = true;
    events_check_refusals(ctx);
}

/* Fires door_changed again from inside its own listener: the engine must
 * stop the loop. */
static void events_heard_door(const tessera_cell_context *ctx, const char *event, tessera_handle source,
                              const tessera_args *fields, void *user_data) {
    events_game *g = user_data;
    (void)event, (void)source, (void)fields;
    g->depth++;
    if (g->depth > g->deepest) g->deepest = g->depth;
    int rc = ctx->api->fire_event(ctx->app, NULL, "door_changed", NULL, TESSERA_EVENT_SERVER);
    if (rc != 0 && !g->refused_at) g->refused_at = g->depth + 1;
    g->depth--;
}

static void events_heard_spell(const tessera_cell_context *ctx, const char *event, tessera_handle source,
                               const tessera_args *fields, void *user_data) {
    (void)user_data;
    uint64_t spell_id = 0;
    ctx->api->args->get_uint_named(fields, "spell_id", &spell_id);
    ctx->api->log(ctx->app, TESSERA_LOG_INFO, NULL, "events: heard %s %llu from %llu", event,
                  (unsigned long long)spell_id, (unsigned long long)source);
}

static void events_heard_player(const tessera_cell_context *ctx, const char *event, tessera_handle source,
                                const tessera_args *fields, void *user_data) {
    (void)user_data;
    const char *name = ""; /* the player's display name */
    ctx->api->args->get_string(fields, 1, &name, NULL);
    ctx->api->log(ctx->app, TESSERA_LOG_INFO, NULL, "events: heard %s %s from %llu", event, name,
                  (unsigned long long)source);
}

static void events_got_witness(const tessera_cell_context *ctx, tessera_entity *e, void *data) {
    (void)data;
    float x = (ctx->api->handle(e) % 2) ? 4.0f : -4.0f;
    ctx->api->teleport(e, NULL, x, 0, 0);
    ctx->api->add_timer(e, 2000, 0, EVENTS_FIRE_TIMER, 0);
}

static void events_timer(const tessera_cell_context *ctx, tessera_entity *e, void *data, uint64_t timer_id,
                         uint32_t tag, uint64_t user_data) {
    const tessera_cell_api *api = ctx->api;
    (void)data, (void)timer_id, (void)user_data;
    if (tag != EVENTS_FIRE_TIMER) return;
    tessera_handle self = api->handle(e);
    static const struct {
        uint64_t spell_id;
        tessera_event_scope scope;
    } firings[] = {{1, TESSERA_EVENT_VIEWERS},
                   {2, TESSERA_EVENT_SPACE},
                   {3, TESSERA_EVENT_EVERYONE},
                   {5, TESSERA_EVENT_SERVER},
                   {6, TESSERA_EVENT_SERVERS}};
    enum { FIRINGS = sizeof firings / sizeof firings[0] };
    int results[FIRINGS];
    for (size_t i = 0; i < FIRINGS; i++) {
        tessera_args *fields = events_spell(api, ctx->app, self, firings[i].spell_id);
        results[i] = api->fire_event(ctx->app, e, "spell_hit", fields, firings[i].scope);
        api->args->free(fields);
    }
    tessera_args *fields = events_spell(api, ctx->app, self, 4);
    tessera_handle recipients[2] = {self, 0x7fffffff00000001ULL};
    int sent = api->send_event(ctx->app, e, "spell_hit", fields, recipients, 2);
    api->args->free(fields);
    api->log(ctx->app, TESSERA_LOG_INFO, e, "events: fired %d %d %d %d %d, user message sent on %d", results[0],
             results[1], results[2], results[3], results[4], sent);
}

static int events_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game) {
    events_game *g = calloc(1, sizeof *g);
    if (!g) return -1;
    *game = g;
    tessera_cell_hooks avatar = {.got_witness = events_got_witness, .timer = events_timer};
    if (!api->register_class(app, "Avatar", &avatar, 0, NULL, 0)) return -1;
    if (api->listen_event(app, "door_changed", events_heard_door, g) != 0 ||
        api->listen_event(app, "spell_hit", events_heard_spell, g) != 0 ||
        api->listen_event(app, "player_joined", events_heard_player, g) != 0)
        return -1;
    int unknown = api->listen_event(app, "no_such_event", events_heard_spell, g);
    api->log(app, TESSERA_LOG_INFO, NULL, "events: listening, unknown %d", unknown);
    api->set_tick(app, events_tick);
    return 0;
}

static void events_cell_shutdown(tessera_cellapp *app, void *game) {
    (void)app;
    free(game);
}

/* ---- the base side: the demo's, and a listener ---------------------------------------- */

static void events_base_heard_spell(const tessera_base_context *ctx, const char *event, tessera_handle source,
                                    const tessera_args *fields, void *user_data) {
    const tessera_base_api *api = ctx->api;
    (void)user_data;
    uint64_t spell_id = 0;
    api->args->get_uint(fields, 2, &spell_id);
    api->log(ctx->app, TESSERA_LOG_INFO, NULL, "events: base heard %s %llu from %llu", event,
             (unsigned long long)spell_id, (unsigned long long)source);
    if (spell_id != 6) return;
    tessera_args *answer = api->event_args_create(ctx->app, "spell_hit");
    if (!answer) return;
    api->args->set_handle(answer, 0, source);
    api->args->set_handle(answer, 1, source);
    api->args->set_uint(answer, 2, 7);
    api->args->set_int(answer, 3, -7);
    int rc = api->fire_event(ctx->app, api->resolve(ctx->app, source), "spell_hit", answer, TESSERA_EVENT_SERVERS);
    api->args->free(answer);
    api->log(ctx->app, TESSERA_LOG_INFO, NULL, "events: base fired 7 for %llu: %d", (unsigned long long)source, rc);
}

static int events_base_init(tessera_baseapp *app, const tessera_base_api *api, void **game) {
    if (demo_base_init(app, api, game) != 0) return -1;
    return api->listen_event(app, "spell_hit", events_base_heard_spell, NULL);
}

TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .name = "events-test",
    .cell_init = events_cell_init,
    .cell_shutdown = events_cell_shutdown,
    .base_init = events_base_init,
    .base_shutdown = demo_base_shutdown,
};
