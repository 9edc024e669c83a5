/* test_timer.c -- unit tests for timer_set on a real libuv loop: exact
 * firing counts for once-only and repeating timers, cancel and add from
 * inside callbacks, (due, id) ordering, describe, skipping missed periods,
 * and freeing with timers pending.
 *
 * Every test counts callbacks and asserts exact totals; none asserts how
 * many milliseconds something took. Each loop run is bounded by an unref'd
 * watchdog timer, so a bug that keeps the loop alive fails the test instead
 * of hanging it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "timer.h"

/* Far longer than any test needs even on a loaded CI machine, yet short
 * enough that a stuck loop fails well within meson's 60 s test timeout. */
#define WATCHDOG_MS 20000

#define MAX_LOG 2048

typedef struct test_ctx {
    uv_loop_t loop;
    timer_set *set;
    int fired_total;
    int fired[MAX_LOG];         /* per timer id */
    uint64_t order[MAX_LOG];    /* ids in firing order */
    int order_len;
    uint64_t other_id;          /* a timer some callback acts on */
    int limit;                  /* callback-specific */
    int cancel_rc[MAX_LOG];     /* what cancel returned, per firing */
    uint64_t pass_now[MAX_LOG]; /* uv_now at each firing */
    int cancel_ok;              /* cancels from callbacks that returned 0 */
} test_ctx;

static void watchdog_cb(uv_timer_t *t) {
    int *expired = t->data;
    *expired = 1;
    uv_stop(t->loop);
}

static void close_noop(uv_handle_t *h) {
}

/* Runs the loop until it has nothing left to do. Returns 0, or -1 if the
 * watchdog had to stop it. */
static int run_bounded(uv_loop_t *loop) {
    uv_timer_t watchdog;
    int expired = 0;
    uv_timer_init(loop, &watchdog);
    watchdog.data = &expired;
    uv_unref((uv_handle_t *)&watchdog);
    uv_timer_start(&watchdog, watchdog_cb, WATCHDOG_MS, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&watchdog, close_noop);
    uv_run(loop, UV_RUN_NOWAIT);
    return expired ? -1 : 0;
}

static test_ctx *ctx_new(void) {
    test_ctx *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    assert_int_equal(uv_loop_init(&c->loop), 0);
    c->set = timer_set_create(&c->loop);
    assert_non_null(c->set);
    return c;
}

/* Frees the set, lets its close callback run, and checks the loop holds
 * nothing more. */
static void ctx_done(test_ctx *c) {
    timer_set_free(c->set);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    free(c);
}

static void record(test_ctx *c, uint64_t id) {
    assert_true(id < MAX_LOG);
    assert_true(c->order_len < MAX_LOG);
    c->fired[id]++;
    c->pass_now[c->order_len] = uv_now(&c->loop);
    c->order[c->order_len++] = id;
    c->fired_total++;
}

static void count_cb(timer_set *set, uint64_t id, void *ud) {
    record(ud, id);
}

static void test_once_only_fire_once(void **state) {
    test_ctx *c = ctx_new();
    uint64_t a = timer_set_add(c->set, 0, 0, count_cb, c, 0);
    uint64_t b = timer_set_add(c->set, 3, 0, count_cb, c, 0);
    uint64_t d = timer_set_add(c->set, 1, 0, count_cb, c, 0);
    assert_true(a > 0 && b > a && d > b);
    assert_int_equal(timer_set_count(c->set), 3);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired_total, 3);
    assert_int_equal(c->fired[a], 1);
    assert_int_equal(c->fired[b], 1);
    assert_int_equal(c->fired[d], 1);
    /* Ordered by due time. */
    assert_int_equal(c->order[0], a);
    assert_int_equal(c->order[1], d);
    assert_int_equal(c->order[2], b);
    assert_int_equal(timer_set_count(c->set), 0);
    /* Already fired: cancel and describe know nothing of them. */
    timer_description desc;
    assert_int_equal(timer_set_cancel(c->set, a), -1);
    assert_int_equal(timer_set_describe(c->set, b, &desc), -1);
    /* The set is reusable after going idle, and ids are never reused. */
    uint64_t e = timer_set_add(c->set, 1, 0, count_cb, c, 0);
    assert_true(e > d);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired_total, 4);
    assert_int_equal(c->fired[e], 1);
    ctx_done(c);
}

