/* test_cell_address.c -- unit tests for cell_address (baseapp/cell_address.h):
 * the base's record of where its cell part is and the order in which its
 * client hears from the reals that succeed one another.
 *
 * Covered: init; messages of the stream incarnation from its cellapp are
 * delivered, from any other cellapp or of an older incarnation stale; later
 * incarnations held and handed out by cell_address_next in arrival order
 * only once the current incarnation's handoff came (a handoff of a later
 * incarnation held and applied in its turn); the central test: three reals
 * k on A, k+1 on B, k+2 on C whose runs (CellAddress, messages, handoff)
 * interleave in every possible way (4200 orders), and the client must get
 * m1..m6 exactly once, in order, with nothing held at the end;
 * cell_address_on_address keeping the highest incarnation; OVERFLOW after
 * CELL_ADDRESS_MAX_HELD held; cell_address_check with dead cellapps (the
 * stream moving on to a held later incarnation, lost with nothing known and
 * found again by a later CellAddress, lost when only the address's cellapp
 * died); and cell_address_clear freeing everything (run under LSan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cell_address.h"

#define CELL_A 10u
#define CELL_B 20u
#define CELL_C 30u
#define CELL_X 40u /* a cellapp that holds no real of the entity */
#define K 5u       /* the first incarnation, on A */

enum { MAX_RECORDED = 512 };

/* The client: what it was handed, in order (payload ids). */
typedef struct client {
    int got[MAX_RECORDED];
    size_t count;
} client;

static void receive(client *cl, const uint8_t *payload, size_t length) {
    assert_int_equal(length, 2);
    assert_int_equal(payload[0], 0xC5);
    assert_true(cl->count < MAX_RECORDED);
    cl->got[cl->count++] = payload[1];
}

/* Hands the client everything cell_address_next lets through (what
 * cell_link_release does); returns how many. */
static size_t release(cell_address *address, client *cl) {
    size_t n = 0;
    uint8_t *payload;
    size_t length;
    while ((payload = cell_address_next(address, &length)) != NULL) {
        receive(cl, payload, length);
        free(payload);
        n++;
    }
    return n;
}

/* A client message with payload id `id` (< 256). */
static cell_address_verdict message(cell_address *address, client *cl, uint64_t cellapp, uint32_t incarnation, int id) {
    uint8_t payload[2] = {0xC5, (uint8_t)id};
    cell_address_verdict verdict = cell_address_on_client_message(address, cellapp, incarnation, payload, 2);
    if (verdict == CELL_ADDRESS_DELIVER) receive(cl, payload, 2);
    return verdict;
}

