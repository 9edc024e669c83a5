/* test_witness_budget.c -- the per-client bandwidth scheduler: the budget
 * holds over time, enter/leave always go, nothing waits more than a second,
 * nearer and staler go first (the choice matching a sort-everything
 * oracle), and the choice is deterministic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "witness_budget.h"

#define HZ 10
#define MAX_ALIASES 256

static witness_budget_config config_with(uint32_t bytes_per_second, uint32_t tick_hz) {
    witness_budget_config config = {
        .bytes_per_second = bytes_per_second,
        .tick_hz = tick_hz,
        .max_aliases = MAX_ALIASES,
        .carry_max_bytes = 0,
        .near_distance = 10.0f,
        .far_distance = 100.0f,
    };
    return config;
}

/* A small deterministic generator (xorshift32), so runs repeat exactly. */
static uint32_t rng_next(uint32_t *state) {
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

static uint32_t rng_range(uint32_t *state, uint32_t low, uint32_t high) {
    return low + rng_next(state) % (high - low + 1);
}

static bool contains(const uint32_t *aliases, uint32_t count, uint32_t alias) {
    for (uint32_t i = 0; i < count; i++)
        if (aliases[i] == alias) return true;
    return false;
}

static void test_config_rejected(void **state) {
    (void)state;
    witness_budget_config config = config_with(1000, HZ);
    config.tick_hz = 0;
    assert_null(witness_budget_create(&config));
    config = config_with(1000, HZ);
    config.max_aliases = 0;
    assert_null(witness_budget_create(&config));
    config = config_with(1000, HZ);
    config.far_distance = config.near_distance;
    assert_null(witness_budget_create(&config));
    config = config_with(1000, HZ);
    config.near_distance = -1.0f;
    assert_null(witness_budget_create(&config));
    assert_null(witness_budget_create(NULL));
    witness_budget_free(NULL);
}

/* Every tick within near range, once a second at the far edge, linear in
 * between: 1 + floor((HZ - 1) * (d - near) / (far - near)). */
static void test_interval_curve(void **state) {
    (void)state;
    witness_budget_config config = config_with(1000, HZ);
    witness_budget *budget = witness_budget_create(&config);
    assert_int_equal(witness_budget_interval(budget, 0.0f), 1);
    assert_int_equal(witness_budget_interval(budget, 10.0f), 1);
    assert_int_equal(witness_budget_interval(budget, 20.0f), 2); /* 1 + floor(1.0) */
    assert_int_equal(witness_budget_interval(budget, 55.0f), 5); /* 1 + floor(4.5) */
    assert_int_equal(witness_budget_interval(budget, 99.0f), 9); /* 1 + floor(8.9) */
    assert_int_equal(witness_budget_interval(budget, 100.0f), HZ);
    assert_int_equal(witness_budget_interval(budget, 1e6f), HZ);
    for (int step = 0; step < 240; step++) {
        float d = (float)step * 0.5f; /* 0 to 119.5 m, as exact as a float counter was */
        assert_true(witness_budget_interval(budget, d) <= witness_budget_interval(budget, d + 0.5f));
    }
    witness_budget_free(budget);
}

/* With no budget at all, enter and leave records still all go, first, in
 * offer order, and become debt; the optional update waits. */
static void test_mandatory_with_zero_budget(void **state) {
    (void)state;
    witness_budget_config config = config_with(0, HZ);
    witness_budget *budget = witness_budget_create(&config);
    assert_int_equal(witness_budget_begin_tick(budget, 1), 0);
    assert_int_equal(witness_budget_offer(budget, 7, 3.0f, 30, false), 0);
    assert_int_equal(witness_budget_offer(budget, 4, 90.0f, 100, true), 0);
    assert_int_equal(witness_budget_offer(budget, 9, 1.0f, 5, false), 0);
    assert_int_equal(witness_budget_offer(budget, 2, 50.0f, 60, true), 0);
    uint32_t out[8], count = 99;
    assert_int_equal(witness_budget_select(budget, out, 8, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 2);
    witness_budget_stats stats;
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.debt, 160);
    assert_int_equal(stats.credit, 0);
    assert_int_equal(stats.mandatory_count, 2);
    assert_int_equal(stats.mandatory_bytes, 160);
    assert_int_equal(stats.skipped_count, 2);

    /* Next tick too: more debt, never a dropped record. */
    assert_int_equal(witness_budget_begin_tick(budget, 2), 0);
    assert_int_equal(witness_budget_offer(budget, 4, 90.0f, 10, true), 0);
    assert_int_equal(witness_budget_select(budget, out, 8, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(out[0], 4);
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.debt, 170);
    witness_budget_free(budget);
}

/* 50 entities at random distances, all entering at tick 0, offered every
 * tick for a minute with a budget well above the once-a-second floor but
 * below demand: what is sent stays within the budget, plus the mandatory
 * bytes, plus one tick's slack. */
static void test_budget_respected_over_time(void **state) {
    (void)state;
    const uint32_t per_second = 2000, entities = 50, seconds = 60;
    witness_budget_config config = config_with(per_second, HZ);
    witness_budget *budget = witness_budget_create(&config);
    uint32_t rng = 12345;
    float distance[50];
    uint32_t out[64], count;
    uint64_t sent_bytes = 0, mandatory_bytes = 0;
    for (uint32_t tick = 0; tick < seconds * HZ; tick++) {
        assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
        uint32_t bytes[50];
        for (uint32_t e = 0; e < entities; e++) {
            if (tick == 0) distance[e] = (float)rng_range(&rng, 0, 110);
            bytes[e] = tick == 0 ? 60 : rng_range(&rng, 5, 25);
            assert_int_equal(witness_budget_offer(budget, e, distance[e], bytes[e], tick == 0), 0);
        }
        assert_int_equal(witness_budget_select(budget, out, 64, &count), 0);
        for (uint32_t i = 0; i < count; i++) {
            sent_bytes += bytes[out[i]];
            if (tick == 0) mandatory_bytes += bytes[out[i]];
        }
    }
    witness_budget_stats stats;
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.bytes_spent, sent_bytes);
    assert_int_equal(stats.mandatory_bytes, mandatory_bytes);
    assert_int_equal(mandatory_bytes, entities * 60);
    assert_true(sent_bytes <= (uint64_t)per_second * seconds + mandatory_bytes + per_second / HZ);
    /* And the budget is used, not hoarded: demand is far above it. */
    assert_true(sent_bytes >= (uint64_t)per_second * seconds * 9 / 10);
    assert_int_equal(stats.debt, 0);
    witness_budget_free(budget);
}

/* 200 entities in view, moving, each with an update every tick; some leave
 * and come back (mandatory leave and enter records). Whatever the budget,
 * from none to a tight one, no entity in view goes more than HZ ticks
 * between two sends, and under a tight budget that bound is reached. */
static void test_starvation_bound_randomized(void **state) {
    (void)state;
    enum { N = 200, TICKS = 1000 };
    const uint32_t budgets[] = {0, 1000, 4000, 8000};
    for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        witness_budget_config config = config_with(budgets[b], HZ);
        witness_budget *budget = witness_budget_create(&config);
        uint32_t rng = 777 + (uint32_t)b;
        float distance[N];
        bool in_view[N], leaving[N];
        uint64_t last_sent[N], max_gap = 0;
        uint32_t out[N], count;
        for (uint32_t e = 0; e < N; e++) {
            distance[e] = (float)rng_range(&rng, 0, 120);
            in_view[e] = false;
        }
        for (uint64_t tick = 0; tick < TICKS; tick++) {
            assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
            for (uint32_t e = 0; e < N; e++) {
                leaving[e] = false;
                bool entering = false;
                if (!in_view[e]) {
                    /* Everyone enters at tick 0; a left entity comes back with 5 %. */
                    if (tick != 0 && rng_range(&rng, 0, 99) >= 5) continue;
                    entering = true;
                } else if (rng_range(&rng, 0, 999) < 3) {
                    leaving[e] = true;
                }
                float step = (float)rng_range(&rng, 0, 40) / 10.0f - 2.0f;
                distance[e] += step;
                if (distance[e] < 0) distance[e] = 0;
                if (distance[e] > 120) distance[e] = 120;
                bool mandatory = entering || leaving[e];
                uint32_t bytes = mandatory ? rng_range(&rng, 40, 80) : rng_range(&rng, 6, 30);
                assert_int_equal(witness_budget_offer(budget, e, distance[e], bytes, mandatory), 0);
                if (entering) {
                    in_view[e] = true;
                    last_sent[e] = UINT64_MAX; /* no send since entering yet */
                }
            }
            assert_int_equal(witness_budget_select(budget, out, N, &count), 0);
            for (uint32_t i = 0; i < count; i++) {
                uint32_t e = out[i];
                if (last_sent[e] != UINT64_MAX && tick - last_sent[e] > max_gap) max_gap = tick - last_sent[e];
                last_sent[e] = tick;
            }
            for (uint32_t e = 0; e < N; e++) {
                if (!in_view[e]) continue;
                /* Enter went this tick, or the last send is at most HZ-1 ticks
                 * ago: the next gap cannot exceed HZ. */
                assert_true(last_sent[e] != UINT64_MAX);
                assert_true(tick - last_sent[e] <= HZ - 1);
                if (leaving[e]) {
                    assert_true(last_sent[e] == tick); /* the leave record went */
                    witness_budget_forget(budget, e);
                    in_view[e] = false;
                }
            }
        }
        assert_true(max_gap <= HZ);
        if (budgets[b] <= 4000) assert_int_equal(max_gap, HZ); /* the bound is the one at work */
        witness_budget_stats stats;
        witness_budget_get_stats(budget, &stats);
        if (budgets[b] <= 4000) assert_true(stats.forced_count > 0);
        witness_budget_free(budget);
    }
}

