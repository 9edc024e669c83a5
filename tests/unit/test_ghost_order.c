/* test_ghost_order.c -- the order in which a cellapp applies what successive
 * reals of one entity send it (cellapp/ghost_order.h). The central test, in
 * the style of BigWorld's buffered-ghost-message test: reals A, B and C of
 * one entity each send the receiver an ordered run of messages, the runs
 * interleave in every possible way, and every arrival order must apply the
 * same messages in the same order (A's, then B's, then C's) and end in the
 * same books, with nothing held and no payload leaked. Then: stale messages
 * and tombstones, a CREATE held behind the previous real's DELETE, dead
 * cellapps (a jump to a held later incarnation, or LOST), expiry of holds
 * and tombstones, set_real / set_ghost / forget, and peer_down's output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ghost_order.h"

#define ENTITY 7u
#define OTHER_ENTITY 8u
#define CELL_A 10u /* incarnation 1 */
#define CELL_B 20u /* incarnation 2 */
#define CELL_C 30u /* incarnation 3 */
#define SELF 99u   /* the receiver R */

enum { MAX_RECORDED = 64, MAX_RUNS = 4, MAX_MESSAGES = 16 };

/* One message as a real sends it. Payload ids are incarnation * 100 + n,
 * so a message handed back by ghost_order_next can be checked against its
 * payload. */
typedef struct msg_spec {
    ghost_order_kind kind;
    uint64_t sender;
    uint32_t incarnation;
    uint64_t next_owner;
    int id;
} msg_spec;

/* The caller around one ghost_order: applies what it is told to (recording
 * the payload id), frees applied and stale payloads itself, and counts what
 * the order frees through the callback. */
typedef struct harness {
    ghost_order *order;
    int allocated, freed_by_order, freed_by_caller;
    int applied[MAX_RECORDED];
    size_t applied_count;
    int stale[MAX_RECORDED];
    size_t stale_count;
    int dropped[MAX_RECORDED]; /* freed by the order */
    size_t dropped_count;
    int lost;
} harness;

static void count_free(void *payload, void *context) {
    harness *h = context;
    assert_non_null(payload);
    if (h->dropped_count < MAX_RECORDED) h->dropped[h->dropped_count++] = *(int *)payload;
    h->freed_by_order++;
    free(payload);
}

static void harness_init(harness *h) {
    memset(h, 0, sizeof *h);
    h->order = ghost_order_create(count_free, h);
    assert_non_null(h->order);
}

/* Frees the order (and what it still holds): every payload ever made has
 * been freed exactly once, by the caller or by the order. */
static void harness_finish(harness *h) {
    ghost_order_free(h->order);
    h->order = NULL;
    assert_int_equal(h->allocated, h->freed_by_order + h->freed_by_caller);
}

static void harness_apply(harness *h, void *payload) {
    assert_non_null(payload);
    assert_true(h->applied_count < MAX_RECORDED);
    h->applied[h->applied_count++] = *(int *)payload;
    h->freed_by_caller++;
    free(payload);
}

/* Offers one message without draining: applies it if told to, frees it if
 * stale, leaves it to the order if held. */
static ghost_order_verdict harness_offer(harness *h, uint64_t entity, const msg_spec *spec, uint64_t now_us) {
    int *payload = malloc(sizeof *payload);
    assert_non_null(payload);
    *payload = spec->id;
    h->allocated++;
    ghost_order_message message = {
        .kind = spec->kind,
        .sender = spec->sender,
        .incarnation = spec->incarnation,
        .next_owner = spec->next_owner,
        .payload = payload,
    };
    ghost_order_verdict verdict = ghost_order_offer(h->order, entity, &message, now_us);
    if (verdict == GHOST_ORDER_APPLY) {
        harness_apply(h, payload);
    } else if (verdict == GHOST_ORDER_STALE) {
        assert_true(h->stale_count < MAX_RECORDED);
        h->stale[h->stale_count++] = spec->id;
        h->freed_by_caller++;
        free(payload);
    } else {
        assert_int_equal(verdict, GHOST_ORDER_HOLD);
    }
    return verdict;
}

/* Calls ghost_order_next until NONE, applying every READY message. Returns
 * how many were READY. */
static size_t harness_drain(harness *h, uint64_t entity) {
    size_t ready = 0;
    for (int guard = 0;; guard++) {
        assert_true(guard < 1000);
        ghost_order_message out;
        memset(&out, 0, sizeof out);
        ghost_order_event event = ghost_order_next(h->order, entity, &out);
        if (event == GHOST_ORDER_NONE) return ready;
        if (event == GHOST_ORDER_LOST) {
            h->lost++;
            continue;
        }
        assert_int_equal(event, GHOST_ORDER_READY);
        assert_non_null(out.payload);
        assert_int_equal(out.incarnation, (uint32_t)(*(int *)out.payload / 100));
        harness_apply(h, out.payload);
        ready++;
    }
}

/* Offers a message the way the caller does: offer, then drain. */
static ghost_order_verdict deliver(harness *h, uint64_t entity, ghost_order_kind kind, uint64_t sender,
                                   uint32_t incarnation, uint64_t next_owner, int id, uint64_t now_us) {
    msg_spec spec = {kind, sender, incarnation, next_owner, id};
    ghost_order_verdict verdict = harness_offer(h, entity, &spec, now_us);
    harness_drain(h, entity);
    return verdict;
}

