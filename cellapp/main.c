/* main.c -- the cellapp process: its settings table, start-up (config,
 * the process runtime, then its modules from the bottom up), the published
 * figures, the drain SIGTERM asks for, and an orderly shutdown. The tick is
 * tick.c's; what peers send, peer dispatch's; the loop, Redis, the
 * registry, the peers and the signals, the process runtime's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cellapp.h"
#include "cell_real.h"
#include "cellapp_admin.h"
#include "cellapp_figures.h"
#include "clock.h"
#include "game_module.h"
#include "log.h"
#include "peer_dispatch.h"
#include "peer_message.h"
#include "state_dump.h"
#include "tick.h"

static const config_key cellapp_config_keys[] = {
    PROCESS_CONFIG_KEYS(cellapp_settings, process),
    {"tick_hz", CONFIG_INT, offsetof(cellapp_settings, tick_hz), 0, 1, 100, "10",
     "simulation ticks per second; each tick sends every client its view changes"},
    {"default_space", CONFIG_STRING, offsetof(cellapp_settings, default_space),
     sizeof(((cellapp_settings *)0)->default_space), 0, 0, "default",
     "the space a new entity joins when its base names none (spaces and their cells are data in Redis: "
     "tessera-admin)"},
    {"max_speed", CONFIG_DOUBLE, offsetof(cellapp_settings, movement.max_speed), 0, 0.01, 1e5, "10",
     "fastest a client may move its entity (metres per second); faster moves are corrected"},
    {"movement_burst_seconds", CONFIG_DOUBLE, offsetof(cellapp_settings, movement.burst_seconds), 0, 0.05, 60, "1",
     "seconds of movement a client may bank, absorbing network jitter"},
    {"max_entities", CONFIG_INT, offsetof(cellapp_settings, max_entities), 0, 1, 10000000, "100000",
     "reals this cellapp accepts (created or arriving) before refusing more"},
    {"entity_definitions", CONFIG_STRING, offsetof(cellapp_settings, entity_definitions),
     sizeof(((cellapp_settings *)0)->entity_definitions), 0, 0, "demo/entities",
     "directory of the game's entity definitions (*.json); every process of a cluster must load the same"},
    {"aoi_mode", CONFIG_STRING, offsetof(cellapp_settings, aoi_mode), sizeof(((cellapp_settings *)0)->aoi_mode), 0, 0,
     "auto",
     "how each cell's AOI finds what enters and leaves views: auto (each cell measures both ways and takes the "
     "cheaper), crossing (boundaries in the axes: cheap when few move) or scan (each view scans its stretch: "
     "cheap in crowds and when everyone moves); the events are the same"},
    {"view_radius", CONFIG_DOUBLE, offsetof(cellapp_settings, witness.view_radius), 0, 0.1, 1e5, "50",
     "half the side of the square (X/Z) a player sees: entities at most this far on each axis"},
    {"view_hysteresis", CONFIG_DOUBLE, offsetof(cellapp_settings, witness.view_hysteresis), 0, 0, 1e5, "5",
     "an entity leaves a view only beyond view_radius + view_hysteresis, so edges do not flicker"},
    {"client_bytes_per_second", CONFIG_INT, offsetof(cellapp_settings, witness.client_bytes_per_second), 0, 0,
     100000000, "4096",
     "each client's entity stream budget; enters and leaves always go, the rest by distance and staleness"},
    {"max_aliases", CONFIG_INT, offsetof(cellapp_settings, witness.max_aliases), 0, 2, 65536, "1024",
     "entities one client can know at once (its alias ids on the wire: 1024 takes 10 bits a record)"},
    {"alias_cooldown_ms", CONFIG_INT, offsetof(cellapp_settings, witness.alias_cooldown_ms), 0, 0, 60000, "1000",
     "a released alias names no other entity for this long, so a record in flight never hits the wrong one"},
    {"position_precision", CONFIG_DOUBLE, offsetof(cellapp_settings, position_precision), 0, 0.0001, 10, "0.015625",
     "metres per step of the positions sent to clients (1/64 m by default)"},
    {"yaw_steps", CONFIG_INT, offsetof(cellapp_settings, yaw_steps), 0, 2, 65536, "256",
     "steps per turn of the yaw sent to clients"},
    {"detail_near_distance", CONFIG_DOUBLE, offsetof(cellapp_settings, witness.detail_near_distance), 0, 0, 1e5, "15",
     "observers this close (on X and Z, like the view) get near-only properties"},
    {"detail_medium_distance", CONFIG_DOUBLE, offsetof(cellapp_settings, witness.detail_medium_distance), 0, 0, 1e5,
     "30", "observers this close get medium-detail properties; farther ones far-detail only"},
    {"detail_hysteresis", CONFIG_DOUBLE, offsetof(cellapp_settings, witness.detail_hysteresis), 0, 0, 1e5, "1",
     "an observer drops to a coarser detail level only this far past its boundary, so pacing across it does not "
     "resend near-only properties each time"},
    {"update_near_distance", CONFIG_DOUBLE, offsetof(cellapp_settings, witness.update_near_distance), 0, 0, 1e5, "10",
     "an entity this close to a client may be updated every tick"},
    {"update_far_distance", CONFIG_DOUBLE, offsetof(cellapp_settings, witness.update_far_distance), 0, 0.01, 1e5, "40",
     "an entity this far is updated once a second; in between, linearly"},
    {"ghost_distance", CONFIG_DOUBLE, offsetof(cellapp_settings, haunt.ghost_distance), 0, 0, 1e5, "70",
     "a real has a ghost in every other cell this close (on X and Z); at least view_radius + view_hysteresis, so "
     "every view that reaches across a line has what it sees"},
    {"ghost_fudge", CONFIG_DOUBLE, offsetof(cellapp_settings, haunt.ghost_fudge), 0, 0, 1e5, "20",
     "a ghost is kept until its real is this much farther than ghost_distance, so walking along a line does not "
     "make and unmake ghosts (BigWorld: 20 m)"},
    {"ghost_min_lifespan_ms", CONFIG_INT, offsetof(cellapp_settings, haunt.ghost_min_lifespan_ms), 0, 0, 600000, "5000",
     "a ghost lives at least this long (BigWorld: 5 s)"},
    {"offload_margin", CONFIG_DOUBLE, offsetof(cellapp_settings, haunt.offload_margin), 0, 0, 1e4, "2",
     "a real moves to the next cell only once this far past its own cell's edge, so standing on a line does not "
     "bounce it"},
    {"ghost_route_ms", CONFIG_INT, offsetof(cellapp_settings, ghost_route_ms), 0, 100, 3600000, "10000",
     "for this long after a real left, messages for it that arrive here are forwarded to where it went; later "
     "ones fail back to their sender"},
    {"cell_stream_gap_ms", CONFIG_INT, offsetof(cellapp_settings, cell_stream_gap_ms), 0, 10, 600000, "2000",
     "a message that arrives ahead of its stream waits this long for the ones before it, then they are given up "
     "(logged)"},
    {"base_restore_wait_ms", CONFIG_INT, offsetof(cellapp_settings, base_restore_wait_ms), 0, 0, 600000, "10000",
     "the reals of a baseapp declared dead lose their clients and wait this long for their bases to be restored on "
     "another baseapp (from its backups), then are destroyed"},
    {"cell_backup_period_ms", CONFIG_INT, offsetof(cellapp_settings, cell_backup_period_ms), 0, 100, 600000, "1000",
     "every real's whole cell state is backed up once in this period (spread over the ticks, and at once when it is "
     "created, arrives or teleports): to its base, or for one without a base to Redis; a dead cellapp's reals come "
     "back from a state at most this old (or from their ghosts)"},
    {"restore_orphan_ms", CONFIG_INT, offsetof(cellapp_settings, restore_orphan_ms), 0, 100, 600000, "10000",
     "the ghosts of a dead cellapp's reals stay, frozen, this long for their reals to be restored (a restored real "
     "takes its ghosts over in place); then they go"},
    {"balance_enabled", CONFIG_BOOL, offsetof(cellapp_settings, balance.enabled), 0, 0, 0, "true",
     "the balancer lease's holder moves the lines toward the load and adds and retires cells (every cellapp "
     "stands for the lease either way: its holder declares deaths and hands over the cells of cellapps that stop "
     "or die); false also makes SIGTERM stop at once instead of draining"},
    {"balance_period_ms", CONFIG_INT, offsetof(cellapp_settings, balance.period_ms), 0, 100, 60000, "1000",
     "how often each cellapp reports its load and the leader moves lines (BigWorld: 1 s)"},
    {"balance_lease_ms", CONFIG_INT, offsetof(cellapp_settings, balance.lease_ms), 0, 300, 600000, "3000",
     "the balancer lease's time to live: a dead leader is replaced within this plus one period"},
    {"balance_report_timeout_ms", CONFIG_INT, offsetof(cellapp_settings, balance.report_timeout_ms), 0, 100, 3600000,
     "5000",
     "a load report this old counts as silence: its cells are not balanced, and a silent "
     "cellapp that is not connected either is gone (its cells are handed over)"},
    {"balance_cell_change_ms", CONFIG_INT, offsetof(cellapp_settings, balance.cell_change_ms), 0, 0, 3600000, "10000",
     "at least this long between adding or retiring cells for the load, so each change settles first"},
    {"drain_timeout_ms", CONFIG_INT, offsetof(cellapp_settings, balance.drain_timeout_ms), 0, 0, 3600000, "60000",
     "SIGTERM hands this cellapp's cells over and waits for its reals to leave; after this long it stops anyway "
     "(SIGINT stops at once)"},
    {"load_smoothing", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.load_smoothing), 0, 0.001, 1, "0.1",
     "weight of each tick's busy share in the smoothed load (BigWorld's load smoothing bias)"},
    {"balance_max_offload", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.max_offload), 0, 0.0001, 1,
     "0.1", "the load the largest step of a line sheds (the top entity bound level; each lower one half of it)"},
    {"balance_aggression_decrease", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.aggression_decrease), 0,
     0.01, 1, "0.5", "a line's aggression is multiplied by this when it reverses direction"},
    {"balance_aggression_increase", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.aggression_increase), 0,
     1, 4, "1.0717734625362931", "... and by this on every other pass (2^(1/10): a halving regrows in 10)"},
    {"balance_min_aggression", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.min_aggression), 0, 0.001, 1,
     "0.0625", "the smallest aggression (share of the load difference a step aims at)"},
    {"balance_max_aggression", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.max_aggression), 0, 0.001, 1,
     "1", "the largest aggression"},
    {"balance_safety_bound", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.safety_bound), 0, 0.01, 100,
     "0.85",
     "a side whose busiest cellapp is this loaded (or balance_safety_ratio x the average, whichever "
     "is larger) does not grow"},
    {"balance_safety_ratio", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.safety_ratio), 0, 1, 100,
     "1.1", "see balance_safety_bound"},
    {"balance_max_step", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.max_step), 0, 0, 1e6, "0",
     "metres a line moves in one pass at most (0: as far as the bound levels say)"},
    {"balance_add_margin", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.add_margin), 0, 0, 100, "0.05",
     "a space whose cellapps average this much more load than the cluster's gets a cell on a cellapp "
     "with room (one that has just joined included)"},
    {"balance_retire_below", CONFIG_DOUBLE, offsetof(cellapp_settings, balance.algorithm.retire_below), 0, 0, 100,
     "0.02",
     "a space whose whole load, spread over one cellapp fewer, stays below this per cellapp retires its "
     "coolest cell (0: never)"},
    {"game_module", CONFIG_STRING, offsetof(cellapp_settings, game_module),
     sizeof(((cellapp_settings *)0)->game_module), 0, 0, "",
     "the game module (a .so built against include/tessera/game.h) whose rules the entities follow; empty: the "
     "definitions alone"},
    {"game_scripts", CONFIG_STRING, offsetof(cellapp_settings, game_scripts),
     sizeof(((cellapp_settings *)0)->game_scripts), 0, 0, "",
     "the folder of the game's Lua scripts (<Class>.lua, game.lua; docs/lua.md), which reload live on SIGHUP or "
     "when a file changes; empty: none"},
    {"lua_instruction_budget", CONFIG_INT, offsetof(cellapp_settings, lua_instruction_budget), 0, 1000, 1000000000,
     "1000000",
     "Lua VM instructions one hook or method may run (about 5 ms): a runaway loop is stopped there with its "
     "traceback, and the tick goes on"},
    {"lua_memory_mb", CONFIG_INT, offsetof(cellapp_settings, lua_memory_mb), 0, 1, 65536, "512",
     "megabytes the Lua state may hold; an allocation past it fails the call that made it"},
    {"game", CONFIG_GROUP, offsetof(cellapp_settings, game), 0, 0, 0, NULL,
     "the game module's own settings (an object; on the command line game.NAME=VALUE)"},
    {"maps", CONFIG_GROUP, offsetof(cellapp_settings, maps), 0, 0, 0, NULL,
     "map files by space name ({\"default\": \"demo/maps/arena.json\"}): each space's walkable geometry, from "
     "which its navigation mesh is built at start-up (or loaded, prebuilt)"},
    {"navmesh_cell_size", CONFIG_DOUBLE, offsetof(cellapp_settings, navmesh_cell_size), 0, 0.05, 10, "0.5",
     "metres: the voxel a navigation mesh is built at (larger: a faster build, a coarser mesh)"},
    {"state_dump_path", CONFIG_STRING, offsetof(cellapp_settings, state_dump_path),
     sizeof(((cellapp_settings *)0)->state_dump_path), 0, 0, "",
     "where SIGUSR1 writes every real's properties as JSON (empty: SIGUSR1 only logs)"},
};

#define CELLAPP_CONFIG_KEY_COUNT (sizeof cellapp_config_keys / sizeof cellapp_config_keys[0])

/* ---- registry and figures ------------------------------------------------ */

