/* wrong_abi.c -- a game module built for a game ABI other than the
 * engine's: the cellapp must refuse it, naming both versions
 * (test_game_module.py). */
#include <tessera/game.h>

static int wrong_abi_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game) {
    (void)app, (void)api, (void)game;
    return 0;
}

TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
    .abi_version = TESSERA_GAME_ABI_VERSION + 1,
    .name = "wrong-abi",
    .cell_init = wrong_abi_cell_init,
};
