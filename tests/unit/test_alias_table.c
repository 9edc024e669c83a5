/* test_alias_table.c -- client alias ids: lowest free first, stable while
 * in use, and never reused before the cooldown has passed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "alias_table.h"
#include "random_unit.h"

static void test_lowest_first_and_stable(void **state) {
    (void)state;
    alias_table *table = alias_table_create(8, 1000);
    assert_int_equal(alias_table_assign(table, 100, 0), 0);
    assert_int_equal(alias_table_assign(table, 200, 0), 1);
    assert_int_equal(alias_table_assign(table, 300, 0), 2);
    /* Asking again gives the same alias. */
    assert_int_equal(alias_table_assign(table, 200, 5), 1);
    assert_int_equal(alias_table_find(table, 300), 2);
    assert_int_equal(alias_table_entity(table, 0), 100);
    assert_int_equal(alias_table_in_use(table), 3);
    assert_int_equal(alias_table_find(table, 999), ALIAS_NONE);
    assert_int_equal(alias_table_assign(table, 0, 0), ALIAS_NONE); /* 0 is no entity */
    alias_table_free(table);
}

static void test_cooldown_blocks_reuse(void **state) {
    (void)state;
    alias_table *table = alias_table_create(2, 1000);
    assert_int_equal(alias_table_assign(table, 1, 0), 0);
    assert_int_equal(alias_table_assign(table, 2, 0), 1);
    assert_int_equal(alias_table_release(table, 1, 100), 0);
    /* A stale alias names nothing. */
    assert_int_equal(alias_table_entity(table, 0), 0);
    assert_int_equal(alias_table_find(table, 1), ALIAS_NONE);
    /* Cooling until 1100: no alias for a newcomer, even though one is unused. */
    assert_int_equal(alias_table_assign(table, 3, 100), ALIAS_NONE);
    assert_int_equal(alias_table_assign(table, 3, 1099), ALIAS_NONE);
    assert_int_equal(alias_table_assign(table, 3, 1100), 0);
    assert_int_equal(alias_table_entity(table, 0), 3);
    /* Releasing twice, or an unknown entity, changes nothing. */
    assert_int_equal(alias_table_release(table, 1, 2000), ALIAS_NONE);
    alias_table_free(table);
}

static void test_reuses_lowest_cooled(void **state) {
    (void)state;
    alias_table *table = alias_table_create(16, 10);
    for (uint64_t e = 1; e <= 10; e++) assert_int_equal(alias_table_assign(table, e, 0), e - 1);
    alias_table_release(table, 8, 0); /* alias 7 */
    alias_table_release(table, 3, 0); /* alias 2 */
    alias_table_release(table, 5, 0); /* alias 4 */
    /* Before the cooldown a newcomer gets a never-used alias. */
    assert_int_equal(alias_table_assign(table, 50, 5), 10);
    /* After it, the lowest cooled ones, in order. */
    assert_int_equal(alias_table_assign(table, 51, 10), 2);
    assert_int_equal(alias_table_assign(table, 52, 10), 4);
    assert_int_equal(alias_table_assign(table, 53, 10), 7);
    assert_int_equal(alias_table_assign(table, 54, 10), 11);
    alias_table_free(table);
}

/* Random churn against a model: an alias never names two entities at
 * once, and never names a new entity within the cooldown of its release. */
static void test_random_churn(void **state) {
    (void)state;
    enum { ALIASES = 64, ENTITIES = 200, STEPS = 20000, COOLDOWN = 50 };
    alias_table *table = alias_table_create(ALIASES, COOLDOWN);
    uint64_t released_at[ALIASES];
    int released[ALIASES] = {0};
    uint32_t held[ENTITIES + 1];
    for (int i = 0; i <= ENTITIES; i++) held[i] = ALIAS_NONE;
    uint64_t seed = 7; /* fixed, so that a failure replays */
    uint64_t now = 0;
    for (int step = 0; step < STEPS; step++) {
        now += random_next(&seed) % 3;
        uint64_t entity = 1 + random_next(&seed) % ENTITIES;
        if (held[entity] == ALIAS_NONE) {
            uint32_t alias = alias_table_assign(table, entity, now);
            if (alias == ALIAS_NONE) continue;
            assert_true(alias < ALIASES);
            if (released[alias]) assert_true(now >= released_at[alias] + COOLDOWN);
            for (int other = 1; other <= ENTITIES; other++) assert_true(held[other] != alias);
            held[entity] = alias;
            assert_int_equal(alias_table_entity(table, alias), entity);
        } else {
            uint32_t alias = alias_table_release(table, entity, now);
            assert_int_equal(alias, held[entity]);
            released[alias] = 1;
            released_at[alias] = now;
            held[entity] = ALIAS_NONE;
        }
    }
    alias_table_free(table);
}

static void test_bad_arguments(void **state) {
    (void)state;
    assert_null(alias_table_create(0, 10));
    alias_table *table = alias_table_create(1, 0);
    assert_int_equal(alias_table_entity(table, 5), 0);
    assert_int_equal(alias_table_assign(table, 1, 0), 0);
    assert_int_equal(alias_table_assign(table, 2, 0), ALIAS_NONE); /* full */
    alias_table_release(table, 1, 0);
    assert_int_equal(alias_table_assign(table, 2, 0), 0); /* no cooldown configured */
    alias_table_free(table);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lowest_first_and_stable), cmocka_unit_test(test_cooldown_blocks_reuse),
        cmocka_unit_test(test_reuses_lowest_cooled),    cmocka_unit_test(test_random_churn),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
