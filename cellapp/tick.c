/* tick.c -- the cellapp's simulation tick: the fixed-timestep clock that
 * drives it, and its phases over every cell, in the order the code below
 * runs them:
 *
 *   1. layouts: those fetched since the last tick are applied, whole; then
 *      a dead cellapp's reals whose cells this one holds now are claimed
 *      and restored (restore.c);
 *   2. the game's own tick, then the maps to claim and spawn;
 *   3. thinks and timers of every cell's reals, between the game systems'
 *      before- and after-think hooks, then the entity I/O events due;
 *   4. per cell: messages held for a gap that waited too long are
 *      delivered; controllers move their entities;
 *   5. per cell: the coord flush (enters, leaves; traps fire, and their
 *      rules may change properties), the pack (every changed entity encoded
 *      once per audience someone receives), the witnesses told what changed
 *      in their views, and each witness writes its client's stream. The
 *      pack, the telling, step 9's haunts and offloads and step 11 walk
 *      the cell's list of what changed (cell.changed), the streams its
 *      list of reals with a witness: an idle entity costs them nothing;
 *   6. view hooks: the game hears this tick's enters and leaves of views;
 *   7. reaping: the reals game code destroyed go (their destroyed hooks run
 *      once; witnesses see them leave at the next flush);
 *   8. the client messages go to the baseapps, one frame each;
 *   9. per cell: haunts (ghost creates, updates, deletes), then offloads of
 *      reals that left their region, and teleports into other spaces; then
 *      this tick's backups (cell_snapshot.c);
 *  10. everything for other cellapps goes, one frame each;
 *  11. per cell: dirty sets and broadcasts clear, destroyed entities are
 *      freed; empty cells without a region go;
 *  12. housekeeping: the ghost route's old entries; once a second the
 *      incarnation books' old holds and the mailbox's idle streams; the
 *      layout poll; the load sample; the balancer's period.
 *
 * Messages from clients and other processes (moves, method calls, ghosts,
 * offloads) are not a phase: they run as they arrive, between ticks
 * (peer_dispatch.c), and what they change goes out with the next tick.
 */
#include "tick.h"

#include <inttypes.h>

#include "clock.h"
#include "log.h"

/* The tick is a fixed-timestep accumulator driven by a libuv timer that
 * fires once per tick period. Time is read from the monotonic clock, so
 * wall-clock steps (NTP, an operator) cannot speed up or stall the
 * simulation. Each wake-up adds the elapsed time to the accumulator and runs
 * whole ticks while it holds at least one period. After a stall (a
 * debugger, a swapped out process) at most TICK_MAX_CATCH_UP ticks run back
 * to back and the rest of the debt is forgiven: replaying seconds of ticks
 * at once would only flood clients with stale movement. */
#define TICK_MAX_CATCH_UP 3

/* 5, for one cell: each witness writes its client's stream. */
static void tick_witnesses(cellapp *app, cell *c) {
    for (size_t i = 0; i < c->witnessed_count; i++) {
        cell_entity *entity = c->witnessed[i];
        if (entity->destroyed) continue;
        const uint8_t *payload;
        size_t length = witness_update(cell_entity_witness(entity), c, entity, &payload);
        if (length) outbox_to_client(app->outbox, entity, payload, length);
    }
}

/* The timers of one cell fire for its reals, into the game's rules. */
typedef struct tick_timer_run {
    cell *c;
    game_host *game;
} tick_timer_run;

static bool tick_timer_live(uint64_t entity_id, void *context) {
    const tick_timer_run *run = context;
    const cell_entity *entity = cell_find(run->c, entity_id);
    return entity && entity->kind == CELL_ENTITY_REAL;
}

static void tick_timer_fire(uint64_t entity_id, uint64_t timer_id, uint32_t tag, uint64_t user_data, void *context) {
    const tick_timer_run *run = context;
    cell_entity *entity = cell_find(run->c, entity_id);
    if (entity) game_host_timer(run->game, entity, timer_id, tag, user_data);
}

static void tick_run_timers(cellapp *app, cell *c, uint64_t now_us) {
    tick_timer_run run = {c, app->game};
    entity_timers_run(c->timers, now_us, tick_timer_live, tick_timer_fire, &run);
}

/* 11, for one cell: a dirty entity, or one with broadcasts, is on the
 * cell's changed list. */
static void tick_end_cell(cell *c) {
    for (size_t i = 0; i < c->changed_count; i++) {
        cell_entity *entity = c->changed[i];
        entity_state_clear_dirty(entity->state); /* packed, or received by nobody */
        cell_clear_broadcasts(entity);
    }
    cell_end_tick(c);
}

/* 1 and 2. */
static void tick_layouts_and_game(cellapp *app) {
    spaces_apply_pending(app->spaces);
    restores_tick(app->restores, clock_monotonic_us());
    game_host_tick(app->game);
    map_entities_tick(app->map_spawner);
}

/* 3. */
static void tick_thinks(cellapp *app, uint64_t now_us) {
    size_t cursor = 0;
    cell *c;
    game_host_before_thinks(app->game);
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) tick_run_timers(app, c, now_us);
    entity_io_service(app->io, now_us / 1000, game_host_io_deliver, app->game);
    game_host_after_thinks(app->game);
}

/* 4. */
static void tick_messages_and_controllers(cellapp *app) {
    size_t cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        cell_message_tick(app->messages, c);
        controller_tick(c, 1.0 / (double)app->settings.tick_hz, game_host_controller_event, app->game);
    }
}

