/* test_id_map.c -- unit tests for id_map: put/get/replace/remove, key 0,
 * iteration, and long random churn checked against a plain reference array
 * (which exercises growth and backward-shift deletion across wrap-around). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "id_map.h"

/* Deterministic generator so failures reproduce (xorshift64*). */
static uint64_t test_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(0x2545f4914f6cdd1d);
}

static void *as_value(uintptr_t v) { return (void *)v; }

static void test_put_get_replace_remove(void **state) {
    id_map m;
    id_map_init(&m);
    assert_int_equal(id_map_count(&m), 0);
    assert_null(id_map_get(&m, 42));
    assert_null(id_map_remove(&m, 42));

    assert_int_equal(id_map_put(&m, 42, as_value(1)), 0);
    assert_int_equal(id_map_put(&m, 43, as_value(2)), 0);
    assert_int_equal(id_map_count(&m), 2);
    assert_ptr_equal(id_map_get(&m, 42), as_value(1));
    assert_ptr_equal(id_map_get(&m, 43), as_value(2));
    assert_null(id_map_get(&m, 44));

    assert_int_equal(id_map_put(&m, 42, as_value(3)), 0);
    assert_int_equal(id_map_count(&m), 2);
    assert_ptr_equal(id_map_get(&m, 42), as_value(3));

    assert_ptr_equal(id_map_remove(&m, 42), as_value(3));
    assert_int_equal(id_map_count(&m), 1);
    assert_null(id_map_get(&m, 42));
    assert_null(id_map_remove(&m, 42));
    assert_ptr_equal(id_map_get(&m, 43), as_value(2));

    assert_int_equal(id_map_put(&m, UINT64_MAX, as_value(9)), 0);
    assert_ptr_equal(id_map_get(&m, UINT64_MAX), as_value(9));

    id_map_close(&m);
    assert_int_equal(id_map_count(&m), 0);
    assert_null(id_map_get(&m, 43));
    /* Reusable after close. */
    assert_int_equal(id_map_put(&m, 7, as_value(7)), 0);
    assert_ptr_equal(id_map_get(&m, 7), as_value(7));
    id_map_close(&m);
}

static void test_key_zero_rejected(void **state) {
    id_map m;
    id_map_init(&m);
    assert_int_equal(id_map_put(&m, 0, as_value(1)), -1);
    assert_int_equal(id_map_count(&m), 0);
    assert_int_equal(id_map_put(&m, 5, as_value(1)), 0);
    assert_int_equal(id_map_put(&m, 0, as_value(1)), -1);
    assert_null(id_map_get(&m, 0));
    assert_null(id_map_remove(&m, 0));
    assert_int_equal(id_map_count(&m), 1);
    id_map_close(&m);
}

static void test_sequential_keys_grow(void **state) {
    id_map m;
    id_map_init(&m);
    for (uint64_t k = 1; k <= 10000; k++) assert_int_equal(id_map_put(&m, k, as_value((uintptr_t)k * 2)), 0);
    assert_int_equal(id_map_count(&m), 10000);
    /* Power-of-two capacity, load at most 70%. */
    assert_true((m.capacity & (m.capacity - 1)) == 0);
    assert_true(m.count * 10 <= m.capacity * 7);
    for (uint64_t k = 1; k <= 10000; k++) assert_ptr_equal(id_map_get(&m, k), as_value((uintptr_t)k * 2));
    for (uint64_t k = 1; k <= 10000; k += 2) assert_ptr_equal(id_map_remove(&m, k), as_value((uintptr_t)k * 2));
    assert_int_equal(id_map_count(&m), 5000);
    for (uint64_t k = 1; k <= 10000; k++) {
        if (k % 2)
            assert_null(id_map_get(&m, k));
        else
            assert_ptr_equal(id_map_get(&m, k), as_value((uintptr_t)k * 2));
    }
    id_map_close(&m);
}

