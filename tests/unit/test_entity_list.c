/* test_entity_list.c -- unit tests for entity_list: handles resolve while
 * their object lives and never after, FIFO slot reuse, serial wrap-around
 * retiring slots, iteration with removal, and a full list. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "entity_list.h"

static void test_create_rejects_bad_arguments(void **state) {
    assert_null(entity_list_create(0, 32));
    assert_null(entity_list_create(4, 0));
    assert_null(entity_list_create(4, 33));
    assert_null(entity_list_create((UINT32_C(1) << 31) + 1, 32));
    /* The largest list is cheap to create: storage grows lazily. */
    entity_list *big = entity_list_create(UINT32_C(1) << 31, 32);
    assert_non_null(big);
    int x;
    entity_handle h = entity_list_add(big, &x);
    assert_ptr_equal(entity_list_get(big, h), &x);
    entity_list_free(big);
}

static void test_add_get_remove(void **state) {
    entity_list *list = entity_list_create(16, 32);
    assert_non_null(list);
    int a, b, c;
    entity_handle ha = entity_list_add(list, &a);
    entity_handle hb = entity_list_add(list, &b);
    entity_handle hc = entity_list_add(list, &c);
    assert_true(ha != ENTITY_HANDLE_NONE && hb != ENTITY_HANDLE_NONE && hc != ENTITY_HANDLE_NONE);
    assert_true(ha != hb && hb != hc && ha != hc);
    assert_int_equal(entity_list_count(list), 3);
    assert_ptr_equal(entity_list_get(list, ha), &a);
    assert_ptr_equal(entity_list_get(list, hb), &b);
    assert_ptr_equal(entity_list_get(list, hc), &c);
    assert_int_equal(entity_handle_slot(ha), 0);
    assert_int_equal(entity_handle_slot(hb), 1);
    assert_int_equal(entity_handle_slot(hc), 2);

    assert_ptr_equal(entity_list_remove(list, hb), &b);
    assert_int_equal(entity_list_count(list), 2);
    assert_null(entity_list_get(list, hb));
    assert_null(entity_list_remove(list, hb));
    assert_int_equal(entity_list_count(list), 2);
    assert_ptr_equal(entity_list_get(list, ha), &a);
    assert_ptr_equal(entity_list_get(list, hc), &c);

    /* NULL objects are refused. */
    assert_int_equal(entity_list_add(list, NULL), ENTITY_HANDLE_NONE);
    entity_list_free(list);
}

static void test_stale_handle_never_resolves_to_new_object(void **state) {
    entity_list *list = entity_list_create(1, 32);
    int a, b;
    entity_handle ha = entity_list_add(list, &a);
    assert_ptr_equal(entity_list_remove(list, ha), &a);
    entity_handle hb = entity_list_add(list, &b);
    /* Same slot, new serial. */
    assert_int_equal(entity_handle_slot(ha), entity_handle_slot(hb));
    assert_true(ha != hb);
    assert_null(entity_list_get(list, ha));
    assert_null(entity_list_remove(list, ha));
    assert_ptr_equal(entity_list_get(list, hb), &b);
    entity_list_free(list);
}

static void test_bad_handles(void **state) {
    entity_list *list = entity_list_create(8, 32);
    int a;
    entity_handle ha = entity_list_add(list, &a);
    assert_null(entity_list_get(list, ENTITY_HANDLE_NONE));
    assert_null(entity_list_remove(list, ENTITY_HANDLE_NONE));
    assert_null(entity_list_get(NULL, ha));
    /* Slot beyond what was ever handed out, and beyond max_slots. */
    entity_handle out_of_range = (ha & ~UINT64_C(0xffffffff)) | UINT64_C(5);
    assert_null(entity_list_get(list, out_of_range));
    out_of_range = (ha & ~UINT64_C(0xffffffff)) | UINT64_C(0xffffffff);
    assert_null(entity_list_get(list, out_of_range));
    /* Right slot, wrong serials. */
    assert_null(entity_list_get(list, ha & UINT64_C(0xffffffff)));
    assert_null(entity_list_get(list, ha + (UINT64_C(1) << 32)));
    assert_null(entity_list_get(list, ha | UINT64_C(0xffffffff00000000)));
    /* Garbage. */
    assert_null(entity_list_get(list, UINT64_C(0xdeadbeefcafebabe)));
    assert_null(entity_list_get(list, UINT64_MAX));
    assert_null(entity_list_remove(list, UINT64_MAX));
    assert_int_equal(entity_handle_slot(ENTITY_HANDLE_NONE), UINT32_MAX);
    /* None of that disturbed the live object. */
    assert_ptr_equal(entity_list_get(list, ha), &a);
    assert_int_equal(entity_list_count(list), 1);
    entity_list_free(list);
}

