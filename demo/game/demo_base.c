/* demo_base.c -- the base rules of the demo game (demo/entities), the
 * baseapp's half of the demo module:
 *
 *   Account   enterWorld(): the account's Avatar is loaded (or made, the
 *             first time) with its cell part, the Account gives it its
 *             client (giveClientTo) and goes. `visits` counts the entries.
 *   Avatar    chat(text) earns a gold coin (`gold`, BASE_AND_CLIENT: only
 *             the player's own client sees it). relayPing(n) calls the
 *             cell's ping(n) from the base, so numbered calls reach the
 *             cell on the base's stream as well as the client's.
 *             Entity calls across baseapps: poke(target) calls target's
 *             poked(from), which tells its client onPoked(from); a poke
 *             that cannot be delivered tells the poker's client
 *             onCallFailed(target). echoTo(target, n) calls target's
 *             echo(n, from), which calls from's echoed(n), which tells its
 *             client onEcho(n): a round trip (bench/bench_base.py).
 *             census() asks the global Census, which answers the asker's
 *             client with onCensus(players).
 *             An Avatar is named once, when it is first made: a display
 *             name (demo_names.c) in its persistent `name`, which every
 *             client that sees it gets; the account name reaches no other
 *             client. Each Avatar made fires the game event
 *             player_joined(player, name) to everyone: every client of the
 *             cluster, every process's listeners; each time it gets its
 *             client, the base sends that client welcome(name), a user
 *             message.
 *   Census    one base in the whole cluster, the singleton service
 *             "census" (api->singleton): every Avatar made tells it
 *             joined(who), every one destroyed left(who). Every baseapp
 *             takes part; the engine makes it once, tells each baseapp its
 *             handle, and if it is lost (its baseapp died before a backup
 *             of it was taken, or it was destroyed) makes it again on
 *             another. A census restored from its backup is the same one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

#define DEMO_CENSUS_NAME "census"

typedef struct demo_base {
    tessera_base_class *account, *avatar, *census;
    int account_visits, avatar_gold, avatar_name, census_players;
    tessera_handle census_id; /* the global Census (NONE: not known yet) */
} demo_base;

/* Calls `method_name` of `part` of `target` (of `class_name`) from `from`
 * with one entity argument and, when `number` is not NULL, a uint32
 * first: the demo's calls all have one of those two shapes. */
static void demo_base_call(const tessera_base_context *ctx, tessera_base *from, tessera_handle target,
                           tessera_base_class *cls, const char *class_name, tessera_part part, const char *method_name,
                           const uint64_t *number, tessera_handle entity_argument) {
    const tessera_base_api *api = ctx->api;
    tessera_args *args = api->args_create(cls, part, method_name);
    if (!args) return;
    unsigned next = 0;
    if (number) api->args->set_uint(args, next++, *number);
    api->args->set_handle(args, next, entity_argument); /* -1 (ignored) for a call without one */
    api->call_base(from, target, class_name, part, method_name, args);
    api->args->free(args);
}

static tessera_handle demo_base_entity_arg(const tessera_base_context *ctx, const tessera_args *args, unsigned index) {
    tessera_handle id = TESSERA_HANDLE_NONE;
    ctx->api->args->get_handle(args, index, &id);
    return id;
}

static uint64_t demo_base_uint_arg(const tessera_base_context *ctx, const tessera_args *args, unsigned index) {
    uint64_t n = 0;
    ctx->api->args->get_uint(args, index, &n);
    return n;
}

/* ---- Account ------------------------------------------------------------------ */

static void demo_on_avatar_loaded(const tessera_base_context *ctx, tessera_handle loaded, const char *why,
                                  void *user_data) {
    const tessera_base_api *api = ctx->api;
    tessera_handle account_id = (tessera_handle)(uintptr_t)user_data;
    tessera_base *account = api->resolve(ctx->app, account_id);
    tessera_base *avatar = api->resolve(ctx->app, loaded);
    if (!account || !api->has_client(account)) {
        if (avatar) api->destroy(avatar, true, "its account left before it was ready");
        return;
    }
    if (!avatar) {
        api->log(ctx->app, TESSERA_LOG_WARN, account, "its Avatar could not be loaded (%s): it stays on its Account",
                 why);
        return;
    }
    if (api->give_client(account, avatar) != 0) {
        api->destroy(avatar, false, "its account could not give it the client");
        return;
    }
    api->destroy(account, true, "its client went to its Avatar");
}

