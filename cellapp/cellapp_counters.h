/* cellapp_counters.h -- the numbers a cellapp's modules count as they work
 * (offloads, ghosts, messages, refusals, latencies). The process owns one
 * cellapp_counters; each module that counts something takes a pointer to
 * it in its context. Publishing them (the registry, /metrics) is the
 * counter table's business (cellapp_figures.c).
 */
#ifndef TESSERA_CELLAPP_COUNTERS_H
#define TESSERA_CELLAPP_COUNTERS_H

#include <stdint.h>

#include "latency_histogram.h"

typedef struct cellapp_counters {
    uint64_t offloads_out, offloads_in; /* reals sent to and taken from other cellapps */
    uint64_t game_events;               /* game events and user messages fired here */
    uint64_t offloads_refused, offloads_reclaimed;
    uint64_t ghosts_created, ghosts_deleted; /* ghosts of our reals made and removed elsewhere */
    uint64_t ghost_bytes;                    /* GhostMessage bytes sent */
    uint64_t messages_forwarded;             /* CellMessages sent on to the real */
    uint64_t messages_failed;                /* CellMessages that could not be delivered */
    uint64_t stream_gaps;                    /* sequences given up after cell_stream_gap_ms */
    uint64_t duplicates;                     /* CellMessages delivered before, dropped */
    uint64_t teleports;
    uint64_t moves_refused;
    uint64_t base_calls, base_calls_failed; /* calls of entities' bases made here, and those that failed */
    uint64_t fences;                        /* times this cellapp fenced itself */
    /* Backups (cell_snapshot.c): taken, their bytes, the time taking
     * them cost (microseconds). */
    uint64_t snapshots, snapshot_bytes, snapshot_us;
    /* Restores (restore.c): reals brought back from a ghost here or from
     * a backup; requests passed on to the position's owner; claims another
     * cellapp won (it holds the entity); requests that could not be
     * restored; orphan ghosts that waited in vain. */
    uint64_t restores_from_ghost, restores_from_backup, restores_forwarded, restores_refused, restores_failed;
    uint64_t orphans_dropped;
    /* Age of the state each restore came back with, microseconds. */
    latency_histogram restore_state_age;
    /* From an offload's send to its acknowledgement, microseconds. */
    latency_histogram offload_latency;
    latency_histogram tick_time; /* each tick's duration, microseconds */
} cellapp_counters;

#endif