static void test_fifo_reuse(void **state) {
    entity_list *list = entity_list_create(8, 32);
    int obj[5];
    entity_handle h[5];
    for (int i = 0; i < 5; i++) h[i] = entity_list_add(list, &obj[i]);
    /* Free slots 3, 1, 4 in that order: they come back in that order. */
    entity_list_remove(list, h[3]);
    entity_list_remove(list, h[1]);
    entity_list_remove(list, h[4]);
    int x, y, z, w;
    entity_handle hx = entity_list_add(list, &x);
    entity_handle hy = entity_list_add(list, &y);
    /* Freed again while the queue still holds slot 4: goes behind it. */
    entity_list_remove(list, hx);
    entity_handle hz = entity_list_add(list, &z);
    entity_handle hw = entity_list_add(list, &w);
    assert_int_equal(entity_handle_slot(hx), 3);
    assert_int_equal(entity_handle_slot(hy), 1);
    assert_int_equal(entity_handle_slot(hz), 4);
    assert_int_equal(entity_handle_slot(hw), 3);
    /* Queue empty: a fresh slot. */
    int v;
    assert_int_equal(entity_handle_slot(entity_list_add(list, &v)), 5);
    assert_ptr_equal(entity_list_get(list, hw), &w);
    assert_null(entity_list_get(list, hx));
    entity_list_free(list);
}

static void test_full_list(void **state) {
    entity_list *list = entity_list_create(3, 32);
    int obj[4];
    entity_handle h[3];
    for (int i = 0; i < 3; i++) {
        h[i] = entity_list_add(list, &obj[i]);
        assert_true(h[i] != ENTITY_HANDLE_NONE);
    }
    assert_int_equal(entity_list_add(list, &obj[3]), ENTITY_HANDLE_NONE);
    assert_int_equal(entity_list_count(list), 3);
    entity_list_remove(list, h[1]);
    entity_handle h3 = entity_list_add(list, &obj[3]);
    assert_true(h3 != ENTITY_HANDLE_NONE);
    assert_int_equal(entity_handle_slot(h3), 1);
    assert_int_equal(entity_list_add(list, &obj[3]), ENTITY_HANDLE_NONE);
    entity_list_free(list);
}

static void test_serial_wraparound_retires_slots(void **state) {
    /* 2 serial bits: serials 1, 2, 3, then the slot retires. */
    entity_list *list = entity_list_create(2, 2);
    int a, b;
    entity_handle old[8];
    size_t n_old = 0;
    /* Keep slot 1 busy so all churn lands on slot 0. */
    entity_handle hb = entity_list_add(list, &b);
    assert_int_equal(entity_handle_slot(hb), 0);
    entity_handle ha = entity_list_add(list, &a);
    assert_int_equal(entity_handle_slot(ha), 1);
    entity_list_remove(list, hb);
    old[n_old++] = hb;
    for (int use = 2; use <= 3; use++) {
        entity_handle h = entity_list_add(list, &b);
        assert_int_equal(entity_handle_slot(h), 0);
        for (size_t i = 0; i < n_old; i++) assert_true(old[i] != h);
        assert_ptr_equal(entity_list_get(list, h), &b);
        assert_ptr_equal(entity_list_remove(list, h), &b);
        old[n_old++] = h;
    }
    /* Slot 0 has had its 3 uses and is retired. */
    assert_int_equal(entity_list_retired(list), 1);
    assert_int_equal(entity_list_count(list), 1);
    assert_int_equal(entity_list_add(list, &b), ENTITY_HANDLE_NONE);
    for (size_t i = 0; i < n_old; i++) assert_null(entity_list_get(list, old[i]));

    /* Slot 1 goes the same way; then nothing is left. */
    for (int use = 1; use <= 3; use++) {
        entity_handle h = use == 1 ? ha : entity_list_add(list, &a);
        assert_int_equal(entity_handle_slot(h), 1);
        for (size_t i = 0; i < n_old; i++) assert_true(old[i] != h);
        assert_ptr_equal(entity_list_remove(list, h), &a);
        old[n_old++] = h;
    }
    assert_int_equal(entity_list_retired(list), 2);
    assert_int_equal(entity_list_count(list), 0);
    assert_int_equal(entity_list_add(list, &a), ENTITY_HANDLE_NONE);
    for (size_t i = 0; i < n_old; i++) {
        assert_null(entity_list_get(list, old[i]));
        assert_null(entity_list_remove(list, old[i]));
    }
    uint32_t cursor = 0;
    assert_null(entity_list_next(list, &cursor, NULL));
    entity_list_free(list);
}

static void test_serial_one_bit_churn_until_exhausted(void **state) {
    /* With 1 serial bit every slot serves exactly once; FIFO churn over
     * 5 slots must hand out exactly 5 handles, all distinct, then NONE. */
    entity_list *list = entity_list_create(5, 1);
    int obj;
    entity_handle seen[5];
    int n = 0;
    for (;;) {
        entity_handle h = entity_list_add(list, &obj);
        if (h == ENTITY_HANDLE_NONE) break;
        assert_true(n < 5);
        for (int i = 0; i < n; i++) assert_true(seen[i] != h);
        seen[n++] = h;
        assert_ptr_equal(entity_list_remove(list, h), &obj);
    }
    assert_int_equal(n, 5);
    assert_int_equal(entity_list_retired(list), 5);
    entity_list_free(list);
}

