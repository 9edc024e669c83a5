/* test_config.c -- unit tests for config: defaults, JSON file, command-line
 * overrides and their order, every error the loader reports (each must
 * return -1 and name the key and the source), and config_print.
 *
 * JSON files are written into a mkdtemp directory that the group teardown
 * removes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

typedef struct test_settings {
    int64_t port;
    double rate;
    bool verbose;
    char name[8];
    int64_t workers;
    config_group game;
} test_settings;

static const config_key test_keys[] = {
    {"port", CONFIG_INT, offsetof(test_settings, port), 0, 1, 65535, "7000", "listen port"},
    {"rate", CONFIG_DOUBLE, offsetof(test_settings, rate), 0, 0, 100, "2.5", "ticks per second"},
    {"verbose", CONFIG_BOOL, offsetof(test_settings, verbose), 0, 0, 0, "false", "log more"},
    {"name", CONFIG_STRING, offsetof(test_settings, name), sizeof(((test_settings *)0)->name), 0, 0, "cell",
     "process name"},
    {"workers", CONFIG_INT, offsetof(test_settings, workers), 0, 1, 64, "4", "worker threads"},
    {"game", CONFIG_GROUP, offsetof(test_settings, game), 0, 0, 0, NULL, "the game's own"},
};
#define N_KEYS (sizeof(test_keys) / sizeof(test_keys[0]))

typedef struct test_env {
    char dir[64];
    char path[128]; /* the JSON file of the current test */
} test_env;

static int group_setup(void **state) {
    test_env *env = calloc(1, sizeof(*env));
    if (env == NULL) return -1;
    snprintf(env->dir, sizeof(env->dir), "/tmp/tessera_test_config_XXXXXX");
    if (mkdtemp(env->dir) == NULL) {
        free(env);
        return -1;
    }
    snprintf(env->path, sizeof(env->path), "%s/settings.json", env->dir);
    *state = env;
    return 0;
}

static int group_teardown(void **state) {
    test_env *env = *state;
    unlink(env->path);
    int rc = rmdir(env->dir);
    free(env);
    return rc;
}

/* Removes the current test's file, if it wrote one. */
static int test_teardown(void **state) {
    test_env *env = *state;
    unlink(env->path);
    return 0;
}

