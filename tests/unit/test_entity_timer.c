/* test_entity_timer.c -- unit tests for the scheduler of entity timers
 * (common/entity_timer.h: a cell's reals, a baseapp's bases), run over a
 * table of the test's own that says which entity ids are live.
 *
 * Covered: a one-shot fires once at its due time, not before; a repeating
 * timer keeps its beat from its due time (no drift over 60 s of uneven
 * ~100 ms ticks: the count is floor(elapsed / interval) and every firing
 * happens in the first run at or after its due time); catching up after a
 * stall, at most ENTITY_TIMER_MAX_CATCH_UP firings per run, then skipping
 * ahead on the beat; (due, id) order; cancel before and after firing;
 * callbacks that cancel themselves, add timers and cancel another timer due
 * in the same run; timers of an entity the live callback denies (unknown, or
 * a ghost) dropped; entity_timers_take / entity_timers_put moving timers to
 * another scheduler under the same ids (the prefix in the high bits) and the
 * same beat; entity_timers_of; entity_timers_owner; a second put of an id refused without harm;
 * new ids never colliding with ids put; and 10,000 random adds, cancels,
 * runs, takes and puts checked against a brute-force list of (due, id). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "entity_timer.h"

#define COUNTER_BITS 40 /* the id's low bits (entity_timer.c) */

/* ---- the entities the scheduler asks about ---------------------------------------- */

enum { MAX_ENTITIES = 64, MAX_FIRINGS = 4096 };

typedef enum entity_kind { ENTITY_UNKNOWN, ENTITY_REAL, ENTITY_GHOST } entity_kind;

static entity_kind entities[MAX_ENTITIES]; /* by id */

static void make_entity(uint64_t id, entity_kind kind) {
    assert_true(id > 0 && id < MAX_ENTITIES);
    assert_int_equal(entities[id], ENTITY_UNKNOWN);
    entities[id] = kind;
}

static void forget_entity(uint64_t id) { entities[id] = ENTITY_UNKNOWN; }

static void forget_all_entities(void) {
    for (uint64_t id = 0; id < MAX_ENTITIES; id++) forget_entity(id);
}

static bool is_real(uint64_t entity_id) { return entity_id < MAX_ENTITIES && entities[entity_id] == ENTITY_REAL; }

static bool live(uint64_t entity_id, void *context) {
    (void)context;
    return is_real(entity_id);
}

/* ---- what the callback saw ------------------------------------------------------- */

typedef struct firing {
    uint64_t timer_id;
    uint64_t entity_id;
    uint32_t tag;
    uint64_t user_data;
    uint64_t now_us; /* of the run it fired in */
} firing;

typedef struct recorder recorder;
/* Something a test's callback does when timer `timer_id` fires. */
typedef void (*action_fn)(recorder *r, const firing *f);

struct recorder {
    entity_timer_ids ids;
    entity_timers *timers;
    uint64_t now_us;
    firing fired[MAX_FIRINGS];
    size_t count;
    action_fn action;
    /* Scratch for the actions. */
    uint64_t watch_id, other_id, added_id[8];
    size_t added_count;
    int cancel_result;
};

static void on_timer(uint64_t entity_id, uint64_t timer_id, uint32_t tag, uint64_t user_data, void *context) {
    recorder *r = context;
    assert_true(is_real(entity_id));
    assert_true(r->count < MAX_FIRINGS);
    firing *f = &r->fired[r->count++];
    *f = (firing){timer_id, entity_id, tag, user_data, r->now_us};
    if (r->action) r->action(r, f);
}

static size_t run(recorder *r, uint64_t now_us) {
    r->now_us = now_us;
    size_t before = r->count;
    size_t fired = entity_timers_run(r->timers, now_us, live, on_timer, r);
    assert_int_equal(fired, r->count - before);
    return fired;
}

static void recorder_init(recorder *r, uint64_t prefix) {
    memset(r, 0, sizeof *r);
    r->ids.prefix = prefix;
    r->timers = entity_timers_create(&r->ids);
    assert_non_null(r->timers);
    assert_int_equal(entity_timers_count(r->timers), 0);
}

static void recorder_close(recorder *r) {
    entity_timers_free(r->timers);
    r->timers = NULL;
    forget_all_entities();
}

/* ---- one-shots and repeats --------------------------------------------------------- */