static void demo_enter_world(const tessera_base_context *ctx, tessera_base *account, tessera_handle caller,
                             const tessera_args *args) {
    demo_base *g = ctx->game;
    const tessera_base_api *api = ctx->api;
    (void)caller, (void)args;
    uint64_t visits = 0;
    api->get_uint(account, g->account_visits, 0, &visits);
    api->set_uint(account, g->account_visits, 0, visits + 1);
    if (api->load_base(account, "Avatar", api->account(account), demo_on_avatar_loaded,
                       (void *)(uintptr_t)api->handle(account)) != 0)
        api->log(ctx->app, TESSERA_LOG_INFO, account, "enterWorld: a load is under way or Redis is unavailable");
}

/* ---- Avatar -------------------------------------------------------------------- */

static void demo_chat(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle caller,
                      const tessera_args *args) {
    demo_base *g = ctx->game;
    const tessera_base_api *api = ctx->api;
    (void)caller;
    const char *text = "";
    api->args->get_string(args, 0, &text, NULL);
    api->log(ctx->app, TESSERA_LOG_DEBUG, avatar, "says: %s", text);
    uint64_t coins = 0;
    if (api->get_uint(avatar, g->avatar_gold, 0, &coins) == 0) api->set_uint(avatar, g->avatar_gold, 0, coins + 1);
}

static void demo_relay_ping(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle caller,
                            const tessera_args *args) {
    demo_base *g = ctx->game;
    const tessera_base_api *api = ctx->api;
    (void)caller;
    tessera_args *ping = api->args_create(g->avatar, TESSERA_PART_CELL, "ping");
    if (!ping) return;
    api->args->set_uint(ping, 0, demo_base_uint_arg(ctx, args, 0));
    api->call_cell(avatar, "ping", ping);
    api->args->free(ping);
}

static void demo_poke(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle caller,
                      const tessera_args *args) {
    demo_base *g = ctx->game;
    (void)caller;
    demo_base_call(ctx, avatar, demo_base_entity_arg(ctx, args, 0), g->avatar, "Avatar", TESSERA_PART_BASE, "poked",
                   NULL, ctx->api->handle(avatar));
}

static void demo_poked(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle caller,
                       const tessera_args *args) {
    demo_base *g = ctx->game;
    (void)caller;
    demo_base_call(ctx, avatar, ctx->api->handle(avatar), g->avatar, "Avatar", TESSERA_PART_CLIENT, "onPoked", NULL,
                   demo_base_entity_arg(ctx, args, 0));
}

static void demo_echo_to(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle caller,
                         const tessera_args *args) {
    demo_base *g = ctx->game;
    (void)caller;
    uint64_t n = demo_base_uint_arg(ctx, args, 1);
    demo_base_call(ctx, avatar, demo_base_entity_arg(ctx, args, 0), g->avatar, "Avatar", TESSERA_PART_BASE, "echo", &n,
                   ctx->api->handle(avatar));
}

static void demo_echo(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle caller,
                      const tessera_args *args) {
    demo_base *g = ctx->game;
    (void)caller;
    uint64_t n = demo_base_uint_arg(ctx, args, 0);
    demo_base_call(ctx, avatar, demo_base_entity_arg(ctx, args, 1), g->avatar, "Avatar", TESSERA_PART_BASE, "echoed",
                   &n, TESSERA_HANDLE_NONE);
}

static void demo_echoed(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle caller,
                        const tessera_args *args) {
    demo_base *g = ctx->game;
    (void)caller;
    uint64_t n = demo_base_uint_arg(ctx, args, 0);
    demo_base_call(ctx, avatar, ctx->api->handle(avatar), g->avatar, "Avatar", TESSERA_PART_CLIENT, "onEcho", &n,
                   TESSERA_HANDLE_NONE);
}

/* Tells the Avatar's client onCallFailed(target): a call it asked for did
 * not arrive (target NONE: there was nobody to call yet). */
static void demo_tell_call_failed(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle target) {
    demo_base *g = ctx->game;
    demo_base_call(ctx, avatar, ctx->api->handle(avatar), g->avatar, "Avatar", TESSERA_PART_CLIENT, "onCallFailed",
                   NULL, target);
}

/* The player always hears back: onCensus from the Census, or onCallFailed
 * when this baseapp does not know the Census yet (or the call is lost:
 * demo_avatar_call_failed), so the client may ask again. */
static void demo_ask_census(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle caller,
                            const tessera_args *args) {
    demo_base *g = ctx->game;
    (void)caller, (void)args;
    if (g->census_id)
        demo_base_call(ctx, avatar, g->census_id, g->census, "Census", TESSERA_PART_BASE, "count", NULL,
                       ctx->api->handle(avatar));
    else
        demo_tell_call_failed(ctx, avatar, TESSERA_HANDLE_NONE);
}

/* The Avatar's display name: the stored one, or, for an Avatar made just
 * now (or stored by a demo that named Avatars after their accounts), a new
 * one, set in `name` (persistent: it is written with the Avatar). Its
 * length in *length; "" when the class has no `name`. */