/* 100 entities spread evenly from 0 to 99 away, all with an update every
 * tick, a budget for about a fifth of them: each band of 20 units gets no
 * more sends than the band nearer in, and the nearest band gets several
 * times what the farthest gets. */
static void test_nearer_sent_more(void **state) {
    (void)state;
    enum { N = 100, TICKS = 600 };
    witness_budget_config config = config_with(4000, HZ); /* 400 B/tick, 20 B records */
    witness_budget *budget = witness_budget_create(&config);
    uint32_t sends[N] = {0}, out[N], count;
    for (uint32_t tick = 1; tick <= TICKS; tick++) {
        assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
        for (uint32_t e = 0; e < N; e++) assert_int_equal(witness_budget_offer(budget, e, (float)e, 20, false), 0);
        assert_int_equal(witness_budget_select(budget, out, N, &count), 0);
        for (uint32_t i = 0; i < count; i++) sends[out[i]]++;
    }
    uint32_t band[5] = {0};
    for (uint32_t e = 0; e < N; e++) band[e / 20] += sends[e];
    for (int i = 0; i < 4; i++) assert_true(band[i] >= band[i + 1]);
    assert_true(band[0] >= 3 * band[4]);
    /* The farthest still get their once a second. */
    for (uint32_t e = 0; e < N; e++) assert_true(sends[e] >= TICKS / HZ);
    witness_budget_free(budget);
}