static void test_one_shot(void **state) {
    recorder r;
    recorder_init(&r, 3);
    make_entity(1, ENTITY_REAL);
    uint64_t id = entity_timers_add(r.timers, 1, 1000, 500, 0, 7, 99);
    assert_true(id > 0);
    assert_int_equal(id >> COUNTER_BITS, 3);
    assert_int_equal(entity_timers_count(r.timers), 1);
    assert_int_equal(entity_timers_owner(r.timers, id), 1);
    assert_int_equal(entity_timers_owner(r.timers, id + 1), 0);
    assert_int_equal(run(&r, 0), 0);
    assert_int_equal(run(&r, 1000), 0);
    assert_int_equal(run(&r, 1499), 0);
    assert_int_equal(run(&r, 1500), 1);
    assert_int_equal(entity_timers_owner(r.timers, id), 0); /* fired once: gone */
    assert_int_equal(r.fired[0].timer_id, id);
    assert_int_equal(r.fired[0].entity_id, 1);
    assert_int_equal(r.fired[0].tag, 7);
    assert_int_equal(r.fired[0].user_data, 99);
    assert_int_equal(entity_timers_count(r.timers), 0);
    assert_int_equal(run(&r, 1500), 0);
    assert_int_equal(run(&r, 100000000), 0);
    assert_int_equal(entity_timers_cancel(r.timers, id), -1);

    /* A zero delay is due at once; a late run fires it once. */
    uint64_t now = entity_timers_add(r.timers, 1, 5000, 0, 0, 1, 2);
    uint64_t late = entity_timers_add(r.timers, 1, 5000, 10, 0, 1, 3);
    assert_true(late != now);
    assert_int_equal(run(&r, 5000), 1);
    assert_int_equal(r.fired[1].timer_id, now);
    assert_int_equal(run(&r, 9000000), 1);
    assert_int_equal(r.fired[2].timer_id, late);
    assert_int_equal(entity_timers_count(r.timers), 0);
    recorder_close(&r);
}

/* Ids grow, carry the prefix, and a later prefix applies to later ids. */
static void test_ids(void **state) {
    recorder r;
    recorder_init(&r, 0);
    uint64_t last = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t id = entity_timers_add(r.timers, 1, 0, 1000, 0, 0, 0);
        assert_true(id > last);
        last = id;
    }
    r.ids.prefix = 0xABCDEF;
    uint64_t id = entity_timers_add(r.timers, 1, 0, 1000, 0, 0, 0);
    assert_int_equal(id >> COUNTER_BITS, 0xABCDEF);
    assert_int_equal(entity_timers_count(r.timers), 101);
    recorder_close(&r);
}

static uint64_t test_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(0x2545f4914f6cdd1d);
}

/* A repeat is due every interval after its last due time, never after
 * when it ran: over 60 s of uneven ticks it fires exactly as the clock
 * says, each firing in the first run at or after its due time. */
static void check_no_drift(uint64_t delay, uint64_t interval, uint64_t seed) {
    recorder r;
    recorder_init(&r, 1);
    make_entity(2, ENTITY_REAL);
    const uint64_t t0 = 7000000;
    uint64_t id = entity_timers_add(r.timers, 2, t0, delay, interval, 4, 5);
    /* A run at the time it was set: only a zero delay is due. */
    size_t total = run(&r, t0);
    assert_int_equal(total, delay == 0 ? 1 : 0);
    uint64_t now = t0;
    while (now < t0 + 60000000) {
        uint64_t previous = now;
        now += 80000 + test_rand(&seed) % 50001; /* 80..130 ms */
        size_t before = r.count;
        size_t fired = run(&r, now);
        for (size_t i = before; i < r.count; i++) {
            uint64_t due = t0 + delay + (uint64_t)i * interval; /* the (i+1)th firing */
            assert_int_equal(r.fired[i].timer_id, id);
            assert_true(due > previous);
            assert_true(due <= now);
        }
        total += fired;
        /* Everything due by now has fired. */
        assert_int_equal(total, now < t0 + delay ? 0 : (now - t0 - delay) / interval + 1);
    }
    assert_int_equal(entity_timers_count(r.timers), 1);
    assert_int_equal(entity_timers_cancel(r.timers, id), 0);
    recorder_close(&r);
}

static void test_repeat_no_drift(void **state) {
    /* delay == interval: floor(elapsed / interval) firings. */
    check_no_drift(333333, 333333, 0x1111);
    check_no_drift(250000, 250000, 0x2222);
    check_no_drift(50000, 50000, 0x3333); /* two or three a run */
    check_no_drift(1000000, 1000000, 0x4444);
    /* A first delay other than the interval. */
    check_no_drift(12345, 97000, 0x5555);
    check_no_drift(0, 200000, 0x6666);
}

/* After a stall of B due firings: all of them when B <= MAX_CATCH_UP, never
 * more than MAX_CATCH_UP, and then the timer is on its beat again: next due
 * at the first beat after now. */
static void test_catch_up_after_stall(void **state) {
    const uint64_t interval = 1000;
    const uint64_t offsets[] = {0, 1, interval / 2, interval - 1};
    for (uint64_t backlog = 1; backlog <= (uint64_t)3 * ENTITY_TIMER_MAX_CATCH_UP; backlog++) {
        for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
            recorder r;
            recorder_init(&r, 1);
            make_entity(1, ENTITY_REAL);
            uint64_t id = entity_timers_add(r.timers, 1, 0, interval, interval, 0, 0);
            assert_int_equal(run(&r, interval), 1);
            /* Due at 2I, 3I, ...: `backlog` of them by now. */
            uint64_t now = (backlog + 1) * interval + offsets[o];
            size_t fired = run(&r, now);
            if (backlog <= ENTITY_TIMER_MAX_CATCH_UP) {
                assert_int_equal(fired, backlog);
            } else {
                assert_true(fired >= 1);
                assert_true(fired <= ENTITY_TIMER_MAX_CATCH_UP);
            }
            uint64_t next_beat = (now / interval + 1) * interval;
            assert_int_equal(run(&r, next_beat - 1), 0);
            assert_int_equal(run(&r, next_beat), 1);
            assert_int_equal(run(&r, next_beat + interval - 1), 0);
            assert_int_equal(run(&r, next_beat + interval), 1);
            assert_int_equal(r.fired[r.count - 1].timer_id, id);
            recorder_close(&r);
        }
    }
}