static void assert_got(const client *cl, const int *expected, size_t n) {
    assert_int_equal(cl->count, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(cl->got[i], expected[i]);
}

/* Which cellapps are up: a bit per cellapp id / 10. */
typedef struct liveness {
    unsigned up;
    int calls;
} liveness;

static bool is_up(uint64_t cellapp_id, void *context) {
    liveness *l = context;
    l->calls++;
    if (cellapp_id == 0 || cellapp_id % 10 || cellapp_id / 10 > 8) return false;
    return (l->up >> (cellapp_id / 10)) & 1u;
}

static unsigned up_set(uint64_t a, uint64_t b, uint64_t c) {
    unsigned bits = 0;
    if (a) bits |= 1u << (a / 10);
    if (b) bits |= 1u << (b / 10);
    if (c) bits |= 1u << (c / 10);
    return bits;
}

static void test_init(void **state) {
    cell_address address;
    memset(&address, 0xAB, sizeof address);
    cell_address_init(&address, CELL_A, K);
    assert_int_equal(address.cellapp_id, CELL_A);
    assert_int_equal(address.incarnation, K);
    assert_int_equal(address.stream_cellapp, CELL_A);
    assert_int_equal(address.stream_incarnation, K);
    assert_null(address.held);
    assert_int_equal(address.held_count, 0);
    assert_int_equal(address.held_capacity, 0);
    assert_int_equal(address.lost_since_us, 0);
    size_t length;
    assert_null(cell_address_next(&address, &length));
    cell_address_clear(&address);
    assert_int_equal(address.cellapp_id, 0);
    assert_int_equal(address.held_count, 0);
    assert_null(address.held);
    /* Clearing twice is harmless. */
    cell_address_clear(&address);
}

static void test_stream_deliver_and_stale(void **state) {
    cell_address address;
    client cl = {0};
    cell_address_init(&address, CELL_A, K);
    assert_int_equal(message(&address, &cl, CELL_A, K, 1), CELL_ADDRESS_DELIVER);
    assert_int_equal(message(&address, &cl, CELL_A, K, 2), CELL_ADDRESS_DELIVER);
    /* The stream's incarnation, from another cellapp. */
    assert_int_equal(message(&address, &cl, CELL_B, K, 90), CELL_ADDRESS_STALE);
    assert_int_equal(message(&address, &cl, CELL_X, K, 91), CELL_ADDRESS_STALE);
    /* Older incarnations, from anywhere. */
    assert_int_equal(message(&address, &cl, CELL_A, K - 1, 92), CELL_ADDRESS_STALE);
    assert_int_equal(message(&address, &cl, CELL_B, K - 1, 93), CELL_ADDRESS_STALE);
    assert_int_equal(message(&address, &cl, CELL_A, 0, 94), CELL_ADDRESS_STALE);
    assert_int_equal(address.held_count, 0);
    assert_int_equal(message(&address, &cl, CELL_A, K, 3), CELL_ADDRESS_DELIVER);
    const int expected[] = {1, 2, 3};
    assert_got(&cl, expected, 3);
    assert_int_equal(release(&address, &cl), 0);
    /* A stale handoff changes nothing. */
    assert_false(cell_address_on_handoff(&address, CELL_A, K - 1, CELL_B));
    assert_int_equal(address.stream_incarnation, K);
    assert_int_equal(address.stream_cellapp, CELL_A);
    assert_int_equal(address.held_count, 0);
    cell_address_clear(&address);
}

/* Only the stream's cellapp can end its incarnation ("until the stream's
 * cellapp says that incarnation has ended"): a handoff of the stream
 * incarnation from another cellapp is stale, like its messages. */
static void test_handoff_from_other_cellapp_is_stale(void **state) {
    cell_address address;
    client cl = {0};
    cell_address_init(&address, CELL_A, K);
    assert_false(cell_address_on_handoff(&address, CELL_X, K, CELL_B));
    assert_int_equal(address.stream_incarnation, K);
    assert_int_equal(address.stream_cellapp, CELL_A);
    assert_int_equal(message(&address, &cl, CELL_A, K, 1), CELL_ADDRESS_DELIVER);
    /* The same, held first and met by cell_address_next: dropped too. */
    assert_true(cell_address_on_handoff(&address, CELL_X, K + 1, CELL_C));
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 2), CELL_ADDRESS_HELD);
    assert_true(cell_address_on_handoff(&address, CELL_A, K, CELL_B));
    assert_int_equal(release(&address, &cl), 1);
    assert_int_equal(address.stream_incarnation, K + 1);
    assert_int_equal(address.stream_cellapp, CELL_B);
    assert_int_equal(address.held_count, 0);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 3), CELL_ADDRESS_DELIVER);
    const int expected[] = {1, 2, 3};
    assert_got(&cl, expected, 3);
    cell_address_clear(&address);
}

