/* base_services.c -- a game module for test_base_services.py, over the
 * demo's definitions, with base rules only: the base services of game.h
 * (ABI 4) reported in log lines the test reads ("base_services: ...").
 *
 * base_init joins the cluster singleton "services" (a Census) and logs how
 * three wrong joins are refused: an unknown class, an empty name, the same
 * name with another class. Each baseapp logs "ready <id> here|elsewhere"
 * whenever it learns the singleton's handle.
 *
 * The singleton's created hook (once in the cluster, on the baseapp that
 * made it) logs "made <id>" and sets: a repeating timer every 100 ms (tag
 * 1) and a one-shot at 50 ms (tag 2) on itself; on a doomed Account it
 * creates, two timers due together at 50 ms (tags 4 and 6), the first of
 * which to fire destroys that Account (so the other must never fire); and
 * on a keeper Account, a one-shot at 800 ms (tag 8). At the third firing of
 * tag 1 the singleton cancels it (0), cancels it again (-1), tries to
 * cancel the keeper's timer (-1: not its own), and sets tag 5 at 300 ms,
 * which logs one summary line of what it sees then: how often each timer
 * fired, the bases of each class here (find_by_class: the doomed Account is
 * gone), the clocks and the random numbers. The keeper's firing logs
 * "keeper fired" once, later.
 *
 * A baseapp told a second handle (the singleton was made again after its
 * baseapp died) destroys that one 1.5 s later, once its summary is out, if
 * it is here (tag 9): the name is given up, and it is made a third time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/game.h>

enum {
    SERVICES_TICK = 1,    /* the singleton's repeating timer */
    SERVICES_ONCE = 2,    /* its one-shot */
    SERVICES_DOOMED = 4,  /* the doomed Account's two timers */
    SERVICES_SUMMARY = 5, /* the singleton's summary, after the cancel */
    SERVICES_DOOMED_TOO = 6,
    SERVICES_KEEPER = 8,  /* the keeper Account's one-shot */
    SERVICES_DESTROY = 9, /* the second singleton destroys itself */
};

#define SERVICES_NAME "services"

typedef struct services_game {
    int refusals[3];
    int ticks, once, doomed_fired, keeper_fired;
    int cancel_own, cancel_again, cancel_other;
    uint64_t keeper_timer;
    uint64_t first_now_ms;
    int readies; /* handles this baseapp was told */
} services_game;

static void services_on_ready(const tessera_base_context *ctx, bool ok, tessera_handle holder, void *user_data) {
    services_game *g = ctx->game;
    (void)user_data;
    tessera_base *census = ctx->api->resolve(ctx->app, holder);
    ctx->api->log(ctx->app, TESSERA_LOG_INFO, NULL, "base_services: ready %llu %s (ok %d)", (unsigned long long)holder,
                  census ? "here" : "elsewhere", ok);
    if (++g->readies == 2 && census) ctx->api->add_timer(census, 1500, 0, SERVICES_DESTROY, 0);
}

static void services_census_created(const tessera_base_context *ctx, tessera_base *census) {
    const tessera_base_api *api = ctx->api;
    services_game *g = ctx->game;
    if (strcmp(api->account(census), SERVICES_NAME) != 0) return;
    *g = (services_game){.refusals = {g->refusals[0], g->refusals[1], g->refusals[2]}, .readies = g->readies};
    g->first_now_ms = api->now_ms(ctx->app);
    api->log(ctx->app, TESSERA_LOG_INFO, census, "base_services: made %llu", (unsigned long long)api->handle(census));
    api->add_timer(census, 100, 100, SERVICES_TICK, 11);
    api->add_timer(census, 50, 0, SERVICES_ONCE, 22);
    tessera_base *doomed = api->resolve(ctx->app, api->create_base(ctx->app, "Account", "doomed"));
    if (doomed) {
        api->add_timer(doomed, 50, 0, SERVICES_DOOMED, 0);
        api->add_timer(doomed, 50, 0, SERVICES_DOOMED_TOO, 0);
    }
    tessera_base *keeper = api->resolve(ctx->app, api->create_base(ctx->app, "Account", "keeper"));
    if (keeper) g->keeper_timer = api->add_timer(keeper, 800, 0, SERVICES_KEEPER, 0);
}

/* The summary line: everything the test checks of this baseapp's timers,
 * look-ups, clocks and random numbers. */