static void cellapp_on_figures(void *owner) {
    cellapp *app = owner;
    if (!app->runtime.registry) return;
    cellapp_figures figures;
    cellapp_figures_gather(app, &figures);
    cellapp_figures_publish(&figures, app->runtime.registry);
}

static void cellapp_metrics(void *owner, metrics_text *text) { cellapp_figures_metrics(owner, text); }

static void cellapp_on_registered(void *owner, uint64_t process_id) {
    cellapp *app = owner;
    app->shared.self_id = process_id;
    app->timer_ids.prefix = process_id;
    mailbox_set_self(app->mailbox, process_id);
    base_route_set_self(app->bases, process_id);
    id_block_refill(app->ids);
    app->random_state ^= process_id * 0x9E3779B97F4A7C15ull;
    if (app->random_state == 0) app->random_state = 1;
    cellapp_admin_publish(app->admin, app->runtime.registry);
}

/* ---- shutdown ------------------------------------------------------------ */

/* Closes what talks to the outside: the balancer's lease, the admin
 * listener, the tick, then the runtime (peer listener, signals, registry,
 * peers, Redis). The modules stay until the loop has drained
 * (cellapp_free); they see self.stopping and do nothing more. Idempotent. */
static void cellapp_shutdown(cellapp *app) {
    if (app->runtime.self.stopping) return;
    app->runtime.self.stopping = true;
    log_info("shutting down");
    balancer_stop(app->balancer);
    cellapp_admin_stop(app->admin);
    app->admin = NULL;
    if (app->ticking) tick_stop(app);
    app->ticking = false;
    process_runtime_stop(&app->runtime);
}