static const char *demo_avatar_display_name(const tessera_base_context *ctx, tessera_base *avatar, size_t *length) {
    demo_base *g = ctx->game;
    const tessera_base_api *api = ctx->api;
    const char *name = "";
    *length = 0;
    if (g->avatar_name < 0 || api->get_string(avatar, g->avatar_name, 0, &name, length) != 0) return "";
    const char *account = api->account(avatar);
    if (*length > 0 && !(*length == strlen(account) && memcmp(name, account, *length) == 0)) return name;
    char picked[32];
    size_t picked_length = demo_names_pick(picked, sizeof picked);
    if (api->set_string(avatar, g->avatar_name, 0, picked, picked_length) != 0 ||
        api->get_string(avatar, g->avatar_name, 0, &name, length) != 0) {
        *length = 0;
        return "";
    }
    api->log(ctx->app, TESSERA_LOG_INFO, avatar, "named %.*s", (int)*length, name);
    return name;
}

static void demo_avatar_created(const tessera_base_context *ctx, tessera_base *avatar) {
    demo_base *g = ctx->game;
    const tessera_base_api *api = ctx->api;
    size_t name_length;
    const char *name = demo_avatar_display_name(ctx, avatar, &name_length);
    if (g->census_id)
        demo_base_call(ctx, avatar, g->census_id, g->census, "Census", TESSERA_PART_BASE, "joined", NULL,
                       api->handle(avatar));
    /* Every client of the cluster, and every process's listeners, hear it. */
    tessera_args *fields = api->event_args_create(ctx->app, "player_joined");
    if (!fields) return;
    api->args->set_handle(fields, 0, api->handle(avatar));
    api->args->set_string(fields, 1, name, name_length);
    api->fire_event(ctx->app, avatar, "player_joined", fields, TESSERA_EVENT_EVERYONE);
    api->args->free(fields);
}

/* A user message from the base: the player's own client is welcomed
 * whenever its Avatar gets it (a login, a reconnect). */
static void demo_avatar_client_enabled(const tessera_base_context *ctx, tessera_base *avatar) {
    demo_base *g = ctx->game;
    const tessera_base_api *api = ctx->api;
    tessera_args *fields = api->event_args_create(ctx->app, "welcome");
    if (!fields) return;
    const char *name = "";
    size_t length = 0;
    if (g->avatar_name >= 0) api->get_string(avatar, g->avatar_name, 0, &name, &length);
    api->args->set_string(fields, 0, name, length);
    api->send_event(avatar, "welcome", fields);
    api->args->free(fields);
}

static void demo_avatar_destroyed(const tessera_base_context *ctx, tessera_base *avatar) {
    demo_base *g = ctx->game;
    if (g->census_id && !ctx->api->stopping(ctx->app))
        demo_base_call(ctx, avatar, g->census_id, g->census, "Census", TESSERA_PART_BASE, "left", NULL,
                       ctx->api->handle(avatar));
}

/* A poke, or a census question, that did not arrive tells the player's
 * client. (The census's joined and left need nothing: a census that is gone
 * is made again, and demo_census_ready has everyone join it.) */
static void demo_avatar_call_failed(const tessera_base_context *ctx, tessera_base *avatar, tessera_handle target,
                                    tessera_part part, const char *method_name) {
    if (part == TESSERA_PART_BASE && (strcmp(method_name, "poked") == 0 || strcmp(method_name, "count") == 0))
        demo_tell_call_failed(ctx, avatar, target);
}

/* ---- Census ---------------------------------------------------------------------- */

static void demo_census_count_change(const tessera_base_context *ctx, tessera_base *census, int delta) {
    demo_base *g = ctx->game;
    uint64_t players = 0;
    ctx->api->get_uint(census, g->census_players, 0, &players);
    if (delta > 0)
        players++;
    else if (delta < 0 && players > 0)
        players--;
    ctx->api->set_uint(census, g->census_players, 0, players);
}

static void demo_census_joined(const tessera_base_context *ctx, tessera_base *census, tessera_handle caller,
                               const tessera_args *args) {
    (void)caller, (void)args;
    demo_census_count_change(ctx, census, +1);
}

static void demo_census_left(const tessera_base_context *ctx, tessera_base *census, tessera_handle caller,
                             const tessera_args *args) {
    (void)caller, (void)args;
    demo_census_count_change(ctx, census, -1);
}