/* One tick's order: mandatory in offer order; forced by priority; then the
 * rest by staleness/interval, ties nearer first; an alias inside its
 * distance interval is not a candidate. Staleness is built with commit(0),
 * which undoes a send, as under TCP backpressure. */
static void offer_tick(witness_budget *budget, uint64_t tick, const uint32_t *aliases, const float *distances,
                       uint32_t n, uint32_t keep_sent) {
    uint32_t out[32], count;
    assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(witness_budget_offer(budget, aliases[i], distances[i], 10, false), 0);
    assert_int_equal(witness_budget_select(budget, out, 32, &count), 0);
    for (uint32_t i = 0; i < count; i++)
        if (out[i] != keep_sent) assert_int_equal(witness_budget_commit(budget, out[i], 0), 0);
}

static void test_priority_order_within_tick(void **state) {
    (void)state;
    /* HZ 4: forced at staleness 4; intervals: d <= 10 -> 1, 55 -> 2, 85 -> 3, >= 100 -> 4. */
    witness_budget_config config = config_with(1000000, 4);
    witness_budget *budget = witness_budget_create(&config);
    assert_int_equal(witness_budget_interval(budget, 55.0f), 2);
    assert_int_equal(witness_budget_interval(budget, 85.0f), 3);
    uint32_t out[32], count;
    /* Tick 0: everyone enters. */
    assert_int_equal(witness_budget_begin_tick(budget, 0), 0);
    for (uint32_t a = 0; a <= 10; a++)
        if (a != 5) assert_int_equal(witness_budget_offer(budget, a, 5.0f, 50, true), 0);
    assert_int_equal(witness_budget_select(budget, out, 32, &count), 0);
    assert_int_equal(count, 10);

    const uint32_t t1[] = {6, 0};
    const float d1[] = {5.0f, 200.0f};
    offer_tick(budget, 1, t1, d1, 2, UINT32_MAX);
    const uint32_t t2[] = {6, 0, 1, 4, 9};
    const float d2[] = {5.0f, 200.0f, 5.0f, 55.0f, 5.0f};
    offer_tick(budget, 2, t2, d2, 5, 9); /* 9, near then, really goes at tick 2 */
    const uint32_t t3[] = {6, 0, 1, 4, 8, 9};
    const float d3[] = {5.0f, 200.0f, 5.0f, 55.0f, 85.0f, 85.0f};
    offer_tick(budget, 3, t3, d3, 6, UINT32_MAX);

    /* Tick 4, offered in scrambled order. Expected:
     *   10  mandatory (leave), offered before 5
     *   5   mandatory (enter)
     *   6   forced: staleness 4 / interval 1 = 4
     *   0   forced: staleness 4 / interval 4 = 1
     *   1   staleness 3 / interval 1 = 3
     *   4   staleness 3 / interval 2 = 1.5
     *   2   staleness 1 / interval 1, distance 5
     *   3   staleness 1 / interval 1, distance 8
     *   8   staleness 2 / interval 3
     *   9   not a candidate: sent at tick 2, interval 3 */
    assert_int_equal(witness_budget_begin_tick(budget, 4), 0);
    assert_int_equal(witness_budget_offer(budget, 3, 8.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 9, 85.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 10, 40.0f, 10, true), 0);
    assert_int_equal(witness_budget_offer(budget, 8, 85.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 2, 5.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 0, 200.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 5, 90.0f, 10, true), 0);
    assert_int_equal(witness_budget_offer(budget, 4, 55.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 6, 5.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 1, 5.0f, 10, false), 0);
    assert_int_equal(witness_budget_select(budget, out, 32, &count), 0);
    /* The credit covers everything: the optional ones go unranked. */
    const uint32_t expected[] = {10, 5, 6, 0, 1, 4, 2, 3, 8};
    assert_int_equal(count, 9);
    for (uint32_t i = 0; i < 4; i++) assert_int_equal(out[i], expected[i]);
    for (uint32_t i = 4; i < 9; i++) assert_true(contains(out + 4, 5, expected[i]));
    witness_budget_stats stats;
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.forced_count, 2);
    witness_budget_free(budget);
}

