/* laps.c -- the smallest game worth running: a player is a Runner, and
 * every lap_ms (a setting of the game, 200 by default) its cell counts a
 * lap in its `laps` property, which every client that sees it receives.
 *
 * Built outside Tessera's tree against the installed header, either way:
 *
 *     cc -shared -fPIC $(pkg-config --cflags tessera-game) -o build/liblaps.so laps.c
 *     meson setup build && ninja -C build
 *
 * and run with `scripts/cluster up --dir run/laps --game examples/laps`
 * (game.json names the definitions, this module and the player's class). */
#include <stdlib.h>

#include <tessera/game.h>

enum { LAPS_TIMER = 1 };

typedef struct laps_game {
    int laps_property; /* Runner's `laps` */
    double lap_ms;
} laps_game;

static void runner_created(const tessera_cell_context *ctx, tessera_entity *entity, void *data) {
    (void)data;
    const laps_game *game = ctx->game;
    uint64_t every = game->lap_ms >= 1 ? (uint64_t)game->lap_ms : 200;
    ctx->api->add_timer(entity, every, every, LAPS_TIMER, 0);
}

static void runner_timer(const tessera_cell_context *ctx, tessera_entity *entity, void *data, uint64_t timer_id,
                         uint32_t tag, uint64_t user_data) {
    (void)data;
    (void)timer_id;
    (void)user_data;
    const laps_game *game = ctx->game;
    uint64_t laps = 0;
    if (tag != LAPS_TIMER || ctx->api->get_uint(entity, game->laps_property, 0, &laps) != 0) return;
    ctx->api->set_uint(entity, game->laps_property, 0, laps + 1);
}

static int laps_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game) {
    tessera_cell_hooks hooks = {.created = runner_created, .timer = runner_timer};
    tessera_class *runner = api->register_class(app, "Runner", &hooks, 0, NULL, 0);
    if (!runner) return -1;
    laps_game *state = calloc(1, sizeof *state);
    if (!state) return -1;
    state->laps_property = api->property_id(runner, "laps");
    state->lap_ms = api->setting_number(app, "lap_ms", 200);
    *game = state; /* freed by laps_cell_shutdown */
    return state->laps_property >= 0 ? 0 : -1;
}

static void laps_cell_shutdown(tessera_cellapp *app, void *game) {
    (void)app;
    free(game);
}

TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .name = "laps",
    .cell_init = laps_cell_init,
    .cell_shutdown = laps_cell_shutdown,
};