static void assert_books(const harness *h, uint64_t entity, uint32_t incarnation, uint64_t owner) {
    uint32_t got_incarnation = 0;
    uint64_t got_owner = 0;
    assert_true(ghost_order_lookup(h->order, entity, &got_incarnation, &got_owner));
    assert_int_equal(got_incarnation, incarnation);
    assert_int_equal(got_owner, owner);
}

static void assert_no_books(const harness *h, uint64_t entity) {
    assert_false(ghost_order_lookup(h->order, entity, NULL, NULL));
}

/* ---- every interleaving of the reals' runs -------------------------------- */

typedef struct run {
    const msg_spec *messages;
    size_t count;
} run;

#define RUN(array) \
    { (array), sizeof(array) / sizeof((array)[0]) }

/* Real A on cellapp 10 makes the ghost and moves to B. */
static const msg_spec run_a[] = {
    {GHOST_ORDER_CREATE, CELL_A, 1, 0, 101},
    {GHOST_ORDER_UPDATE, CELL_A, 1, 0, 102},
    {GHOST_ORDER_UPDATE, CELL_A, 1, 0, 103},
    {GHOST_ORDER_SET_REAL, CELL_A, 1, CELL_B, 104},
};
/* Real B on cellapp 20 moves to C ... */
static const msg_spec run_b[] = {
    {GHOST_ORDER_UPDATE, CELL_B, 2, 0, 201},
    {GHOST_ORDER_UPDATE, CELL_B, 2, 0, 202},
    {GHOST_ORDER_SET_REAL, CELL_B, 2, CELL_C, 203},
};
/* ... or to the receiver itself (R is the offload's destination). */
static const msg_spec run_b_offload[] = {
    {GHOST_ORDER_UPDATE, CELL_B, 2, 0, 201},
    {GHOST_ORDER_UPDATE, CELL_B, 2, 0, 202},
    {GHOST_ORDER_OFFLOAD, CELL_B, 2, SELF, 203},
};
static const msg_spec run_c[] = {
    {GHOST_ORDER_UPDATE, CELL_C, 3, 0, 301},
    {GHOST_ORDER_UPDATE, CELL_C, 3, 0, 302},
};
static const msg_spec run_c_delete[] = {
    {GHOST_ORDER_UPDATE, CELL_C, 3, 0, 301},
    {GHOST_ORDER_UPDATE, CELL_C, 3, 0, 302},
    {GHOST_ORDER_DELETE, CELL_C, 3, 0, 303},
};

typedef void (*visit_fn)(const msg_spec *const *sequence, size_t length, void *context);

typedef struct interleaving {
    const run *runs;
    size_t run_count;
    size_t next[MAX_RUNS];
    const msg_spec *sequence[MAX_MESSAGES];
    size_t length, total;
    visit_fn visit;
    void *context;
    size_t visited;
} interleaving;

/* Extends the sequence by the next message of each run that has one, in
 * turn: every run keeps its own order, and every merge is visited once. */
static void interleave(interleaving *it) {
    if (it->length == it->total) {
        it->visit(it->sequence, it->length, it->context);
        it->visited++;
        return;
    }
    for (size_t r = 0; r < it->run_count; r++) {
        if (it->next[r] == it->runs[r].count) continue;
        it->sequence[it->length++] = &it->runs[r].messages[it->next[r]++];
        interleave(it);
        it->next[r]--;
        it->length--;
    }
}

static size_t for_each_interleaving(const run *runs, size_t run_count, visit_fn visit, void *context) {
    assert_true(run_count <= MAX_RUNS);
    interleaving it;
    memset(&it, 0, sizeof it);
    it.runs = runs;
    it.run_count = run_count;
    for (size_t r = 0; r < run_count; r++) it.total += runs[r].count;
    assert_true(it.total <= MAX_MESSAGES);
    it.visit = visit;
    it.context = context;
    interleave(&it);
    return it.visited;
}

/* (sum of counts)! / product of count! */
static size_t multinomial(const run *runs, size_t run_count) {
    size_t result = 1, n = 0;
    for (size_t r = 0; r < run_count; r++)
        for (size_t k = 1; k <= runs[r].count; k++) {
            n++;
            result = result * n / k; /* exact: a product of binomials */
        }
    return result;
}

static void describe(char *buffer, size_t size, const int *ids, size_t count) {
    size_t used = 0;
    buffer[0] = '\0';
    for (size_t i = 0; i < count && used + 1 < size; i++) {
        int written = snprintf(buffer + used, size - used, "%s%d", i ? " " : "", ids[i]);
        if (written < 0) break;
        used += (size_t)written;
    }
}

typedef struct chain_case {
    const run *runs;
    size_t run_count;
    bool present; /* what lookup says at the end */
    uint32_t incarnation;
    uint64_t owner;
    bool drain_always; /* drain after every offer, not only after an APPLY */
    /* The last run ends in an OFFLOAD to the receiver, which carries the
     * whole entity: arriving when nothing is known of it, it applies at
     * once and everything older is stale (the applied list is then the
     * offload alone). Otherwise the order is the runs' order. */
    int offload_id;
} chain_case;