/* When the credit does not cover every optional candidate they are ranked:
 * staleness/interval, then nearer, then lower alias; the greedy cut skips
 * the last. */
static void test_ranked_when_short(void **state) {
    (void)state;
    witness_budget_config config = config_with(160, 4); /* 40 B a tick, carry cap 40 */
    witness_budget *budget = witness_budget_create(&config);
    uint32_t out[8], count;
    assert_int_equal(witness_budget_begin_tick(budget, 0), 0);
    assert_int_equal(witness_budget_offer(budget, 7, 85.0f, 10, false), 0); /* interval 3 */
    assert_int_equal(witness_budget_offer(budget, 3, 5.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 9, 55.0f, 10, false), 0); /* interval 2 */
    assert_int_equal(witness_budget_offer(budget, 1, 8.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 4, 5.0f, 10, false), 0);
    assert_int_equal(witness_budget_select(budget, out, 8, &count), 0);
    const uint32_t expected[] = {3, 4, 1, 9};
    assert_int_equal(count, 4);
    for (uint32_t i = 0; i < count; i++) assert_int_equal(out[i], expected[i]);
    /* 7 is still pending, without being offered again: it goes when its
     * interval allows and the credit does. */
    assert_true(witness_budget_is_pending(budget, 7));
    assert_int_equal(witness_budget_pending_count(budget), 1);
    assert_int_equal(witness_budget_begin_tick(budget, 1), 0);
    assert_int_equal(witness_budget_select(budget, out, 8, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(out[0], 7);
    assert_false(witness_budget_is_pending(budget, 7));
    witness_budget_free(budget);
}

/* The ranking against an oracle: a tick's first offers (all equally
 * stale) of random sizes and distances, many more than the credit pays
 * for. The choice must be what sorting them all by interval, then
 * distance, then alias, and walking that list greedily gives. */
typedef struct ranked_offer {
    uint32_t alias, bytes, interval;
    float distance;
} ranked_offer;

static int ranked_offer_compare(const void *a, const void *b) {
    const ranked_offer *x = a, *y = b;
    if (x->interval != y->interval) return x->interval < y->interval ? -1 : 1;
    if (x->distance != y->distance) return x->distance < y->distance ? -1 : 1;
    return x->alias < y->alias ? -1 : x->alias > y->alias;
}

static void test_ranked_matches_sorted_greedy(void **state) {
    (void)state;
    uint32_t seed = 0x2545f491u;
    for (int round = 0; round < 200; round++) {
        uint32_t per_second = rng_range(&seed, 0, 40000);
        witness_budget_config config = config_with(per_second, HZ);
        witness_budget *budget = witness_budget_create(&config);
        assert_non_null(budget);
        ranked_offer offers[MAX_ALIASES] = {{0}};
        uint32_t count = rng_range(&seed, 1, MAX_ALIASES), total = 0;
        assert_int_equal(witness_budget_begin_tick(budget, 1), 0);
        for (uint32_t i = 0; i < count; i++) {
            /* Distances on a coarse grid, so that ties in interval and
             * distance are common and the alias must break them. */
            ranked_offer *offer = &offers[i];
            offer->alias = (i * 97u + (uint32_t)round) % MAX_ALIASES;
            offer->distance = (float)rng_range(&seed, 0, 24) * 5.0f;
            offer->bytes = rng_range(&seed, 0, 3) == 0 ? rng_range(&seed, 0, 2) : rng_range(&seed, 1, 200);
            offer->interval = witness_budget_interval(budget, offer->distance);
            total += offer->bytes;
            assert_int_equal(witness_budget_offer(budget, offer->alias, offer->distance, offer->bytes, false), 0);
        }
        qsort(offers, count, sizeof offers[0], ranked_offer_compare);
        int64_t credit = per_second / HZ;
        uint32_t expected[MAX_ALIASES], expected_count = 0;
        for (uint32_t i = 0; i < count; i++) {
            if ((int64_t)offers[i].bytes > credit) continue;
            credit -= offers[i].bytes;
            expected[expected_count++] = offers[i].alias;
        }
        uint32_t out[MAX_ALIASES], chosen;
        assert_int_equal(witness_budget_select(budget, out, MAX_ALIASES, &chosen), 0);
        if ((int64_t)total <= per_second / HZ) {
            /* All fit: they all go, in no promised order. */
            assert_int_equal(chosen, count);
            for (uint32_t i = 0; i < count; i++) assert_true(contains(out, chosen, expected[i]));
        } else {
            assert_int_equal(chosen, expected_count);
            for (uint32_t i = 0; i < chosen; i++) assert_int_equal(out[i], expected[i]);
        }
        witness_budget_free(budget);
    }
}

/* An alias offered once stays pending until it goes: with no credit at all
 * it is forced a second after its offer, without being offered again. While
 * the budget is held only mandatory records go; releasing it restarts the
 * second. */
static void test_pending_persists_and_hold(void **state) {
    (void)state;
    witness_budget_config config = config_with(0, HZ);
    witness_budget *budget = witness_budget_create(&config);
    uint32_t out[4], count;
    assert_int_equal(witness_budget_begin_tick(budget, 1), 0);
    assert_int_equal(witness_budget_offer(budget, 2, 5.0f, 10, false), 0);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
    assert_int_equal(count, 0);
    for (uint64_t tick = 2; tick <= HZ; tick++) {
        assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
        assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
        assert_int_equal(count, tick == HZ ? 1 : 0); /* staleness HZ at tick HZ */
    }
    witness_budget_hold(budget, true);
    assert_int_equal(witness_budget_begin_tick(budget, 20), 0);
    assert_int_equal(witness_budget_offer(budget, 2, 5.0f, 10, false), 0);
    assert_int_equal(witness_budget_offer(budget, 3, 5.0f, 10, true), 0);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(out[0], 3);
    for (uint64_t tick = 21; tick <= 40; tick++) {
        assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
        assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
        assert_int_equal(count, 0); /* held: not even forced */
    }
    witness_budget_hold(budget, false); /* pending since 40 now */
    for (uint64_t tick = 41; tick <= 49; tick++) {
        assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
        assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
        assert_int_equal(count, tick == 49 ? 1 : 0);
    }
    witness_budget_free(budget);
}

/* forget() drops an alias's history: an alias about to be forced is, once
 * forgotten and offered again, a newcomer whose second starts now. */
static void test_forget_resets_alias(void **state) {
    (void)state;
    witness_budget_config config = config_with(0, HZ); /* only mandatory and forced go */
    witness_budget *budget = witness_budget_create(&config);
    uint32_t out[4], count;
    assert_int_equal(witness_budget_begin_tick(budget, 0), 0);
    assert_int_equal(witness_budget_offer(budget, 3, 5.0f, 50, true), 0);
    assert_int_equal(witness_budget_offer(budget, 4, 5.0f, 50, true), 0);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
    assert_int_equal(count, 2);
    /* Both pending from tick 1; alias 3 is forgotten at tick 5 and offered
     * again from tick 6. Alias 4 is forced at tick 10, alias 3 at 15. */
    for (uint64_t tick = 1; tick <= 20; tick++) {
        assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
        if (tick != 5) assert_int_equal(witness_budget_offer(budget, 3, 5.0f, 10, false), 0);
        if (tick == 5) {
            witness_budget_forget(budget, 3);
            witness_budget_forget(budget, 3); /* idempotent */
        }
        assert_int_equal(witness_budget_offer(budget, 4, 5.0f, 10, false), 0);
        assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
        assert_int_equal(contains(out, count, 4), tick == 10 || tick == 20);
        assert_int_equal(contains(out, count, 3), tick == 15);
    }
    /* An offer withdrawn by forget() in the same tick is not selected. */
    assert_int_equal(witness_budget_begin_tick(budget, 21), 0);
    assert_int_equal(witness_budget_offer(budget, 4, 5.0f, 10, true), 0);
    witness_budget_forget(budget, 4);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
    assert_false(contains(out, count, 4));
    witness_budget_forget(budget, MAX_ALIASES + 5); /* out of range: ignored */
    witness_budget_free(budget);
}

/* With room for everything, near entities go every tick and farther ones
 * exactly at their distance interval. */
static void test_generous_budget_sends_all(void **state) {
    (void)state;
    enum { N = 100 };
    witness_budget_config config = config_with(10000000, HZ);
    witness_budget *budget = witness_budget_create(&config);
    uint32_t out[N + 10], count;
    for (uint64_t tick = 1; tick <= 50; tick++) {
        assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
        for (uint32_t e = 0; e < N; e++)
            assert_int_equal(witness_budget_offer(budget, e, (float)(e % 10), 30, false), 0);
        assert_int_equal(witness_budget_offer(budget, N, 55.0f, 30, false), 0); /* interval 5 */
        assert_int_equal(witness_budget_select(budget, out, N + 10, &count), 0);
        for (uint32_t e = 0; e < N; e++) assert_true(contains(out, count, e));
        assert_int_equal(contains(out, count, N), tick % 5 == 1);
        assert_int_equal(count, N + (tick % 5 == 1));
    }
    witness_budget_stats stats;
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.forced_count, 0);
    assert_int_equal(stats.debt, 0);
    witness_budget_free(budget);
}

/* Two schedulers fed the same offers choose the same records in the same
 * order every tick. */
static void test_deterministic(void **state) {
    (void)state;
    enum { N = 150 };
    witness_budget_config config = config_with(3000, HZ);
    witness_budget *a = witness_budget_create(&config), *b = witness_budget_create(&config);
    uint32_t rng = 42;
    uint32_t out_a[N], out_b[N], count_a, count_b;
    for (uint64_t tick = 0; tick < 300; tick++) {
        assert_int_equal(witness_budget_begin_tick(a, tick), 0);
        assert_int_equal(witness_budget_begin_tick(b, tick), 0);
        for (uint32_t e = 0; e < N; e++) {
            if (tick > 0 && rng_range(&rng, 0, 9) == 0) continue; /* nothing pending */
            /* Integer distances, so ties (broken by alias) are common. */
            float distance = (float)rng_range(&rng, 0, 12) * 10.0f;
            uint32_t bytes = rng_range(&rng, 5, 40);
            assert_int_equal(witness_budget_offer(a, e, distance, bytes, tick == 0), 0);
            assert_int_equal(witness_budget_offer(b, e, distance, bytes, tick == 0), 0);
        }
        assert_int_equal(witness_budget_select(a, out_a, N, &count_a), 0);
        assert_int_equal(witness_budget_select(b, out_b, N, &count_b), 0);
        assert_int_equal(count_a, count_b);
        assert_memory_equal(out_a, out_b, count_a * sizeof *out_a);
    }
    witness_budget_stats stats_a, stats_b;
    witness_budget_get_stats(a, &stats_a);
    witness_budget_get_stats(b, &stats_b);
    assert_memory_equal(&stats_a, &stats_b, sizeof stats_a);
    witness_budget_free(a);
    witness_budget_free(b);
}

/* Debt from mandatory records is paid back from later ticks' allowances
 * before anything optional goes; unspent credit carries, capped. */
static void test_debt_and_carry(void **state) {
    (void)state;
    witness_budget_config config = config_with(1000, HZ); /* 100 B/tick, carry cap 250 */
    witness_budget *budget = witness_budget_create(&config);
    uint32_t out[4], count;
    witness_budget_stats stats;
    assert_int_equal(witness_budget_begin_tick(budget, 0), 0);
    assert_int_equal(witness_budget_offer(budget, 1, 5.0f, 400, true), 0);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.debt, 300);
    /* Ticks 1..3 pay it back; the optional update waits. */
    for (uint64_t tick = 1; tick <= 3; tick++) {
        assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
        assert_int_equal(witness_budget_offer(budget, 2, 5.0f, 1, false), 0);
        assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
        assert_int_equal(count, 0);
    }
    assert_int_equal(witness_budget_begin_tick(budget, 4), 0);
    assert_int_equal(witness_budget_offer(budget, 2, 5.0f, 100, false), 0);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
    assert_int_equal(count, 1);
    /* Idle for a long while: the credit is the cap plus one tick, not more. */
    for (uint64_t tick = 5; tick < 100; tick++) {
        assert_int_equal(witness_budget_begin_tick(budget, tick), 0);
        assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
    }
    assert_int_equal(witness_budget_begin_tick(budget, 100), 0);
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.credit, 350);
    assert_int_equal(witness_budget_offer(budget, 2, 5.0f, 351, false), 0);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
    assert_int_equal(count, 0); /* does not fit: skipped, not queued */
    /* A gap of ticks earns the same: cap plus one tick. */
    assert_int_equal(witness_budget_begin_tick(budget, 1000), 0);
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.credit, 350);
    witness_budget_free(budget);
}