/* 5. */
static void tick_views(cellapp *app) {
    replication_begin_tick(app->shared.replication, ++app->shared.replication_tick);
    size_t cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        /* Every move since the last tick is already in the coordinate
         * system; the flush turns the crossings into the witnesses' net
         * leaves and fires the traps. Then pack once. */
        coord_flush(c->coord);
        cell_pack(c);
        witness_notify_changes(c);
        tick_witnesses(app, c);
    }
}

/* 6. */
static void tick_view_hooks(cellapp *app) {
    size_t cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->view_event_count; i++) {
            cell_entity *owner = cell_find(c, c->view_events[i].owner_id);
            if (owner && owner->kind == CELL_ENTITY_REAL)
                game_host_view(app->game, owner, c->view_events[i].other_id, c->view_events[i].entered);
        }
        c->view_event_count = 0;
    }
}

/* 7. */
static void tick_reap_doomed(cellapp *app) {
    size_t cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->doomed_count; i++) {
            cell_entity *doomed = cell_find(c, c->doomed[i]);
            if (doomed && doomed->real && doomed->real->doomed) reals_destroy(app->reals, doomed);
        }
        c->doomed_count = 0;
    }
}

/* 9. */
static void tick_ghosts_and_offloads(cellapp *app) {
    size_t cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        haunt_tick(app->haunts, c);
        offload_tick(app->offloads, c);
        cell_snapshots_tick(app->snapshots, c);
    }
}

/* 11. */
static void tick_end_cells(cellapp *app) {
    size_t cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) tick_end_cell(c);
    spaces_reap(app->spaces);
}

/* 12. */
static void tick_housekeeping(cellapp *app, uint64_t now_us) {
    ghost_route_expire(app->route, now_us / 1000);
    if (app->shared.replication_tick % (uint64_t)app->settings.tick_hz == 0) {
        /* Once a second: held ghost messages whose earlier real never
         * finished, and the tombstones of deleted ghosts, both far older
         * than any message is late; and streams nobody writes to. */
        ghost_order_expire(app->ghost_order, now_us, (uint64_t)30 * 1000 * 1000, (uint64_t)60 * 1000 * 1000);
        mailbox_sweep(app->mailbox, now_us / 1000);
        reals_sweep_lost_bases(app->reals, now_us);
    }
    spaces_poll(app->spaces);
    cell_load_sample(app->load, now_us);
    balancer_tick(app->balancer, now_us);
    death_watch_tick(app->deaths, now_us);
}

/* 0. Whether this cellapp may act as an owner this tick. A cellapp whose
 * lease lapsed while a cellapp that could declare it dead may not hear it
 * (process_runtime_fenced) ticks nothing of its own: another may own its
 * reals by now. It keeps its state and carries on once its lease is back,
 * or rejoins empty if it was declared dead meanwhile (the runtime). */
static bool tick_fenced(cellapp *app, uint64_t now_us) {
    bool fenced = process_runtime_fenced(&app->runtime, now_us);
    if (fenced != app->fenced) {
        app->fenced = fenced;
        if (fenced) {
            app->counters.fences++;
            log_warn("fenced: this cellapp's lease lapsed and it may be declared dead: it ticks nothing of its own "
                     "until its lease is back");
        } else {
            log_info("unfenced: the lease is back; ticking again");
        }
    }
    return fenced;
}

void tick_run(cellapp *app) {
    uint64_t started = clock_monotonic_us();
    if (tick_fenced(app, started)) {
        tick_housekeeping(app, started);
        app->clock.last_duration_us = clock_monotonic_us() - started;
        return;
    }
    tick_layouts_and_game(app);
    tick_thinks(app, started);
    tick_messages_and_controllers(app);
    tick_views(app);
    tick_view_hooks(app);
    tick_reap_doomed(app);
    outbox_flush_clients(app->outbox); /* 8 */
    tick_ghosts_and_offloads(app);
    outbox_flush_cellapps(app->outbox); /* 10 */
    tick_end_cells(app);
    tick_housekeeping(app, clock_monotonic_us());
    app->clock.last_duration_us = clock_monotonic_us() - started;
    latency_histogram_add(&app->counters.tick_time, app->clock.last_duration_us);
}

static void tick_on_timer(uv_timer_t *timer) {
    cellapp *app = timer->data;
    tick_clock *clock = &app->clock;
    uint64_t period_us = 1000000u / (uint64_t)app->settings.tick_hz;
    uint64_t now = clock_monotonic_us();
    clock->accumulator_us += now - clock->last_us;
    clock->last_us = now;
    int ran = 0;
    while (clock->accumulator_us >= period_us && ran < TICK_MAX_CATCH_UP) {
        tick_run(app);
        clock->accumulator_us -= period_us;
        ran++;
    }
    if (clock->accumulator_us >= period_us) {
        log_warn("tick fell %" PRIu64 " ms behind; skipping the missed ticks", clock->accumulator_us / 1000);
        clock->accumulator_us = 0;
    }
    if (ran && clock->after_ticks) clock->after_ticks(app);
}

void tick_start(cellapp *app) {
    tick_clock *clock = &app->clock;
    uv_timer_init(app->runtime.loop, &clock->timer);
    clock->timer.data = app;
    uint64_t period_ms = 1000u / (uint64_t)app->settings.tick_hz;
    clock->last_us = clock_monotonic_us();
    uv_timer_start(&clock->timer, tick_on_timer, period_ms, period_ms ? period_ms : 1);
}

void tick_stop(cellapp *app) {
    uv_timer_stop(&app->clock.timer);
    uv_close((uv_handle_t *)&app->clock.timer, NULL);
}