static void check_chain(const msg_spec *const *sequence, size_t length, void *context) {
    const chain_case *c = context;
    harness h;
    harness_init(&h);
    uint64_t now = 0;
    for (size_t i = 0; i < length; i++) {
        now += 10;
        ghost_order_verdict verdict = harness_offer(&h, ENTITY, sequence[i], now);
        if (verdict == GHOST_ORDER_APPLY || c->drain_always) harness_drain(&h, ENTITY);
    }

    int expected[MAX_MESSAGES];
    size_t expected_count = 0;
    for (size_t r = 0; r < c->run_count; r++)
        for (size_t i = 0; i < c->runs[r].count; i++) expected[expected_count++] = c->runs[r].messages[i].id;
    bool same = h.applied_count == expected_count;
    for (size_t i = 0; same && i < expected_count; i++) same = h.applied[i] == expected[i];
    bool offload_first = c->offload_id && h.applied_count == 1 && h.applied[0] == c->offload_id;
    if (!same && !offload_first) {
        int arrival[MAX_MESSAGES];
        for (size_t i = 0; i < length; i++) arrival[i] = sequence[i]->id;
        char arrived[256], applied[256];
        describe(arrived, sizeof arrived, arrival, length);
        describe(applied, sizeof applied, h.applied, h.applied_count);
        fail_msg("arrival order [%s] applied [%s]", arrived, applied);
    }
    size_t stale = offload_first ? expected_count - 1 : 0;
    assert_int_equal(h.lost, 0);

    uint32_t incarnation = 0;
    uint64_t owner = 0;
    assert_int_equal(ghost_order_lookup(h.order, ENTITY, &incarnation, &owner), c->present);
    if (c->present) {
        assert_int_equal(incarnation, c->incarnation);
        assert_int_equal(owner, c->owner);
    }
    assert_int_equal(ghost_order_held_count(h.order), 0);

    ghost_order_stats stats;
    ghost_order_get_stats(h.order, &stats);
    assert_int_equal(stats.applied, h.applied_count);
    assert_int_equal(stats.stale, stale);
    /* Everything held came back, applied or found stale. */
    assert_int_equal(stats.held, stats.replayed + (stats.stale - (size_t)h.stale_count));
    assert_int_equal(stats.expired, 0);
    assert_int_equal(stats.lost, 0);

    harness_finish(&h);
    assert_int_equal(h.freed_by_caller + h.freed_by_order, (int)expected_count);
    assert_int_equal(h.allocated, h.freed_by_order + h.freed_by_caller);
}

static void run_chain_case(chain_case *c, size_t expected_interleavings) {
    assert_int_equal(multinomial(c->runs, c->run_count), expected_interleavings);
    for (int mode = 0; mode < 2; mode++) {
        c->drain_always = mode == 1;
        assert_int_equal(for_each_interleaving(c->runs, c->run_count, check_chain, c), expected_interleavings);
    }
}

static void test_two_reals_every_order(void **state) {
    (void)state;
    const run runs[] = {RUN(run_a), RUN(run_b)};
    chain_case c = {.runs = runs, .run_count = 2, .present = true, .incarnation = 3, .owner = CELL_C};
    run_chain_case(&c, 35); /* 7! / (4! 3!) */
}

static void test_three_reals_every_order(void **state) {
    (void)state;
    const run runs[] = {RUN(run_a), RUN(run_b), RUN(run_c)};
    chain_case c = {.runs = runs, .run_count = 3, .present = true, .incarnation = 3, .owner = CELL_C};
    run_chain_case(&c, 1260); /* 9! / (4! 3! 2!) */
}

static void test_three_reals_ending_in_delete_every_order(void **state) {
    (void)state;
    const run runs[] = {RUN(run_a), RUN(run_b), RUN(run_c_delete)};
    chain_case c = {.runs = runs, .run_count = 3, .present = false};
    run_chain_case(&c, 4200); /* 10! / (4! 3! 3!) */
}

/* R is the destination of B's offload: R becomes the real, incarnation 3,
 * whatever the order (the offload alone suffices when it comes first). */
static void test_offload_destination_every_order(void **state) {
    (void)state;
    const run runs[] = {RUN(run_a), RUN(run_b_offload)};
    chain_case c = {.runs = runs, .run_count = 2, .present = true, .incarnation = 3, .owner = SELF, .offload_id = 203};
    run_chain_case(&c, 35);
}

/* Sanity of the enumeration itself: each interleaving keeps every run's
 * order and holds every message once. */
static void check_interleaving_shape(const msg_spec *const *sequence, size_t length, void *context) {
    size_t *seen = context;
    int last_per_incarnation[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < length; i++) {
        uint32_t k = sequence[i]->incarnation;
        assert_true(k >= 1 && k <= 3);
        assert_true(sequence[i]->id > last_per_incarnation[k]);
        last_per_incarnation[k] = sequence[i]->id;
    }
    (*seen)++;
}

static void test_interleavings_are_merges(void **state) {
    (void)state;
    const run runs[] = {RUN(run_a), RUN(run_b), RUN(run_c)};
    size_t seen = 0;
    assert_int_equal(for_each_interleaving(runs, 3, check_interleaving_shape, &seen), 1260);
    assert_int_equal(seen, 1260);
}

