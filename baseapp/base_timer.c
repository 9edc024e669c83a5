/* base_timer.c -- the timers of a baseapp's bases (base_timer.h): one
 * entity_timers scheduler and the process's id source. What a firing does
 * is the caller's (base_game.c); what a backup carries, base_backup.c's. */
#include "base_timer.h"

#include <inttypes.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"

struct base_timers {
    const process_self *self;
    entity_timer_ids ids;
    entity_timers *scheduler;
};

base_timers *base_timers_create(const process_self *self) {
    base_timers *timers = xcalloc(1, sizeof *timers);
    timers->self = self;
    timers->scheduler = entity_timers_create(&timers->ids);
    return timers;
}

void base_timers_free(base_timers *timers) {
    if (!timers) return;
    entity_timers_free(timers->scheduler);
    free(timers);
}

uint64_t base_timers_add(base_timers *timers, uint64_t entity_id, uint64_t delay_ms, uint64_t repeat_ms, uint32_t tag,
                         uint64_t user_data) {
    timers->ids.prefix = timers->self->process_id;
    if (delay_ms > BASE_TIMER_MAX_MS) delay_ms = BASE_TIMER_MAX_MS;
    if (repeat_ms > BASE_TIMER_MAX_MS) repeat_ms = BASE_TIMER_MAX_MS;
    return entity_timers_add(timers->scheduler, entity_id, clock_monotonic_us(), delay_ms * 1000, repeat_ms * 1000, tag,
                             user_data);
}

int base_timers_cancel(base_timers *timers, uint64_t entity_id, uint64_t timer_id) {
    if (!timer_id || entity_timers_owner(timers->scheduler, timer_id) != entity_id) return -1;
    return entity_timers_cancel(timers->scheduler, timer_id);
}

size_t base_timers_run(base_timers *timers, uint64_t now_us, entity_timer_live live, entity_timer_fire fire,
                       void *context) {
    return entity_timers_run(timers->scheduler, now_us, live, fire, context);
}

void base_timers_drop(base_timers *timers, uint64_t entity_id) {
    entity_timers_take(timers->scheduler, entity_id, 0, NULL, NULL);
}

size_t base_timers_of(const base_timers *timers, uint64_t entity_id, uint64_t now_us, entity_timer_state *out,
                      size_t cap) {
    return entity_timers_of(timers->scheduler, entity_id, now_us, out, cap);
}

void base_timers_save(const base_timers *timers, uint64_t entity_id, Tessera__Cluster__TimerState ***out,
                      size_t *count) {
    entity_timers_save(timers->scheduler, entity_id, clock_monotonic_us(), out, count);
}

size_t base_timers_restore(base_timers *timers, uint64_t entity_id, Tessera__Cluster__TimerState *const *states,
                           size_t count, uint64_t age_us) {
    timers->ids.prefix = timers->self->process_id;
    size_t set = entity_timers_load(timers->scheduler, entity_id, clock_monotonic_us(), states, count, age_us);
    if (set)
        log_info("entity %" PRIu64 ": %zu timers restored with it (its backup %" PRIu64 " ms old)", entity_id, set,
                 age_us / 1000);
    return set;
}

size_t base_timers_count(const base_timers *timers) { return entity_timers_count(timers->scheduler); }
