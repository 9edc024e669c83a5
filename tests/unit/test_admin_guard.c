/* test_admin_guard.c -- unit tests for admin_guard: the bearer token (header
 * and query, right and wrong, none configured), the Host rule (the
 * listener's address, the connected address, ports, the allowed list,
 * bracketed IPv6), the Origin rule (own, exact, any-port, "null", paths),
 * and the token file (trimmed; refused when missing, world-readable, empty,
 * short, or holding spaces).
 *
 * Token files are written into a mkdtemp directory removed at the end. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin_guard.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

static admin_guard guard_with(const char *token, const char *hosts, const char *origins) {
    admin_guard guard;
    char err[256];
    assert_int_equal(admin_guard_init(&guard, token, "127.0.0.1", 9100, hosts, origins, err, sizeof err), 0);
    return guard;
}

static void test_token(void **state) {
    (void)state;
    admin_guard guard = guard_with(TOKEN, NULL, NULL);
    assert_true(admin_guard_token_ok(&guard, "Bearer " TOKEN, NULL));
    assert_true(admin_guard_token_ok(&guard, "bearer " TOKEN, NULL));
    assert_true(admin_guard_token_ok(&guard, NULL, TOKEN));
    assert_true(admin_guard_token_ok(&guard, "Bearer wrong", TOKEN));
    assert_false(admin_guard_token_ok(&guard, NULL, NULL));
    assert_false(admin_guard_token_ok(&guard, "Bearer " TOKEN "x", NULL));
    assert_false(admin_guard_token_ok(&guard, "Bearer 0123456789abcdef", NULL));
    assert_false(admin_guard_token_ok(&guard, "Basic " TOKEN, NULL));
    assert_false(admin_guard_token_ok(&guard, TOKEN, NULL));
    assert_false(admin_guard_token_ok(&guard, "Bearer ", ""));
    assert_false(admin_guard_token_ok(&guard, NULL, "wrong"));
    admin_guard none = guard_with(NULL, NULL, NULL);
    assert_false(none.has_token);
    assert_false(admin_guard_token_ok(&none, "Bearer ", ""));
    assert_false(admin_guard_token_ok(&none, "Bearer " TOKEN, TOKEN));
}

static void test_host(void **state) {
    (void)state;
    admin_guard guard = guard_with(TOKEN, "tessera-admin.example, ops:8080", NULL);
    assert_true(admin_guard_host_ok(&guard, "127.0.0.1:9100", NULL));
    assert_true(admin_guard_host_ok(&guard, "10.1.2.3:9100", "10.1.2.3"));
    assert_false(admin_guard_host_ok(&guard, "10.1.2.3:9100", "10.9.9.9"));
    assert_false(admin_guard_host_ok(&guard, "127.0.0.1:9101", NULL));
    assert_false(admin_guard_host_ok(&guard, "127.0.0.1", NULL)); /* port 80 */
    assert_false(admin_guard_host_ok(&guard, "evil.example:9100", "127.0.0.1"));
    assert_false(admin_guard_host_ok(&guard, "localhost:9100", NULL));
    assert_false(admin_guard_host_ok(&guard, "", NULL));
    assert_false(admin_guard_host_ok(&guard, NULL, NULL));
    assert_false(admin_guard_host_ok(&guard, "127.0.0.1:", NULL));
    assert_false(admin_guard_host_ok(&guard, "127.0.0.1:9100x", NULL));
    assert_false(admin_guard_host_ok(&guard, "127.0.0.1:99999999999", NULL));
    /* The allowed list: any port, or the one named. */
    assert_true(admin_guard_host_ok(&guard, "tessera-admin.example", NULL));
    assert_true(admin_guard_host_ok(&guard, "TESSERA-ADMIN.example:443", NULL));
    assert_true(admin_guard_host_ok(&guard, "ops:8080", NULL));
    assert_false(admin_guard_host_ok(&guard, "ops:8081", NULL));
    assert_false(admin_guard_host_ok(&guard, "ops", NULL));
    /* IPv6 in brackets. */
    admin_guard v6;
    char err[128];
    assert_int_equal(admin_guard_init(&v6, TOKEN, "::1", 9100, NULL, NULL, err, sizeof err), 0);
    assert_true(admin_guard_host_ok(&v6, "[::1]:9100", NULL));
    assert_false(admin_guard_host_ok(&v6, "[::1]:9101", NULL));
    assert_false(admin_guard_host_ok(&v6, "[::1", NULL));
}