/* ---- stale messages and tombstones ---------------------------------------- */

static void test_stale_after_move(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10), GHOST_ORDER_APPLY);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_SET_REAL, CELL_A, 1, CELL_B, 102, 20), GHOST_ORDER_APPLY);
    assert_books(&h, ENTITY, 2, CELL_B);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 201, 30), GHOST_ORDER_APPLY);
    /* A straggler from the old real. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_A, 1, 0, 103, 40), GHOST_ORDER_STALE);
    assert_books(&h, ENTITY, 2, CELL_B);
    assert_int_equal(h.stale_count, 1);
    assert_int_equal(h.stale[0], 103);
    ghost_order_stats stats;
    ghost_order_get_stats(h.order, &stats);
    assert_int_equal(stats.stale, 1);
    assert_int_equal(stats.applied, 3);
    assert_int_equal(ghost_order_held_count(h.order), 0);
    harness_finish(&h);
    assert_int_equal(h.freed_by_order, 0);
}

static void test_late_create_after_delete_is_stale(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    deliver(&h, ENTITY, GHOST_ORDER_SET_REAL, CELL_A, 1, CELL_B, 102, 20);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_DELETE, CELL_B, 2, 0, 201, 30), GHOST_ORDER_APPLY);
    assert_no_books(&h, ENTITY);
    /* A former real's late CREATE cannot raise a ghost nobody would delete. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 103, 40), GHOST_ORDER_STALE);
    /* Nor can more of the deleted incarnation. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 202, 50), GHOST_ORDER_STALE);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_SET_REAL, CELL_B, 2, CELL_C, 203, 60), GHOST_ORDER_STALE);
    assert_no_books(&h, ENTITY);
    assert_int_equal(ghost_order_held_count(h.order), 0);
    /* A later incarnation's non-CREATE waits for its CREATE. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_C, 3, 0, 302, 70), GHOST_ORDER_HOLD);
    assert_int_equal(ghost_order_held_count(h.order), 1);
    harness_finish(&h);
    assert_int_equal(h.freed_by_order, 1); /* the held UPDATE, by ghost_order_free */
    assert_int_equal(h.dropped[0], 302);
}

static void test_recreate_same_incarnation_applies(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_DELETE, CELL_A, 1, 0, 102, 20), GHOST_ORDER_APPLY);
    assert_no_books(&h, ENTITY);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_A, 1, 0, 103, 25), GHOST_ORDER_STALE);
    /* The same real comes back within ghost distance: a new ghost. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 104, 30), GHOST_ORDER_APPLY);
    assert_books(&h, ENTITY, 1, CELL_A);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_A, 1, 0, 105, 40), GHOST_ORDER_APPLY);
    assert_int_equal(h.applied_count, 4);
    harness_finish(&h);
}

/* B's CREATE(2) overtakes A's DELETE(1) (A dropped its ghost here, then
 * moved to B, which made a new one). */
static void test_create_held_behind_delete(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_B, 2, 0, 201, 20), GHOST_ORDER_HOLD);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 202, 30), GHOST_ORDER_HOLD);
    assert_books(&h, ENTITY, 1, CELL_A);
    assert_int_equal(ghost_order_held_count(h.order), 2);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_A, 1, 0, 102, 35), GHOST_ORDER_APPLY);

    msg_spec delete_1 = {GHOST_ORDER_DELETE, CELL_A, 1, 0, 103};
    assert_int_equal(harness_offer(&h, ENTITY, &delete_1, 40), GHOST_ORDER_APPLY);
    assert_no_books(&h, ENTITY);
    assert_int_equal(harness_drain(&h, ENTITY), 2);
    assert_books(&h, ENTITY, 2, CELL_B);
    assert_int_equal(ghost_order_held_count(h.order), 0);
    const int expected[] = {101, 102, 103, 201, 202};
    assert_int_equal(h.applied_count, 5);
    assert_memory_equal(h.applied, expected, sizeof expected);
    ghost_order_stats stats;
    ghost_order_get_stats(h.order, &stats);
    assert_int_equal(stats.held, 2);
    assert_int_equal(stats.replayed, 2);
    harness_finish(&h);
    assert_int_equal(h.freed_by_order, 0);
}

/* The same, in the other order: the tombstone of 1 lets CREATE(2) apply. */
static void test_create_after_delete_of_earlier(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    deliver(&h, ENTITY, GHOST_ORDER_DELETE, CELL_A, 1, 0, 102, 20);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_B, 2, 0, 201, 30), GHOST_ORDER_APPLY);
    assert_books(&h, ENTITY, 2, CELL_B);
    harness_finish(&h);
}

/* ---- dead cellapps ---------------------------------------------------------- */