/* Later incarnations wait for the handoff, then come out in arrival order. */
static void test_held_until_handoff(void **state) {
    cell_address address;
    client cl = {0};
    cell_address_init(&address, CELL_A, K);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 11), CELL_ADDRESS_HELD);
    assert_int_equal(message(&address, &cl, CELL_A, K, 1), CELL_ADDRESS_DELIVER);
    assert_int_equal(message(&address, &cl, CELL_C, K + 2, 21), CELL_ADDRESS_HELD);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 12), CELL_ADDRESS_HELD);
    assert_int_equal(message(&address, &cl, CELL_X, K + 1, 99), CELL_ADDRESS_HELD); /* never the stream */
    assert_int_equal(message(&address, &cl, CELL_A, K, 2), CELL_ADDRESS_DELIVER);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 13), CELL_ADDRESS_HELD);
    assert_int_equal(address.held_count, 5);
    /* Nothing is released before the handoff, however often asked. */
    assert_int_equal(release(&address, &cl), 0);
    assert_int_equal(release(&address, &cl), 0);
    assert_int_equal(address.held_count, 5);

    /* A's incarnation ends: B's held messages, in arrival order; X's is
     * dropped; C's waits for B's handoff. */
    assert_true(cell_address_on_handoff(&address, CELL_A, K, CELL_B));
    assert_int_equal(address.stream_incarnation, K + 1);
    assert_int_equal(address.stream_cellapp, CELL_B);
    assert_int_equal(release(&address, &cl), 3);
    assert_int_equal(address.held_count, 1);
    const int first[] = {1, 2, 11, 12, 13};
    assert_got(&cl, first, 5);
    /* A's stragglers are stale now. */
    assert_int_equal(message(&address, &cl, CELL_A, K, 3), CELL_ADDRESS_STALE);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 14), CELL_ADDRESS_DELIVER);

    assert_true(cell_address_on_handoff(&address, CELL_B, K + 1, CELL_C));
    assert_int_equal(release(&address, &cl), 1);
    assert_int_equal(address.held_count, 0);
    assert_int_equal(message(&address, &cl, CELL_C, K + 2, 22), CELL_ADDRESS_DELIVER);
    const int all[] = {1, 2, 11, 12, 13, 14, 21, 22};
    assert_got(&cl, all, 8);
    assert_int_equal(address.stream_incarnation, K + 2);
    assert_int_equal(address.stream_cellapp, CELL_C);
    /* The address follows CellAddress only: still A's. */
    assert_int_equal(address.cellapp_id, CELL_A);
    assert_int_equal(address.incarnation, K);
    cell_address_clear(&address);
}

/* A handoff of a later incarnation arriving before the current one's: held,
 * applied in its turn (an incarnation that never ran, a refused offload). */
static void test_later_handoff_held(void **state) {
    cell_address address;
    client cl = {0};
    cell_address_init(&address, CELL_A, K);
    /* B refused the offload: its incarnation ends with its handoff back to
     * A, which runs the entity as K+2. */
    assert_int_equal(message(&address, &cl, CELL_A, K + 2, 21), CELL_ADDRESS_HELD);
    assert_true(cell_address_on_handoff(&address, CELL_B, K + 1, CELL_A));
    assert_int_equal(message(&address, &cl, CELL_A, K + 2, 22), CELL_ADDRESS_HELD);
    assert_int_equal(release(&address, &cl), 0);
    assert_int_equal(message(&address, &cl, CELL_A, K, 1), CELL_ADDRESS_DELIVER);
    assert_true(cell_address_on_handoff(&address, CELL_A, K, CELL_B));
    assert_int_equal(release(&address, &cl), 2);
    assert_int_equal(address.stream_incarnation, K + 2);
    assert_int_equal(address.stream_cellapp, CELL_A);
    assert_int_equal(address.held_count, 0);
    const int expected[] = {1, 21, 22};
    assert_got(&cl, expected, 3);
    cell_address_clear(&address);
}

static void test_on_address_keeps_highest(void **state) {
    cell_address address;
    cell_address_init(&address, CELL_A, K);
    assert_false(cell_address_on_address(&address, CELL_B, K));
    assert_false(cell_address_on_address(&address, CELL_B, K - 1));
    assert_int_equal(address.cellapp_id, CELL_A);
    assert_true(cell_address_on_address(&address, CELL_C, K + 2));
    assert_int_equal(address.cellapp_id, CELL_C);
    assert_int_equal(address.incarnation, K + 2);
    assert_false(cell_address_on_address(&address, CELL_B, K + 1));
    assert_false(cell_address_on_address(&address, CELL_B, K + 2));
    assert_int_equal(address.cellapp_id, CELL_C);
    assert_int_equal(address.incarnation, K + 2);
    /* The stream is not the address's business while not lost. */
    assert_int_equal(address.stream_cellapp, CELL_A);
    assert_int_equal(address.stream_incarnation, K);
    assert_true(cell_address_on_address(&address, CELL_B, K + 3));
    assert_int_equal(address.cellapp_id, CELL_B);
    assert_int_equal(address.stream_incarnation, K);
    cell_address_clear(&address);
}

