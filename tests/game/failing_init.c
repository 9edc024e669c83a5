/* failing_init.c -- a game module whose cell_init fails: it registers a
 * class the definitions do not declare. The cellapp must not start, and
 * must say which module and why (test_game_module.py). */
#include <tessera/game.h>

static int failing_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game) {
    (void)game;
    tessera_cell_hooks hooks = {0};
    return api->register_class(app, "Dragon", &hooks, 0, NULL, 0) ? 0 : -1;
}

TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .name = "failing-init",
    .cell_init = failing_cell_init,
};