static void test_peer_down_replays_held(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_A, 1, 0, 102, 20);
    /* B's first messages overtook A's SET_REAL, and then A died. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 201, 30), GHOST_ORDER_HOLD);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 202, 40), GHOST_ORDER_HOLD);
    /* Another entity, fed by C, is not A's concern. */
    deliver(&h, OTHER_ENTITY, GHOST_ORDER_CREATE, CELL_C, 1, 0, 111, 45);

    uint64_t changed[4] = {0, 0, 0, 0};
    assert_int_equal(ghost_order_peer_down(h.order, CELL_A, changed, 4), 1);
    assert_int_equal(changed[0], ENTITY);
    assert_int_equal(harness_drain(&h, ENTITY), 2);
    assert_int_equal(h.lost, 0);
    assert_books(&h, ENTITY, 2, CELL_B);
    assert_books(&h, OTHER_ENTITY, 1, CELL_C);
    const int expected[] = {101, 102, 111, 201, 202};
    assert_int_equal(h.applied_count, 5);
    assert_memory_equal(h.applied, expected, sizeof expected);
    assert_int_equal(ghost_order_held_count(h.order), 0);
    /* B goes on as usual; A's stragglers are stale. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 203, 50), GHOST_ORDER_APPLY);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_SET_REAL, CELL_A, 1, CELL_B, 103, 60), GHOST_ORDER_STALE);
    ghost_order_stats stats;
    ghost_order_get_stats(h.order, &stats);
    assert_int_equal(stats.lost, 0);
    assert_int_equal(stats.replayed, 2);
    harness_finish(&h);
    assert_int_equal(h.freed_by_order, 0);
}

static void test_peer_down_nothing_held_is_lost(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    uint64_t changed[4] = {0, 0, 0, 0};
    assert_int_equal(ghost_order_peer_down(h.order, CELL_A, changed, 4), 1);
    assert_int_equal(changed[0], ENTITY);

    ghost_order_message out;
    memset(&out, 0, sizeof out);
    assert_int_equal(ghost_order_next(h.order, ENTITY, &out), GHOST_ORDER_LOST);
    assert_int_equal(ghost_order_next(h.order, ENTITY, &out), GHOST_ORDER_NONE); /* once */
    assert_no_books(&h, ENTITY);
    ghost_order_stats stats;
    ghost_order_get_stats(h.order, &stats);
    assert_int_equal(stats.lost, 1);
    /* A second peer_down of the same cellapp finds nothing more. */
    assert_int_equal(ghost_order_peer_down(h.order, CELL_A, changed, 4), 0);
    assert_int_equal(ghost_order_held_count(h.order), 0);
    harness_finish(&h);
}

/* A cellapp declared dead whose reals will be restored: the copy it fed
 * stays, an orphan, until a later real's first create takes it over in
 * place; an update of that later real before its create waits. */
static void test_orphan_taken_over_by_later_create(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    uint64_t changed[4] = {0, 0, 0, 0};
    assert_int_equal(ghost_order_peer_orphans(h.order, CELL_A, changed, 4), 1);
    ghost_order_message out;
    memset(&out, 0, sizeof out);
    assert_int_equal(ghost_order_next(h.order, ENTITY, &out), GHOST_ORDER_NONE); /* not lost */
    assert_true(ghost_order_is_orphan(h.order, ENTITY));
    assert_books(&h, ENTITY, 1, CELL_A);
    /* The restored real (incarnation 3 on CELL_B): its update overtakes
     * its create and waits for it. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 3, 0, 301, 20), GHOST_ORDER_HOLD);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_B, 3, 0, 302, 30), GHOST_ORDER_APPLY);
    assert_books(&h, ENTITY, 3, CELL_B);
    assert_false(ghost_order_is_orphan(h.order, ENTITY));
    assert_int_equal(ghost_order_held_count(h.order), 0); /* the update was replayed */
    /* The dead real's late messages are stale. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_A, 1, 0, 102, 40), GHOST_ORDER_STALE);
    ghost_order_stats stats;
    ghost_order_get_stats(h.order, &stats);
    assert_int_equal(stats.lost, 0);
    harness_finish(&h);
}

/* An orphan restored here: the books hold the real. */
static void test_orphan_restored_here(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 2, 0, 201, 10);
    uint64_t changed[4] = {0, 0, 0, 0};
    assert_int_equal(ghost_order_peer_orphans(h.order, CELL_A, changed, 4), 1);
    ghost_order_set_real(h.order, ENTITY, 3, SELF);
    assert_false(ghost_order_is_orphan(h.order, ENTITY));
    assert_books(&h, ENTITY, 3, SELF);
    harness_finish(&h);
}

static void test_set_real_to_dead_cellapp_is_lost(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    uint64_t changed[4];
    assert_int_equal(ghost_order_peer_down(h.order, CELL_B, changed, 4), 0);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    assert_books(&h, ENTITY, 1, CELL_A);
    msg_spec set_real = {GHOST_ORDER_SET_REAL, CELL_A, 1, CELL_B, 102};
    assert_int_equal(harness_offer(&h, ENTITY, &set_real, 20), GHOST_ORDER_APPLY);
    assert_int_equal(harness_drain(&h, ENTITY), 0);
    assert_int_equal(h.lost, 1);
    assert_no_books(&h, ENTITY);
    harness_finish(&h);
}

