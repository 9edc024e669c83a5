/* demo.c -- the demo game's module entry: the one symbol the cellapp and
 * the baseapp look up (tessera_game), with the ABI version it was built
 * against and the two halves of its rules. */
#include "demo.h"

TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .name = "demo",
    .cell_init = demo_cell_init,
    .cell_shutdown = demo_cell_shutdown,
    .base_init = demo_base_init,
    .base_shutdown = demo_base_shutdown,
};
