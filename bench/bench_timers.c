/* bench_timers.c -- what pending timers cost a tick (common/entity_timer.h):
 * one cell's scheduler holding 1,000 timers and one holding 100,000, none
 * due, each asked a million times whether anything is due (what every tick
 * does); then the same two with a tenth of a percent of their timers
 * falling due each tick, to show that a tick pays for what fires, not for
 * what waits. The 1,000-timer scheduler is the baseline; the ratio is
 * printed (1.0 is the goal: 100,000 pending timers cost nothing on a tick
 * where none is due).
 *
 *   bench-timers
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "entity_timer.h"

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Every timer's entity is a live real. */
static bool always_live(uint64_t entity_id, void *context) {
    (void)entity_id, (void)context;
    return true;
}

static uint64_t fired;
static void on_fire(uint64_t entity_id, uint64_t timer_id, uint32_t tag, uint64_t user_data, void *context) {
    (void)entity_id, (void)timer_id, (void)tag, (void)user_data, (void)context;
    fired++;
}

/* ns per run with `pending` timers, none due. */
static double idle_tick_ns(size_t pending, int runs) {
    entity_timer_ids ids = {1, 0};
    entity_timers *timers = entity_timers_create(&ids);
    const uint64_t hour_us = 3600ull * 1000000;
    for (size_t i = 0; i < pending; i++) entity_timers_add(timers, 1 + i % 5000, 0, hour_us + i * 1000, 0, 1, i);
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        double t0 = now_seconds();
        for (int r = 0; r < runs; r++) entity_timers_run(timers, (uint64_t)r, always_live, on_fire, NULL);
        double ns = (now_seconds() - t0) * 1e9 / runs;
        if (ns < best) best = ns;
    }
    entity_timers_free(timers);
    return best;
}

/* ns per firing when `pending` repeating timers are spread over `period`
 * ticks of 100 ms (pending / period fire each tick). */
static double busy_ns_per_firing(size_t pending, unsigned period, unsigned ticks) {
    entity_timer_ids ids = {1, 0};
    entity_timers *timers = entity_timers_create(&ids);
    const uint64_t tick_us = 100000;
    for (size_t i = 0; i < pending; i++)
        entity_timers_add(timers, 1 + i % 5000, 0, tick_us * (1 + i % period), tick_us * period, 1, i);
    fired = 0;
    double t0 = now_seconds();
    for (unsigned t = 1; t <= ticks; t++) entity_timers_run(timers, t * tick_us, always_live, on_fire, NULL);
    double ns = (now_seconds() - t0) * 1e9 / (double)(fired ? fired : 1);
    entity_timers_free(timers);
    return ns;
}

int main(void) {
    const int runs = 1000000;
    double small = idle_tick_ns(1000, runs), large = idle_tick_ns(100000, runs);
    printf("bench-timers: a tick with no timer due (best of 5 x %d ticks)\n", runs);
    printf("  1,000 pending:   %6.1f ns a tick\n", small);
    printf("  100,000 pending: %6.1f ns a tick\n", large);
    printf("  ratio 100,000 / 1,000: %.2f\n", large / small);
    double a = busy_ns_per_firing(1000, 1000, 2000), b = busy_ns_per_firing(100000, 1000, 2000);
    printf("a tick with a tenth of a percent of them due (repeating, 2,000 ticks)\n");
    printf("  1,000 pending:   %6.1f ns a firing\n", a);
    printf("  100,000 pending: %6.1f ns a firing (heap depth 17 against 10)\n", b);
    printf("  ratio: %.2f\n", b / a);
    return 0;
}