static void test_set_real_to_dead_cellapp_jumps_to_held(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    uint64_t changed[4];
    assert_int_equal(ghost_order_peer_down(h.order, CELL_B, changed, 4), 0);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    /* The entity went on from the dead B (restored) to C, whose messages
     * are already here. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_C, 3, 0, 301, 20), GHOST_ORDER_HOLD);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_C, 3, 0, 302, 30), GHOST_ORDER_HOLD);
    msg_spec set_real = {GHOST_ORDER_SET_REAL, CELL_A, 1, CELL_B, 102};
    assert_int_equal(harness_offer(&h, ENTITY, &set_real, 40), GHOST_ORDER_APPLY);
    assert_int_equal(harness_drain(&h, ENTITY), 2);
    assert_int_equal(h.lost, 0);
    assert_books(&h, ENTITY, 3, CELL_C);
    const int expected[] = {101, 102, 301, 302};
    assert_int_equal(h.applied_count, 4);
    assert_memory_equal(h.applied, expected, sizeof expected);
    assert_int_equal(ghost_order_held_count(h.order), 0);
    harness_finish(&h);
}

/* Both A and B are dead: the copy moves past B's incarnation too. */
static void test_peer_down_skips_dead_incarnations(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 201, 20);
    deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_C, 3, 0, 301, 30);
    uint64_t changed[4];
    assert_int_equal(ghost_order_peer_down(h.order, CELL_B, changed, 4), 0); /* B fed nothing here yet */
    assert_int_equal(ghost_order_peer_down(h.order, CELL_A, changed, 4), 1);
    harness_drain(&h, ENTITY);
    assert_int_equal(h.lost, 0);
    assert_books(&h, ENTITY, 3, CELL_C);
    assert_int_equal(h.applied[h.applied_count - 1], 301);
    assert_int_equal(ghost_order_held_count(h.order), 0);
    harness_finish(&h);
}

/* peer_down reports every entity whose books changed, but writes at most
 * `cap` of them. */
static void test_peer_down_cap(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    deliver(&h, OTHER_ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 111, 10);
    deliver(&h, 9, GHOST_ORDER_CREATE, CELL_B, 1, 0, 121, 10);
    uint64_t changed[2] = {0, 12345};
    assert_int_equal(ghost_order_peer_down(h.order, CELL_A, changed, 1), 2);
    assert_true(changed[0] == ENTITY || changed[0] == OTHER_ENTITY);
    assert_int_equal(changed[1], 12345);
    /* The caller calls next for the ids it has; the rest are lost too. */
    harness_drain(&h, ENTITY);
    harness_drain(&h, OTHER_ENTITY);
    harness_drain(&h, 9);
    assert_int_equal(h.lost, 2);
    assert_no_books(&h, ENTITY);
    assert_no_books(&h, OTHER_ENTITY);
    assert_books(&h, 9, 1, CELL_B);
    harness_finish(&h);
}

/* ---- expiry ------------------------------------------------------------------ */

static void test_expire_drops_old_holds(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 0);
    /* C's messages wait for a chain (A's SET_REAL, then B's) that never comes. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_C, 3, 0, 301, 1000), GHOST_ORDER_HOLD);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_C, 3, 0, 302, 1500), GHOST_ORDER_HOLD);
    /* And an entity never created here waits for its CREATE. */
    assert_int_equal(deliver(&h, OTHER_ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 201, 1000), GHOST_ORDER_HOLD);
    assert_int_equal(ghost_order_held_count(h.order), 3);

    assert_int_equal(ghost_order_expire(h.order, 2000, 1000, 1000000), 0); /* exactly the limit: kept */
    assert_int_equal(ghost_order_expire(h.order, 2001, 1000, 1000000), 2);
    assert_int_equal(ghost_order_held_count(h.order), 1);
    assert_int_equal(h.freed_by_order, 2);
    assert_true((h.dropped[0] == 301 && h.dropped[1] == 201) || (h.dropped[0] == 201 && h.dropped[1] == 301));
    ghost_order_stats stats;
    ghost_order_get_stats(h.order, &stats);
    assert_int_equal(stats.expired, 2);
    assert_books(&h, ENTITY, 1, CELL_A);
    assert_no_books(&h, OTHER_ENTITY);
    assert_int_equal(harness_drain(&h, ENTITY), 0);

    assert_int_equal(ghost_order_expire(h.order, 10000, 1000, 1000000), 1);
    assert_int_equal(ghost_order_held_count(h.order), 0);
    assert_int_equal(h.dropped[2], 302);
    ghost_order_get_stats(h.order, &stats);
    assert_int_equal(stats.expired, 3);
    /* The copy here is untouched and still listens to A. */
    assert_books(&h, ENTITY, 1, CELL_A);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_A, 1, 0, 102, 10010), GHOST_ORDER_APPLY);
    /* The entity never created here is forgotten: its CREATE applies. */
    assert_int_equal(deliver(&h, OTHER_ENTITY, GHOST_ORDER_CREATE, CELL_B, 2, 0, 202, 10020), GHOST_ORDER_APPLY);
    assert_books(&h, OTHER_ENTITY, 2, CELL_B);
    harness_finish(&h);
    assert_int_equal(h.freed_by_order, 3);
}

/* A clock earlier than a hold's arrival, or than a tombstone's time (the
 * books keep the latest time any caller gave), makes nothing old. */
