/* cell_entity_codec.h -- an entity's whole cell state as one message
 * (proto/cluster.proto, CellEntityState), and back (cell_entity_codec.c):
 * what an offload moves, and what a real backs up.
 */
#ifndef TESSERA_CELL_ENTITY_CODEC_H
#define TESSERA_CELL_ENTITY_CODEC_H

#include <stddef.h>

#include "cell.h"
#include "cellapp_settings.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "game_hooks.h"

/* What saving and restoring borrow: the definitions (classes by name), the
 * speed check's settings (a state without movement gets a full
 * allowance), and the game's hooks (its per-entity data). */
typedef struct cell_entity_codec {
    const entity_def_registry *definitions;
    const movement_config *movement;
    const game_hooks *hooks;
} cell_entity_codec;

/* Fills `out` with everything `entity` (a real) is; arrays allocated (free
 * with cell_entity_saved_free). */
void cell_entity_save(const cell_entity_codec *codec, const cell_entity *entity,
                      Tessera__Cluster__CellEntityState *out);
/* The same for a backup (cell_snapshot.h): without the witness, which a
 * restore builds anew; had_witness says there was one. */
void cell_entity_save_backup(const cell_entity_codec *codec, const cell_entity *entity,
                             Tessera__Cluster__CellEntityState *out);
/* Frees what cell_entity_save allocated in `state` (the game's fields
 * included) and leaves it empty. */
void cell_entity_saved_free(Tessera__Cluster__CellEntityState *state);
/* Makes `entity` (a ghost here, or NULL for a new entity) the real that
 * `state` describes, in cell `c`. Returns 0, or -1 with why in err (a ghost
 * is then left a ghost, and nothing new is made). */
int cell_entity_restore(const cell_entity_codec *codec, cell *c, cell_entity *entity,
                        const Tessera__Cluster__CellEntityState *state, char *err, size_t errlen);

#endif
