/* test_arena.c -- the bump allocator: aligned memory that stays put until
 * released, nested marks, chunks reused rather than reallocated, a large
 * allocation, a protobuf message decoded into it, and a release to empty
 * that gives back an outsized chunk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "arena.h"
#include "client.pb-c.h"

static void test_aligned_and_kept(void **state) {
    (void)state;
    arena a;
    arena_init(&a);
    unsigned char *blocks[200];
    for (int i = 0; i < 200; i++) {
        blocks[i] = arena_alloc(&a, (size_t)(i % 37) + 1);
        assert_int_equal((uintptr_t)blocks[i] % 16, 0);
        memset(blocks[i], i, (size_t)(i % 37) + 1);
    }
    /* Nothing moved or was overwritten by later allocations. */
    for (int i = 0; i < 200; i++)
        for (int k = 0; k < i % 37 + 1; k++) assert_int_equal(blocks[i][k], (unsigned char)i);
    arena_close(&a);
}

static void test_nested_marks(void **state) {
    (void)state;
    arena a;
    arena_init(&a);
    arena_mark outer = arena_save(&a);
    char *first = arena_alloc(&a, 100);
    memcpy(first, "outer", sizeof "outer");
    arena_mark inner = arena_save(&a);
    char *second = arena_alloc(&a, 100);
    memcpy(second, "inner", sizeof "inner");
    arena_release(&a, inner);
    /* The inner release gave back only what came after its mark. */
    assert_string_equal(first, "outer");
    char *third = arena_alloc(&a, 100);
    assert_ptr_equal(third, second);
    arena_release(&a, outer);
    assert_ptr_equal(arena_alloc(&a, 100), first);
    arena_close(&a);
}

static void test_reuse_without_growth(void **state) {
    (void)state;
    arena a;
    arena_init(&a);
    for (int round = 0; round < 50; round++) {
        arena_mark mark = arena_save(&a);
        for (int i = 0; i < 1000; i++) arena_alloc(&a, 200); /* about 200 KB: several chunks */
        arena_release(&a, mark);
    }
    size_t held = arena_bytes(&a);
    for (int round = 0; round < 50; round++) {
        arena_mark mark = arena_save(&a);
        for (int i = 0; i < 1000; i++) arena_alloc(&a, 200);
        arena_release(&a, mark);
    }
    assert_int_equal(arena_bytes(&a), held); /* steady load: nothing new allocated */
    arena_close(&a);
}

static void test_large_and_trim(void **state) {
    (void)state;
    arena a;
    arena_init(&a);
    arena_mark empty = arena_save(&a);
    unsigned char *big = arena_alloc(&a, 20u << 20); /* larger than what a release keeps */
    memset(big, 7, 20u << 20);
    assert_true(arena_bytes(&a) >= (20u << 20));
    arena_release(&a, empty);
    assert_true(arena_bytes(&a) <= (4u << 20));
    arena_close(&a);
}

static void test_protobuf_decode(void **state) {
    (void)state;
    Tessera__Client__ClientToServer message = TESSERA__CLIENT__CLIENT_TO_SERVER__INIT;
    Tessera__Client__LoginRequest login = TESSERA__CLIENT__LOGIN_REQUEST__INIT;
    login.account = "alice";
    login.password = "secret";
    message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_LOGIN;
    message.login = &login;
    uint8_t wire[256];
    size_t length = tessera__client__client_to_server__pack(&message, wire);
    arena a;
    arena_init(&a);
    for (int i = 0; i < 100; i++) {
        arena_mark mark = arena_save(&a);
        Tessera__Client__ClientToServer *decoded =
            tessera__client__client_to_server__unpack(arena_protobuf(&a), length, wire);
        assert_non_null(decoded);
        assert_string_equal(decoded->login->account, "alice");
        assert_string_equal(decoded->login->password, "secret");
        arena_release(&a, mark);
    }
    /* A malformed frame fails cleanly inside the arena too. */
    uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff};
    arena_mark mark = arena_save(&a);
    assert_null(tessera__client__client_to_server__unpack(arena_protobuf(&a), sizeof junk, junk));
    arena_release(&a, mark);
    arena_close(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aligned_and_kept),     cmocka_unit_test(test_nested_marks),
        cmocka_unit_test(test_reuse_without_growth), cmocka_unit_test(test_large_and_trim),
        cmocka_unit_test(test_protobuf_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