static void test_expire_with_earlier_clock(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 0);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_C, 3, 0, 301, 5000), GHOST_ORDER_HOLD);
    assert_int_equal(ghost_order_expire(h.order, 2000, 1000, 1000), 0);
    assert_int_equal(ghost_order_held_count(h.order), 1);

    /* Deleted at 1000 by the caller's clock, but the books say 5000. */
    deliver(&h, OTHER_ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 111, 500);
    deliver(&h, OTHER_ENTITY, GHOST_ORDER_SET_REAL, CELL_A, 1, CELL_B, 112, 600);
    deliver(&h, OTHER_ENTITY, GHOST_ORDER_DELETE, CELL_B, 2, 0, 211, 1000);
    assert_int_equal(ghost_order_expire(h.order, 2000, 1000, 500), 0);
    assert_int_equal(deliver(&h, OTHER_ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 113, 2000), GHOST_ORDER_STALE);
    assert_no_books(&h, OTHER_ENTITY);

    /* Once the clock is really past both, they go. */
    assert_int_equal(ghost_order_expire(h.order, 6001, 1000, 500), 1);
    assert_int_equal(ghost_order_held_count(h.order), 0);
    assert_int_equal(deliver(&h, OTHER_ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 114, 6001), GHOST_ORDER_APPLY);
    harness_finish(&h);
    assert_int_equal(h.freed_by_order, 1);
}

/* A tombstone outlives only `tombstone_us`: after that the order has
 * forgotten the entity, and a CREATE of an old incarnation that straggled
 * in later than that raises a ghost again. This is the intended forgetting
 * (the tombstone lifetime must exceed the longest a message can be late). */
static void test_expire_removes_old_tombstones(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 0);
    deliver(&h, ENTITY, GHOST_ORDER_SET_REAL, CELL_A, 1, CELL_B, 102, 50);
    deliver(&h, ENTITY, GHOST_ORDER_DELETE, CELL_B, 2, 0, 201, 100);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 103, 200), GHOST_ORDER_STALE);

    assert_int_equal(ghost_order_expire(h.order, 600, 10000, 500), 0); /* 500 old: kept */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 104, 600), GHOST_ORDER_STALE);
    assert_int_equal(ghost_order_expire(h.order, 601, 10000, 500), 0);
    assert_no_books(&h, ENTITY);
    /* Forgotten: the old incarnation's CREATE applies again. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 105, 700), GHOST_ORDER_APPLY);
    assert_books(&h, ENTITY, 1, CELL_A);
    ghost_order_stats stats;
    ghost_order_get_stats(h.order, &stats);
    assert_int_equal(stats.expired, 0); /* no message was dropped by expiry */
    harness_finish(&h);
    assert_int_equal(h.freed_by_order, 0);
}

/* ghost_order_free frees what is still held; a NULL callback is allowed. */
static void test_free_releases_holds(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 201, 10);
    deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 202, 20);
    deliver(&h, OTHER_ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 30);
    deliver(&h, OTHER_ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 203, 40);
    assert_int_equal(ghost_order_held_count(h.order), 3);
    harness_finish(&h);
    assert_int_equal(h.freed_by_order, 3);

    ghost_order *order = ghost_order_create(NULL, NULL);
    ghost_order_message update = {GHOST_ORDER_UPDATE, CELL_B, 2, 0, NULL};
    assert_int_equal(ghost_order_offer(order, ENTITY, &update, 0), GHOST_ORDER_HOLD);
    assert_int_equal(ghost_order_expire(order, 100, 10, 10), 1);
    assert_int_equal(ghost_order_offer(order, ENTITY, &update, 100), GHOST_ORDER_HOLD);
    ghost_order_free(order);
    ghost_order_free(NULL);
}

/* ---- set_real, set_ghost, forget -------------------------------------------- */

static void test_set_real_and_set_ghost(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    /* R created the real. */
    ghost_order_set_real(h.order, ENTITY, 1, SELF);
    assert_books(&h, ENTITY, 1, SELF);
    /* It offloads to B; B's messages may come before R notes the move. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 201, 10), GHOST_ORDER_HOLD);
    ghost_order_set_ghost(h.order, ENTITY, 2, CELL_B);
    assert_books(&h, ENTITY, 2, CELL_B);
    assert_int_equal(harness_drain(&h, ENTITY), 1);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 202, 20), GHOST_ORDER_APPLY);
    /* B dies before acknowledging: R takes the real back as incarnation 3. */
    ghost_order_set_real(h.order, ENTITY, 3, SELF);
    assert_books(&h, ENTITY, 3, SELF);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 203, 30), GHOST_ORDER_STALE);
    assert_books(&h, ENTITY, 3, SELF);
    /* set_ghost on an entity the order did not know. */
    ghost_order_set_ghost(h.order, OTHER_ENTITY, 4, CELL_C);
    assert_books(&h, OTHER_ENTITY, 4, CELL_C);
    assert_int_equal(deliver(&h, OTHER_ENTITY, GHOST_ORDER_UPDATE, CELL_C, 4, 0, 401, 40), GHOST_ORDER_APPLY);
    assert_int_equal(deliver(&h, OTHER_ENTITY, GHOST_ORDER_UPDATE, CELL_C, 3, 0, 301, 50), GHOST_ORDER_STALE);
    assert_int_equal(h.applied_count, 3);
    assert_int_equal(h.lost, 0);
    harness_finish(&h);
}