/* Several stalled timers each catch up on their own. */
static void test_catch_up_several(void **state) {
    recorder r;
    recorder_init(&r, 1);
    make_entity(1, ENTITY_REAL);
    make_entity(2, ENTITY_REAL);
    uint64_t a = entity_timers_add(r.timers, 1, 0, 100, 100, 1, 0); /* 8 due by 800 */
    uint64_t b = entity_timers_add(r.timers, 2, 0, 250, 250, 2, 0); /* 3 */
    uint64_t c = entity_timers_add(r.timers, 2, 0, 10, 10, 3, 0);   /* 80: too many */
    run(&r, 800);
    size_t of_a = 0, of_b = 0, of_c = 0;
    for (size_t i = 0; i < r.count; i++) {
        of_a += r.fired[i].timer_id == a;
        of_b += r.fired[i].timer_id == b;
        of_c += r.fired[i].timer_id == c;
    }
    assert_int_equal(of_a, 8);
    assert_int_equal(of_b, 3);
    assert_true(of_c >= 1 && of_c <= ENTITY_TIMER_MAX_CATCH_UP);
    assert_int_equal(of_a + of_b + of_c, r.count);
    /* All on their beats again. */
    size_t before = r.count;
    assert_int_equal(run(&r, 809), 0);
    assert_int_equal(run(&r, 810), 1);
    assert_int_equal(r.fired[before].timer_id, c);
    assert_int_equal(run(&r, 900), 1 + 9);       /* a at 900; c at 820 .. 900 */
    assert_int_equal(run(&r, 1000), 1 + 1 + 10); /* a, b at 1000; c at 910 .. 1000 */
    recorder_close(&r);
}

/* Due timers fire in (due, id) order, a repeat interleaving with the rest. */
static void test_due_id_order(void **state) {
    recorder r;
    recorder_init(&r, 2);
    make_entity(1, ENTITY_REAL);
    make_entity(2, ENTITY_REAL);
    uint64_t t30a = entity_timers_add(r.timers, 1, 0, 30, 0, 1, 0);
    uint64_t t10 = entity_timers_add(r.timers, 2, 0, 10, 0, 2, 0);
    uint64_t rep = entity_timers_add(r.timers, 1, 0, 5, 10, 3, 0); /* 5, 15, 25, 35 */
    uint64_t t30b = entity_timers_add(r.timers, 2, 0, 30, 0, 4, 0);
    uint64_t t15 = entity_timers_add(r.timers, 1, 5, 10, 0, 5, 0); /* also 15: larger id than rep */
    uint64_t t0 = entity_timers_add(r.timers, 2, 0, 0, 0, 6, 0);
    uint64_t t40 = entity_timers_add(r.timers, 1, 0, 40, 0, 7, 0);
    assert_int_equal(run(&r, 35), 9);
    const uint64_t expected[] = {t0, rep, t10, rep, t15, rep, t30a, t30b, rep};
    for (size_t i = 0; i < 9; i++) assert_int_equal(r.fired[i].timer_id, expected[i]);
    assert_int_equal(entity_timers_count(r.timers), 2);
    assert_int_equal(run(&r, 40), 1);
    assert_int_equal(r.fired[9].timer_id, t40);
    recorder_close(&r);
}

/* ---- cancelling ---------------------------------------------------------------------- */

static void test_cancel(void **state) {
    recorder r;
    recorder_init(&r, 1);
    make_entity(1, ENTITY_REAL);
    uint64_t once = entity_timers_add(r.timers, 1, 0, 100, 0, 1, 0);
    uint64_t repeat = entity_timers_add(r.timers, 1, 0, 100, 100, 2, 0);
    uint64_t gone = entity_timers_add(r.timers, 1, 0, 100, 0, 3, 0);
    /* Before firing. */
    assert_int_equal(entity_timers_cancel(r.timers, gone), 0);
    assert_int_equal(entity_timers_cancel(r.timers, gone), -1);
    assert_int_equal(entity_timers_count(r.timers), 2);
    assert_int_equal(entity_timers_cancel(r.timers, 0), -1);
    assert_int_equal(entity_timers_cancel(r.timers, 123456789), -1);
    assert_int_equal(run(&r, 100), 2);
    for (size_t i = 0; i < r.count; i++) assert_int_not_equal(r.fired[i].timer_id, gone);
    /* After firing: the one-shot is gone, the repeat is cancelled. */
    assert_int_equal(entity_timers_cancel(r.timers, once), -1);
    assert_int_equal(entity_timers_cancel(r.timers, repeat), 0);
    assert_int_equal(entity_timers_cancel(r.timers, repeat), -1);
    assert_int_equal(entity_timers_count(r.timers), 0);
    assert_int_equal(run(&r, 10000), 0);
    assert_int_equal(entity_timers_of(r.timers, 1, 0, NULL, 0), 0);
    recorder_close(&r);
}

