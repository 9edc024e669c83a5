/* restore.h -- bringing back the reals of a dead cellapp (restore.c).
 *
 * When the cluster declares a cellapp dead (death_watch.h), its reals come
 * back on the cellapps that own their positions in the layout that hands
 * its cells to the survivors:
 *
 *   - a real with a base: the base sends its latest backup
 *     (RestoreCellEntity, cell_snapshot.h) to a cellapp, which passes it on
 *     to the owner of the position, holding it while the layout still
 *     names the dead cellapp;
 *   - a real without a base: every survivor reads the dead cellapp's
 *     backups in Redis and restores those whose position it owns.
 *
 * The owner claims the entity in the cell directory first
 * (mailbox_directory_claim): only an entry that names a dead cellapp (or
 * this one) is taken, so an entity that was on its way to or from the dead
 * cellapp (an offload) is real exactly once, wherever it ended up. It then
 * restores the real as the claimed incarnation: over its own ghost of it
 * when it holds one (the ghost's position and ghosted values are a tick
 * old at most; the rest is the backup's), so that the clients that see it
 * here see no leave and no enter; the other cellapps' ghosts of it are
 * taken over in place by its first ghost create (ghost_order.h, orphans).
 * The base hears the new address; a player's client is told
 * (EntityRestored) and its view starts again. The game hears `restored`.
 *
 * Claims go out at most RESTORE_CLAIMS_PER_TICK a tick, so the survivors'
 * ticks stay in budget while hundreds of reals come back. The dead
 * cellapp's ghosts here wait, frozen, restore_orphan_ms for their reals,
 * then go.
 */
#ifndef TESSERA_RESTORE_H
#define TESSERA_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell_entity_codec.h"
#include "cellapp_counters.h"
#include "cellapp_settings.h"
#include "cluster.pb-c.h"
#include "game_hooks.h"
#include "ghost_order.h"
#include "ghost_route.h"
#include "outbox.h"
#include "peer_set.h"
#include "process_self.h"
#include "redis_client.h"
#include "spaces.h"

#define RESTORE_CLAIMS_PER_TICK 256

typedef struct restores restores;

/* What restoring borrows (each outlives it). */
typedef struct restores_context {
    const cellapp_settings *settings; /* restore_orphan_ms, max_entities */
    const cell_entity_codec *codec;
    const game_hooks *hooks; /* restored */
    spaces *spaces;
    outbox *outbox; /* the client's EntityRestored */
    peer_set *peers;
    ghost_order *ghost_order;
    ghost_route *route;
    redis_client *redis; /* the cell directory, the backups of reals without a base */
    const char *cluster_name;
    const process_self *self;
    cellapp_counters *counters;
    const bool *fenced; /* a fenced cellapp restores nothing (NULL: never fenced) */
} restores_context;

restores *restores_create(const restores_context *context);
/* Frees the requests waiting; a claim still in Redis finds nothing. */
void restores_free(restores *r);

/* A RestoreCellEntity from process `from` (a baseapp, or a cellapp that
 * passed it on): kept until the position's owner is known. */
void restores_on_request(restores *r, uint64_t from, const Tessera__Cluster__RestoreCellEntity *request);
/* Cellapp `dead` was declared dead (after the incarnation books and the
 * haunts heard it): its ghosts here become orphans, and its backups of
 * reals without a base are read from Redis. */
void restores_on_cellapp_dead(restores *r, uint64_t dead);
/* Once per tick, after the layouts are applied: requests whose position
 * has a live owner go on to it or are claimed here; orphans that waited
 * too long go. */
void restores_tick(restores *r, uint64_t now_us);
/* Requests waiting or being claimed. */
size_t restores_pending(const restores *r);

#endif