static void test_overflow(void **state) {
    cell_address address;
    client cl = {0};
    cell_address_init(&address, CELL_A, K);
    for (int i = 0; i < CELL_ADDRESS_MAX_HELD; i++)
        assert_int_equal(message(&address, &cl, CELL_B, K + 1, i & 0xff), CELL_ADDRESS_HELD);
    assert_int_equal(address.held_count, CELL_ADDRESS_MAX_HELD);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 1), CELL_ADDRESS_OVERFLOW);
    assert_int_equal(message(&address, &cl, CELL_C, K + 2, 1), CELL_ADDRESS_OVERFLOW);
    assert_int_equal(address.held_count, CELL_ADDRESS_MAX_HELD);
    /* The stream itself still flows; stale is still stale. */
    assert_int_equal(message(&address, &cl, CELL_A, K, 7), CELL_ADDRESS_DELIVER);
    assert_int_equal(message(&address, &cl, CELL_A, K - 1, 7), CELL_ADDRESS_STALE);
    assert_int_equal(cl.count, 1);
    /* Released, there is room again. */
    assert_true(cell_address_on_handoff(&address, CELL_A, K, CELL_B));
    assert_int_equal(release(&address, &cl), CELL_ADDRESS_MAX_HELD);
    for (int i = 0; i < CELL_ADDRESS_MAX_HELD; i++) assert_int_equal(cl.got[1 + i], i & 0xff);
    assert_int_equal(message(&address, &cl, CELL_C, K + 2, 1), CELL_ADDRESS_HELD);
    cell_address_clear(&address); /* frees what is held */
    assert_int_equal(address.held_count, 0);
}

/* Clearing with held messages and handoffs frees everything (LSan). */
static void test_clear_frees_held(void **state) {
    cell_address address;
    client cl = {0};
    cell_address_init(&address, CELL_A, K);
    for (int i = 0; i < 40; i++) {
        assert_int_equal(message(&address, &cl, CELL_B, K + 1 + (uint32_t)(i % 3), i), CELL_ADDRESS_HELD);
        if (i % 10 == 0) assert_true(cell_address_on_handoff(&address, CELL_B, K + 1 + (uint32_t)(i % 3), CELL_C));
    }
    assert_true(address.held_count >= 40);
    cell_address_clear(&address);
    assert_int_equal(address.held_count, 0);
    assert_null(address.held);
    assert_int_equal(address.stream_incarnation, 0);
    cell_address_init(&address, CELL_B, 1);
    assert_int_equal(message(&address, &cl, CELL_B, 1, 1), CELL_ADDRESS_DELIVER);
    cell_address_clear(&address);
}

/* ---- every interleaving of three reals' runs ---------------------------------- */

typedef enum event_kind { EV_MESSAGE, EV_HANDOFF, EV_ADDRESS } event_kind;

typedef struct event {
    event_kind kind;
    uint64_t cellapp;
    uint32_t incarnation;
    int id;        /* message */
    uint64_t next; /* handoff */
} event;

enum { RUNS = 3, MAX_RUN = 4 };

typedef struct runs {
    event run[RUNS][MAX_RUN];
    size_t length[RUNS];
} runs;

typedef struct interleaving_stats {
    size_t orders;
    size_t held;              /* messages held over every order */
    uint32_t highest_address; /* of this order so far */
} interleaving_stats;

/* Applies one event as the baseapp does (cell_link.c): a message is
 * delivered or held; a handoff is followed by a check and a release; an
 * address by a release. */
static void apply_event(cell_address *address, client *cl, liveness *live, const event *e, interleaving_stats *st) {
    switch (e->kind) {
        case EV_MESSAGE: {
            cell_address_verdict verdict = message(address, cl, e->cellapp, e->incarnation, e->id);
            assert_true(verdict == CELL_ADDRESS_DELIVER || verdict == CELL_ADDRESS_HELD);
            if (verdict == CELL_ADDRESS_HELD) st->held++;
            break;
        }
        case EV_HANDOFF:
            assert_true(cell_address_on_handoff(address, e->cellapp, e->incarnation, e->next));
            assert_false(cell_address_check(address, is_up, live, 1000));
            release(address, cl);
            break;
        case EV_ADDRESS: {
            /* The later real's CellAddress may come first: the earlier one's is
         * then no change. */
            bool changes = e->incarnation > st->highest_address;
            assert_int_equal(cell_address_on_address(address, e->cellapp, e->incarnation), changes);
            if (changes) st->highest_address = e->incarnation;
            release(address, cl);
            break;
        }
    }
}