static void test_serial_wraparound_under_churn(void **state) {
    /* 3 serial bits (7 uses per slot), 4 slots, 2 objects alive at a time:
     * exactly 28 adds succeed, and no handle is ever handed out twice. */
    entity_list *list = entity_list_create(4, 3);
    int obj;
    entity_handle seen[28];
    int n = 0;
    entity_handle live[2] = {ENTITY_HANDLE_NONE, ENTITY_HANDLE_NONE};
    for (int step = 0; step < 100; step++) {
        int k = step % 2;
        if (live[k] != ENTITY_HANDLE_NONE) {
            assert_ptr_equal(entity_list_remove(list, live[k]), &obj);
            live[k] = ENTITY_HANDLE_NONE;
        }
        entity_handle h = entity_list_add(list, &obj);
        if (h == ENTITY_HANDLE_NONE) continue;
        assert_true(n < 28);
        for (int i = 0; i < n; i++) {
            assert_true(seen[i] != h);
            if (seen[i] != live[1 - k]) assert_null(entity_list_get(list, seen[i]));
        }
        seen[n++] = h;
        live[k] = h;
    }
    for (int k = 0; k < 2; k++)
        if (live[k] != ENTITY_HANDLE_NONE) entity_list_remove(list, live[k]);
    assert_int_equal(n, 28);
    assert_int_equal(entity_list_retired(list), 4);
    assert_int_equal(entity_list_count(list), 0);
    entity_list_free(list);
}

static void test_iteration_with_removal(void **state) {
    entity_list *list = entity_list_create(16, 32);
    int obj[10];
    entity_handle h[10];
    for (int i = 0; i < 10; i++) h[i] = entity_list_add(list, &obj[i]);
    entity_list_remove(list, h[2]);
    entity_list_remove(list, h[7]);

    /* Remove every object as it is returned, plus its successor when odd. */
    int visited[10] = {0};
    int visits = 0;
    uint32_t cursor = 0;
    entity_handle hh;
    void *o;
    while ((o = entity_list_next(list, &cursor, &hh)) != NULL) {
        int i = (int)((int *)o - obj);
        if (i < 0 || i >= 10) {
            fail_msg("entity_list_next gave object %d, not one of the 10", i);
            return; /* not reached (fail_msg jumps out), but the checkers cannot tell */
        }
        assert_int_equal(hh, h[i]);
        visited[i]++;
        visits++;
        assert_ptr_equal(entity_list_remove(list, hh), o);
        if (i % 2 == 1 && i + 1 < 10) entity_list_remove(list, h[i + 1]);
    }
    /* 0,1 (removes 2: already gone),3 (removes 4),5 (removes 6),8,9. */
    int expected[10] = {1, 1, 0, 1, 0, 1, 0, 0, 1, 1};
    for (int i = 0; i < 10; i++) assert_int_equal(visited[i], expected[i]);
    assert_int_equal(visits, 6);
    assert_int_equal(entity_list_count(list), 0);
    cursor = 0;
    assert_null(entity_list_next(list, &cursor, &hh));
    assert_int_equal(hh, ENTITY_HANDLE_NONE);
    entity_list_free(list);
}

static void test_iteration_counts_live(void **state) {
    entity_list *list = entity_list_create(1000, 32);
    int obj[300];
    entity_handle h[300];
    for (int i = 0; i < 300; i++) h[i] = entity_list_add(list, &obj[i]);
    for (int i = 0; i < 300; i += 3) entity_list_remove(list, h[i]);
    uint32_t cursor = 0;
    int n = 0;
    uint32_t last_slot = 0;
    entity_handle hh;
    while (entity_list_next(list, &cursor, &hh) != NULL) {
        assert_true(n == 0 || entity_handle_slot(hh) > last_slot);
        last_slot = entity_handle_slot(hh);
        n++;
    }
    assert_int_equal(n, 200);
    assert_int_equal(entity_list_count(list), 200);
    entity_list_free(list);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_rejects_bad_arguments),
        cmocka_unit_test(test_add_get_remove),
        cmocka_unit_test(test_stale_handle_never_resolves_to_new_object),
        cmocka_unit_test(test_bad_handles),
        cmocka_unit_test(test_fifo_reuse),
        cmocka_unit_test(test_full_list),
        cmocka_unit_test(test_serial_wraparound_retires_slots),
        cmocka_unit_test(test_serial_one_bit_churn_until_exhausted),
        cmocka_unit_test(test_serial_wraparound_under_churn),
        cmocka_unit_test(test_iteration_with_removal),
        cmocka_unit_test(test_iteration_counts_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