/* Frees the modules, top first, once the loop has drained. */
static void cellapp_free(cellapp *app) {
    death_watch_free(app->deaths);
    balancer_free(app->balancer);
    map_entities_free(app->map_spawner);
    game_host_free(app->game);
    space_maps_free(app->maps);
    id_block_free(app->ids);
    entity_io_free(app->io);
    base_route_free(app->bases);
    cell_message_free(app->messages);
    io_route_free(app->io_route);
    event_route_free(app->events);
    restores_free(app->restores);
    ghost_inbox_free(app->ghost_inbox);
    offload_free(app->offloads);
    reals_free(app->reals);
    cell_snapshots_free(app->snapshots);
    haunt_free(app->haunts);
    cell_load_free(app->load);
    spaces_free(app->spaces);
    outbox_free(app->outbox);
    mailbox_free(app->mailbox);
    ghost_route_free(app->route);
    ghost_order_free(app->ghost_order);
    latency_histogram_close(&app->counters.offload_latency);
    latency_histogram_close(&app->counters.tick_time);
    latency_histogram_close(&app->counters.restore_state_age);
    bit_writer_close(&app->shared.stream);
    replication_free(app->shared.replication);
    replication_schema_free(app->shared.schema);
    entity_def_registry_free(app->shared.definitions);
}