static void test_origin(void **state) {
    (void)state;
    admin_guard guard =
        guard_with(TOKEN, "tessera-admin.example", "http://127.0.0.1:9200, http://10.0.0.5:*,https://ops.example");
    assert_true(admin_guard_origin_ok(&guard, NULL, NULL));
    assert_true(admin_guard_origin_ok(&guard, "http://127.0.0.1:9100", NULL));
    assert_true(admin_guard_origin_ok(&guard, "http://tessera-admin.example", NULL));
    assert_true(admin_guard_origin_ok(&guard, "http://127.0.0.1:9200", NULL));
    assert_true(admin_guard_origin_ok(&guard, "HTTP://127.0.0.1:9200", NULL));
    assert_true(admin_guard_origin_ok(&guard, "http://10.0.0.5:31000", NULL));
    assert_true(admin_guard_origin_ok(&guard, "https://ops.example", NULL));
    assert_false(admin_guard_origin_ok(&guard, "http://127.0.0.1:9201", NULL));
    assert_false(admin_guard_origin_ok(&guard, "http://10.0.0.5:", NULL));
    assert_false(admin_guard_origin_ok(&guard, "http://10.0.0.5:123456", NULL));
    assert_false(admin_guard_origin_ok(&guard, "http://10.0.0.5:80.evil.example", NULL));
    assert_false(admin_guard_origin_ok(&guard, "http://10.0.0.50:80", NULL));
    assert_false(admin_guard_origin_ok(&guard, "http://127.0.0.1:9100/x", NULL));
    assert_false(admin_guard_origin_ok(&guard, "https://127.0.0.1:9100", NULL));
    assert_false(admin_guard_origin_ok(&guard, "http://evil.example", NULL));
    assert_false(admin_guard_origin_ok(&guard, "null", NULL));
    assert_false(admin_guard_origin_ok(&guard, "", NULL));

    /* A pod network: any address in it, on the given port or any. */
    admin_guard pods =
        guard_with(TOKEN, NULL, "http://10.244.0.0/16:20080, http://192.168.7.0/24:*, http://1.2.3.4/40:*");
    assert_true(admin_guard_origin_ok(&pods, "http://10.244.3.17:20080", NULL));
    assert_true(admin_guard_origin_ok(&pods, "http://10.244.255.255:20080", NULL));
    assert_true(admin_guard_origin_ok(&pods, "http://192.168.7.200:31000", NULL));
    assert_false(admin_guard_origin_ok(&pods, "http://10.245.0.1:20080", NULL));
    assert_false(admin_guard_origin_ok(&pods, "http://10.244.3.17:20081", NULL));
    assert_false(admin_guard_origin_ok(&pods, "http://10.244.3.17", NULL));
    assert_false(admin_guard_origin_ok(&pods, "http://10.244.3.17:20080/", NULL));
    assert_false(admin_guard_origin_ok(&pods, "https://10.244.3.17:20080", NULL));
    assert_false(admin_guard_origin_ok(&pods, "http://192.168.8.1:31000", NULL));
    assert_false(admin_guard_origin_ok(&pods, "http://192.168.7.200:", NULL));
    assert_false(admin_guard_origin_ok(&pods, "http://pods.evil.example:20080", NULL));
    assert_false(admin_guard_origin_ok(&pods, "http://1.2.3.4:80", NULL)); /* a /40 is no network */
}

static void test_lists_too_long(void **state) {
    (void)state;
    char origins[4096];
    memset(origins, 'a', sizeof origins - 1);
    origins[sizeof origins - 1] = '\0';
    admin_guard guard;
    char err[128];
    assert_int_equal(admin_guard_init(&guard, TOKEN, "127.0.0.1", 1, NULL, origins, err, sizeof err), -1);
    assert_non_null(strstr(err, "admin_allowed_origins"));
}

/* ---- the token file -------------------------------------------------------------- */

static char test_dir[64];

static const char *write_file(const char *name, const char *text, mode_t mode) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", test_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

static void test_token_file(void **state) {
    (void)state;
    char token[ADMIN_GUARD_TOKEN_MAX + 1], err[512];
    const char *path = write_file("good", "  \n" TOKEN "\r\n\t", 0600);
    assert_int_equal(admin_guard_read_token_file(path, token, sizeof token, err, sizeof err), 0);
    assert_string_equal(token, TOKEN);
    path = write_file("group", TOKEN, 0640);
    assert_int_equal(admin_guard_read_token_file(path, token, sizeof token, err, sizeof err), 0);

    struct {
        const char *name, *text;
        mode_t mode;
        const char *says;
    } refused[] = {
        {"open", TOKEN, 0644, "readable by every user"},
        {"empty", " \n\n", 0600, "is empty"},
        {"short", "abc\n", 0600, "shorter than 16"},
        {"spaced", "0123456789abcdef 0123456789abcdef", 0600, "a space or a non-printable byte"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        path = write_file(refused[i].name, refused[i].text, refused[i].mode);
        assert_int_equal(admin_guard_read_token_file(path, token, sizeof token, err, sizeof err), -1);
        assert_non_null(strstr(err, refused[i].says));
        assert_null(strstr(err, "0123456789abcdef")); /* never the token */
    }
    char long_text[ADMIN_GUARD_TOKEN_MAX + 2];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    path = write_file("long", long_text, 0600);
    assert_int_equal(admin_guard_read_token_file(path, token, sizeof token, err, sizeof err), -1);
    assert_non_null(strstr(err, "longer than 256"));
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing", test_dir);
    assert_int_equal(admin_guard_read_token_file(missing, token, sizeof token, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(admin_guard_read_token_file(test_dir, token, sizeof token, err, sizeof err), -1);
}

static int test_setup(void **state) {
    (void)state;
    snprintf(test_dir, sizeof test_dir, "/tmp/test_admin_guard.XXXXXX");
    return mkdtemp(test_dir) ? 0 : -1;
}

static int test_teardown(void **state) {
    (void)state;
    static const char *const names[] = {"good", "group", "open", "empty", "short", "spaced", "long"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", test_dir, names[i]);
        unlink(path);
    }
    return rmdir(test_dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token),          cmocka_unit_test(test_host),       cmocka_unit_test(test_origin),
        cmocka_unit_test(test_lists_too_long), cmocka_unit_test(test_token_file),
    };
    return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