/* Cancelling from the middle of a big heap keeps the rest in order. */
static void test_cancel_keeps_order(void **state) {
    recorder r;
    recorder_init(&r, 1);
    make_entity(1, ENTITY_REAL);
    enum { N = 200 };
    uint64_t ids[N];
    uint64_t seed = 99;
    uint64_t due[N];
    for (int i = 0; i < N; i++) {
        due[i] = test_rand(&seed) % 1000;
        ids[i] = entity_timers_add(r.timers, 1, 0, due[i], 0, (uint32_t)i, 0);
    }
    bool cancelled[N] = {false};
    for (int i = 0; i < N; i += 3) {
        assert_int_equal(entity_timers_cancel(r.timers, ids[i]), 0);
        cancelled[i] = true;
    }
    size_t fired = run(&r, 1000);
    assert_int_equal(fired, N - (N + 2) / 3);
    for (size_t i = 0; i < r.count; i++) {
        uint32_t k = r.fired[i].tag;
        assert_false(cancelled[k]);
        if (i > 0) {
            uint32_t p = r.fired[i - 1].tag;
            assert_true(due[p] < due[k] || (due[p] == due[k] && ids[p] < ids[k]));
        }
    }
    recorder_close(&r);
}

/* ---- what callbacks may do ------------------------------------------------------------- */

static void cancel_self(recorder *r, const firing *f) {
    if (f->timer_id == r->watch_id) r->cancel_result = entity_timers_cancel(r->timers, f->timer_id);
}

static void test_callback_cancels_itself(void **state) {
    recorder r;
    recorder_init(&r, 1);
    make_entity(1, ENTITY_REAL);
    r.action = cancel_self;
    /* A repeat that cancels itself: it never fires again, even in a run
     * that would have caught it up. */
    r.watch_id = entity_timers_add(r.timers, 1, 0, 10, 10, 1, 0);
    uint64_t other = entity_timers_add(r.timers, 1, 0, 10, 10, 2, 0);
    r.cancel_result = 5;
    assert_int_equal(run(&r, 55), 1 + 5);
    assert_int_equal(r.cancel_result, 0);
    for (size_t i = 1; i < r.count; i++) assert_int_equal(r.fired[i].timer_id, other);
    assert_int_equal(entity_timers_count(r.timers), 1);
    assert_int_equal(entity_timers_cancel(r.timers, r.watch_id), -1);
    /* A one-shot that cancels itself: it is already gone. */
    r.watch_id = entity_timers_add(r.timers, 1, 55, 0, 0, 3, 0);
    r.cancel_result = 5;
    assert_int_equal(run(&r, 55), 1);
    assert_int_equal(r.cancel_result, -1);
    assert_int_equal(entity_timers_count(r.timers), 1);
    recorder_close(&r);
}

static void add_more(recorder *r, const firing *f) {
    if (f->timer_id != r->watch_id) return;
    /* Due now: fires in this run, after the current one. Due later: not. */
    r->added_id[r->added_count++] = entity_timers_add(r->timers, f->entity_id, r->now_us, 0, 0, 100, 0);
    r->added_id[r->added_count++] = entity_timers_add(r->timers, f->entity_id, r->now_us, 1, 0, 101, 0);
    r->added_id[r->added_count++] = entity_timers_add(r->timers, 2, r->now_us, 500, 500, 102, 0);
}

static void test_callback_adds_timers(void **state) {
    recorder r;
    recorder_init(&r, 1);
    make_entity(1, ENTITY_REAL);
    make_entity(2, ENTITY_REAL);
    r.action = add_more;
    r.watch_id = entity_timers_add(r.timers, 1, 0, 100, 0, 1, 0);
    uint64_t after = entity_timers_add(r.timers, 1, 0, 100, 0, 2, 0);
    assert_int_equal(run(&r, 100), 3);
    assert_int_equal(r.fired[0].timer_id, r.watch_id);
    assert_int_equal(r.fired[1].timer_id, after);         /* same due, smaller id */
    assert_int_equal(r.fired[2].timer_id, r.added_id[0]); /* due now */
    assert_int_equal(r.fired[2].tag, 100);
    assert_int_equal(entity_timers_count(r.timers), 2);
    assert_int_equal(run(&r, 100), 0);
    assert_int_equal(run(&r, 101), 1);
    assert_int_equal(r.fired[3].timer_id, r.added_id[1]);
    assert_int_equal(run(&r, 599), 0);
    assert_int_equal(run(&r, 600), 1);
    assert_int_equal(r.fired[4].timer_id, r.added_id[2]);
    assert_int_equal(r.fired[4].entity_id, 2);
    assert_int_equal(run(&r, 1100), 1);
    recorder_close(&r);
}

static void cancel_other(recorder *r, const firing *f) {
    if (f->timer_id == r->watch_id) r->cancel_result = entity_timers_cancel(r->timers, r->other_id);
}