/* SIGHUP: the game's scripts reload at the next tick. */
static void cellapp_on_reload(void *owner) {
    cellapp *app = owner;
    game_host_request_reload(app->game);
}

static void cellapp_on_dump(void *owner) {
    cellapp *app = owner;
    state_dump_write(app->spaces, app->settings.state_dump_path, app->runtime.self.process_id);
}

/* SIGINT: stop at once. */
static void cellapp_on_interrupt(void *owner) { cellapp_shutdown(owner); }

/* SIGTERM: drain. The cellapp stops standing for the lease and reports
 * itself draining; the balancer hands its cells to other cellapps (or
 * retires them into their neighbours), its reals offload as the lines
 * say, and once it holds no cell, no real and no offload in flight it
 * stops (cellapp_drain_check). Without a balancer, or with no other
 * cellapp to take over, or on a second SIGTERM, it stops at once. */
static void cellapp_begin_drain(void *owner) {
    cellapp *app = owner;
    if (app->runtime.self.stopping) return;
    if (app->draining) {
        log_info("asked to stop again while draining: stopping now");
        cellapp_shutdown(app);
        return;
    }
    bool balancing = app->settings.balance.enabled;
    if (!balancing || peer_set_count_up(app->runtime.peers, PEER_ROLE_CELLAPP) == 0) {
        log_info("stopping (%s)", balancing ? "no other cellapp to hand the cells to" : "balancing is off");
        cellapp_shutdown(app);
        return;
    }
    app->draining = true;
    app->drain_started_us = clock_monotonic_us();
    balancer_give_up_lease(app->balancer);
    log_info("draining (the cells go to other cellapps, then this one stops; at most %lld ms)",
             (long long)app->settings.balance.drain_timeout_ms);
}

