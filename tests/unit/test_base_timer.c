/* test_base_timer.c -- unit tests for the timers of a baseapp's bases
 * (baseapp/base_timer.h).
 *
 * Covered: ids carry the process id, read at each add (0 before the
 * baseapp registers); a base cancels its own timer once (then -1), never
 * another base's, nor an unknown id or 0; delays past BASE_TIMER_MAX_MS
 * are cut to it; dropping a base's timers leaves the others', and none of
 * its timers fires after; what a backup carries (base_timers_save) and what
 * a restore sets from it: the same ids, each due its time left less the
 * backup's age (at once when that is past), repeats kept, states without
 * an id skipped, an id pending here already dropped; a later add never
 * reuses a restored id of this process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base_timer.h"
#include "clock.h"

#define COUNTER_BITS 40 /* the id's low bits (common/entity_timer.c) */

typedef struct fired_log {
    uint64_t entity_id[16], timer_id[16];
    size_t count;
} fired_log;

static bool all_live(uint64_t entity_id, void *context) {
    (void)entity_id, (void)context;
    return true;
}

static void record(uint64_t entity_id, uint64_t timer_id, uint32_t tag, uint64_t user_data, void *context) {
    fired_log *log = context;
    (void)tag, (void)user_data;
    assert_true(log->count < 16);
    log->entity_id[log->count] = entity_id;
    log->timer_id[log->count++] = timer_id;
}

static void test_ids_and_ownership(void **state) {
    (void)state;
    process_self self = {0, false};
    base_timers *timers = base_timers_create(&self);
    uint64_t early = base_timers_add(timers, 10, 1000, 0, 1, 0);
    assert_int_equal(early >> COUNTER_BITS, 0);
    self.process_id = 7;
    uint64_t mine = base_timers_add(timers, 10, 1000, 0, 1, 0);
    uint64_t theirs = base_timers_add(timers, 11, 1000, 0, 1, 0);
    assert_int_equal(mine >> COUNTER_BITS, 7);
    assert_true(mine != theirs && mine != early);
    assert_int_equal(base_timers_count(timers), 3);
    /* Another base's timer, an unknown one, none. */
    assert_int_equal(base_timers_cancel(timers, 10, theirs), -1);
    assert_int_equal(base_timers_cancel(timers, 10, theirs + 1000), -1);
    assert_int_equal(base_timers_cancel(timers, 10, 0), -1);
    assert_int_equal(base_timers_cancel(timers, 10, mine), 0);
    assert_int_equal(base_timers_cancel(timers, 10, mine), -1);
    assert_int_equal(base_timers_cancel(timers, 11, theirs), 0);
    assert_int_equal(base_timers_count(timers), 1);
    base_timers_free(timers);
}

static void test_long_delays_cut(void **state) {
    (void)state;
    process_self self = {3, false};
    base_timers *timers = base_timers_create(&self);
    base_timers_add(timers, 10, UINT64_MAX, UINT64_MAX, 1, 0);
    entity_timer_state s;
    uint64_t now = clock_monotonic_us();
    assert_int_equal(base_timers_of(timers, 10, now, &s, 1), 1);
    assert_true(s.remaining_us <= BASE_TIMER_MAX_MS * 1000);
    assert_true(s.remaining_us > BASE_TIMER_MAX_MS * 1000 - 60000000);
    assert_int_equal(s.interval_us, BASE_TIMER_MAX_MS * 1000);
    base_timers_free(timers);
}

static void test_drop(void **state) {
    (void)state;
    process_self self = {3, false};
    base_timers *timers = base_timers_create(&self);
    base_timers_add(timers, 10, 0, 0, 1, 0);
    base_timers_add(timers, 10, 0, 50, 2, 0);
    uint64_t kept = base_timers_add(timers, 11, 0, 0, 3, 0);
    base_timers_drop(timers, 10);
    base_timers_drop(timers, 12); /* none: nothing happens */
    assert_int_equal(base_timers_count(timers), 1);
    assert_int_equal(base_timers_of(timers, 10, clock_monotonic_us(), NULL, 0), 0);
    fired_log log = {0};
    assert_int_equal(base_timers_run(timers, clock_monotonic_us() + 1000000, all_live, record, &log), 1);
    assert_int_equal(log.entity_id[0], 11);
    assert_int_equal(log.timer_id[0], kept);
    base_timers_free(timers);
}

