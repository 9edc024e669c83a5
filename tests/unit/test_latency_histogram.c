/* test_latency_histogram.c -- unit tests for latency_histogram (common/):
 * layout checks at init, percentiles against exact answers on known data,
 * the overflow bucket, merging, and random data checked against a sorted
 * reference array (the reported value is never below the true percentile
 * and at most one bucket width above it). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "latency_histogram.h"

/* Deterministic generator so failures reproduce (xorshift64*). */
static uint64_t test_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(0x2545f4914f6cdd1d);
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_init_rejects_bad_layouts(void **state) {
    latency_histogram h;
    assert_int_equal(latency_histogram_init(&h, 0, 1000), -1);
    assert_null(h.buckets);
    assert_int_equal(latency_histogram_init(&h, 10, 0), -1);
    assert_int_equal(latency_histogram_init(&h, 10, 1005), -1);                   /* not a multiple */
    assert_int_equal(latency_histogram_init(&h, 1, (UINT64_C(1) << 24) + 1), -1); /* too many buckets */
    /* A zeroed or failed histogram is safe to use and to close. */
    latency_histogram_add(&h, 5);
    assert_int_equal(h.count, 0);
    assert_int_equal(latency_histogram_percentile(&h, 50), 0);
    latency_histogram_close(&h);
    latency_histogram_close(&h);

    assert_int_equal(latency_histogram_init(&h, 10, 2000000), 0);
    assert_int_equal(h.bucket_count, 200000);
    latency_histogram_close(&h);
    assert_null(h.buckets);
}

static void test_empty(void **state) {
    latency_histogram h;
    assert_int_equal(latency_histogram_init(&h, 10, 1000), 0);
    assert_int_equal(h.count, 0);
    assert_int_equal(latency_histogram_percentile(&h, 50), 0);
    assert_int_equal(latency_histogram_percentile(&h, 99), 0);
    assert_true(latency_histogram_mean(&h) == 0.0);
    latency_histogram_close(&h);
}

static void test_known_percentiles(void **state) {
    latency_histogram h;
    assert_int_equal(latency_histogram_init(&h, 10, 100000), 0);
    /* 1..100 ms in 1 ms steps: each sample is on a bucket edge. */
    for (uint64_t ms = 1; ms <= 100; ms++) latency_histogram_add(&h, ms * 1000);
    assert_int_equal(h.count, 100);
    assert_int_equal(h.max_us, 100000); /* 100 ms is the limit: it overflows, the maximum keeps it */
    assert_int_equal(h.buckets[h.bucket_count], 1);
    /* rank 50 is 50 ms, which sits in the bucket [50000, 50010): upper edge 50010. */
    assert_int_equal(latency_histogram_percentile(&h, 50), 50010);
    assert_int_equal(latency_histogram_percentile(&h, 99), 99010);
    /* The 100th sample is in the overflow bucket: reported as the maximum. */
    assert_int_equal(latency_histogram_percentile(&h, 100), 100000);
    /* Percent 0 (and nonsense) means the first sample. */
    assert_int_equal(latency_histogram_percentile(&h, 0), 1010);
    assert_int_equal(latency_histogram_percentile(&h, -5), 1010);
    assert_int_equal(latency_histogram_percentile(&h, NAN), 1010);
    assert_int_equal(latency_histogram_percentile(&h, 250), 100000);
    assert_true(fabs(latency_histogram_mean(&h) - 50500.0) < 1e-9);
    latency_histogram_close(&h);
}

static void test_clamped_to_maximum(void **state) {
    latency_histogram h;
    assert_int_equal(latency_histogram_init(&h, 10, 1000), 0);
    latency_histogram_add(&h, 3);
    latency_histogram_add(&h, 0);
    /* Both in bucket [0, 10): the upper edge 10 is clamped to the maximum 3. */
    assert_int_equal(latency_histogram_percentile(&h, 50), 3);
    assert_int_equal(latency_histogram_percentile(&h, 100), 3);
    latency_histogram_close(&h);
}

static void test_overflow(void **state) {
    latency_histogram h;
    assert_int_equal(latency_histogram_init(&h, 10, 1000), 0);
    latency_histogram_add(&h, 5);
    latency_histogram_add(&h, 999);
    latency_histogram_add(&h, 1000);
    latency_histogram_add(&h, UINT64_MAX);
    assert_int_equal(h.buckets[0], 1);
    assert_int_equal(h.buckets[99], 1);
    assert_int_equal(h.buckets[100], 2);
    assert_int_equal(h.max_us, UINT64_MAX);
    assert_int_equal(h.sum_us, UINT64_MAX); /* saturated, not wrapped */
    assert_int_equal(latency_histogram_percentile(&h, 50), 1000);
    assert_int_equal(latency_histogram_percentile(&h, 75), UINT64_MAX);
    latency_histogram_close(&h);
}

static void test_merge(void **state) {
    latency_histogram a, b, c;
    assert_int_equal(latency_histogram_init(&a, 10, 1000), 0);
    assert_int_equal(latency_histogram_init(&b, 10, 1000), 0);
    assert_int_equal(latency_histogram_init(&c, 20, 1000), 0);
    latency_histogram_add(&a, 15);
    latency_histogram_add(&b, 25);
    latency_histogram_add(&b, 5000);
    assert_int_equal(latency_histogram_merge(&a, &c), -1);
    assert_int_equal(a.count, 1);
    assert_int_equal(latency_histogram_merge(&a, &b), 0);
    assert_int_equal(a.count, 3);
    assert_int_equal(a.max_us, 5000);
    assert_int_equal(a.buckets[1], 1);
    assert_int_equal(a.buckets[2], 1);
    assert_int_equal(a.buckets[100], 1);
    assert_int_equal(latency_histogram_percentile(&a, 50), 30);
    latency_histogram_close(&a);
    latency_histogram_close(&b);
    latency_histogram_close(&c);
}

static void test_random_against_reference(void **state) {
    enum { SAMPLES = 100000 };
    const uint64_t bucket = 10, limit = 2000000;
    uint64_t *values = malloc(SAMPLES * sizeof *values);
    assert_non_null(values);
    latency_histogram h;
    assert_int_equal(latency_histogram_init(&h, bucket, limit), 0);
    uint64_t seed = 0x1234567;
    for (size_t i = 0; i < SAMPLES; i++) {
        /* Mostly short, with a tail past the limit. */
        uint64_t r = test_rand(&seed);
        uint64_t v = (r % 100 < 95) ? r % 50000 : r % 3000000;
        values[i] = v;
        latency_histogram_add(&h, v);
    }
    qsort(values, SAMPLES, sizeof *values, compare_u64);
    static const double percents[] = {1, 10, 50, 90, 95, 99, 99.9, 100};
    for (size_t i = 0; i < sizeof percents / sizeof percents[0]; i++) {
        size_t rank = (size_t)ceil(percents[i] / 100.0 * SAMPLES);
        uint64_t truth = values[rank - 1];
        uint64_t got = latency_histogram_percentile(&h, percents[i]);
        assert_true(got >= truth);
        if (truth < limit)
            assert_true(got - truth <= bucket);
        else
            assert_int_equal(got, values[SAMPLES - 1]);
    }
    latency_histogram_close(&h);
    free(values);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_rejects_bad_layouts),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_known_percentiles),
        cmocka_unit_test(test_clamped_to_maximum),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_random_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