/* Whether a draining cellapp is done: no cell with a region, no real, no
 * offload waiting for its acknowledgement. Runs after the ticks. */
static void cellapp_drain_check(cellapp *app) {
    if (!app->draining || app->runtime.self.stopping) return;
    size_t regions = 0, reals = 0, cursor = 0;
    const cell *c;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        regions += c->has_region;
        reals += c->real_count;
    }
    size_t pending = offload_pending_count(app->offloads);
    if (regions == 0 && reals == 0 && pending == 0) {
        log_info("drained: no cell, no real, no offload in flight is left here");
        cellapp_shutdown(app);
        return;
    }
    uint64_t waited_ms = (clock_monotonic_us() - app->drain_started_us) / 1000;
    if (waited_ms >= (uint64_t)app->settings.balance.drain_timeout_ms) {
        log_warn("drain timed out after %" PRIu64 " ms with %zu cells, %zu reals and %zu offloads left: stopping",
                 waited_ms, regions, reals, pending);
        cellapp_shutdown(app);
    } else if (peer_set_count_up(app->runtime.peers, PEER_ROLE_CELLAPP) == 0) {
        log_warn("draining: no other cellapp is left to take %zu cells and %zu reals: stopping", regions, reals);
        cellapp_shutdown(app);
    }
}

/* The mailbox's wire: straight to the process that holds the real. */
static int cellapp_mailbox_send(uint64_t process_id, const Tessera__Cluster__CellMessage *message, void *user_data) {
    cellapp *app = user_data;
    return peer_send_cell_message(app->runtime.peers, process_id, message);
}

static void cellapp_mailbox_failed(uint64_t entity_id, uint64_t sequence, const char *reason, void *user_data) {
    cellapp *app = user_data;
    app->counters.messages_failed++;
    log_warn("a call to entity %" PRIu64 " (#%" PRIu64 ") failed: %s", entity_id, sequence, reason);
}