static void services_summary(const tessera_base_context *ctx, tessera_base *census) {
    const tessera_base_api *api = ctx->api;
    services_game *g = ctx->game;
    tessera_handle found[8];
    size_t censuses = api->find_by_class(ctx->app, "Census", found, 8);
    bool census_is_self = censuses == 1 && found[0] == api->handle(census);
    size_t accounts = api->find_by_class(ctx->app, "Account", NULL, 0);
    size_t unknown = api->find_by_class(ctx->app, "NoSuchClass", found, 8);
    bool random_ok = true;
    double first = api->random_unit(ctx->app), lowest = first, highest = first;
    for (int i = 0; i < 1000; i++) {
        double r = api->random_unit(ctx->app);
        random_ok = random_ok && r >= 0.0 && r < 1.0;
        lowest = r < lowest ? r : lowest;
        highest = r > highest ? r : highest;
    }
    random_ok = random_ok && lowest < 0.1 && highest > 0.9;
    uint64_t now = api->now_ms(ctx->app);
    /* Unix time past 2020, and the monotonic clock at least the 300 ms
     * since tick 3 past the first reading. */
    bool clocks_ok = api->wall_ms(ctx->app) > 1577836800000ull && now >= g->first_now_ms + 300;
    api->log(ctx->app, TESSERA_LOG_INFO, census,
             "base_services: summary ticks %d once %d doomed %d cancels %d %d %d census %zu self %d accounts %zu "
             "unknown %zu random %d clocks %d",
             g->ticks, g->once, g->doomed_fired, g->cancel_own, g->cancel_again, g->cancel_other, censuses,
             census_is_self, accounts, unknown, random_ok, clocks_ok);
}

static void services_census_timer(const tessera_base_context *ctx, tessera_base *census, uint64_t timer_id,
                                  uint32_t tag, uint64_t user_data) {
    const tessera_base_api *api = ctx->api;
    services_game *g = ctx->game;
    if (tag == SERVICES_ONCE && user_data == 22) g->once++;
    if (tag == SERVICES_SUMMARY) services_summary(ctx, census);
    if (tag == SERVICES_DESTROY) {
        api->destroy(census, false, "the test destroys it");
        return;
    }
    if (tag != SERVICES_TICK || user_data != 11 || ++g->ticks != 3) return;
    g->cancel_own = api->cancel_timer(census, timer_id);
    g->cancel_again = api->cancel_timer(census, timer_id);
    g->cancel_other = api->cancel_timer(census, g->keeper_timer);
    api->add_timer(census, 300, 0, SERVICES_SUMMARY, 0);
}

static void services_account_timer(const tessera_base_context *ctx, tessera_base *account, uint64_t timer_id,
                                   uint32_t tag, uint64_t user_data) {
    const tessera_base_api *api = ctx->api;
    services_game *g = ctx->game;
    (void)timer_id, (void)user_data;
    if (tag == SERVICES_DOOMED || tag == SERVICES_DOOMED_TOO) {
        g->doomed_fired++;
        api->destroy(account, false, "its own timer destroyed it"); /* `account` is gone now */
    } else if (tag == SERVICES_KEEPER) {
        g->keeper_fired++;
        api->log(ctx->app, TESSERA_LOG_INFO, account, "base_services: keeper fired %d", g->keeper_fired);
    }
}

static int services_base_init(tessera_baseapp *app, const tessera_base_api *api, void **game) {
    services_game *g = calloc(1, sizeof *g);
    if (!g) return -1;
    *game = g;
    tessera_base_hooks census_hooks = {.created = services_census_created, .timer = services_census_timer};
    tessera_base_hooks account_hooks = {.timer = services_account_timer};
    if (!api->register_class(app, "Census", &census_hooks) || !api->register_class(app, "Account", &account_hooks))
        return -1;
    if (api->singleton(app, SERVICES_NAME, "Census", services_on_ready, NULL) != 0) return -1;
    g->refusals[0] = api->singleton(app, "elsewhere", "NoSuchClass", services_on_ready, NULL);
    g->refusals[1] = api->singleton(app, "", "Census", services_on_ready, NULL);
    g->refusals[2] = api->singleton(app, SERVICES_NAME, "Account", services_on_ready, NULL);
    api->log(app, TESSERA_LOG_INFO, NULL, "base_services: joins refused %d %d %d", g->refusals[0], g->refusals[1],
             g->refusals[2]);
    return 0;
}

static void services_base_shutdown(tessera_baseapp *app, void *game) {
    (void)app;
    free(game);
}

TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .name = "base_services",
    .base_init = services_base_init,
    .base_shutdown = services_base_shutdown,
};