static void test_callback_cancels_another_due(void **state) {
    recorder r;
    recorder_init(&r, 1);
    make_entity(1, ENTITY_REAL);
    make_entity(2, ENTITY_REAL);
    r.action = cancel_other;
    r.watch_id = entity_timers_add(r.timers, 1, 0, 100, 0, 1, 0);
    r.other_id = entity_timers_add(r.timers, 2, 0, 100, 0, 2, 0); /* due with it, after it */
    uint64_t third = entity_timers_add(r.timers, 2, 0, 90, 100, 3, 0);
    r.cancel_result = 5;
    assert_int_equal(run(&r, 1000), 1 + 10);
    assert_int_equal(r.cancel_result, 0);
    for (size_t i = 0; i < r.count; i++) {
        assert_int_not_equal(r.fired[i].timer_id, r.other_id);
        if (r.fired[i].timer_id != r.watch_id) assert_int_equal(r.fired[i].timer_id, third);
    }
    assert_int_equal(entity_timers_count(r.timers), 1);
    /* And a repeat cancelled by another's callback in the run it was due. */
    r.watch_id = entity_timers_add(r.timers, 1, 1000, 5, 0, 4, 0);
    r.other_id = third; /* due at 1090 and every 100 */
    assert_int_equal(run(&r, 1200), 1);
    assert_int_equal(r.fired[r.count - 1].timer_id, r.watch_id);
    assert_int_equal(entity_timers_count(r.timers), 0);
    recorder_close(&r);
}

/* ---- entities the live callback denies ---------------------------------------------------- */

static void test_unknown_entity_dropped(void **state) {
    recorder r;
    recorder_init(&r, 1);
    make_entity(1, ENTITY_REAL);
    make_entity(3, ENTITY_GHOST);
    uint64_t alive = entity_timers_add(r.timers, 1, 0, 10, 100, 1, 0); /* 10, 110, 210 ... */
    uint64_t missing = entity_timers_add(r.timers, 2, 0, 10, 10, 2, 0);
    uint64_t ghost = entity_timers_add(r.timers, 3, 0, 10, 0, 3, 0);
    uint64_t later = entity_timers_add(r.timers, 2, 0, 1000, 0, 4, 0);
    assert_int_equal(entity_timers_count(r.timers), 4);
    assert_int_equal(run(&r, 10), 1);
    assert_int_equal(r.fired[0].timer_id, alive);
    assert_int_equal(entity_timers_count(r.timers), 2);
    assert_int_equal(entity_timers_cancel(r.timers, missing), -1);
    assert_int_equal(entity_timers_cancel(r.timers, ghost), -1);
    assert_int_equal(entity_timers_of(r.timers, 3, 10, NULL, 0), 0);
    assert_int_equal(entity_timers_of(r.timers, 2, 10, NULL, 0), 1); /* not due yet: kept */
    /* Entity 2 appears before its timer is due: it fires. */
    make_entity(2, ENTITY_REAL);
    assert_int_equal(run(&r, 1000), 1 + 9); /* later; live at 110 .. 910 */
    size_t of_later = 0;
    for (size_t i = 0; i < r.count; i++) of_later += r.fired[i].timer_id == later;
    assert_int_equal(of_later, 1);
    /* Entity 1 goes: its repeat is dropped when next due. */
    forget_entity(1);
    assert_int_equal(run(&r, 1010), 0);
    assert_int_equal(entity_timers_count(r.timers), 0);
    recorder_close(&r);
}

/* ---- moving timers --------------------------------------------------------------------- */

static const entity_timer_state *state_of(const entity_timer_state *states, size_t count, uint64_t id) {
    for (size_t i = 0; i < count; i++)
        if (states[i].timer_id == id) return &states[i];
    fail_msg("no state for timer %llx", (unsigned long long)id);
    return NULL;
}

