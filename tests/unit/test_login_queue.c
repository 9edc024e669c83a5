/* test_login_queue.c -- the bounded hash queue (baseapp/login_queue.c) on
 * a real libuv loop and thread pool, and the throttle's count at arrival
 * (baseapp/login_throttle.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <uv.h>

#include "login_queue.h"
#include "login_throttle.h"

typedef struct test_job {
    login_queue_job job; /* first: the queue's callbacks get it */
    int index;
    bool wanted;
    int *order; /* indexes in the order their `done` ran */
    int *order_count;
    int *dropped;
} test_job;

static void test_run(login_queue_job *job) {
    (void)job;
    uv_sleep(2); /* a hash's worth of work, in miniature */
}
static bool test_wanted(login_queue_job *job) { return ((test_job *)job)->wanted; }
static void test_done(login_queue_job *job, int status) {
    test_job *t = (test_job *)job;
    assert_int_equal(status, 0);
    t->order[(*t->order_count)++] = t->index;
    login_queue_leave(job->queue, job);
}
static void test_dropped(login_queue_job *job) {
    (*((test_job *)job)->dropped)++;
    login_queue_leave(job->queue, job);
}

static login_queue_refusal enter_and_push(login_queue *queue, test_job *t, const char *account, const char *address) {
    login_queue_refusal refusal = login_queue_enter(queue, &t->job, account, address);
    if (refusal != LOGIN_QUEUE_ACCEPTED) return refusal;
    refusal = login_queue_push(queue, &t->job);
    if (refusal != LOGIN_QUEUE_ACCEPTED) login_queue_leave(queue, &t->job);
    return refusal;
}

static void init_job(test_job *t, int index, int *order, int *order_count, int *dropped) {
    *t = (test_job){.index = index, .wanted = true, .order = order, .order_count = order_count, .dropped = dropped};
    t->job.run = test_run;
    t->job.wanted = test_wanted;
    t->job.done = test_done;
    t->job.dropped = test_dropped;
}

/* Arrival order, the caps, and jobs nobody waits for dropped unrun. */
static void test_queue_bounds(void **state) {
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    login_queue queue;
    login_queue_limits limits = {.workers = 1, .waiting_max = 5, .per_account = 2, .per_address = 3};
    login_queue_init(&queue, &loop, &limits);
    test_job jobs[9];
    int order[9], order_count = 0, dropped = 0;
    for (int i = 0; i < 9; i++) init_job(&jobs[i], i, order, &order_count, &dropped);

    /* One worker: job 0 runs, the rest wait. */
    assert_int_equal(enter_and_push(&queue, &jobs[0], "alice", "10.0.0.1:5000"), LOGIN_QUEUE_ACCEPTED);
    assert_int_equal(enter_and_push(&queue, &jobs[1], "alice", "10.0.0.2:5000"), LOGIN_QUEUE_ACCEPTED);
    /* A third of alice's at once: refused. */
    assert_int_equal(enter_and_push(&queue, &jobs[2], "alice", "10.0.0.3:5000"), LOGIN_QUEUE_ACCOUNT_BUSY);
    /* Three from 10.0.0.9 (ports differ, the address is the same). */
    assert_int_equal(enter_and_push(&queue, &jobs[2], "bob", "10.0.0.9:1"), LOGIN_QUEUE_ACCEPTED);
    assert_int_equal(enter_and_push(&queue, &jobs[3], "carol", "10.0.0.9:2"), LOGIN_QUEUE_ACCEPTED);
    assert_int_equal(enter_and_push(&queue, &jobs[4], "dave", "10.0.0.9:3"), LOGIN_QUEUE_ACCEPTED);
    assert_int_equal(enter_and_push(&queue, &jobs[5], "erin", "10.0.0.9:4"), LOGIN_QUEUE_ADDRESS_BUSY);
    /* Five wait now (1 to 5): the queue is full for anyone. */
    assert_int_equal(enter_and_push(&queue, &jobs[5], "frank", "10.0.0.5:1"), LOGIN_QUEUE_ACCEPTED);
    assert_int_equal(queue.counters.waiting, 5);
    assert_int_equal(enter_and_push(&queue, &jobs[6], "gina", "10.0.0.6:1"), LOGIN_QUEUE_FULL);
    assert_int_equal(queue.counters.refused_full + queue.counters.refused_account + queue.counters.refused_address, 3);

    /* Job 3's client leaves while it waits: it is never hashed. */
    jobs[3].wanted = false;
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(order_count, 5);
    int expected[] = {0, 1, 2, 4, 5};
    for (int i = 0; i < 5; i++) assert_int_equal(order[i], expected[i]);
    assert_int_equal(dropped, 1);
    assert_int_equal(queue.counters.hashed, 5);
    assert_int_equal(queue.counters.dropped, 1);
    assert_int_equal(queue.counters.waiting, 0);
    assert_int_equal(queue.counters.running, 0);

    /* Everything done: the counts are back to nothing. */
    assert_int_equal(enter_and_push(&queue, &jobs[7], "alice", "10.0.0.9:9"), LOGIN_QUEUE_ACCEPTED);
    assert_int_equal(enter_and_push(&queue, &jobs[8], "alice", "10.0.0.9:9"), LOGIN_QUEUE_ACCEPTED);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(order_count, 7);
    login_queue_close(&queue);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A burst of guesses is counted as it arrives: only `per_minute` of them
 * are let through; a success gives its attempt back. */
static void test_throttle_counts_at_arrival(void **state) {
    (void)state;
    login_throttle throttle;
    login_throttle_init(&throttle, 10, 60);
    uint64_t now = 1000000;
    int admitted = 0;
    for (int i = 0; i < 100; i++)
        if (login_throttle_admit(&throttle, "victim", "10.1.1.1:4000", now) == 0) admitted++;
    assert_int_equal(admitted, 10);
    /* The account's bucket is empty: refused with when to retry (6 s a failure). */
    uint64_t wait_ms = login_throttle_admit(&throttle, "victim", "10.1.1.2:4000", now);
    assert_true(wait_ms > 5000 && wait_ms <= 6001);

    /* Successes cost nothing: a crowd behind one address. */
    for (int i = 0; i < 200; i++) {
        char account[32];
        snprintf(account, sizeof account, "player%d", i);
        assert_int_equal(login_throttle_admit(&throttle, account, "10.2.2.2:1", now), 0);
        login_throttle_refund(&throttle, account, "10.2.2.2:1", now);
    }
    /* 60 unknown accounts from one address, then it waits. */
    admitted = 0;
    for (int i = 0; i < 200; i++) {
        char account[32];
        snprintf(account, sizeof account, "nobody%d", i);
        if (login_throttle_admit(&throttle, account, "10.3.3.3:1", now) == 0) admitted++;
    }
    assert_int_equal(admitted, 60);
    /* A refill: after a minute everything is back, and swept. */
    login_throttle_sweep(&throttle, now + 61000000);
    assert_int_equal(login_throttle_admit(&throttle, "victim", "10.1.1.1:4000", now + 61000000), 0);
    login_throttle_close(&throttle);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_bounds),
        cmocka_unit_test(test_throttle_counts_at_arrival),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