/* A repeating timer that cancels itself on its c->limit-th firing. */
static void repeat_until_limit_cb(timer_set *set, uint64_t id, void *ud) {
    test_ctx *c = ud;
    record(c, id);
    if (c->fired[id] == c->limit) {
        c->cancel_rc[c->order_len - 1] = timer_set_cancel(set, id);
        c->cancel_ok += c->cancel_rc[c->order_len - 1] == 0;
    }
}

static void test_repeating_fires_exact_count(void **state) {
    test_ctx *c = ctx_new();
    c->limit = 5;
    uint64_t r1 = timer_set_add(c->set, 1, 1, repeat_until_limit_cb, c, 0);
    uint64_t r2 = timer_set_add(c->set, 0, 2, repeat_until_limit_cb, c, 0);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired[r1], 5);
    assert_int_equal(c->fired[r2], 5);
    assert_int_equal(c->fired_total, 10);
    /* Cancelling a repeating timer from its own callback succeeds. */
    assert_int_equal(c->cancel_ok, 2);
    assert_int_equal(timer_set_count(c->set), 0);
    assert_int_equal(timer_set_cancel(c->set, r1), -1);
    assert_int_equal(timer_set_cancel(c->set, r2), -1);
    ctx_done(c);
}

/* Once-only: by the time its callback runs it is gone. */
static void once_cancel_self_cb(timer_set *set, uint64_t id, void *ud) {
    test_ctx *c = ud;
    record(c, id);
    c->cancel_rc[c->order_len - 1] = timer_set_cancel(set, id);
    timer_description desc;
    assert_int_equal(timer_set_describe(set, id, &desc), -1);
}

/* Cancels c->other_id and records what cancel said. */
static void cancel_other_cb(timer_set *set, uint64_t id, void *ud) {
    test_ctx *c = ud;
    record(c, id);
    c->cancel_rc[c->order_len - 1] = timer_set_cancel(set, c->other_id);
}

static void test_cancel_inside_callback(void **state) {
    test_ctx *c = ctx_new();
    /* Self, once-only: -1. */
    uint64_t s = timer_set_add(c->set, 0, 0, once_cancel_self_cb, c, 0);
    /* Other, due at the same time but a later id: it must not fire. */
    uint64_t a = timer_set_add(c->set, 2, 0, cancel_other_cb, c, 0);
    uint64_t b = timer_set_add(c->set, 2, 0, count_cb, c, 0);
    c->other_id = b;
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired[s], 1);
    assert_int_equal(c->cancel_rc[0], -1);
    assert_int_equal(c->fired[a], 1);
    assert_int_equal(c->fired[b], 0);
    assert_int_equal(c->cancel_rc[1], 0);
    assert_int_equal(c->fired_total, 2);
    assert_int_equal(timer_set_count(c->set), 0);
    ctx_done(c);
}

static void test_cancel_other_pending_lets_loop_end(void **state) {
    test_ctx *c = ctx_new();
    uint64_t far = timer_set_add(c->set, 3600 * 1000, 0, count_cb, c, 0);
    c->limit = 3;
    uint64_t r = timer_set_add(c->set, 1, 1, repeat_until_limit_cb, c, 0);
    uint64_t k = timer_set_add(c->set, 0, 0, cancel_other_cb, c, 0);
    c->other_id = far;
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired[far], 0);
    assert_int_equal(c->fired[k], 1);
    assert_int_equal(c->fired[r], 3);
    assert_int_equal(c->fired_total, 4);
    assert_int_equal(c->order[0], k);
    assert_int_equal(c->cancel_rc[0], 0);
    assert_int_equal(timer_set_cancel(c->set, far), -1);
    ctx_done(c);
}

/* Adds a delay-0 once-only timer to itself until c->limit firings: a chain
 * that must neither spin inside one pass nor stop early. */
static void chain_cb(timer_set *set, uint64_t id, void *ud) {
    test_ctx *c = ud;
    record(c, id);
    if (c->fired_total < c->limit)
        assert_true(timer_set_add(set, 0, 0, chain_cb, c, 0) > id);
}

static void test_add_inside_callback(void **state) {
    test_ctx *c = ctx_new();
    c->limit = 25;
    timer_set_add(c->set, 0, 0, chain_cb, c, 0);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired_total, 25);
    for (int i = 1; i < c->order_len; i++) {
        assert_true(c->order[i] > c->order[i - 1]);
        /* A timer added in a callback never fires in that same pass. */
        assert_true(c->pass_now[i] > c->pass_now[i - 1]);
    }
    assert_int_equal(timer_set_count(c->set), 0);
    ctx_done(c);
}