static void test_take_and_put(void **state) {
    recorder from, to;
    recorder_init(&from, 3);
    make_entity(1, ENTITY_REAL);
    make_entity(2, ENTITY_REAL);
    uint64_t once = entity_timers_add(from.timers, 1, 0, 700, 0, 11, 111);
    uint64_t beat = entity_timers_add(from.timers, 1, 0, 250, 1000, 12, 222);  /* 250, 1250, 2250 ... */
    uint64_t overdue = entity_timers_add(from.timers, 1, 0, 1600, 0, 13, 333); /* due, not yet run */
    uint64_t stays = entity_timers_add(from.timers, 2, 0, 400, 400, 14, 444);
    assert_int_equal(run(&from, 1250), 1 + 2 + 3); /* once; beat 250, 1250; stays 400, 800, 1200 */
    assert_int_equal(entity_timers_of(from.timers, 1, 1700, NULL, 0), 2);

    entity_timer_state *states = NULL;
    size_t count = 99;
    entity_timers_take(from.timers, 1, 1700, &states, &count);
    assert_int_equal(count, 2);
    assert_non_null(states);
    const entity_timer_state *b = state_of(states, count, beat);
    assert_int_equal(b->remaining_us, 550);
    assert_int_equal(b->interval_us, 1000);
    assert_int_equal(b->tag, 12);
    assert_int_equal(b->user_data, 222);
    const entity_timer_state *o = state_of(states, count, overdue);
    assert_int_equal(o->remaining_us, 0);
    assert_int_equal(o->interval_us, 0);
    assert_int_equal(o->tag, 13);
    assert_int_equal(o->user_data, 333);
    (void)once;
    /* Gone from `from`; entity 2's stays. */
    assert_int_equal(entity_timers_count(from.timers), 1);
    assert_int_equal(entity_timers_of(from.timers, 1, 1700, NULL, 0), 0);
    assert_int_equal(entity_timers_cancel(from.timers, beat), -1);
    size_t before = from.count;
    assert_int_equal(run(&from, 1700), 1); /* stays at 1600 only */
    assert_int_equal(from.fired[before].timer_id, stays);

    /* Put on another cellapp, with another clock. */
    recorder_init(&to, 4);
    const uint64_t t = 90000000;
    entity_timers_put(to.timers, 1, t, states, count);
    assert_int_equal(entity_timers_count(to.timers), 2);
    entity_timer_state again[4];
    assert_int_equal(entity_timers_of(to.timers, 1, t, again, 4), 2);
    const entity_timer_state *b2 = state_of(again, 2, beat);
    assert_int_equal(b2->remaining_us, 550);
    assert_int_equal(b2->interval_us, 1000);
    assert_int_equal(b2->tag, 12);
    assert_int_equal(b2->user_data, 222);
    assert_int_equal(state_of(again, 2, overdue)->remaining_us, 0);
    free(states);

    /* The overdue one fires at once; the beat goes on 550 later, then every 1000. */
    assert_int_equal(run(&to, t), 1);
    assert_int_equal(to.fired[0].timer_id, overdue);
    assert_int_equal(to.fired[0].tag, 13);
    assert_int_equal(run(&to, t + 549), 0);
    assert_int_equal(run(&to, t + 550), 1);
    assert_int_equal(to.fired[1].timer_id, beat);
    assert_int_equal(to.fired[1].user_data, 222);
    assert_int_equal(run(&to, t + 1549), 0);
    assert_int_equal(run(&to, t + 1550), 1);
    assert_int_equal(to.fired[2].timer_id, beat);

    /* New ids here carry this cellapp's prefix and are unlike the ones put. */
    uint64_t fresh = entity_timers_add(to.timers, 1, t + 1550, 10, 0, 15, 0);
    assert_int_equal(fresh >> COUNTER_BITS, 4);
    assert_int_equal(beat >> COUNTER_BITS, 3);
    assert_true(fresh != beat && fresh != overdue);
    /* The ids are the same timers: cancel works across the move. */
    assert_int_equal(entity_timers_cancel(to.timers, beat), 0);
    assert_int_equal(entity_timers_count(to.timers), 1);
    assert_int_equal(run(&to, t + 5000), 1);
    assert_int_equal(to.fired[3].timer_id, fresh);

    /* Taking what is not there, and taking without a description. */
    entity_timer_state *none = (entity_timer_state *)&none;
    count = 7;
    entity_timers_take(to.timers, 1, t, &none, &count);
    assert_null(none);
    assert_int_equal(count, 0);
    entity_timers_take(from.timers, 2, 1700, NULL, NULL);
    assert_int_equal(entity_timers_count(from.timers), 0);
    assert_int_equal(run(&from, 100000), 0);
    entity_timers_free(to.timers);
    recorder_close(&from);
}

/* entity_timers_of describes without removing, at most `cap`. */
static void test_timers_of(void **state) {
    recorder r;
    recorder_init(&r, 1);
    make_entity(1, ENTITY_REAL);
    uint64_t ids[5];
    for (int i = 0; i < 5; i++) ids[i] = entity_timers_add(r.timers, 1, 0, 100 * (uint64_t)(i + 1), 0, (uint32_t)i, 0);
    entity_timers_add(r.timers, 2, 0, 50, 0, 9, 0);
    entity_timer_state out[5];
    memset(out, 0, sizeof out);
    assert_int_equal(entity_timers_of(r.timers, 1, 150, out, 2), 5);
    for (int i = 0; i < 2; i++) assert_int_not_equal(out[i].timer_id, 0);
    assert_int_equal(entity_timers_of(r.timers, 1, 150, out, 5), 5);
    for (int i = 0; i < 5; i++) {
        const entity_timer_state *s = state_of(out, 5, ids[i]);
        assert_int_equal(s->tag, (uint32_t)i);
        assert_int_equal(s->remaining_us, 100 * (uint64_t)(i + 1) > 150 ? 100 * (uint64_t)(i + 1) - 150 : 0);
    }
    assert_int_equal(entity_timers_count(r.timers), 6);
    assert_int_equal(entity_timers_of(r.timers, 3, 0, out, 5), 0);
    recorder_close(&r);
}

/* A timer put twice (or without an id) is refused; the heap stays sound. */
static void test_put_twice_refused(void **state) {
    recorder r;
    recorder_init(&r, 5);
    make_entity(1, ENTITY_REAL);
    entity_timer_state states[3] = {
        {(UINT64_C(9) << COUNTER_BITS) | 1, 100, 0, 1, 10},
        {(UINT64_C(9) << COUNTER_BITS) | 2, 200, 100, 2, 20},
        {(UINT64_C(9) << COUNTER_BITS) | 3, 300, 0, 3, 30},
    };
    entity_timers_put(r.timers, 1, 0, states, 3);
    assert_int_equal(entity_timers_count(r.timers), 3);
    /* Again (another entity even), and an id of 0: all refused. */
    entity_timers_put(r.timers, 1, 1000, states, 3);
    entity_timers_put(r.timers, 2, 1000, &states[1], 1);
    entity_timer_state zero = {0, 50, 0, 4, 40};
    entity_timers_put(r.timers, 1, 0, &zero, 1);
    assert_int_equal(entity_timers_count(r.timers), 3);
    assert_int_equal(entity_timers_of(r.timers, 2, 0, NULL, 0), 0);
    assert_int_equal(entity_timers_of(r.timers, 1, 0, NULL, 0), 3);
    /* The first puts' times stand: 100, 200, 300, 400 ... */
    assert_int_equal(run(&r, 99), 0);
    assert_int_equal(run(&r, 100), 1);
    assert_int_equal(r.fired[0].timer_id, states[0].timer_id);
    assert_int_equal(r.fired[0].user_data, 10);
    assert_int_equal(run(&r, 300), 3);
    assert_int_equal(r.fired[1].timer_id, states[1].timer_id);
    assert_int_equal(r.fired[2].timer_id, states[1].timer_id);
    assert_int_equal(r.fired[3].timer_id, states[2].timer_id);
    assert_int_equal(entity_timers_cancel(r.timers, states[1].timer_id), 0);
    assert_int_equal(entity_timers_count(r.timers), 0);
    assert_int_equal(run(&r, 10000), 0);
    /* Put again after they left: welcome. */
    entity_timers_put(r.timers, 1, 10000, states, 1);
    assert_int_equal(entity_timers_count(r.timers), 1);
    recorder_close(&r);
}

