/* demo.h -- the demo module's two halves, as demo.c puts them together:
 * the cell rules (demo_cell.c) and the base rules (demo_base.c), and the
 * players' display names (demo_names.c). */
#ifndef TESSERA_DEMO_H
#define TESSERA_DEMO_H

#include <tessera/game.h>

int demo_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game);

/* The map's doors, triggers and logic timers (demo_world.c); their ids
 * live in the cell game's state, which demo_world_state finds. */
typedef struct demo_world demo_world;
demo_world *demo_world_register(tessera_cellapp *app, const tessera_cell_api *api, tessera_class *avatar);
const demo_world *demo_world_state(const void *game);
void demo_cell_shutdown(tessera_cellapp *app, void *game);
int demo_base_init(tessera_baseapp *app, const tessera_base_api *api, void **game);
void demo_base_shutdown(tessera_baseapp *app, void *game);

/* A new display name ("QuietHeron#4821", at most 21 bytes) in `out`
 * (`size` bytes, NUL-terminated, cut to fit): random, unrelated to any
 * account name. Returns its length. */
size_t demo_names_pick(char *out, size_t size);

#endif
