/* offload.h -- reals moving between cellapps (offload.c): a real that
 * walked out of its cell's region moves to the cell that holds it, whole,
 * as its next incarnation; a refused or lost offload is taken back; a
 * teleport moves a real within or between spaces.
 */
#ifndef TESSERA_OFFLOAD_H
#define TESSERA_OFFLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "cell.h"
#include "cell_entity_codec.h"
#include "cell_load.h"
#include "cellapp_counters.h"
#include "cell_snapshot.h"
#include "cellapp_settings.h"
#include "cluster.pb-c.h"
#include "game_hooks.h"
#include "ghost_order.h"
#include "ghost_route.h"
#include "haunt.h"
#include "outbox.h"
#include "peer_set.h"
#include "process_self.h"
#include "redis_client.h"
#include "spaces.h"

typedef struct offloads offloads;

/* What offloading borrows (each outlives it). */
typedef struct offloads_context {
    const cellapp_settings *settings; /* offload_margin, max_entities, ghost_route_ms, movement */
    const cell_entity_codec *codec;   /* how a real is saved and restored */
    const game_hooks *hooks;          /* leaving, arrived, teleported */
    spaces *spaces;
    outbox *outbox;
    peer_set *peers;
    haunts *haunts;
    ghost_order *ghost_order;
    ghost_route *route;
    redis_client *redis; /* the cell directory */
    const char *cluster_name;
    cell_load *load;
    cellapp_counters *counters;
    const process_self *self;
    const bool *fenced;        /* the cellapp is fenced (tick.c): it takes no real (NULL: never) */
    cell_snapshots *snapshots; /* a real without a base that leaves takes its backup here along */
} offloads_context;

offloads *offload_create(const offloads_context *context);
/* Frees the states kept for offloads not acknowledged. NULL is a no-op. */
void offload_free(offloads *o);

/* Once per tick, after haunt_tick: every real whose position lies in
 * another cell (past the margin) moves there, and teleports into other
 * spaces go. */
void offload_tick(offloads *o, cell *c);
/* Moves real `entity` to `target` now (a line moved under it). */
void offload_send(offloads *o, cell_entity *entity, uint64_t target);
/* An Offload the incarnation books let through: restores it here and
 * acknowledges, or refuses it. */
void offload_apply(offloads *o, uint64_t peer, const Tessera__Cluster__Offload *offload);
/* Refuses an Offload from `peer` for `reason`: its haunts and its base
 * learn that the offered incarnation will never run, its sender takes the
 * real back. */
void offload_refuse(offloads *o, uint64_t peer, const Tessera__Cluster__Offload *offload, const char *reason);
void offload_on_ack(offloads *o, uint64_t peer, const Tessera__Cluster__OffloadAck *ack);
/* Cellapp `peer` is gone (dead, or back after a lost link): reals sent to
 * it and not acknowledged come back here unless the cell directory says
 * it took them (a claim, mailbox_directory_claim). */
void offload_peer_down(offloads *o, uint64_t peer);
/* Moves `entity` (a real) to (x, y, z) in space `space_name` (NULL: its
 * own): here if the point is in this cell, else to the cell that holds it,
 * on whichever cellapp. Returns 0, or -1 with why in err (an unknown space,
 * a point in no cell: the entity stays where it is). */
int offload_teleport(offloads *o, cell_entity *entity, const char *space_name, float x, float y, float z, float yaw,
                     char *err, size_t errlen);
/* Offloads sent and not yet acknowledged. */
size_t offload_pending_count(const offloads *o);

#endif