/* Ids are unique: an id put here (this prefix, ahead of the counter: it
 * was made by another scheduler of this process) is never given again by
 * entity_timers_add. */
static void test_add_after_put_never_reuses_an_id(void **state) {
    recorder r;
    recorder_init(&r, 6);
    make_entity(1, ENTITY_REAL);
    entity_timer_state states[3] = {
        {(UINT64_C(6) << COUNTER_BITS) | 1, 100, 0, 1, 0},
        {(UINT64_C(6) << COUNTER_BITS) | 2, 100, 50, 2, 0},
        {(UINT64_C(6) << COUNTER_BITS) | 5, 100, 0, 3, 0},
    };
    entity_timers_put(r.timers, 1, 0, states, 3);
    uint64_t added[8];
    for (int i = 0; i < 8; i++) {
        added[i] = entity_timers_add(r.timers, 1, 0, 1000, 0, 10, 0);
        for (int j = 0; j < 3; j++) assert_int_not_equal(added[i], states[j].timer_id);
        for (int j = 0; j < i; j++) assert_int_not_equal(added[i], added[j]);
    }
    assert_int_equal(entity_timers_count(r.timers), 11);
    entity_timer_state out[16];
    assert_int_equal(entity_timers_of(r.timers, 1, 0, out, 16), 11);
    for (int i = 0; i < 3; i++) assert_int_equal(state_of(out, 11, states[i].timer_id)->tag, (uint32_t)i + 1);
    assert_int_equal(run(&r, 100), 3);
    assert_int_equal(entity_timers_cancel(r.timers, states[1].timer_id), 0);
    for (int i = 0; i < 8; i++) assert_int_equal(entity_timers_cancel(r.timers, added[i]), 0);
    assert_int_equal(entity_timers_count(r.timers), 0);
    recorder_close(&r);
}

/* ---- random mix against a brute-force list ------------------------------------------------ */

typedef struct model_timer {
    uint64_t id, entity, due, interval, user_data;
    uint32_t tag;
} model_timer;

typedef struct model {
    model_timer *t;
    size_t count, capacity;
} model;

static void model_add(model *m, model_timer t) {
    if (m->count == m->capacity) {
        m->capacity = m->capacity ? m->capacity * 2 : 64;
        m->t = realloc(m->t, m->capacity * sizeof *m->t);
        assert_non_null(m->t);
    }
    m->t[m->count++] = t;
}

static void model_remove(model *m, size_t i) { m->t[i] = m->t[--m->count]; }

static long model_find(const model *m, uint64_t id) {
    for (size_t i = 0; i < m->count; i++)
        if (m->t[i].id == id) return (long)i;
    return -1;
}

/* What entity_timers_run should fire, in order (appended to out). */
static size_t model_run(model *m, uint64_t now, uint64_t *out, size_t cap) {
    size_t n = 0;
    for (;;) {
        long best = -1;
        for (size_t i = 0; i < m->count; i++) {
            const model_timer *t = &m->t[i];
            if (t->due > now) continue;
            if (best < 0 || t->due < m->t[best].due || (t->due == m->t[best].due && t->id < m->t[best].id))
                best = (long)i;
        }
        if (best < 0) return n;
        model_timer *t = &m->t[best];
        if (!is_real(t->entity)) {
            model_remove(m, (size_t)best);
            continue;
        }
        assert_true(n < cap);
        out[n++] = t->id;
        if (t->interval)
            t->due += t->interval; /* never behind by more than a few beats here */
        else
            model_remove(m, (size_t)best);
    }
}

static void check_against_model(recorder *r, const model *m, uint64_t now) {
    assert_int_equal(entity_timers_count(r->timers), m->count);
    static entity_timer_state out[1024];
    for (uint64_t e = 1; e <= 8; e++) {
        size_t n = entity_timers_of(r->timers, e, now, out, 1024);
        assert_true(n <= 1024);
        size_t expected = 0;
        for (size_t i = 0; i < m->count; i++) {
            if (m->t[i].entity != e) continue;
            expected++;
            const entity_timer_state *s = state_of(out, n, m->t[i].id);
            assert_int_equal(s->remaining_us, m->t[i].due > now ? m->t[i].due - now : 0);
            assert_int_equal(s->interval_us, m->t[i].interval);
            assert_int_equal(s->tag, m->t[i].tag);
            assert_int_equal(s->user_data, m->t[i].user_data);
        }
        assert_int_equal(n, expected);
    }
}

