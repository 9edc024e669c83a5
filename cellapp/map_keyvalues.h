/* map_keyvalues.h -- a map entity's "keyvalues" (cellapp/map_entities.h):
 * each key names a property of its class (the definitions), or, failing
 * that, a field of the per-entity data the game registered for the class
 * (its field table: Source's datadesc KEYFIELD), whose value converts to
 * the field's type. A key that names neither, or a value that does not
 * convert or fit, is an error naming the key. */
#ifndef TESSERA_MAP_KEYVALUES_H
#define TESSERA_MAP_KEYVALUES_H

#include <stddef.h>

#include <cJSON.h>

#include "cell.h"
#include "entity_def.h"
#include "game_host.h"

struct cell_entity;
typedef struct entity_def_class entity_def_class;

/* Checks every keyvalue of an entity of `cls`. Returns 0, or -1 with why. */
int map_keyvalues_check(game_host *game, const entity_def_class *cls, const cJSON *keyvalues, char *why,
                        size_t why_size);

/* Applies checked keyvalues to a fresh real: its properties and its game
 * data. */
void map_keyvalues_apply(game_host *game, cell_entity *entity, const cJSON *keyvalues);

#endif