static void demo_census_count(const tessera_base_context *ctx, tessera_base *census, tessera_handle caller,
                              const tessera_args *args) {
    demo_base *g = ctx->game;
    (void)caller;
    uint64_t players = 0;
    ctx->api->get_uint(census, g->census_players, 0, &players);
    demo_base_call(ctx, census, demo_base_entity_arg(ctx, args, 0), g->avatar, "Avatar", TESSERA_PART_CLIENT,
                   "onCensus", &players, TESSERA_HANDLE_NONE);
}

/* Its name is the engine's to give up (the singleton service); this
 * baseapp stops calling it until it hears of the next one. */
static void demo_census_destroyed(const tessera_base_context *ctx, tessera_base *census) {
    demo_base *g = ctx->game;
    if (g->census_id == ctx->api->handle(census)) g->census_id = TESSERA_HANDLE_NONE;
}

/* Every Avatar on this baseapp joins the census `g->census_id`: those made
 * before this baseapp knew it, or counted by one that is gone (a census
 * made again starts from nothing). */
static void demo_census_join_everyone(const tessera_base_context *ctx) {
    demo_base *g = ctx->game;
    const tessera_base_api *api = ctx->api;
    size_t count = api->find_by_class(ctx->app, "Avatar", NULL, 0);
    if (count == 0) return;
    tessera_handle *avatars = malloc(count * sizeof *avatars);
    if (!avatars) {
        api->log(ctx->app, TESSERA_LOG_WARN, NULL, "census: no memory to list %zu Avatars; they are not counted",
                 count);
        return;
    }
    count = api->find_by_class(ctx->app, "Avatar", avatars, count);
    for (size_t i = 0; i < count; i++) {
        tessera_base *avatar = api->resolve(ctx->app, avatars[i]);
        if (avatar)
            demo_base_call(ctx, avatar, g->census_id, g->census, "Census", TESSERA_PART_BASE, "joined", NULL,
                           avatars[i]);
    }
    free(avatars);
}

/* The singleton "census" is known, or made again: its handle. */
static void demo_census_ready(const tessera_base_context *ctx, bool ok, tessera_handle holder, void *user_data) {
    demo_base *g = ctx->game;
    (void)user_data;
    if (!ok || holder == g->census_id) return;
    g->census_id = holder;
    if (ctx->api->resolve(ctx->app, holder))
        ctx->api->log(ctx->app, TESSERA_LOG_INFO, NULL, "the Census is entity %llu here", (unsigned long long)holder);
    demo_census_join_everyone(ctx);
}

/* ---- registration ------------------------------------------------------------------ */

int demo_base_init(tessera_baseapp *app, const tessera_base_api *api, void **game) {
    demo_base *g = calloc(1, sizeof *g);
    if (!g) return -1;
    *game = g;
    tessera_base_hooks no_hooks = {0};
    tessera_base_hooks avatar_hooks = {
        .created = demo_avatar_created,
        .destroyed = demo_avatar_destroyed,
        .call_failed = demo_avatar_call_failed,
        .client_enabled = demo_avatar_client_enabled,
    };
    tessera_base_hooks census_hooks = {.destroyed = demo_census_destroyed};
    g->account = api->register_class(app, "Account", &no_hooks);
    g->avatar = api->register_class(app, "Avatar", &avatar_hooks);
    g->census = api->register_class(app, "Census", &census_hooks);
    if (!g->account || !g->avatar || !g->census) return -1;
    g->account_visits = api->property_id(g->account, "visits");
    g->avatar_gold = api->property_id(g->avatar, "gold");
    g->avatar_name = api->property_id(g->avatar, "name");
    g->census_players = api->property_id(g->census, "players");
    int failures = 0;
    failures += api->register_method(app, g->account, "enterWorld", demo_enter_world) != 0;
    failures += api->register_method(app, g->avatar, "chat", demo_chat) != 0;
    failures += api->register_method(app, g->avatar, "relayPing", demo_relay_ping) != 0;
    failures += api->register_method(app, g->avatar, "poke", demo_poke) != 0;
    failures += api->register_method(app, g->avatar, "poked", demo_poked) != 0;
    failures += api->register_method(app, g->avatar, "echoTo", demo_echo_to) != 0;
    failures += api->register_method(app, g->avatar, "echo", demo_echo) != 0;
    failures += api->register_method(app, g->avatar, "echoed", demo_echoed) != 0;
    failures += api->register_method(app, g->avatar, "census", demo_ask_census) != 0;
    failures += api->register_method(app, g->census, "joined", demo_census_joined) != 0;
    failures += api->register_method(app, g->census, "left", demo_census_left) != 0;
    failures += api->register_method(app, g->census, "count", demo_census_count) != 0;
    if (failures) return -1;
    return api->singleton(app, DEMO_CENSUS_NAME, "Census", demo_census_ready, NULL);
}

void demo_base_shutdown(tessera_baseapp *app, void *game) {
    (void)app;
    free(game);
}