static void test_iteration(void **state) {
    id_map m;
    id_map_init(&m);
    size_t cursor = 0;
    uint64_t key;
    void *value;
    assert_int_equal(id_map_next(&m, &cursor, &key, &value), 0);
    enum { N = 500 };
    for (uint64_t k = 1; k <= N; k++) id_map_put(&m, k * 1000003u, as_value((uintptr_t)k));
    for (uint64_t k = 1; k <= N; k += 5) id_map_remove(&m, k * 1000003u);
    int seen[N + 1] = {0};
    int count = 0;
    cursor = 0;
    while (id_map_next(&m, &cursor, &key, &value)) {
        uintptr_t k = (uintptr_t)value;
        if (k < 1 || k > N) {
            fail_msg("id_map_next gave value %ju, not 1 to %d", (uintmax_t)k, N);
            return; /* not reached (fail_msg jumps out), but the checkers cannot tell */
        }
        assert_int_equal(key, (uint64_t)k * 1000003u);
        seen[k]++;
        count++;
    }
    assert_int_equal(count, N - N / 5);
    assert_int_equal((size_t)count, id_map_count(&m));
    for (int k = 1; k <= N; k++) assert_int_equal(seen[k], (k - 1) % 5 == 0 ? 0 : 1);
    /* At the end it stays at the end. */
    assert_int_equal(id_map_next(&m, &cursor, &key, &value), 0);
    id_map_close(&m);
}

/* Random churn against a reference array of (key, value) pairs. Keys come
 * from a small pool so inserts, replacements and removals of present and
 * absent keys all happen often. A third of the keys differ only in high
 * bits, which a hash that ignored them would pile into one bucket. */
static void test_random_churn_against_reference(void **state) {
    enum { POOL = 3000, STEPS = 200000 };
    uint64_t *keys = malloc(POOL * sizeof(*keys));
    uintptr_t *ref = calloc(POOL, sizeof(*ref)); /* 0 = absent */
    assert_non_null(keys);
    assert_non_null(ref);
    uint64_t seed = UINT64_C(0x9e3779b97f4a7c15);
    for (int i = 0; i < POOL; i++) {
        uint64_t k;
        if (i % 3 == 0)
            k = (uint64_t)(i + 1) << 40; /* low 40 bits all zero */
        else
            k = test_rand(&seed);
        if (k == 0) k = 1;
        for (int j = 0; j < i; j++) {
            if (keys[j] == k) {
                k = test_rand(&seed) | 1;
                j = -1;
            }
        }
        keys[i] = k;
    }

    id_map m;
    id_map_init(&m);
    size_t ref_count = 0;
    for (int step = 0; step < STEPS; step++) {
        uint64_t r = test_rand(&seed);
        int i = (int)(r % POOL);
        /* Phases alternate between growing and shrinking the map. */
        int grow_phase = (step / 20000) % 2 == 0;
        unsigned op = (unsigned)((r >> 32) % 10);
        if (op < (grow_phase ? 6u : 3u)) {
            uintptr_t v = (uintptr_t)step + 1;
            assert_int_equal(id_map_put(&m, keys[i], as_value(v)), 0);
            if (ref[i] == 0) ref_count++;
            ref[i] = v;
        } else if (op < 9) {
            void *got = id_map_remove(&m, keys[i]);
            assert_ptr_equal(got, as_value(ref[i]));
            if (ref[i] != 0) ref_count--;
            ref[i] = 0;
        } else {
            assert_ptr_equal(id_map_get(&m, keys[i]), as_value(ref[i]));
        }
        assert_int_equal(id_map_count(&m), ref_count);
        if (step % 10000 == 0) {
            for (int j = 0; j < POOL; j++) assert_ptr_equal(id_map_get(&m, keys[j]), as_value(ref[j]));
        }
    }
    for (int j = 0; j < POOL; j++) assert_ptr_equal(id_map_get(&m, keys[j]), as_value(ref[j]));
    size_t cursor = 0, iterated = 0;
    uint64_t key;
    void *value;
    while (id_map_next(&m, &cursor, &key, &value)) iterated++;
    assert_int_equal(iterated, ref_count);
    id_map_close(&m);
    free(keys);
    free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_replace_remove),         cmocka_unit_test(test_key_zero_rejected),
        cmocka_unit_test(test_sequential_keys_grow),           cmocka_unit_test(test_iteration),
        cmocka_unit_test(test_random_churn_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