/* Walks every merge of the runs that keeps each run's order. */
static void interleave(const runs *r, size_t *at, event *order, size_t depth, size_t total, interleaving_stats *st) {
    if (depth == total) {
        cell_address address;
        client cl = {0};
        liveness live = {up_set(CELL_A, CELL_B, CELL_C), 0};
        cell_address_init(&address, CELL_A, K);
        st->highest_address = K;
        for (size_t i = 0; i < total; i++) {
            apply_event(&address, &cl, &live, &order[i], st);
            assert_int_equal(release(&address, &cl), 0); /* nothing left behind */
        }
        const int expected[] = {1, 2, 3, 4, 5, 6};
        assert_got(&cl, expected, 6);
        assert_int_equal(address.held_count, 0);
        assert_int_equal(address.stream_incarnation, K + 2);
        assert_int_equal(address.stream_cellapp, CELL_C);
        assert_int_equal(address.cellapp_id, CELL_C);
        assert_int_equal(address.incarnation, K + 2);
        assert_int_equal(address.lost_since_us, 0);
        /* Anything of the earlier reals that comes now is stale. */
        assert_int_equal(message(&address, &cl, CELL_A, K, 90), CELL_ADDRESS_STALE);
        assert_int_equal(message(&address, &cl, CELL_B, K + 1, 91), CELL_ADDRESS_STALE);
        assert_false(cell_address_on_handoff(&address, CELL_A, K, CELL_B));
        cell_address_clear(&address);
        st->orders++;
        return;
    }
    for (size_t run = 0; run < RUNS; run++) {
        if (at[run] == r->length[run]) continue;
        order[depth] = r->run[run][at[run]++];
        interleave(r, at, order, depth + 1, total, st);
        at[run]--;
    }
}

static void test_three_reals_every_interleaving(void **state) {
    runs r = {
        .run =
            {
                {{EV_MESSAGE, CELL_A, K, 1, 0}, {EV_MESSAGE, CELL_A, K, 2, 0}, {EV_HANDOFF, CELL_A, K, 0, CELL_B}},
                {{EV_ADDRESS, CELL_B, K + 1, 0, 0},
                 {EV_MESSAGE, CELL_B, K + 1, 3, 0},
                 {EV_MESSAGE, CELL_B, K + 1, 4, 0},
                 {EV_HANDOFF, CELL_B, K + 1, 0, CELL_C}},
                {{EV_ADDRESS, CELL_C, K + 2, 0, 0},
                 {EV_MESSAGE, CELL_C, K + 2, 5, 0},
                 {EV_MESSAGE, CELL_C, K + 2, 6, 0}},
            },
        .length = {3, 4, 3},
    };
    size_t at[RUNS] = {0};
    event order[10];
    interleaving_stats st = {0};
    interleave(&r, at, order, 0, 10, &st);
    assert_int_equal(st.orders, 4200); /* 10! / (3! 4! 3!) */
    assert_true(st.held > 0);
}

/* The same without the CellAddress messages: the three runs of the brief,
 * [m1 m2 handoff(k->B)] [m3 m4 handoff(k+1->C)] [m5 m6]. */
static void test_three_runs_without_addresses(void **state) {
    runs r = {
        .run =
            {
                {{EV_MESSAGE, CELL_A, K, 1, 0}, {EV_MESSAGE, CELL_A, K, 2, 0}, {EV_HANDOFF, CELL_A, K, 0, CELL_B}},
                {{EV_MESSAGE, CELL_B, K + 1, 3, 0},
                 {EV_MESSAGE, CELL_B, K + 1, 4, 0},
                 {EV_HANDOFF, CELL_B, K + 1, 0, CELL_C}},
                {{EV_MESSAGE, CELL_C, K + 2, 5, 0}, {EV_MESSAGE, CELL_C, K + 2, 6, 0}},
            },
        .length = {3, 3, 2},
    };
    event order[8];
    size_t orders = 0;
    /* interleave() checks the address too; here it stays A's, so walk the
     * orders by hand. */
    size_t total = 8;
    for (unsigned mask = 0; mask < (1u << (2 * total)); mask++) {
        /* Two bits per position choose the run (0..2); 3 is invalid. */
        size_t count[RUNS] = {0};
        bool valid = true;
        for (size_t i = 0; i < total && valid; i++) {
            unsigned run = (mask >> (2 * i)) & 3u;
            if (run >= RUNS || count[run] == r.length[run])
                valid = false;
            else
                order[i] = r.run[run][count[run]++];
        }
        if (!valid) continue;
        cell_address address;
        client cl = {0};
        liveness live = {up_set(CELL_A, CELL_B, CELL_C), 0};
        interleaving_stats st = {0};
        cell_address_init(&address, CELL_A, K);
        for (size_t i = 0; i < total; i++) apply_event(&address, &cl, &live, &order[i], &st);
        const int expected[] = {1, 2, 3, 4, 5, 6};
        assert_got(&cl, expected, 6);
        assert_int_equal(address.held_count, 0);
        assert_int_equal(address.stream_incarnation, K + 2);
        assert_int_equal(address.stream_cellapp, CELL_C);
        cell_address_clear(&address);
        orders++;
    }
    assert_int_equal(orders, 560); /* 8! / (3! 3! 2!) */
}

