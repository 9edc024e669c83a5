/* base_life.h -- the life of a base, from made to freed, whether or not it
 * ever holds a client:
 *
 *   made       from what was stored (or fresh): an entity id, its
 *              properties, its entity-call address claimed, the game's
 *              created hook;
 *   its cell   asked of the least-loaded cellapp (CREATING_CELL), then
 *              LIVE once the cellapp answers, or destroyed if it refuses
 *              or goes away meanwhile;
 *   destroyed  explicitly (DESTROYING): its cell part goes, with a last
 *              backup when it is saved, then its last write;
 *   freed      once that write is acknowledged: the game's destroyed hook,
 *              its address released, its client part (proxy.c) let go.
 *
 * What a base's client hears of all this is its proxy part's: the
 * callbacks below reach it without this module knowing proxies.
 */
#ifndef TESSERA_BASE_LIFE_H
#define TESSERA_BASE_LIFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "base_entity.h"
#include "base_hooks.h"
#include "base_mailbox.h"
#include "cell_link.h"
#include "cluster.pb-c.h"
#include "id_block.h"
#include "persistence.h"
#include "process_self.h"

typedef struct base_life base_life;

/* How often a restored base asks its cell part to answer before it gives
 * up on it (a second apart): longer than the cellapps' own wait would not
 * help, the cell part is gone by then (base_restore_wait_ms, 10 s). */
#define BASE_LIFE_ADOPT_ASKS 8

typedef struct base_life_callbacks {
    void *owner;
    /* The base is going: its client, if it has one, is told `message`. */
    void (*client_gone)(void *owner, base_entity *base, const char *message);
    /* The base is being freed: its client part, if any, goes. */
    void (*client_part_free)(void *owner, base_entity *base);
    /* Its cell part answered: `created` the first time (the base is LIVE
     * now), else again for another client binding. */
    void (*cell_ready)(void *owner, base_entity *base, const Tessera__Cluster__CellEntityCreated *reply, bool created);
    /* The base is being freed: it is gone from this baseapp for good. */
    void (*freed)(void *owner, base_entity *base);
} base_life_callbacks;

typedef struct base_life_context {
    base_entities *bases;
    cell_links *cells;
    persistence *store;
    base_mailbox *addresses; /* entity calls find bases through it */
    id_block *ids;
    const base_hooks *hooks;
    const process_self *self;
    base_life_callbacks callbacks;
} base_life_context;

base_life *base_life_create(const base_life_context *context);
void base_life_free_module(base_life *life);

/* A new base of `cls` stored under `name`, from what was stored (NULL:
 * nothing), without a cell part yet and without a client. NULL with `why`
 * when none can be made (no entity ids, the set full). */
base_entity *base_life_make(base_life *life, const entity_def_class *cls, const char *name, const cJSON *stored,
                            char *why, size_t why_size);
/* The same as entity `entity_id`, an id base_life_take_id gave (a
 * singleton claims its name under the id before its base is made). */
base_entity *base_life_make_as(base_life *life, uint64_t entity_id, const entity_def_class *cls, const char *name,
                               const cJSON *stored, char *why, size_t why_size);
/* A fresh entity id into *entity_id. Returns 0, or -1 when none is to hand
 * (ids come from Redis in blocks). */
int base_life_take_id(base_life *life, uint64_t *entity_id);
/* A base of `cls` brought back here from `backup`, a base of dead baseapp
 * `dead_baseapp_id` (base_backup.h): its entity id, properties, latest
 * cell backup and stored state as they were; its entity-call address
 * claimed; its cell part, which lives on, asked to answer to this baseapp
 * (CREATING_CELL until it does), or made afresh if it had none yet. The
 * game's created hook does not run again. NULL with `why` when it cannot
 * be (the entity is here already, the set is full, the properties do not
 * decode). */
base_entity *base_life_restore(base_life *life, const entity_def_class *cls, const Tessera__Cluster__BaseBackup *backup,
                               uint64_t dead_baseapp_id, char *why, size_t why_size);
/* Asks for the base's cell part (CREATING_CELL), with a witness when
 * `with_client`, for client binding `binding`. Returns 0, or -1 when no
 * cellapp is up. */
int base_life_create_cell(base_life *life, base_entity *base, bool with_client, uint32_t binding);
/* Starts the end of a base: its cell part goes (with a last backup when
 * `save`), its state is written, then it is freed. Idempotent. */
void base_life_destroy(base_life *life, base_entity *base, bool save, const char *reason);
/* Frees a base whose part everywhere is over. */
void base_life_free(base_life *life, base_entity *base);
/* Its cell part answered (CellEntityCreated). */
void base_life_on_cell_created(base_life *life, base_entity *base, uint64_t cellapp_id,
                               const Tessera__Cluster__CellEntityCreated *reply);
/* Its cell part is lost (cell_link.h's lost callback). */
void base_life_on_cell_lost(base_life *life, base_entity *base, uint64_t cellapp_id, bool while_making,
                            const char *reason);
/* Every base's persistence duties (a backup past its deadline, a retry,
 * an autosave), and restored bases whose cell part has not answered yet
 * (asked again each second, given up with a save after
 * BASE_LIFE_ADOPT_ASKS asks). */
void base_life_sweep(base_life *life);
/* At shutdown: frees every base, reporting those whose state is
 * unwritten. */
void base_life_free_all(base_life *life);

#endif