/* A real that left for a cellapp already gone: the ghost here is lost. */
static void test_set_ghost_of_dead_cellapp(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    uint64_t changed[4];
    assert_int_equal(ghost_order_peer_down(h.order, CELL_B, changed, 4), 0);
    ghost_order_set_real(h.order, ENTITY, 1, SELF);
    ghost_order_set_ghost(h.order, ENTITY, 2, CELL_B);
    harness_drain(&h, ENTITY);
    assert_int_equal(h.lost, 1);
    assert_no_books(&h, ENTITY);
    /* set_real afterwards brings the books back. */
    ghost_order_set_real(h.order, ENTITY, 3, SELF);
    assert_books(&h, ENTITY, 3, SELF);
    assert_int_equal(harness_drain(&h, ENTITY), 0);
    assert_int_equal(h.lost, 1);
    harness_finish(&h);
}

static void test_forget(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    ghost_order_forget(h.order, ENTITY, 0); /* unknown: nothing */
    assert_no_books(&h, ENTITY);

    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    ghost_order_forget(h.order, ENTITY, 20);
    assert_no_books(&h, ENTITY);
    /* A tombstone at incarnation 1. */
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_UPDATE, CELL_A, 1, 0, 102, 30), GHOST_ORDER_STALE);
    assert_int_equal(deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_B, 2, 0, 201, 40), GHOST_ORDER_APPLY);
    assert_books(&h, ENTITY, 2, CELL_B);

    /* What is held is kept. */
    deliver(&h, OTHER_ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 111, 50);
    assert_int_equal(deliver(&h, OTHER_ENTITY, GHOST_ORDER_CREATE, CELL_B, 2, 0, 211, 60), GHOST_ORDER_HOLD);
    assert_int_equal(deliver(&h, OTHER_ENTITY, GHOST_ORDER_UPDATE, CELL_B, 2, 0, 212, 70), GHOST_ORDER_HOLD);
    ghost_order_forget(h.order, OTHER_ENTITY, 80);
    assert_no_books(&h, OTHER_ENTITY);
    assert_int_equal(ghost_order_held_count(h.order), 2);
    assert_int_equal(harness_drain(&h, OTHER_ENTITY), 2);
    assert_books(&h, OTHER_ENTITY, 2, CELL_B);
    assert_int_equal(ghost_order_held_count(h.order), 0);

    const int expected[] = {101, 201, 111, 211, 212};
    assert_int_equal(h.applied_count, 5);
    assert_memory_equal(h.applied, expected, sizeof expected);
    harness_finish(&h);
    assert_int_equal(h.freed_by_order, 0);
}

/* forget clears a pending LOST: the caller has destroyed the copy already. */
static void test_forget_clears_lost(void **state) {
    (void)state;
    harness h;
    harness_init(&h);
    deliver(&h, ENTITY, GHOST_ORDER_CREATE, CELL_A, 1, 0, 101, 10);
    uint64_t changed[4];
    assert_int_equal(ghost_order_peer_down(h.order, CELL_A, changed, 4), 1);
    ghost_order_forget(h.order, ENTITY, 20);
    assert_int_equal(harness_drain(&h, ENTITY), 0);
    assert_int_equal(h.lost, 0);
    assert_no_books(&h, ENTITY);
    harness_finish(&h);
}

static void test_kind_names(void **state) {
    (void)state;
    assert_string_equal(ghost_order_kind_name(GHOST_ORDER_CREATE), "create");
    assert_string_equal(ghost_order_kind_name(GHOST_ORDER_UPDATE), "update");
    assert_string_equal(ghost_order_kind_name(GHOST_ORDER_DELETE), "delete");
    assert_string_equal(ghost_order_kind_name(GHOST_ORDER_SET_REAL), "set_real");
    assert_string_equal(ghost_order_kind_name(GHOST_ORDER_OFFLOAD), "offload");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_reals_every_order),
        cmocka_unit_test(test_three_reals_every_order),
        cmocka_unit_test(test_three_reals_ending_in_delete_every_order),
        cmocka_unit_test(test_offload_destination_every_order),
        cmocka_unit_test(test_interleavings_are_merges),
        cmocka_unit_test(test_stale_after_move),
        cmocka_unit_test(test_late_create_after_delete_is_stale),
        cmocka_unit_test(test_recreate_same_incarnation_applies),
        cmocka_unit_test(test_create_held_behind_delete),
        cmocka_unit_test(test_create_after_delete_of_earlier),
        cmocka_unit_test(test_peer_down_replays_held),
        cmocka_unit_test(test_peer_down_nothing_held_is_lost),
        cmocka_unit_test(test_orphan_taken_over_by_later_create),
        cmocka_unit_test(test_orphan_restored_here),
        cmocka_unit_test(test_set_real_to_dead_cellapp_is_lost),
        cmocka_unit_test(test_set_real_to_dead_cellapp_jumps_to_held),
        cmocka_unit_test(test_peer_down_skips_dead_incarnations),
        cmocka_unit_test(test_peer_down_cap),
        cmocka_unit_test(test_expire_drops_old_holds),
        cmocka_unit_test(test_expire_removes_old_tombstones),
        cmocka_unit_test(test_expire_with_earlier_clock),
        cmocka_unit_test(test_free_releases_holds),
        cmocka_unit_test(test_set_real_and_set_ghost),
        cmocka_unit_test(test_set_ghost_of_dead_cellapp),
        cmocka_unit_test(test_forget),
        cmocka_unit_test(test_forget_clears_lost),
        cmocka_unit_test(test_kind_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
