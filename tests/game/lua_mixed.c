/* lua_mixed.c -- the C half of the probe game (tests/game/lua_probe/):
 * the Beacon class, whose rules are C, in the same game as the Lua classes
 * Walker and Probe. A Probe calls Beacon.answer; the answer calls the
 * Probe's Lua method ring back, so a call crosses from Lua to C and from C
 * to Lua. */
#include <tessera/game.h>

typedef struct lua_mixed {
    tessera_class *beacon;
} lua_mixed;

static lua_mixed lua_mixed_game;

static void beacon_answer(const tessera_cell_context *ctx, tessera_entity *entity, void *data, tessera_handle caller,
                          const tessera_args *args) {
    (void)data;
    const tessera_cell_api *api = ctx->api;
    tessera_handle from = 0;
    uint64_t n = 0;
    if (api->args->get_handle(args, 0, &from) != 0 || api->args->get_uint(args, 1, &n) != 0) return;
    int rings = api->property_id(api->class_of(entity), "rings");
    uint64_t count = 0;
    api->get_uint(entity, rings, 0, &count);
    api->set_uint(entity, rings, 0, count + 1);
    api->log(ctx->app, TESSERA_LOG_INFO, entity, "beacon answered %u from %llu", (unsigned)n,
             (unsigned long long)caller);
    tessera_entity *probe = api->resolve(ctx->app, from);
    if (!probe) return;
    tessera_args *reply = api->args_create(api->class_of(probe), TESSERA_PART_CELL, "ring");
    if (!reply) return;
    api->args->set_handle(reply, 0, api->handle(entity));
    api->args->set_uint(reply, 1, n + 1);
    api->call_cell(entity, probe, "ring", reply);
    api->args->free(reply);
}

static int lua_mixed_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game) {
    tessera_cell_hooks hooks = {0};
    lua_mixed_game.beacon = api->register_class(app, "Beacon", &hooks, 0, NULL, 0);
    if (!lua_mixed_game.beacon) return -1;
    if (api->register_method(app, lua_mixed_game.beacon, "answer", beacon_answer) != 0) return -1;
    *game = &lua_mixed_game;
    return 0;
}

TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .name = "lua_mixed",
    .cell_init = lua_mixed_cell_init,
};