/* ---- dead cellapps ------------------------------------------------------------- */

/* The stream's cellapp is gone, a later incarnation is held from a live
 * one: the stream moves on to it and its messages come out. */
static void test_check_moves_to_held(void **state) {
    cell_address address;
    client cl = {0};
    liveness live = {up_set(CELL_A, CELL_B, CELL_C), 0};
    cell_address_init(&address, CELL_A, K);
    assert_int_equal(message(&address, &cl, CELL_A, K, 1), CELL_ADDRESS_DELIVER);
    assert_int_equal(message(&address, &cl, CELL_C, K + 2, 5), CELL_ADDRESS_HELD);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 3), CELL_ADDRESS_HELD);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 4), CELL_ADDRESS_HELD);
    /* All up: nothing changes. */
    assert_false(cell_address_check(&address, is_up, &live, 100));
    assert_true(live.calls > 0);
    assert_int_equal(address.stream_incarnation, K);
    assert_int_equal(release(&address, &cl), 0);

    /* A dies (its handoff never comes): the earliest later incarnation on a
     * live cellapp, B's, is the stream now. */
    live.up = up_set(CELL_B, CELL_C, 0);
    assert_false(cell_address_check(&address, is_up, &live, 200));
    assert_int_equal(address.stream_incarnation, K + 1);
    assert_int_equal(address.stream_cellapp, CELL_B);
    assert_int_equal(address.lost_since_us, 0);
    assert_int_equal(release(&address, &cl), 2);
    assert_int_equal(address.held_count, 1); /* C's waits for B's handoff */
    assert_true(cell_address_on_handoff(&address, CELL_B, K + 1, CELL_C));
    assert_int_equal(release(&address, &cl), 1);
    const int expected[] = {1, 3, 4, 5};
    assert_got(&cl, expected, 4);
    cell_address_clear(&address);
}

/* The stream's cellapp and the next one both dead: it skips to the first
 * later incarnation on a live cellapp. */
static void test_check_skips_dead_incarnations(void **state) {
    cell_address address;
    client cl = {0};
    liveness live = {up_set(CELL_C, 0, 0), 0};
    cell_address_init(&address, CELL_A, K);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 3), CELL_ADDRESS_HELD);
    assert_int_equal(message(&address, &cl, CELL_C, K + 2, 5), CELL_ADDRESS_HELD);
    assert_false(cell_address_check(&address, is_up, &live, 10));
    assert_int_equal(address.stream_incarnation, K + 2);
    assert_int_equal(address.stream_cellapp, CELL_C);
    assert_int_equal(release(&address, &cl), 1);
    assert_int_equal(address.held_count, 0); /* B's dropped: it ended */
    const int expected[] = {5};
    assert_got(&cl, expected, 1);
    cell_address_clear(&address);
}

/* Two reals reached one incarnation in a failure's race (an offload's
 * arrival on B, a restore on A), and A, the one the address named, died:
 * B, which holds the real, takes the address at the same incarnation and
 * the stream is B's; an address that is still up is never taken so. */
static void test_take_over_after_death(void **state) {
    cell_address address;
    client cl = {0};
    liveness live = {up_set(CELL_A, CELL_B, 0), 0};
    cell_address_init(&address, CELL_A, K);
    live.up = up_set(CELL_B, 0, 0);
    assert_true(cell_address_check(&address, is_up, &live, 5000));
    assert_false(cell_address_on_address(&address, CELL_B, K));
    assert_true(cell_address_take_over(&address, CELL_B, K));
    assert_int_equal(address.cellapp_id, CELL_B);
    assert_int_equal(address.stream_cellapp, CELL_B);
    assert_int_equal(address.stream_incarnation, K);
    assert_int_equal(address.lost_since_us, 0);
    assert_int_equal(message(&address, &cl, CELL_B, K, 1), CELL_ADDRESS_DELIVER);
    /* An older incarnation is still refused, a later one still taken. */
    assert_false(cell_address_take_over(&address, CELL_C, K - 1));
    assert_false(cell_address_take_over(&address, CELL_B, K));
    assert_true(cell_address_take_over(&address, CELL_C, K + 1));
    assert_int_equal(address.cellapp_id, CELL_C);
    cell_address_clear(&address);
}