static void test_backup_and_restore(void **state) {
    (void)state;
    process_self dead = {5, false}, here = {9, false};
    base_timers *old = base_timers_create(&dead), *timers = base_timers_create(&here);
    uint64_t late = base_timers_add(old, 10, 10000, 0, 1, 100);   /* 10 s */
    uint64_t soon = base_timers_add(old, 10, 1000, 2000, 2, 200); /* 1 s, then every 2 s */
    /* As BaseBackup.timers carries them, and a third state without an id. */
    Tessera__Cluster__TimerState **saved, none, *list[3];
    size_t saved_count;
    base_timers_save(old, 10, &saved, &saved_count);
    assert_int_equal(saved_count, 2);
    tessera__cluster__timer_state__init(&none);
    list[0] = saved[0], list[1] = saved[1], list[2] = &none;
    /* Restored 3 s after the backup: `soon` is past due, `late` has ~7 s. */
    assert_int_equal(base_timers_restore(timers, 10, list, 3, 3000000), 2);
    assert_int_equal(base_timers_count(timers), 2);
    entity_timer_state back[4];
    uint64_t now = clock_monotonic_us();
    assert_int_equal(base_timers_of(timers, 10, now, back, 4), 2);
    for (size_t i = 0; i < 2; i++) {
        if (back[i].timer_id == late) {
            assert_true(back[i].remaining_us <= 7000000 && back[i].remaining_us > 6000000);
            assert_int_equal(back[i].user_data, 100);
            assert_int_equal(back[i].interval_us, 0);
        } else {
            assert_int_equal(back[i].timer_id, soon);
            assert_int_equal(back[i].remaining_us, 0);
            assert_int_equal(back[i].interval_us, 2000000);
            assert_int_equal(back[i].tag, 2);
        }
    }
    /* The past-due one fires at once (once), the other waits. */
    fired_log log = {0};
    assert_int_equal(base_timers_run(timers, now + 1000, all_live, record, &log), 1);
    assert_int_equal(log.timer_id[0], soon);
    /* Restoring the same ids again: dropped. */
    assert_int_equal(base_timers_restore(timers, 10, list, 2, 0), 0);
    /* The restored ids are the dead baseapp's: ours keep our prefix. */
    uint64_t fresh = base_timers_add(timers, 10, 1000, 0, 1, 0);
    assert_int_equal(fresh >> COUNTER_BITS, 9);
    assert_true(fresh != late && fresh != soon);
    entity_timers_wire_free(saved, saved_count);
    base_timers_free(old);
    base_timers_free(timers);
}

/* An id of this process coming back (its base restored here after it
 * travelled): later adds never reuse it. */
static void test_own_ids_never_reused(void **state) {
    (void)state;
    process_self self = {4, false};
    base_timers *timers = base_timers_create(&self);
    Tessera__Cluster__TimerState wire, *list[1] = {&wire};
    tessera__cluster__timer_state__init(&wire);
    wire.timer_id = ((uint64_t)4 << COUNTER_BITS) | 50;
    wire.remaining_us = 1000000;
    assert_int_equal(base_timers_restore(timers, 10, list, 1, 0), 1);
    for (int i = 0; i < 60; i++) assert_true(base_timers_add(timers, 11, 1000, 0, 1, 0) != wire.timer_id);
    base_timers_free(timers);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_and_ownership),
        cmocka_unit_test(test_long_delays_cut),
        cmocka_unit_test(test_drop),
        cmocka_unit_test(test_backup_and_restore),
        cmocka_unit_test(test_own_ids_never_reused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
