/* map_entities.h -- the entities a space's map lists (Source's map entity
 * parsing), spawned once for the whole cluster.
 *
 * A map's "entities" array (space_map.h has the rest of the file):
 *
 *   { "classname": "Door", "name": "gate", "parent": "gatehouse",
 *     "origin": [x, y, z], "yaw": 0,
 *     "keyvalues": { "open": false, "courage": 5 },  properties by name, else
 *                                                   fields of the game's data
 *                                                   (map_keyvalues.h)
 *     "outputs": [ { "output": "OnOpened", "target": "lamp", "input": "TurnOn",
 *                    "parameter": "", "delay": 0.5, "times": -1 } ] }
 *
 * For every space in the cellapp's "maps" that has a cell here, the first
 * cellapp to claim the space's map in Redis (SET NX, a lease its cellapps
 * renew: MAP_CLAIM_TTL_MS below; a claim held by a process that is not
 * alive, a stopped cluster's, is left to lapse) spawns its entities,
 * all of them on this cellapp (each moves to the cell that holds its
 * origin at the end of the tick). Spawning is two passes, as in Source:
 * every entity is created first (its class, name, keyvalues, outputs),
 * then the game's created hooks run, parents before their children, so a
 * child's spawn can find its parent by name.
 *
 * An entity of a class the definitions lack, or that the game gave no
 * rules, or with a keyvalue that names neither a property nor a game field
 * or that does not convert, is skipped with an error naming the map, the
 * entity and the key; the rest still spawn, and a summary line counts what
 * was skipped.
 */
#ifndef TESSERA_MAP_ENTITIES_H
#define TESSERA_MAP_ENTITIES_H

#include <stddef.h>

/* The claim lives MAP_CLAIM_TTL_MS and every cellapp with a cell of the
 * space renews it each MAP_CLAIM_RENEW_MS: while any of them runs, the
 * map's entities are not spawned again; once the last has stopped (a
 * cluster restarted on the same Redis), the claim lapses and the next
 * cellapp of the space spawns them afresh. */
#define MAP_CLAIM_TTL_MS 5000
#define MAP_CLAIM_RENEW_MS 1000

#include "cellapp_settings.h"
#include "config.h"
#include "entity_def.h"
#include "game_host.h"
#include "id_block.h"
#include "peer_set.h"
#include "process_self.h"
#include "reals.h"
#include "redis_client.h"
#include "spaces.h"

typedef struct map_entities map_entities;

/* What spawning maps borrows (each outlives it). */
typedef struct map_entities_context {
    const config_group *maps; /* map files by space name */
    const entity_def_registry *definitions;
    redis_client *redis; /* the claims */
    const char *cluster_name;
    peer_set *peers; /* whether a claim's holder is alive */
    spaces *spaces;
    reals *reals;
    game_host *game; /* keyvalues into the game's data; the created hooks */
    id_block *ids;
    const process_self *self;
} map_entities_context;

map_entities *map_entities_create(const map_entities_context *context);
void map_entities_free(map_entities *maps);
/* Once a tick: claims and spawns the maps this cellapp should. */
void map_entities_tick(map_entities *maps);

#endif