static const char *write_json(void **state, const char *text) {
    test_env *env = *state;
    FILE *f = fopen(env->path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    return env->path;
}

/* Loads and returns the result; err receives the message. */
static int load(const char *path, const char *const *overrides, size_t n, test_settings *s, char *err, size_t errlen) {
    memset(s, 0xa5, sizeof(*s));
    s->verbose = false;
    return config_load(test_keys, N_KEYS, s, path, (char *const *)overrides, n, err, errlen);
}

/* Asserts that loading `json` (or no file when NULL) with `overrides`
 * fails with a message containing every one of the NULL-terminated
 * `needles`. */
static void expect_error(void **state, const char *json, const char *const *overrides, size_t n,
                         const char *const *needles) {
    test_settings s;
    char err[256] = "";
    const char *path = json != NULL ? write_json(state, json) : NULL;
    int rc = load(path, overrides, n, &s, err, sizeof(err));
    if (rc != -1) fail_msg("expected an error, got rc=%d", rc);
    for (const char *const *needle = needles; *needle != NULL; needle++) {
        if (strstr(err, *needle) == NULL) fail_msg("error \"%s\" does not contain \"%s\"", err, *needle);
    }
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ARGS(...) \
    ((const char *const[]){__VA_ARGS__}), (sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static void test_defaults(void **state) {
    test_settings s;
    char err[256] = "untouched";
    assert_int_equal(load(NULL, NULL, 0, &s, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_int_equal(s.port, 7000);
    assert_true(s.rate == 2.5);
    assert_false(s.verbose);
    assert_string_equal(s.name, "cell");
    assert_int_equal(s.workers, 4);
}

static void test_json_overrides_defaults(void **state) {
    const char *path = write_json(state, "{\n"
                                         "  \"port\": 8000,\n"
                                         "  \"rate\": 10,\n"
                                         "  \"verbose\": true,\n"
                                         "  \"name\": \"alpha\"\n"
                                         "}\n");
    test_settings s;
    char err[256];
    assert_int_equal(load(path, NULL, 0, &s, err, sizeof(err)), 0);
    assert_int_equal(s.port, 8000);
    assert_true(s.rate == 10.0);
    assert_true(s.verbose);
    assert_string_equal(s.name, "alpha");
    assert_int_equal(s.workers, 4); /* not in the file: default */
}

static void test_command_line_wins(void **state) {
    const char *path = write_json(state, "{\"port\": 8000, \"verbose\": true, \"name\": \"alpha\"}");
    test_settings s;
    char err[256];
    assert_int_equal(load(path, ARGS("port=9000", "verbose=0", "name=a=b", "rate=0.25"), &s, err, sizeof(err)), 0);
    assert_int_equal(s.port, 9000);
    assert_false(s.verbose);
    assert_string_equal(s.name, "a=b"); /* split at the first '=' */
    assert_true(s.rate == 0.25);
    assert_int_equal(s.workers, 4);
    /* Later overrides win over earlier ones; an empty string is a value. */
    assert_int_equal(load(NULL, ARGS("workers=2", "workers=64", "name="), &s, err, sizeof(err)), 0);
    assert_int_equal(s.workers, 64);
    assert_string_equal(s.name, "");
}

static void test_bool_parsing(void **state) {
    test_settings s;
    char err[256];
    assert_int_equal(load(NULL, ARGS("verbose=true"), &s, err, sizeof(err)), 0);
    assert_true(s.verbose);
    assert_int_equal(load(NULL, ARGS("verbose=1"), &s, err, sizeof(err)), 0);
    assert_true(s.verbose);
    assert_int_equal(load(NULL, ARGS("verbose=true", "verbose=false"), &s, err, sizeof(err)), 0);
    assert_false(s.verbose);
    assert_int_equal(load(NULL, ARGS("verbose=1", "verbose=0"), &s, err, sizeof(err)), 0);
    assert_false(s.verbose);
    expect_error(state, NULL, ARGS("verbose=yes"), NEEDLES("verbose", "command line", "yes"));
    expect_error(state, NULL, ARGS("verbose=TRUE"), NEEDLES("verbose", "command line"));
    expect_error(state, NULL, ARGS("verbose="), NEEDLES("verbose", "command line"));
    expect_error(state, NULL, ARGS("verbose=2"), NEEDLES("verbose", "command line"));
    /* JSON wants a real boolean. */
    expect_error(state, "{\"verbose\": 1}", NULL, 0, NEEDLES("verbose", "boolean"));
    expect_error(state, "{\"verbose\": \"true\"}", NULL, 0, NEEDLES("verbose", "boolean"));
    const char *path = write_json(state, "{\"verbose\": false}");
    assert_int_equal(load(path, ARGS("verbose=true"), &s, err, sizeof(err)), 0);
    assert_true(s.verbose);
}

static void test_string_length(void **state) {
    test_settings s;
    char err[256];
    /* sizeof name is 8: 7 bytes fit, 8 do not. */
    assert_int_equal(load(NULL, ARGS("name=1234567"), &s, err, sizeof(err)), 0);
    assert_string_equal(s.name, "1234567");
    expect_error(state, NULL, ARGS("name=12345678"), NEEDLES("name", "command line", "too long"));
    expect_error(state, "{\"name\": \"12345678\"}", NULL, 0, NEEDLES("name", "too long"));
    const char *path = write_json(state, "{\"name\": \"1234567\"}");
    assert_int_equal(load(path, NULL, 0, &s, err, sizeof(err)), 0);
    assert_string_equal(s.name, "1234567");
}

static void test_json_errors(void **state) {
    test_env *env = *state;
    expect_error(state, "{\"bogus\": 1}", NULL, 0, NEEDLES(env->path, "unknown key 'bogus'"));
    expect_error(state, "{\"port\": \"80\"}", NULL, 0, NEEDLES(env->path, "port", "integer"));
    expect_error(state, "{\"port\": null}", NULL, 0, NEEDLES("port", "integer"));
    expect_error(state, "{\"port\": 80.5}", NULL, 0, NEEDLES("port", "integer", "80.5"));
    expect_error(state, "{\"port\": 1e30}", NULL, 0, NEEDLES("port", "integer"));
    expect_error(state, "{\"rate\": \"fast\"}", NULL, 0, NEEDLES("rate", "number"));
    expect_error(state, "{\"rate\": [1]}", NULL, 0, NEEDLES("rate", "number", "array"));
    expect_error(state, "{\"name\": 5}", NULL, 0, NEEDLES("name", "string"));
    expect_error(state, "{\"name\": {}}", NULL, 0, NEEDLES("name", "string", "object"));
    /* Out of bounds: the key, the value and the bounds. */
    expect_error(state, "{\"port\": 70000}", NULL, 0, NEEDLES(env->path, "port", "70000", "[1, 65535]"));
    expect_error(state, "{\"port\": 0}", NULL, 0, NEEDLES("port", "0", "[1, 65535]"));
    expect_error(state, "{\"rate\": -0.5}", NULL, 0, NEEDLES("rate", "-0.5", "[0, 100]"));
    expect_error(state, "{\"rate\": 100.25}", NULL, 0, NEEDLES("rate", "100.25", "[0, 100]"));
    /* Bounds are inclusive. */
    test_settings s;
    char err[256];
    const char *path = write_json(state, "{\"port\": 65535, \"rate\": 0, \"workers\": 1}");
    assert_int_equal(load(path, NULL, 0, &s, err, sizeof(err)), 0);
    assert_int_equal(s.port, 65535);
    assert_true(s.rate == 0.0);
    assert_int_equal(s.workers, 1);
    /* An integral number written with a fraction is still an integer. */
    path = write_json(state, "{\"port\": 8080.0}");
    assert_int_equal(load(path, NULL, 0, &s, err, sizeof(err)), 0);
    assert_int_equal(s.port, 8080);
}

static void test_file_errors(void **state) {
    test_env *env = *state;
    test_settings s;
    char err[256];
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/no-such-file.json", env->dir);
    assert_int_equal(load(missing, NULL, 0, &s, err, sizeof(err)), -1);
    assert_non_null(strstr(err, missing));
    assert_non_null(strstr(err, strerror(ENOENT)));

    /* The mistake is on line 3. */
    expect_error(state, "{\n  \"port\": 80,\n  oops\n}\n", NULL, 0, NEEDLES(env->path, "invalid JSON", "line 3"));
    expect_error(state, "{\"port\": 80", NULL, 0, NEEDLES(env->path, "invalid JSON"));
    expect_error(state, "", NULL, 0, NEEDLES(env->path, "invalid JSON"));
    expect_error(state, "{} trailing", NULL, 0, NEEDLES(env->path, "invalid JSON"));
    expect_error(state, "[1, 2]", NULL, 0, NEEDLES(env->path, "object"));
    expect_error(state, "42", NULL, 0, NEEDLES(env->path, "object"));

    /* An empty object is fine: defaults stand. */
    const char *path = write_json(state, " { } ");
    assert_int_equal(load(path, NULL, 0, &s, err, sizeof(err)), 0);
    assert_int_equal(s.port, 7000);
}

static void test_command_line_errors(void **state) {
    expect_error(state, NULL, ARGS("port"), NEEDLES("port", "command line"));
    expect_error(state, NULL, ARGS("port=80", "verbose"), NEEDLES("verbose", "command line"));
    expect_error(state, NULL, ARGS("nope=1"), NEEDLES("unknown key 'nope'", "command line"));
    expect_error(state, NULL, ARGS("=1"), NEEDLES("unknown key ''", "command line"));
    expect_error(state, NULL, ARGS("port=abc"), NEEDLES("port", "command line", "integer"));
    expect_error(state, NULL, ARGS("port=80x"), NEEDLES("port", "command line"));
    expect_error(state, NULL, ARGS("port= 80"), NEEDLES("port", "command line"));
    expect_error(state, NULL, ARGS("port="), NEEDLES("port", "command line"));
    expect_error(state, NULL, ARGS("port=1.5"), NEEDLES("port", "command line"));
    expect_error(state, NULL, ARGS("port=99999999999999999999"), NEEDLES("port", "command line"));
    expect_error(state, NULL, ARGS("port=0"), NEEDLES("port", "command line", "0", "[1, 65535]"));
    expect_error(state, NULL, ARGS("port=65536"), NEEDLES("port", "command line", "65536"));
    expect_error(state, NULL, ARGS("rate=fast"), NEEDLES("rate", "command line", "number"));
    expect_error(state, NULL, ARGS("rate=nan"), NEEDLES("rate", "command line"));
    expect_error(state, NULL, ARGS("rate=inf"), NEEDLES("rate", "command line"));
    expect_error(state, NULL, ARGS("rate=101"), NEEDLES("rate", "command line", "101"));
    /* A bad override still fails when the file was fine. */
    expect_error(state, "{\"port\": 8000}", ARGS("workers=65"), NEEDLES("workers", "command line", "65", "[1, 64]"));
    /* And a bad file fails before the overrides could fix it. */
    expect_error(state, "{\"port\": 0}", ARGS("port=80"), NEEDLES("port", "[1, 65535]"));
}

static void test_bad_default_in_table(void **state) {
    const config_key keys[] = {
        {"port", CONFIG_INT, offsetof(test_settings, port), 0, 1, 65535, "0", "listen port"},
    };
    test_settings s;
    char err[256];
    assert_int_equal(config_load(keys, 1, &s, NULL, NULL, 0, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "port"));
    assert_non_null(strstr(err, "default"));
    /* A tiny error buffer truncates the message but never overflows. */
    char tiny[8];
    assert_int_equal(config_load(keys, 1, &s, NULL, NULL, 0, tiny, sizeof(tiny)), -1);
    assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
    assert_int_equal(config_load(keys, 1, &s, NULL, NULL, 0, NULL, 0), -1);
}

static void test_print(void **state) {
    test_settings s;
    char err[256];
    assert_int_equal(load(NULL, ARGS("port=9000", "verbose=true", "rate=0.1", "name=a\"b"), &s, err, sizeof(err)), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    config_print(test_keys, N_KEYS, &s, f);
    assert_int_equal(fclose(f), 0);
    assert_string_equal(buf, "port = 9000  # listen port\n"
                             "rate = 0.1  # ticks per second\n"
                             "verbose = true  # log more\n"
                             "name = \"a\\\"b\"  # process name\n"
                             "workers = 4  # worker threads\n"
                             "game = {}  # the game's own\n");
    free(buf);
}

/* A group holds what the program does not declare: from JSON (numbers,
 * strings, booleans) and from "group.name=value" on the command line,
 * which replaces a value of the file; anything else is an error naming
 * the key. */
static void test_group(void **state) {
    test_settings s;
    char err[256];
    const char *path = write_json(state, "{\"game\": {\"npc_count\": 40, \"mode\": \"pvp\", \"night\": true}}");
    assert_int_equal(load(path, ARGS("game.npc_count=5", "game.radius=2.5"), &s, err, sizeof(err)), 0);
    assert_int_equal(s.game.count, 4);
    assert_string_equal(config_group_find(&s.game, "npc_count"), "5");
    assert_string_equal(config_group_find(&s.game, "mode"), "pvp");
    assert_string_equal(config_group_find(&s.game, "night"), "true");
    assert_string_equal(config_group_find(&s.game, "radius"), "2.5");
    assert_null(config_group_find(&s.game, "missing"));
    /* With no file and no override, it is empty. */
    assert_int_equal(load(NULL, NULL, 0, &s, err, sizeof(err)), 0);
    assert_int_equal(s.game.count, 0);
    expect_error(state, "{\"game\": 5}", NULL, 0, NEEDLES("game", "an object"));
    expect_error(state, "{\"game\": {\"a\": [1]}}", NULL, 0, NEEDLES("game", "an object"));
    expect_error(state, NULL, ARGS("game.=1"), NEEDLES("command line", "game."));
    expect_error(state, NULL, ARGS("other.x=1"), NEEDLES("unknown key 'other.x'"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_defaults, test_teardown),
        cmocka_unit_test_teardown(test_json_overrides_defaults, test_teardown),
        cmocka_unit_test_teardown(test_command_line_wins, test_teardown),
        cmocka_unit_test_teardown(test_bool_parsing, test_teardown),
        cmocka_unit_test_teardown(test_string_length, test_teardown),
        cmocka_unit_test_teardown(test_json_errors, test_teardown),
        cmocka_unit_test_teardown(test_file_errors, test_teardown),
        cmocka_unit_test_teardown(test_command_line_errors, test_teardown),
        cmocka_unit_test_teardown(test_bad_default_in_table, test_teardown),
        cmocka_unit_test_teardown(test_print, test_teardown),
        cmocka_unit_test_teardown(test_group, test_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