/* commit() corrects the charge, or undoes a send; calls out of order,
 * duplicates and bad aliases are errors, and a short output array selects
 * nothing. */
static void test_commit_and_errors(void **state) {
    (void)state;
    witness_budget_config config = config_with(1000, HZ);
    witness_budget *budget = witness_budget_create(&config);
    uint32_t out[4], count;
    witness_budget_stats stats;
    assert_int_equal(witness_budget_offer(budget, 1, 5.0f, 10, false), WITNESS_BUDGET_ERROR_SEQUENCE);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), WITNESS_BUDGET_ERROR_SEQUENCE);
    assert_int_equal(witness_budget_begin_tick(budget, 5), 0);
    assert_int_equal(witness_budget_begin_tick(budget, 5), WITNESS_BUDGET_ERROR_SEQUENCE);
    assert_int_equal(witness_budget_offer(budget, MAX_ALIASES, 5.0f, 10, false), WITNESS_BUDGET_ERROR_ARGUMENT);
    assert_int_equal(witness_budget_offer(budget, 1, __builtin_nanf(""), 10, false), WITNESS_BUDGET_ERROR_ARGUMENT);
    assert_int_equal(witness_budget_offer(budget, 1, 5.0f, 40, false), 0);
    assert_int_equal(witness_budget_offer(budget, 1, 5.0f, 40, false), WITNESS_BUDGET_ERROR_DUPLICATE);
    assert_int_equal(witness_budget_offer(budget, 2, 5.0f, 30, true), 0);
    assert_int_equal(witness_budget_offer(budget, 3, 6.0f, 30, false), 0);
    assert_int_equal(witness_budget_select(budget, out, 2, &count), WITNESS_BUDGET_ERROR_SPACE);
    assert_int_equal(witness_budget_commit(budget, 2, 30), WITNESS_BUDGET_ERROR_NOT_SELECTED);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), 0);
    assert_int_equal(count, 3);
    assert_int_equal(witness_budget_select(budget, out, 4, &count), WITNESS_BUDGET_ERROR_SEQUENCE);
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.bytes_spent, 100);
    assert_int_equal(stats.debt, 0);
    /* The enter really took 45 bytes, alias 3 did not go at all. */
    assert_int_equal(witness_budget_commit(budget, 2, 45), 0);
    assert_int_equal(witness_budget_commit(budget, 3, 0), 0);
    assert_int_equal(witness_budget_commit(budget, 3, 0), WITNESS_BUDGET_ERROR_NOT_SELECTED);
    assert_int_equal(witness_budget_commit(budget, 7, 10), WITNESS_BUDGET_ERROR_NOT_SELECTED);
    assert_int_equal(witness_budget_commit(budget, MAX_ALIASES, 10), WITNESS_BUDGET_ERROR_ARGUMENT);
    witness_budget_get_stats(budget, &stats);
    assert_int_equal(stats.bytes_spent, 85);
    assert_int_equal(stats.mandatory_bytes, 45);
    assert_int_equal(stats.sent_count, 2);
    assert_int_equal(stats.skipped_count, 1);
    /* Allowance 100 (first tick: nothing carried), spent 85. */
    assert_int_equal(stats.credit, 15);
    witness_budget_free(budget);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_rejected),
        cmocka_unit_test(test_interval_curve),
        cmocka_unit_test(test_mandatory_with_zero_budget),
        cmocka_unit_test(test_budget_respected_over_time),
        cmocka_unit_test(test_starvation_bound_randomized),
        cmocka_unit_test(test_nearer_sent_more),
        cmocka_unit_test(test_priority_order_within_tick),
        cmocka_unit_test(test_ranked_when_short),
        cmocka_unit_test(test_ranked_matches_sorted_greedy),
        cmocka_unit_test(test_pending_persists_and_hold),
        cmocka_unit_test(test_forget_resets_alias),
        cmocka_unit_test(test_generous_budget_sends_all),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_debt_and_carry),
        cmocka_unit_test(test_commit_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