/* Nothing known: lost from now (kept across checks); a CellAddress of a
 * later incarnation from a live cellapp ends it and its messages flow. */
static void test_lost_then_found(void **state) {
    cell_address address;
    client cl = {0};
    liveness live = {up_set(CELL_A, CELL_B, 0), 0};
    cell_address_init(&address, CELL_A, K);
    assert_int_equal(message(&address, &cl, CELL_A, K, 1), CELL_ADDRESS_DELIVER);
    live.up = up_set(CELL_B, 0, 0);
    assert_true(cell_address_check(&address, is_up, &live, 5000));
    assert_int_equal(address.lost_since_us, 5000);
    assert_true(cell_address_check(&address, is_up, &live, 9000));
    assert_int_equal(address.lost_since_us, 5000); /* since the first time */
    assert_int_equal(address.stream_incarnation, K);
    /* An address no later than the stream does not end it. */
    assert_false(cell_address_on_address(&address, CELL_B, K));
    assert_int_equal(address.lost_since_us, 5000);

    /* The real was taken back on B as K+1. */
    assert_true(cell_address_on_address(&address, CELL_B, K + 1));
    assert_int_equal(address.lost_since_us, 0);
    assert_int_equal(address.stream_incarnation, K + 1);
    assert_int_equal(address.stream_cellapp, CELL_B);
    assert_int_equal(address.cellapp_id, CELL_B);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 2), CELL_ADDRESS_DELIVER);
    assert_int_equal(message(&address, &cl, CELL_A, K, 99), CELL_ADDRESS_STALE);
    assert_false(cell_address_check(&address, is_up, &live, 10000));
    assert_int_equal(address.lost_since_us, 0);
    const int expected[] = {1, 2};
    assert_got(&cl, expected, 2);
    cell_address_clear(&address);
}

/* Lost, with the new real's messages arriving before its CellAddress: held,
 * and released when the address ends the loss. */
static void test_lost_messages_before_address(void **state) {
    cell_address address;
    client cl = {0};
    liveness live = {up_set(CELL_B, 0, 0), 0};
    cell_address_init(&address, CELL_A, K);
    assert_true(cell_address_check(&address, is_up, &live, 77));
    assert_int_equal(address.lost_since_us, 77);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 2), CELL_ADDRESS_HELD);
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 3), CELL_ADDRESS_HELD);
    assert_int_equal(release(&address, &cl), 0);
    assert_true(cell_address_on_address(&address, CELL_B, K + 1));
    assert_int_equal(address.lost_since_us, 0);
    assert_int_equal(release(&address, &cl), 2);
    const int expected[] = {2, 3};
    assert_got(&cl, expected, 2);
    assert_int_equal(address.held_count, 0);
    cell_address_clear(&address);
}

/* Lost at time 0 still reads as lost. */
static void test_lost_at_time_zero(void **state) {
    cell_address address;
    liveness live = {0, 0};
    cell_address_init(&address, CELL_A, K);
    assert_true(cell_address_check(&address, is_up, &live, 0));
    assert_int_not_equal(address.lost_since_us, 0);
    cell_address_clear(&address);
}

/* The stream's cellapp is up, but the address is a later incarnation on a
 * dead cellapp: lost (the stream will hand over to a real that is gone). */
