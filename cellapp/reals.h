/* reals.h -- the reals this cellapp creates and destroys (reals.c): a
 * baseapp's request for an entity's cell part (created here, or forwarded
 * to the cellapp whose cell holds the spawn point), what the game spawns,
 * the answer a base gets (CellEntityCreated), the end of a real (its
 * ghosts, the directory, the game told), and asking a real's baseapp to
 * drop a client that broke the rules.
 */
#ifndef TESSERA_REALS_H
#define TESSERA_REALS_H

#include <stdint.h>

#include "cell.h"
#include "cell_snapshot.h"
#include "cellapp_settings.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "game_hooks.h"
#include "ghost_order.h"
#include "haunt.h"
#include "outbox.h"
#include "peer_set.h"
#include "process_self.h"
#include "redis_client.h"
#include "spaces.h"

typedef struct reals reals;

/* What the reals borrow (each outlives them). */
typedef struct reals_context {
    const cellapp_settings *settings; /* default_space, max_entities, what a base's answer carries */
    const entity_def_registry *definitions;
    const game_hooks *hooks; /* created, destroyed, witness */
    spaces *spaces;
    outbox *outbox;
    peer_set *peers;
    haunts *haunts;
    ghost_order *ghost_order;
    redis_client *redis; /* the cell directory */
    const char *cluster_name;
    uint64_t *random_state; /* spawn points (random_unit.h) */
    const process_self *self;
    cell_snapshots *snapshots; /* a destroyed real's backup goes */
} reals_context;

reals *reals_create(const reals_context *context);
void reals_free(reals *r);

/* Creates a real of class `cls` in cell `c` at a position (checked by the
 * caller), incarnation 1, and announces it (ghost books, directory). The
 * game is not told: the caller does, once the real is set up. NULL if the
 * id is taken. */
cell_entity *reals_create_real(reals *r, cell *c, uint64_t id, const entity_def_class *cls, float x, float y, float z,
                               float yaw, uint64_t baseapp_id);
/* Destroys a real: the game hears it first, its haunts delete their
 * ghosts, the directory forgets it. Idempotent; a ghost is left alone. */
void reals_destroy(reals *r, cell_entity *entity);
/* A CreateCellEntity from process `from` (a baseapp, or a cellapp that
 * forwarded it): creates the real here, forwards it to the cellapp whose
 * cell holds the point, or refuses it; the base hears how it came out. */
void reals_on_create(reals *r, uint64_t from, const Tessera__Cluster__CreateCellEntity *request);
/* Tells baseapp `baseapp_id` how entity `entity_id`'s cell part came out:
 * made (entity, with what its client needs) or refused (entity NULL,
 * `error`). Also the answer to a ClientBinding that attaches a client. */
void reals_reply_created(reals *r, uint64_t baseapp_id, uint64_t entity_id, const cell_entity *entity,
                         const char *error);
/* Asks the baseapp of real `entity` to drop its client, which broke the
 * rules; the cell entity goes when the baseapp destroys it. */
void reals_drop_client(reals *r, const cell_entity *entity, Tessera__Client__ErrorCode code, const char *reason);
/* Baseapp `baseapp_id` was declared dead: its reals lose their clients
 * (their witnesses go) and wait settings->base_restore_wait_ms for their
 * bases, which the dead baseapp's backup holders bring back elsewhere
 * (reals_base_moved). Returns how many wait. */
size_t reals_lose_bases_of(reals *r, uint64_t baseapp_id, uint64_t now_us);
/* Once a second: reals whose baseapp is dead start waiting (those that
 * arrived by offload meanwhile), and those that waited past
 * base_restore_wait_ms are destroyed. Returns how many were destroyed. */
size_t reals_sweep_lost_bases(reals *r, uint64_t now_us);
/* BaseMoved: the base of real `entity` was on `dead_baseapp_id` and is now
 * on `new_baseapp_id`. Taken when the real's baseapp is that dead one and
 * this cellapp does not hold it connected (the sender acts on a death the
 * cluster declared); the new baseapp hears a CellEntityCreated, as for a
 * new cell part, and gets a cell backup this tick. Returns 0, or -1 with
 * why in `why`. */
int reals_base_moved(reals *r, cell_entity *entity, uint64_t dead_baseapp_id, uint64_t new_baseapp_id, char *why,
                     size_t why_size);

#endif