static int cellapp_check_settings(const void *raw, char *err, size_t errlen) {
    const cellapp_settings *settings = raw;
    const witness_config *w = &settings->witness;
    coord_mode aoi_mode;
    if (coord_mode_from_name(settings->aoi_mode, &aoi_mode) != 0) {
        snprintf(err, errlen, "aoi_mode '%s' is none of auto, crossing and scan", settings->aoi_mode);
        return -1;
    }
    if (w->detail_near_distance > w->detail_medium_distance) {
        snprintf(err, errlen, "detail_near_distance must not exceed detail_medium_distance");
        return -1;
    }
    if (w->update_near_distance >= w->update_far_distance) {
        snprintf(err, errlen, "update_near_distance must be below update_far_distance");
        return -1;
    }
    if (settings->haunt.ghost_distance < w->view_radius + w->view_hysteresis) {
        snprintf(err, errlen,
                 "ghost_distance (%g) must be at least view_radius + view_hysteresis (%g + %g): a view reaching "
                 "across a line would miss what is there",
                 settings->haunt.ghost_distance, w->view_radius, w->view_hysteresis);
        return -1;
    }
    const balancer_settings *balance = &settings->balance;
    if (balance->lease_ms < 2 * balance->period_ms) {
        snprintf(err, errlen,
                 "balance_lease_ms (%lld) must be at least twice balance_period_ms (%lld): the lease is renewed "
                 "once a period",
                 (long long)balance->lease_ms, (long long)balance->period_ms);
        return -1;
    }
    if (balance->algorithm.min_aggression > balance->algorithm.max_aggression) {
        snprintf(err, errlen, "balance_min_aggression must not exceed balance_max_aggression");
        return -1;
    }
    /* The game: its definitions load, its module opens with this engine's
     * ABI, and its scripts load. */
    if (game_module_check(settings->entity_definitions, NULL, settings->game_module, "cellapp", err, errlen) != 0)
        return -1;
    return game_module_check_scripts(settings->entity_definitions, settings->game_scripts, "cell", err, errlen);
}

/* ---- start-up ------------------------------------------------------------ */

/* What every cell shares: the settings, the definitions (loaded here), the
 * packer, and the release hooks. Returns 0, or -1 with why in err. */
static int cellapp_build_shared(cellapp *app, char *err, size_t errlen) {
    cellapp_settings *settings = &app->settings;
    char why[400];
    if (entity_def_load_directory(settings->entity_definitions, &app->shared.definitions, why, sizeof why) != 0) {
        snprintf(err, errlen, "configuration error: entity_definitions '%s': %s", settings->entity_definitions, why);
        return -1;
    }
    app->shared.settings = settings;
    app->shared.schema = replication_schema_create(app->shared.definitions);
    app->shared.replication = replication_create(app->shared.schema);
    app->shared.timer_ids = &app->timer_ids;
    cell_real_install_hooks(&app->shared);
    bit_writer_init(&app->shared.stream);
    app->codec = (cell_entity_codec){app->shared.definitions, &settings->movement, &app->hooks};
    return 0;
}

/* The modules, bottom up: each borrows only what was built before it. */
static void cellapp_build_modules(cellapp *app) {
    cellapp_settings *settings = &app->settings;
    const char *cluster = settings->process.cluster_name;
    app->outbox = outbox_create(app->runtime.peers);
    app->mailbox = mailbox_create(app->runtime.redis, cluster, cellapp_mailbox_send, cellapp_mailbox_failed, app);
    spaces_context spaces_needs = {app->runtime.redis, cluster,      app->runtime.peers,
                                   app->outbox,        &app->shared, &app->runtime.self};
    app->spaces = spaces_create(&spaces_needs);
    app->load = cell_load_create(app->runtime.loop, settings->balance.load_smoothing, &settings->balance.algorithm);
    haunts_context haunt_needs = {&settings->haunt, &app->shared, app->spaces,    app->outbox,       app->runtime.peers,
                                  app->ghost_order, app->load,    &app->counters, &app->runtime.self};
    app->haunts = haunt_create(&haunt_needs);
    cell_snapshots_context snapshot_needs = {settings, &app->codec,        app->runtime.peers, app->runtime.redis,
                                             cluster,  &app->runtime.self, &app->counters};
    app->snapshots = cell_snapshots_create(&snapshot_needs);
    reals_context real_needs = {
        settings,      app->shared.definitions, &app->hooks,        app->spaces, app->outbox,        app->runtime.peers,
        app->haunts,   app->ghost_order,        app->runtime.redis, cluster,     &app->random_state, &app->runtime.self,
        app->snapshots};
    app->reals = reals_create(&real_needs);
    offloads_context offload_needs = {settings,       &app->codec,        &app->hooks,  app->spaces,
                                      app->outbox,    app->runtime.peers, app->haunts,  app->ghost_order,
                                      app->route,     app->runtime.redis, cluster,      app->load,
                                      &app->counters, &app->runtime.self, &app->fenced, app->snapshots};
    app->offloads = offload_create(&offload_needs);
    ghost_inbox_context inbox_needs = {app->ghost_order, app->haunts, app->offloads, app->spaces, &app->runtime.self};
    app->ghost_inbox = ghost_inbox_create(&inbox_needs);
    restores_context restore_needs = {
        settings,           &app->codec,      &app->hooks, app->spaces,        app->outbox,
        app->runtime.peers, app->ghost_order, app->route,  app->runtime.redis, cluster,
        &app->runtime.self, &app->counters,   &app->fenced};
    app->restores = restores_create(&restore_needs);
    event_route_context event_needs = {app->shared.definitions, &app->hooks, app->spaces, app->runtime.peers,
                                       app->mailbox};
    app->events = event_route_create(&event_needs);
    io_route_context io_needs = {app->runtime.redis, cluster,      &app->hooks,       app->spaces,
                                 app->runtime.peers, app->mailbox, &app->runtime.self};
    app->io_route = io_route_create(&io_needs);
    cell_messages_context message_needs = {settings,           &app->hooks,   app->spaces,    app->outbox,
                                           app->runtime.peers, app->mailbox,  app->route,     app->reals,
                                           app->events,        app->io_route, &app->counters, &app->runtime.self};
    app->messages = cell_message_create(&message_needs);
    base_route_context base_needs = {app->runtime.redis,      cluster,       app->runtime.peers, app->spaces,
                                     app->shared.definitions, &app->counters};
    app->bases = base_route_create(&base_needs);
    app->io = entity_io_create();
    /* Ids for what the game spawns: a small block, since a cellapp
     * creates few entities itself. */
    app->ids = id_block_create(app->runtime.redis, cluster, 256);
}