static void test_random_against_brute_force(void **state) {
    enum { OPS = 10000, STEP = 2000 };
    recorder r;
    recorder_init(&r, 77);
    for (uint64_t e = 1; e <= 8; e++) make_entity(e, ENTITY_REAL);
    model m = {0};
    uint64_t seed = 0xC0FFEE;
    uint64_t now = 1000000;
    uint64_t *expected = calloc(MAX_FIRINGS, sizeof *expected);
    assert_non_null(expected);
    size_t total_fired = 0, taken = 0, dropped_entities = 0;
    for (int op = 0; op < OPS; op++) {
        uint64_t roll = test_rand(&seed) % 100;
        if (roll < 40 && m.count >= 400) roll = 40; /* keep the brute force quick: cancel instead */
        if (roll < 40) {
            model_timer t;
            t.entity = 1 + test_rand(&seed) % 8;
            uint64_t delay = test_rand(&seed) % 5000;
            /* Repeats no shorter than a run's step: at most a few beats behind. */
            t.interval = test_rand(&seed) % 3 == 0 ? 0 : STEP + test_rand(&seed) % 4000;
            t.tag = (uint32_t)test_rand(&seed);
            t.user_data = test_rand(&seed);
            t.due = now + delay;
            t.id = entity_timers_add(r.timers, t.entity, now, delay, t.interval, t.tag, t.user_data);
            assert_int_equal(model_find(&m, t.id), -1);
            model_add(&m, t);
        } else if (roll < 60) {
            if (m.count && test_rand(&seed) % 4) {
                size_t i = test_rand(&seed) % m.count;
                assert_int_equal(entity_timers_cancel(r.timers, m.t[i].id), 0);
                model_remove(&m, i);
            } else {
                uint64_t bogus = (UINT64_C(77) << COUNTER_BITS) | (1000000 + test_rand(&seed) % 1000);
                assert_int_equal(entity_timers_cancel(r.timers, bogus), -1);
            }
        } else if (roll < 88) {
            now += test_rand(&seed) % STEP;
            size_t n = model_run(&m, now, expected, MAX_FIRINGS);
            r.count = 0;
            assert_int_equal(run(&r, now), n);
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(r.fired[i].timer_id, expected[i]);
                assert_true(r.fired[i].now_us == now);
            }
            total_fired += n;
        } else if (roll < 94) {
            /* An entity leaves and maybe comes back (an offload and back). */
            uint64_t e = 1 + test_rand(&seed) % 8;
            entity_timer_state *states;
            size_t count;
            entity_timers_take(r.timers, e, now, &states, &count);
            size_t in_model = 0;
            for (size_t i = 0; i < m.count;) {
                if (m.t[i].entity != e) {
                    i++;
                    continue;
                }
                const entity_timer_state *s = state_of(states, count, m.t[i].id);
                assert_int_equal(s->remaining_us, m.t[i].due > now ? m.t[i].due - now : 0);
                assert_int_equal(s->interval_us, m.t[i].interval);
                in_model++;
                if (test_rand(&seed) % 2 == 0)
                    model_remove(&m, i);
                else
                    i++; /* it comes back below */
            }
            assert_int_equal(count, in_model);
            taken += count;
            /* Put back those still in the model, at once. */
            for (size_t k = 0; k < count; k++) {
                long i = model_find(&m, states[k].timer_id);
                if (i < 0) continue;
                entity_timers_put(r.timers, e, now, &states[k], 1);
                m.t[i].due = now + states[k].remaining_us;
            }
            free(states);
        } else {
            /* An entity disappears or reappears (live's answer changes). */
            uint64_t e = 1 + test_rand(&seed) % 8;
            if (entities[e]) {
                forget_entity(e);
                dropped_entities++;
            } else {
                make_entity(e, ENTITY_REAL);
            }
        }
        if (op % 50 == 0)
            check_against_model(&r, &m, now);
        else
            assert_int_equal(entity_timers_count(r.timers), m.count);
    }
    check_against_model(&r, &m, now);
    assert_true(total_fired > 1000);
    assert_true(taken > 0);
    assert_true(dropped_entities > 0);
    free(expected);
    free(m.t);
    recorder_close(&r);
}

/* A failed test must not leave its entities to the next one. */
static int reset_entities(void **state) {
    forget_all_entities();
    return 0;
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, reset_entities, reset_entities)

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_one_shot),
        TEST(test_ids),
        TEST(test_repeat_no_drift),
        TEST(test_catch_up_after_stall),
        TEST(test_catch_up_several),
        TEST(test_due_id_order),
        TEST(test_cancel),
        TEST(test_cancel_keeps_order),
        TEST(test_callback_cancels_itself),
        TEST(test_callback_adds_timers),
        TEST(test_callback_cancels_another_due),
        TEST(test_unknown_entity_dropped),
        TEST(test_take_and_put),
        TEST(test_timers_of),
        TEST(test_put_twice_refused),
        TEST(test_add_after_put_never_reuses_an_id),
        TEST(test_random_against_brute_force),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
