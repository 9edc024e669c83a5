/* crowd.c -- bench/bench_lua.py's NPC in C: the same rules as
 * scripts/Crowd.lua and scripts/game.lua, for the ratio of a Lua hook to a C
 * one. With the setting "hooks" at 0 it spawns the crowd and gives it no
 * rules at all: the engine's own cost, which both are measured above. */
#include <math.h>

#include <tessera/game.h>

typedef struct crowd_game {
    const tessera_cell_api *api;
    int energy, visits;
    bool hooks;
    double spawned;
} crowd_game;

static crowd_game crowd;

static void crowd_created(const tessera_cell_context *ctx, tessera_entity *e, void *data) {
    (void)data;
    const tessera_cell_api *api = ctx->api;
    api->add_timer(e, 100, 100, 1, 0);
    api->set_think(e, "wander", (uint64_t)floor(api->random_unit(ctx->app) * 2000));
    api->add_trap_shaped(e, 2, TESSERA_TRAP_CIRCLE, 3);
}

static void crowd_timer(const tessera_cell_context *ctx, tessera_entity *e, void *data, uint64_t timer_id, uint32_t tag,
                        uint64_t user_data) {
    (void)data, (void)timer_id, (void)tag, (void)user_data;
    int64_t energy = 0;
    ctx->api->get_int(e, crowd.energy, 0, &energy);
    energy += 1;
    if (energy > 1000) energy = 0;
    ctx->api->set_int(e, crowd.energy, 0, energy);
}

static void crowd_wander(const tessera_cell_context *ctx, tessera_entity *e, void *data) {
    (void)data;
    const tessera_cell_api *api = ctx->api;
    float position[3], yaw;
    api->position(e, position, &yaw);
    float to[3] = {position[0] + (float)((api->random_unit(ctx->app) - 0.5) * 16), position[1],
                   position[2] + (float)((api->random_unit(ctx->app) - 0.5) * 16)};
    api->move_to_point(e, to, 2, 0.2f, true, 0);
    api->set_think(e, "wander", 2000);
}

static void crowd_entered_trap(const tessera_cell_context *ctx, tessera_entity *e, void *data, uint32_t tag,
                               tessera_entity *other) {
    (void)data, (void)tag, (void)other;
    uint64_t visits = 0;
    ctx->api->get_uint(e, crowd.visits, 0, &visits);
    ctx->api->set_uint(e, crowd.visits, 0, visits + 1);
}

static void crowd_tick(const tessera_cell_context *ctx) {
    const tessera_cell_api *api = ctx->api;
    double count = api->setting_number(ctx->app, "npc_count", 1000);
    double half = api->setting_number(ctx->app, "area_half_width", 150);
    double side = ceil(sqrt(count));
    double step = 2 * half / side;
    while (crowd.spawned < count) {
        double x = -half + (fmod(crowd.spawned, side) + 0.5) * step;
        double z = -half + (floor(crowd.spawned / side) + 0.5) * step;
        if (!api->spawn(ctx->app, "Crowd", api->default_space(ctx->app), (float)x, 0, (float)z, 0)) return;
        crowd.spawned += 1;
    }
}

static int crowd_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game) {
    crowd.api = api;
    crowd.hooks = api->setting_number(app, "hooks", 1) != 0;
    tessera_cell_hooks hooks = {0};
    if (crowd.hooks) {
        hooks.created = crowd_created;
        hooks.timer = crowd_timer;
        hooks.entered_trap = crowd_entered_trap;
    }
    tessera_class *cls = api->register_class(app, "Crowd", &hooks, 0, NULL, 0);
    if (!cls) return -1;
    if (crowd.hooks && api->register_think(app, cls, "wander", crowd_wander) != 0) return -1;
    crowd.energy = api->property_id(cls, "energy");
    crowd.visits = api->property_id(cls, "visits");
    api->set_tick(app, crowd_tick);
    *game = &crowd;
    return 0;
}

TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .name = "crowd",
    .cell_init = crowd_cell_init,
};