/* The game module, the maps, the registry, the balancer and the admin
 * listener. Returns 0, or -1 with why in err. */
static int cellapp_build_top(cellapp *app, char *err, size_t errlen) {
    cellapp_settings *settings = &app->settings;
    const char *cluster = settings->process.cluster_name;
    char why[400];
    app->maps = space_maps_load(&settings->maps, settings->navmesh_cell_size, why, sizeof why);
    if (!app->maps) {
        snprintf(err, errlen, "configuration error: %s", why);
        return -1;
    }
    game_host_services services = {
        &app->shared, &app->hooks,   app->spaces,        app->reals,     app->messages,
        app->events,  app->io_route, app->offloads,      app->bases,     app->io,
        app->ids,     app->maps,     &app->random_state, &app->counters, settings->default_space};
    game_host_scripts scripts = {
        settings->game_scripts,
        {(uint64_t)settings->lua_instruction_budget, (size_t)settings->lua_memory_mb << 20},
    };
    app->game = game_host_load(&services, settings->game_module, &settings->game, &scripts, why, sizeof why);
    if (!app->game) {
        snprintf(err, errlen, "configuration error: %s", why);
        return -1;
    }
    map_entities_context map_needs = {&settings->maps,    app->shared.definitions,
                                      app->runtime.redis, cluster,
                                      app->runtime.peers, app->spaces,
                                      app->reals,         app->game,
                                      app->ids,           &app->runtime.self};
    app->map_spawner = map_entities_create(&map_needs);
    process_runtime_register(&app->runtime, NULL);
    {
        balancer_context balance_needs = {&settings->balance, app->runtime.redis, cluster,
                                          app->runtime.peers, app->spaces,        app->load,
                                          app->offloads,      &app->draining,     &app->runtime.self};
        app->balancer = balancer_create(&balance_needs);
    }
    death_watch_context death_needs = {&app->runtime, app->balancer};
    app->deaths = death_watch_create(&death_needs);
    cellapp_admin_context admin_needs = {
        .loop = app->runtime.loop,
        .process = &settings->process,
        .redis = app->runtime.redis,
        .spaces = app->spaces,
        .shared = &app->shared,
        .view_radius = settings->witness.view_radius,
        .self = &app->runtime.self,
        .draining = &app->draining,
        .tick_last_us = &app->clock.last_us,
        .owner = app,
        .drain = cellapp_begin_drain,
        .metrics = cellapp_metrics,
    };
    app->admin = cellapp_admin_start(&admin_needs, why, sizeof why);
    if (!app->admin && why[0]) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    return 0;
}

