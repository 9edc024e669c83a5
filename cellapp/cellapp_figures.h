/* cellapp_figures.h -- the cellapp's figures: a snapshot of plain numbers
 * gathered from its modules, and the one table (cellapp_figures.c) that
 * publishes them to the registry and writes them to /metrics.
 */
#ifndef TESSERA_CELLAPP_FIGURES_H
#define TESSERA_CELLAPP_FIGURES_H

#include <stdbool.h>
#include <stdint.h>

#include "cellapp.h"
#include "metrics.h"
#include "registry.h"

typedef struct cellapp_figures {
    uint64_t reals, ghosts, entities, interior_reals, cells;
    /* The cells' coordinate systems (coord.h): in scan mode now, and their
     * work so far, the swaps of crossing mode and the tests of scan mode. */
    uint64_t aoi_scanning_cells, aoi_swaps, aoi_scanned;
    uint64_t baseapps, cellapps; /* peers up */
    uint64_t frames_in, frames_out, bytes_in, bytes_out;
    uint64_t tick_us;
    double load, transient_load;
    bool draining;
    /* The witnesses'. */
    uint64_t stream_bytes, records_held, aliases_exhausted, arrivals_awaited, arrivals_missed, near_leaves;
    /* The modules' counters. */
    uint64_t offloads_out, offloads_in, offloads_refused, offloads_reclaimed;
    uint64_t offload_acks, offload_p50_us, offload_p99_us;
    uint64_t ghosts_created, ghosts_deleted, ghost_bytes, held_ghost_messages;
    uint64_t messages_forwarded, messages_failed, stream_gaps, duplicates;
    uint64_t teleports, moves_refused, game_events, base_calls, base_calls_failed;
    /* Failure: fenced now, times fenced, deaths this cellapp declared. */
    bool fenced;
    uint64_t fences, deaths_declared;
    /* Recovery: backups taken and their bytes and cost; reals restored
     * (from a ghost, from a backup), requests passed on, refused (another
     * holds the entity), failed, waiting; orphan ghosts dropped; the age
     * of restored states (p50, p99, ms). */
    uint64_t snapshots, snapshot_bytes, snapshot_us;
    uint64_t restores_from_ghost, restores_from_backup, restores_forwarded, restores_refused, restores_failed;
    uint64_t restores_pending, orphans_dropped, restore_age_p50_ms, restore_age_p99_ms;
    /* The game's Lua scripts (lua_runtime.h): heap bytes, calls, errors,
     * budget stops, reloads (done, refused, the last one's time), and the
     * collector's pauses between ticks. */
    uint64_t lua_bytes, lua_calls, lua_errors, lua_budget_stops, lua_reloads, lua_reloads_refused, lua_reload_us;
    uint64_t lua_gc_p50_us, lua_gc_p99_us, lua_gc_max_us;
    /* The balancer's. */
    bool balance_leader;
    uint64_t balance_passes, line_moves, cell_changes, balance_writes_refused;
} cellapp_figures;

/* Reads every figure from the process's modules. It takes the whole
 * process because it reads most of it. */
void cellapp_figures_gather(const cellapp *app, cellapp_figures *out);
/* Publishes the figures' registry fields. */
void cellapp_figures_publish(const cellapp_figures *figures, registry *reg);
/* Writes every family of the cellapp's /metrics: the table's, the per-cell
 * gauges, and the latency histograms. */
void cellapp_figures_metrics(const cellapp *app, metrics_text *m);

#endif
