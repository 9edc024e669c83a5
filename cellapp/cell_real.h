/* cell_real.h -- what a real's part holds above its cell: its witness and
 * its controllers, released when the part goes, and the witnesses that
 * must forget an entity being freed. The cell (cell.c) knows neither
 * witnesses nor controllers; it calls back through cell_shared, and these
 * are the callbacks every cellapp (and every test that builds cells with
 * witnesses or controllers) installs.
 */
#ifndef TESSERA_CELL_REAL_H
#define TESSERA_CELL_REAL_H

#include "cell.h"

/* Sets shared->release_real (the witness detaches, the controllers are
 * freed) and shared->entity_freed (the witnesses that see the entity
 * forget it). Leaves on_trap and host to the caller. */
void cell_real_install_hooks(cell_shared *shared);

#endif