/* Adds `limit` more repeating timers from inside a repeating timer. */
static void spawner_cb(timer_set *set, uint64_t id, void *ud) {
    test_ctx *c = ud;
    record(c, id);
    if (c->fired[id] == 1) {
        for (int i = 0; i < c->limit; i++)
            assert_true(timer_set_add(set, 1, 1, repeat_until_limit_cb, c, 0) > 0);
    }
    if (c->fired[id] == 2)
        assert_int_equal(timer_set_cancel(set, id), 0);
}

static void test_add_repeating_inside_callback(void **state) {
    test_ctx *c = ctx_new();
    c->limit = 4; /* spawns 4 timers, each fires 4 times */
    uint64_t s = timer_set_add(c->set, 0, 1, spawner_cb, c, 0);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired[s], 2);
    for (uint64_t id = s + 1; id <= s + 4; id++)
        assert_int_equal(c->fired[id], 4);
    assert_int_equal(c->fired_total, 2 + 16);
    ctx_done(c);
}

static void test_simultaneous_fire_in_id_order(void **state) {
    test_ctx *c = ctx_new();
    /* All added at the same loop time: due = now + delay exactly. */
    const uint64_t delays[] = {2, 1, 2, 0, 1, 2, 0, 1};
    enum { N = sizeof(delays) / sizeof(delays[0]) };
    uint64_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = timer_set_add(c->set, delays[i], 0, count_cb, c, 0);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->order_len, N);
    const int expect[N] = {3, 6, 1, 4, 7, 0, 2, 5};
    for (int i = 0; i < N; i++)
        assert_int_equal(c->order[i], ids[expect[i]]);
    ctx_done(c);
}

static void test_many_timers_heap_order(void **state) {
    test_ctx *c = ctx_new();
    enum { N = 1500 };
    uint64_t delay_of[MAX_LOG] = {0};
    int cancelled[MAX_LOG] = {0};
    uint64_t seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        uint64_t d = (seed >> 33) % 20;
        uint64_t id = timer_set_add(c->set, d, 0, count_cb, c, 0);
        assert_true(id > 0 && id < MAX_LOG);
        delay_of[id] = d;
    }
    assert_int_equal(timer_set_count(c->set), N);
    /* Cancel every third, from the middle of the heap as well as the top. */
    int n_cancelled = 0;
    for (uint64_t id = 1; id <= N; id += 3) {
        assert_int_equal(timer_set_cancel(c->set, id), 0);
        assert_int_equal(timer_set_cancel(c->set, id), -1);
        cancelled[id] = 1;
        n_cancelled++;
    }
    assert_int_equal(timer_set_count(c->set), N - n_cancelled);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired_total, N - n_cancelled);
    for (uint64_t id = 1; id <= N; id++)
        assert_int_equal(c->fired[id], cancelled[id] ? 0 : 1);
    for (int i = 1; i < c->order_len; i++) {
        uint64_t p = c->order[i - 1], q = c->order[i];
        assert_true(delay_of[p] < delay_of[q] || (delay_of[p] == delay_of[q] && p < q));
    }
    ctx_done(c);
}

static void test_describe(void **state) {
    test_ctx *c = ctx_new();
    int x;
    uint64_t id = timer_set_add(c->set, 5000, 250, count_cb, &x, 77);
    uint64_t now_id = timer_set_add(c->set, 0, 0, count_cb, c, 5);
    timer_description d;
    memset(&d, 0xff, sizeof(d));
    assert_int_equal(timer_set_describe(c->set, id, &d), 0);
    assert_int_equal(d.timer_id, id);
    /* The loop time has not moved since the add. */
    assert_int_equal(d.remaining_ms, 5000);
    assert_int_equal(d.interval_ms, 250);
    assert_int_equal(d.tag, 77);
    assert_ptr_equal(d.user_data, &x);
    assert_int_equal(timer_set_describe(c->set, now_id, &d), 0);
    assert_int_equal(d.remaining_ms, 0);
    assert_int_equal(d.interval_ms, 0);
    assert_int_equal(d.tag, 5);
    assert_int_equal(timer_set_describe(c->set, 9999, &d), -1);
    assert_int_equal(timer_set_describe(c->set, 0, &d), -1);
    assert_int_equal(timer_set_cancel(c->set, id), 0);
    assert_int_equal(timer_set_describe(c->set, id, &d), -1);
    assert_int_equal(timer_set_cancel(c->set, now_id), 0);
    assert_int_equal(timer_set_count(c->set), 0);
    ctx_done(c);
}