static void test_address_dead_stream_alive(void **state) {
    cell_address address;
    client cl = {0};
    liveness live = {up_set(CELL_A, CELL_B, 0), 0};
    cell_address_init(&address, CELL_A, K);
    assert_true(cell_address_on_address(&address, CELL_B, K + 1));
    assert_false(cell_address_check(&address, is_up, &live, 10));
    live.up = up_set(CELL_A, 0, 0);
    assert_true(cell_address_check(&address, is_up, &live, 20));
    assert_int_equal(address.lost_since_us, 20);
    /* The stream itself still flows meanwhile. */
    assert_int_equal(address.stream_cellapp, CELL_A);
    assert_int_equal(message(&address, &cl, CELL_A, K, 1), CELL_ADDRESS_DELIVER);
    /* A takes the real back as K+2: found, and its stream is the client's. */
    assert_true(cell_address_on_address(&address, CELL_A, K + 2));
    assert_int_equal(address.lost_since_us, 0);
    assert_int_equal(address.stream_incarnation, K + 2);
    assert_int_equal(address.stream_cellapp, CELL_A);
    assert_false(cell_address_check(&address, is_up, &live, 30));
    assert_int_equal(message(&address, &cl, CELL_A, K + 2, 2), CELL_ADDRESS_DELIVER);
    assert_int_equal(message(&address, &cl, CELL_A, K, 98), CELL_ADDRESS_STALE);
    const int expected[] = {1, 2};
    assert_got(&cl, expected, 2);

    /* The address's cellapp dead but the address no later than the stream:
     * not lost. */
    cell_address other;
    cell_address_init(&other, CELL_A, K);
    live.up = up_set(CELL_A, 0, 0);
    assert_false(cell_address_check(&other, is_up, &live, 40));
    assert_false(cell_address_on_address(&other, CELL_B, K));
    assert_false(cell_address_check(&other, is_up, &live, 40));
    cell_address_clear(&other);
    cell_address_clear(&address);
}

/* The stream's cellapp died with only an address (no held messages) of a
 * later incarnation on a live cellapp: the stream moves there. */
static void test_check_moves_to_address(void **state) {
    cell_address address;
    client cl = {0};
    liveness live = {up_set(CELL_B, CELL_C, 0), 0};
    cell_address_init(&address, CELL_A, K);
    assert_true(cell_address_on_address(&address, CELL_C, K + 2));
    assert_int_equal(message(&address, &cl, CELL_B, K + 1, 3), CELL_ADDRESS_HELD);
    /* The earliest later incarnation wins: B's (held) over C's (address). */
    assert_false(cell_address_check(&address, is_up, &live, 1));
    assert_int_equal(address.stream_incarnation, K + 1);
    assert_int_equal(address.stream_cellapp, CELL_B);
    assert_int_equal(release(&address, &cl), 1);
    /* B dies too: on to the address. */
    live.up = up_set(CELL_C, 0, 0);
    assert_false(cell_address_check(&address, is_up, &live, 2));
    assert_int_equal(address.stream_incarnation, K + 2);
    assert_int_equal(address.stream_cellapp, CELL_C);
    assert_int_equal(message(&address, &cl, CELL_C, K + 2, 5), CELL_ADDRESS_DELIVER);
    const int expected[] = {3, 5};
    assert_got(&cl, expected, 2);
    cell_address_clear(&address);
}

/* A handoff naming no cellapp (0): the stream has nowhere to go. */
static void test_handoff_to_nobody(void **state) {
    cell_address address;
    liveness live = {up_set(CELL_A, 0, 0), 0};
    cell_address_init(&address, CELL_A, K);
    assert_true(cell_address_on_handoff(&address, CELL_A, K, 0));
    assert_true(cell_address_check(&address, is_up, &live, 3));
    assert_int_equal(address.lost_since_us, 3);
    cell_address_clear(&address);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_stream_deliver_and_stale),
        cmocka_unit_test(test_handoff_from_other_cellapp_is_stale),
        cmocka_unit_test(test_held_until_handoff),
        cmocka_unit_test(test_later_handoff_held),
        cmocka_unit_test(test_on_address_keeps_highest),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_clear_frees_held),
        cmocka_unit_test(test_three_reals_every_interleaving),
        cmocka_unit_test(test_three_runs_without_addresses),
        cmocka_unit_test(test_check_moves_to_held),
        cmocka_unit_test(test_check_skips_dead_incarnations),
        cmocka_unit_test(test_lost_then_found),
        cmocka_unit_test(test_lost_messages_before_address),
        cmocka_unit_test(test_lost_at_time_zero),
        cmocka_unit_test(test_address_dead_stream_alive),
        cmocka_unit_test(test_check_moves_to_address),
        cmocka_unit_test(test_handoff_to_nobody),
        cmocka_unit_test(test_take_over_after_death),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
