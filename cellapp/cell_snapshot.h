/* cell_snapshot.h -- every real's backup (cell_snapshot.c): its whole cell
 * state (cell_entity_codec.h, what an offload moves; without the witness,
 * since a restore starts the client's view again), taken once per
 * cell_backup_period_ms, spread evenly over the ticks, and at once when a
 * real is created, arrives, teleports or is restored (cell_real's
 * snapshot_due). A real with a base sends it to its base (CellSnapshot);
 * one without (an NPC, a map entity) keeps it in Redis (P
 * cell_backups:<this cellapp>). If this cellapp dies, the others bring the
 * reals back from these (restore.h).
 */
#ifndef TESSERA_CELL_SNAPSHOT_H
#define TESSERA_CELL_SNAPSHOT_H

#include <stdint.h>

#include "cell.h"
#include "cell_entity_codec.h"
#include "cellapp_counters.h"
#include "cellapp_settings.h"
#include "peer_set.h"
#include "process_self.h"
#include "redis_client.h"

typedef struct cell_snapshots cell_snapshots;

/* What the backups borrow (each outlives them). */
typedef struct cell_snapshots_context {
    const cellapp_settings *settings; /* cell_backup_period_ms, tick_hz */
    const cell_entity_codec *codec;
    peer_set *peers;
    redis_client *redis;
    const char *cluster_name;
    const process_self *self;
    cellapp_counters *counters;
} cell_snapshots_context;

cell_snapshots *cell_snapshots_create(const cell_snapshots_context *context);
void cell_snapshots_free(cell_snapshots *snapshots);

/* Once per tick for each cell, once its reals have moved on (after the
 * offloads): the reals due now, then this tick's share of the round. */
void cell_snapshots_tick(cell_snapshots *snapshots, cell *c);
/* A real without a base leaves this cellapp or is destroyed: its backup
 * here goes (a restore would refuse it anyway: the directory no longer
 * names this cellapp). */
void cell_snapshots_forget(cell_snapshots *snapshots, const cell_entity *entity);

#endif
