/* cellapp_figures.c -- the cellapp's figures in one table: what each is,
 * its registry field and its /metrics family (common/stat_table.h), and the
 * gathering of a snapshot from the modules. The registry's field names are
 * what `scripts/cluster status`, the balancer tests and the benchmarks
 * read; the metric names are what dashboards scrape. */
#include "cellapp_figures.h"

#include <stddef.h>
#include <stdio.h>

#include "game_host.h"
#include "stat_table.h"

#define FIGURE(field) offsetof(cellapp_figures, field)

static const stat_row cellapp_figure_rows[] = {
    /* registry, metric, labels, kind, type, offset, registry scale, help */
    {"load", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(reals), 0, "reals held (what a baseapp balances on)"},
    {"entities", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(entities), 0, "reals and ghosts held"},
    {"reals", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(reals), 0, "reals held"},
    {"ghosts", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(ghosts), 0, "ghosts held"},
    {"interior_reals", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(interior_reals), 0, "reals with no ghost anywhere"},
    {"cells", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(cells), 0, "cells held"},
    {"aoi_scanning_cells", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(aoi_scanning_cells), 0,
     "cells whose AOI is in scan mode (a crowd, or everyone moving)"},
    {"aoi_swaps", "aoi_swaps_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(aoi_swaps), 0,
     "node swaps of the cells' AOI axes (crossing mode's work)"},
    {"aoi_scanned", "aoi_scanned_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(aoi_scanned), 0,
     "entities tested by the cells' AOI scans (scan mode's work)"},
    {"baseapps", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(baseapps), 0, "baseapps connected"},
    {"cellapps", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(cellapps), 0, "other cellapps connected"},
    {"tick_us", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(tick_us), 0, "the last tick's duration"},
    {"load_permille", "load", NULL, STAT_GAUGE, STAT_DOUBLE, FIGURE(load), 1000,
     "busy share of one core, smoothed, without transient work"},
    {"transient_permille", "transient_load", NULL, STAT_GAUGE, STAT_DOUBLE, FIGURE(transient_load), 1000,
     "share of one core spent moving reals and making and removing ghosts"},
    {"offloads_out", "offloads_out_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(offloads_out), 0,
     "reals sent to other cellapps"},
    {"offloads_in", "offloads_in_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(offloads_in), 0,
     "reals taken from other cellapps"},
    {"offloads_reclaimed", "offloads_reclaimed_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(offloads_reclaimed), 0,
     "reals taken back after their receiver refused or died"},
    {"offload_acks", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(offload_acks), 0, "offloads acknowledged"},
    {"offload_p50_us", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(offload_p50_us), 0,
     "median time from an offload to its acknowledgement"},
    {"offload_p99_us", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(offload_p99_us), 0, "99th percentile of the same"},
    {NULL, "ghosts_created_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(ghosts_created), 0,
     "ghosts of our reals made on other cellapps"},
    {NULL, "ghosts_deleted_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(ghosts_deleted), 0,
     "ghosts of our reals removed from other cellapps"},
    {"ghost_bytes", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(ghost_bytes), 0, "ghost message bytes sent"},
    {"held_ghost_messages", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(held_ghost_messages), 0,
     "ghost messages held for an earlier incarnation"},
    {"forwarded", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(messages_forwarded), 0,
     "messages to cell parts sent on to their real"},
    {"failed", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(messages_failed), 0,
     "messages to cell parts that could not be delivered"},
    {"teleports", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(teleports), 0, "teleports done"},
    {"base_calls", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(base_calls), 0, "calls of entities' bases made here"},
    {"base_calls_failed", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(base_calls_failed), 0,
     "calls of entities' bases that came back failed"},
    {NULL, "game_events_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(game_events), 0,
     "game events and user messages the game fired here"},
    {"lua_bytes", "lua_heap_bytes", NULL, STAT_GAUGE, STAT_U64, FIGURE(lua_bytes), 0,
     "bytes the game's Lua state holds"},
    {"lua_calls", "lua_calls_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(lua_calls), 0,
     "calls from the engine into Lua scripts"},
    {"lua_errors", "lua_errors_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(lua_errors), 0,
     "Lua calls that raised an error (budget stops included)"},
    {"lua_budget_stops", "lua_budget_stops_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(lua_budget_stops), 0,
     "Lua calls stopped by the instruction budget"},
    {"lua_reloads", "lua_reloads_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(lua_reloads), 0,
     "script reloads that took over"},
    {"lua_reloads_refused", "lua_reloads_refused_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(lua_reloads_refused), 0,
     "script reloads refused (the old code kept)"},
    {"lua_reload_us", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(lua_reload_us), 0, "the last reload's duration"},
    {"lua_gc_p50_us", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(lua_gc_p50_us), 0,
     "median pause of the Lua collector's step between ticks"},
    {"lua_gc_p99_us", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(lua_gc_p99_us), 0, "99th percentile of the same"},
    {"lua_gc_max_us", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(lua_gc_max_us), 0, "the longest of the same"},
    {"stream_bytes", "witness_bytes_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(stream_bytes), 0,
     "entity stream bytes sent to clients"},
    {"records_held", "witness_records_held_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(records_held), 0,
     "records a client's budget held to a later tick"},
    {"arrivals_awaited", "witness_arrivals_awaited_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(arrivals_awaited), 0,
     "entities a travelling view knew whose copy it waited for here"},
    {"arrivals_missed", "witness_arrivals_missed_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(arrivals_missed), 0,
     "entities a travelling view waited for in vain (they left its client's view)"},
    {"near_leaves", "witness_near_leaves_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(near_leaves), 0,
     "LEAVEs of entities still inside the view radius: the AOI and the positions disagree (a bug)"},
    {"bytes_in", "channel_bytes_in_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(bytes_in), 0,
     "bytes read from other processes"},
    {"bytes_out", "channel_bytes_out_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(bytes_out), 0,
     "bytes written to other processes"},
    {"frames_in", "channel_frames_in_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(frames_in), 0,
     "frames read from other processes"},
    {"frames_out", "channel_frames_out_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(frames_out), 0,
     "frames written to other processes"},
    {NULL, "errors_total", "reason=\"message_failed\"", STAT_COUNTER, STAT_U64, FIGURE(messages_failed), 0,
     "things that went wrong, by reason"},
    {NULL, "errors_total", "reason=\"stream_gap\"", STAT_COUNTER, STAT_U64, FIGURE(stream_gaps), 0, NULL},
    {NULL, "errors_total", "reason=\"move_refused\"", STAT_COUNTER, STAT_U64, FIGURE(moves_refused), 0, NULL},
    {NULL, "errors_total", "reason=\"offload_refused\"", STAT_COUNTER, STAT_U64, FIGURE(offloads_refused), 0, NULL},
    {"aliases_exhausted", "errors_total", "reason=\"aliases_exhausted\"", STAT_COUNTER, STAT_U64,
     FIGURE(aliases_exhausted), 0, NULL},
    {"restores_failed", "errors_total", "reason=\"restore_failed\"", STAT_COUNTER, STAT_U64, FIGURE(restores_failed), 0,
     NULL},
    {"draining", "draining", NULL, STAT_GAUGE, STAT_BOOL, FIGURE(draining), 0,
     "1 while the cellapp hands its cells over before stopping"},
    {"fenced", "fenced", NULL, STAT_GAUGE, STAT_BOOL, FIGURE(fenced), 0,
     "1 while this cellapp's lease lapsed and it may be declared dead: it ticks nothing of its own"},
    {"fences", "fences_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(fences), 0, "times this cellapp fenced itself"},
    {"deaths_declared", "deaths_declared_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(deaths_declared), 0,
     "processes this cellapp declared dead as the balancer lease's holder"},
    {"snapshots", "cell_backups_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(snapshots), 0,
     "backups of reals taken (to their bases, or to Redis for those without)"},
    {"snapshot_bytes", "cell_backup_bytes_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(snapshot_bytes), 0,
     "bytes of those backups"},
    {"snapshot_us", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(snapshot_us), 0,
     "time spent taking them, microseconds (registry only: /metrics wants seconds)"},
    {"restores_from_ghost", "restores_total", "from=\"ghost\"", STAT_COUNTER, STAT_U64, FIGURE(restores_from_ghost), 0,
     "reals of dead cellapps brought back here, by what they came back from"},
    {"restores_from_backup", "restores_total", "from=\"backup\"", STAT_COUNTER, STAT_U64, FIGURE(restores_from_backup),
     0, NULL},
    {"restores_forwarded", "restores_forwarded_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(restores_forwarded), 0,
     "restore requests passed on to the cellapp that owns the position"},
    {"restores_refused", "restores_refused_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(restores_refused), 0,
     "restores not done: another cellapp holds the entity, or it was destroyed"},
    {"restores_pending", "restores_pending", NULL, STAT_GAUGE, STAT_U64, FIGURE(restores_pending), 0,
     "restore requests waiting for their position's owner or their claim"},
    {"orphans_dropped", "orphan_ghosts_dropped_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(orphans_dropped), 0,
     "ghosts of dead cellapps' reals that waited in vain for a restore"},
    {"restore_age_p50_ms", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(restore_age_p50_ms), 0,
     "median age of the states reals were restored from, ms"},
    {"restore_age_p99_ms", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(restore_age_p99_ms), 0,
     "99th percentile age of the states reals were restored from, ms"},
    {"balance_leader", "balance_leader", NULL, STAT_GAUGE, STAT_BOOL, FIGURE(balance_leader), 0,
     "1 while this cellapp holds the balancer lease"},
    {"balance_passes", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(balance_passes), 0,
     "passes this cellapp ran as the balancer"},
    {"line_moves", "line_moves_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(line_moves), 0,
     "split lines this cellapp moved as the balancer"},
    {"cell_changes", "cell_changes_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(cell_changes), 0,
     "cells this cellapp added, handed over, retired or removed"},
    {"balance_writes_refused", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(balance_writes_refused), 0,
     "layout writes refused for an older lease"},
};

#define CELLAPP_FIGURE_ROWS (sizeof cellapp_figure_rows / sizeof cellapp_figure_rows[0])

void cellapp_figures_gather(const cellapp *app, cellapp_figures *out) {
    *out = (cellapp_figures){0};
    size_t interior, reals, ghosts;
    haunt_count(app->haunts, &interior, &reals, &ghosts);
    out->reals = reals;
    out->ghosts = ghosts;
    out->entities = reals + ghosts;
    out->interior_reals = interior;
    size_t cursor = 0;
    for (cell *c; (c = spaces_next_cell(app->spaces, &cursor)) != NULL;) {
        out->cells++;
        coord_stats aoi;
        coord_get_stats(c->coord, &aoi);
        out->aoi_swaps += aoi.swaps;
        out->aoi_scanned += aoi.scanned;
        out->aoi_scanning_cells += coord_current_mode(c->coord) == COORD_MODE_SCAN;
    }
    out->baseapps = peer_set_count_up(app->runtime.peers, PEER_ROLE_BASEAPP);
    out->cellapps = peer_set_count_up(app->runtime.peers, PEER_ROLE_CELLAPP);
    out->frames_in = app->runtime.peer_totals.frames_in;
    out->frames_out = app->runtime.peer_totals.frames_out;
    out->bytes_in = app->runtime.peer_totals.bytes_in;
    out->bytes_out = app->runtime.peer_totals.bytes_out;
    out->tick_us = app->clock.last_duration_us;
    out->load = cell_load_value(app->load);
    out->transient_load = cell_load_transient(app->load);
    out->draining = app->draining;
    const struct witness_totals *w = &app->shared.witness_totals;
    out->stream_bytes = w->stream_bytes;
    out->records_held = w->records_held;
    out->aliases_exhausted = w->aliases_exhausted;
    out->arrivals_awaited = w->arrivals_awaited;
    out->arrivals_missed = w->arrivals_missed;
    out->near_leaves = w->near_leaves;
    const cellapp_counters *n = &app->counters;
    out->offloads_out = n->offloads_out;
    out->offloads_in = n->offloads_in;
    out->offloads_refused = n->offloads_refused;
    out->offloads_reclaimed = n->offloads_reclaimed;
    out->offload_acks = n->offload_latency.count;
    out->offload_p50_us = latency_histogram_percentile(&n->offload_latency, 50.0);
    out->offload_p99_us = latency_histogram_percentile(&n->offload_latency, 99.0);
    out->ghosts_created = n->ghosts_created;
    out->ghosts_deleted = n->ghosts_deleted;
    out->ghost_bytes = n->ghost_bytes;
    out->held_ghost_messages = ghost_order_held_count(app->ghost_order);
    out->messages_forwarded = n->messages_forwarded;
    out->messages_failed = n->messages_failed;
    out->stream_gaps = n->stream_gaps;
    out->duplicates = n->duplicates;
    out->teleports = n->teleports;
    out->moves_refused = n->moves_refused;
    out->game_events = n->game_events;
    lua_runtime_figures lua;
    if (game_host_lua_figures(app->game, &lua)) {
        out->lua_bytes = lua.bytes;
        out->lua_calls = lua.calls;
        out->lua_errors = lua.errors;
        out->lua_budget_stops = lua.budget_stops;
        out->lua_reloads = lua.reloads;
        out->lua_reloads_refused = lua.reloads_refused;
        out->lua_reload_us = lua.last_reload_us;
        out->lua_gc_p50_us = lua.gc_p50_us;
        out->lua_gc_p99_us = lua.gc_p99_us;
        out->lua_gc_max_us = lua.gc_max_us;
    }
    out->base_calls = n->base_calls;
    out->base_calls_failed = n->base_calls_failed;
    out->fenced = app->fenced;
    out->fences = n->fences;
    out->deaths_declared = death_watch_declared(app->deaths);
    out->snapshots = n->snapshots;
    out->snapshot_bytes = n->snapshot_bytes;
    out->snapshot_us = n->snapshot_us;
    out->restores_from_ghost = n->restores_from_ghost;
    out->restores_from_backup = n->restores_from_backup;
    out->restores_forwarded = n->restores_forwarded;
    out->restores_refused = n->restores_refused;
    out->restores_failed = n->restores_failed;
    out->restores_pending = restores_pending(app->restores);
    out->orphans_dropped = n->orphans_dropped;
    out->restore_age_p50_ms = latency_histogram_percentile(&n->restore_state_age, 50.0) / 1000;
    out->restore_age_p99_ms = latency_histogram_percentile(&n->restore_state_age, 99.0) / 1000;
    balancer_figures balance;
    balancer_stats(app->balancer, &balance);
    out->balance_leader = balance.leader;
    out->balance_passes = balance.passes;
    out->line_moves = balance.line_moves;
    out->cell_changes = balance.cell_changes;
    out->balance_writes_refused = balance.writes_refused;
}

void cellapp_figures_publish(const cellapp_figures *figures, registry *reg) {
    stat_table_publish(cellapp_figure_rows, CELLAPP_FIGURE_ROWS, figures, reg);
}

static const double cellapp_figures_tick_edges[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0};
static const double cellapp_figures_offload_edges[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0};

void cellapp_figures_metrics(const cellapp *app, metrics_text *m) {
    cellapp_figures figures;
    cellapp_figures_gather(app, &figures);
    metrics_family(m, "tick_seconds", "histogram", "time one simulation tick took");
    metrics_histogram(m, "tick_seconds", NULL, &app->counters.tick_time, cellapp_figures_tick_edges,
                      sizeof cellapp_figures_tick_edges / sizeof cellapp_figures_tick_edges[0]);
    /* The text format wants a family's samples together: one pass over the
     * cells for each family. */
    for (int family = 0; family < 2; family++) {
        const char *name = family == 0 ? "reals" : "ghosts";
        metrics_family(m, name, "gauge", family == 0 ? "reals held, per cell" : "ghosts held, per cell");
        size_t cursor = 0;
        const cell *c;
        while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
            char labels[160] = "", id[16];
            snprintf(id, sizeof id, "%u", c->cell_id);
            metrics_label(labels, sizeof labels, "space", c->space_name);
            metrics_label(labels, sizeof labels, "cell", id);
            metrics_sample(m, name, labels, (double)(family == 0 ? c->real_count : c->ghost_count));
        }
    }
    metrics_family(m, "offload_seconds", "histogram", "from sending a real to its acknowledgement");
    metrics_histogram(m, "offload_seconds", NULL, &app->counters.offload_latency, cellapp_figures_offload_edges,
                      sizeof cellapp_figures_offload_edges / sizeof cellapp_figures_offload_edges[0]);
    stat_table_metrics(cellapp_figure_rows, CELLAPP_FIGURE_ROWS, &figures, m);
}
