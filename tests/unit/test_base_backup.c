/* test_base_backup.c -- unit tests for the choice of a base's backup holder
 * (baseapp/base_backup.c, base_backup_holder: rendezvous hashing over the
 * other live baseapps): no candidates, one, the same answer every time and
 * whatever the candidates' order, an even spread over three, and a change
 * of the set moving only the bases whose holder came or went. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "base_backup.h"

#define TEST_BASES 30000

static void test_no_candidate_and_one(void **state) {
    (void)state;
    assert_int_equal(base_backup_holder(42, NULL, 0), 0);
    const uint64_t one[] = {7};
    for (uint64_t id = 1; id < 1000; id++) assert_int_equal(base_backup_holder(id, one, 1), 7);
}

static void test_stable_and_order_free(void **state) {
    (void)state;
    const uint64_t forward[] = {3, 9, 14}, backward[] = {14, 9, 3};
    for (uint64_t id = 1; id < 5000; id++) {
        uint64_t holder = base_backup_holder(id, forward, 3);
        assert_int_equal(holder, base_backup_holder(id, forward, 3));
        assert_int_equal(holder, base_backup_holder(id, backward, 3));
    }
}

static void test_even_spread(void **state) {
    (void)state;
    const uint64_t candidates[] = {3, 9, 14};
    size_t counts[3] = {0, 0, 0};
    for (uint64_t id = 1000; id < 1000 + TEST_BASES; id++) {
        uint64_t holder = base_backup_holder(id, candidates, 3);
        for (size_t c = 0; c < 3; c++)
            if (holder == candidates[c]) counts[c]++;
    }
    /* A third each, within 3 % of the total. */
    for (size_t c = 0; c < 3; c++) {
        assert_true(counts[c] > TEST_BASES / 3 - TEST_BASES * 3 / 100);
        assert_true(counts[c] < TEST_BASES / 3 + TEST_BASES * 3 / 100);
    }
}

static void test_set_change_moves_only_what_it_must(void **state) {
    (void)state;
    const uint64_t before[] = {3, 9, 14}, without_nine[] = {3, 14}, with_twenty[] = {3, 9, 14, 20};
    size_t moved_to_twenty = 0;
    for (uint64_t id = 1; id < TEST_BASES; id++) {
        uint64_t holder = base_backup_holder(id, before, 3);
        /* 9 leaves: only its bases move. */
        uint64_t after = base_backup_holder(id, without_nine, 2);
        if (holder != 9) assert_int_equal(after, holder);
        /* 20 joins: a base moves only to 20. */
        uint64_t grown = base_backup_holder(id, with_twenty, 4);
        if (grown != holder) {
            assert_int_equal(grown, 20);
            moved_to_twenty++;
        }
    }
    /* About a quarter moves to the newcomer. */
    assert_true(moved_to_twenty > TEST_BASES / 4 - TEST_BASES * 3 / 100);
    assert_true(moved_to_twenty < TEST_BASES / 4 + TEST_BASES * 3 / 100);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_candidate_and_one),
        cmocka_unit_test(test_stable_and_order_free),
        cmocka_unit_test(test_even_spread),
        cmocka_unit_test(test_set_change_moves_only_what_it_must),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