/* First firing stalls the loop for several periods; the late firing must
 * be single and must schedule the next one in the future. */
static void stall_cb(timer_set *set, uint64_t id, void *ud) {
    test_ctx *c = ud;
    record(c, id);
    int n = c->fired[id];
    if (n == 1) {
        /* 5.5 periods of 10 ms: a stall the timer must not make up for. */
        uv_sleep(55);
    } else if (n == 2) {
        timer_description d;
        assert_int_equal(timer_set_describe(set, id, &d), 0);
        /* Next due is the first period after now, not an overdue one. */
        assert_true(d.remaining_ms > 0);
        assert_true(d.remaining_ms <= 10);
    } else if (n == 3) {
        assert_int_equal(timer_set_cancel(set, id), 0);
    }
}

static void test_repeating_skips_missed_periods(void **state) {
    test_ctx *c = ctx_new();
    uint64_t id = timer_set_add(c->set, 0, 10, stall_cb, c, 0);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired[id], 3);
    /* No burst: each firing came in its own pass. */
    assert_true(c->pass_now[1] > c->pass_now[0]);
    assert_true(c->pass_now[2] > c->pass_now[1]);
    ctx_done(c);
}

static void test_free_with_pending_fires_nothing(void **state) {
    test_ctx *c = ctx_new();
    timer_set_add(c->set, 0, 0, count_cb, c, 0);
    timer_set_add(c->set, 1, 1, count_cb, c, 0);
    timer_set_add(c->set, 50, 0, count_cb, c, 0);
    assert_int_equal(timer_set_count(c->set), 3);
    timer_set_free(c->set);
    /* The close callback releases the memory (ASan checks it is freed). */
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired_total, 0);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    free(c);
}

/* Frees the whole set from inside a callback. */
static void free_set_cb(timer_set *set, uint64_t id, void *ud) {
    test_ctx *c = ud;
    record(c, id);
    timer_set_free(set);
}

static void test_free_inside_callback(void **state) {
    test_ctx *c = ctx_new();
    uint64_t f = timer_set_add(c->set, 1, 0, free_set_cb, c, 0);
    uint64_t same_time = timer_set_add(c->set, 1, 0, count_cb, c, 0);
    uint64_t repeating = timer_set_add(c->set, 0, 1, count_cb, c, 0);
    assert_int_equal(run_bounded(&c->loop), 0);
    assert_int_equal(c->fired[f], 1);
    assert_int_equal(c->fired[same_time], 0);
    /* The repeating timer fired at least once before f (due 0 < 1); the
     * exact number depends on how the loop's clock advanced, but nothing
     * fired after f. */
    assert_true(c->fired[repeating] >= 1);
    assert_int_equal(c->order[c->order_len - 1], f);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    free(c);
}

static void test_bad_arguments(void **state) {
    assert_null(timer_set_create(NULL));
    test_ctx *c = ctx_new();
    assert_int_equal(timer_set_add(c->set, 1, 0, NULL, c, 0), 0);
    assert_int_equal(timer_set_cancel(c->set, 0), -1);
    assert_int_equal(timer_set_cancel(c->set, 12345), -1);
    assert_int_equal(timer_set_count(c->set), 0);
    /* Huge delays saturate instead of wrapping to "due now". */
    uint64_t id = timer_set_add(c->set, UINT64_MAX, UINT64_MAX, count_cb, c, 0);
    assert_true(id > 0);
    timer_description d;
    assert_int_equal(timer_set_describe(c->set, id, &d), 0);
    assert_true(d.remaining_ms > UINT64_MAX / 2);
    ctx_done(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_once_only_fire_once),
        cmocka_unit_test(test_repeating_fires_exact_count),
        cmocka_unit_test(test_cancel_inside_callback),
        cmocka_unit_test(test_cancel_other_pending_lets_loop_end),
        cmocka_unit_test(test_add_inside_callback),
        cmocka_unit_test(test_add_repeating_inside_callback),
        cmocka_unit_test(test_simultaneous_fire_in_id_order),
        cmocka_unit_test(test_many_timers_heap_order),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_repeating_skips_missed_periods),
        cmocka_unit_test(test_free_with_pending_fires_nothing),
        cmocka_unit_test(test_free_inside_callback),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