/* The process up to its modules: the runtime (peer listener, peers, Redis
 * not connected yet), then the modules. Returns 0, or -1 with why in err. */
static int cellapp_build(cellapp *app, int argc, char **argv, char *err, size_t errlen) {
    cellapp_settings *settings = &app->settings;
    static const peer_set_callbacks peer_callbacks = {
        .on_peer_up = peer_dispatch_on_peer_up,
        .on_peer_down = peer_dispatch_on_peer_down,
        .on_peer_dead = peer_dispatch_on_peer_dead,
        .on_message = peer_dispatch_on_message,
    };
    process_runtime_options options = {
        .program = "tessera-cellapp",
        .role = "cellapp",
        .peer_role = PEER_ROLE_CELLAPP,
        .settings = &settings->process,
        .keys = cellapp_config_keys,
        .key_count = CELLAPP_CONFIG_KEY_COUNT,
        .settings_size = sizeof(cellapp_settings),
        .common_offset = offsetof(cellapp_settings, process),
        .argc = argc,
        .argv = argv,
        .peer_callbacks = &peer_callbacks,
        .peer_user_data = app,
        .figures_ms = 200,
        .hooks =
            {
                .owner = app,
                .registered = cellapp_on_registered,
                .figures = cellapp_on_figures,
                .terminate = cellapp_begin_drain,
                .interrupt = cellapp_on_interrupt,
                .dump = cellapp_on_dump,
                .reload = cellapp_on_reload,
            },
    };
    if (process_runtime_open(&app->runtime, &options, err, errlen) != 0) return -1;
    cellapp_build_modules(app);
    return cellapp_build_top(app, err, errlen);
}

int main(int argc, char **argv) {
    static cellapp app; /* the process's single context */
    int status =
        process_configure("tessera-cellapp", "cellapp", argc, argv, cellapp_config_keys, CELLAPP_CONFIG_KEY_COUNT,
                          &app.settings, &app.settings.process, cellapp_check_settings);
    if (status != PROCESS_CONTINUE) return status;
    cellapp_settings *settings = &app.settings;
    settings->witness.tick_hz = settings->tick_hz;
    char err[1024];
    if (cellapp_build_shared(&app, err, sizeof err) != 0) {
        fprintf(stderr, "tessera-cellapp: %s\n", err);
        return 1;
    }
    app.runtime.loop = uv_default_loop();
    app.random_state = clock_monotonic_us() ^ ((uint64_t)getpid() << 32);
    if (app.random_state == 0) app.random_state = 1;
    /* 50 us buckets up to 5 s (800 KB): an offload's acknowledgement takes
     * a round trip and the receiver's handling, milliseconds, or up to a
     * tick behind a burst of thousands; slower ones land in the overflow
     * bucket and are reported by the maximum. */
    if (latency_histogram_init(&app.counters.offload_latency, 50, 5000000) != 0 ||
        latency_histogram_init(&app.counters.tick_time, 100, 5000000) != 0 ||
        latency_histogram_init(&app.counters.restore_state_age, 1000, 60000000) != 0)
        log_panic("latency histogram layout rejected");
    app.ghost_order = ghost_order_create(ghost_inbox_free_held, NULL);
    app.route = ghost_route_create();

    if (cellapp_build(&app, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "tessera-cellapp: %s\n", err);
        app.runtime.exit_code = 1;
    } else {
        app.ticking = true;
        app.clock.after_ticks = cellapp_drain_check;
        tick_start(&app);
        log_info("cellapp starting: peers on %s:%d, Redis %s:%lld, %lld Hz, %zu entity types (digest %.16s), "
                 "ghost distance %g m",
                 settings->process.internal_host, app.runtime.peer_port, settings->process.redis_host,
                 (long long)settings->process.redis_port, (long long)settings->tick_hz,
                 entity_def_registry_class_count(app.shared.definitions),
                 entity_def_registry_digest_hex(app.shared.definitions), settings->haunt.ghost_distance);
        process_runtime_run(&app.runtime);
    }

    /* Either a signal ran the shutdown and the loop drained, or a fatal
     * error stopped the loop (or the start): close what is left and drain. */
    cellapp_shutdown(&app);
    process_runtime_close(&app.runtime);
    cellapp_free(&app);
    log_info("stopped");
    return app.runtime.exit_code;
}
