/* test_entity_def.c -- unit tests for entity_def: every type, defaults,
 * every loader error (each must return -1 and name the file and the member),
 * the audience of each flag, quantization bit counts, the digest, the
 * describe -> load round trip, directory loading, game events (ids across
 * files, their errors, the digest with and without them), and the demo's
 * own definitions.
 *
 * Files are written into a mkdtemp directory that the group teardown
 * removes. The demo directory is $TESSERA_SOURCE_DIR/demo/entities, or
 * ../demo/entities from the current directory when the variable is unset. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "entity_def.h"

typedef struct test_env {
    char dir[64];
} test_env;

static test_env *env_of(void **state) { return *state; }

/* Removes every file in `dir`, then `dir` itself when `remove_dir`. */
static int empty_dir(const char *dir, bool remove_dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        char path[512];
        if (snprintf(path, sizeof path, "%s/%s", dir, entry->d_name) >= (int)sizeof path) continue;
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            empty_dir(path, true);
        else
            unlink(path);
    }
    closedir(d);
    return remove_dir ? rmdir(dir) : 0;
}

static int group_setup(void **state) {
    test_env *env = calloc(1, sizeof *env);
    if (env == NULL) return -1;
    snprintf(env->dir, sizeof env->dir, "/tmp/tessera_test_entity_def_XXXXXX");
    if (mkdtemp(env->dir) == NULL) {
        free(env);
        return -1;
    }
    *state = env;
    return 0;
}

static int group_teardown(void **state) {
    test_env *env = *state;
    int rc = empty_dir(env->dir, true);
    free(env);
    return rc;
}

static int test_teardown(void **state) { return empty_dir(env_of(state)->dir, false); }

/* Writes `text` to <tmp>/<name>, returns the path (static buffer). */
static const char *write_file(void **state, const char *name, const char *text) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", env_of(state)->dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    return path;
}

static entity_def_registry *load_ok(const char *text) {
    entity_def_registry *reg = NULL;
    char err[512] = "";
    if (entity_def_load_string(text, "test.json", &reg, err, sizeof err) != 0) fail_msg("load failed: %s", err);
    assert_non_null(reg);
    assert_string_equal(err, "");
    return reg;
}

/* Asserts that `text`, written to bad.json and loaded as a file, fails
 * with a message holding the file path and every NULL-terminated needle. */
static void expect_error(void **state, const char *text, const char *const *needles) {
    const char *path = write_file(state, "bad.json", text);
    char saved[256];
    snprintf(saved, sizeof saved, "%s", path);
    entity_def_registry *reg = (entity_def_registry *)0x1;
    char err[512] = "";
    int rc = entity_def_load_file(saved, &reg, err, sizeof err);
    if (rc != -1) fail_msg("expected an error for %s", text);
    assert_null(reg);
    if (strstr(err, saved) == NULL) fail_msg("error \"%s\" does not name the file %s", err, saved);
    for (const char *const *needle = needles; *needle != NULL; needle++) {
        if (strstr(err, *needle) == NULL) fail_msg("error \"%s\" does not contain \"%s\"", err, *needle);
    }
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A class "Avatar" with the given properties JSON (the inside of the
 * array). Static buffer. */
static const char *with_props(const char *props) {
    static char text[4096];
    snprintf(text, sizeof text, "{\"entities\": [{\"name\": \"Avatar\", \"properties\": [%s]}]}", props);
    return text;
}

/* ---- types ------------------------------------------------------------ */

static const char every_type_doc[] =
    "{\"types\": [\n"
    "  {\"name\": \"Inner\", \"fields\": [{\"name\": \"a\", \"type\": \"int8\"},\n"
    "                                  {\"name\": \"b\", \"type\": \"string\", \"max_length\": 4,"
    "                                   \"default\": \"hi\"}]},\n"
    "  {\"name\": \"Outer\", \"fields\": [{\"name\": \"inner\", \"type\": \"Inner\"},\n"
    "     {\"name\": \"list\", \"type\": \"array\", \"count\": 2, \"element\": \"Inner\"}]}\n"
    "],\n"
    "\"entities\": [{\"name\": \"All\", \"properties\": [\n"
    "  {\"name\": \"i8\", \"type\": \"int8\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"i16\", \"type\": \"int16\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"i32\", \"type\": \"int32\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"i64\", \"type\": \"int64\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"u8\", \"type\": \"uint8\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"u16\", \"type\": \"uint16\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"u32\", \"type\": \"uint32\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"u64\", \"type\": \"uint64\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"f\", \"type\": \"float\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"d\", \"type\": \"double\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"flag\", \"type\": \"bool\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"s\", \"type\": \"string\", \"max_length\": 16, \"flags\": \"BASE\"},\n"
    "  {\"name\": \"raw\", \"type\": \"bytes\", \"max_length\": 8, \"flags\": \"BASE\"},\n"
    "  {\"name\": \"v2\", \"type\": \"vector2\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"v3\", \"type\": \"vector3\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"target\", \"type\": \"entity\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"arr\", \"type\": \"array\", \"element\": \"uint16\", \"count\": 8,"
    "   \"flags\": \"BASE\"},\n"
    "  {\"name\": \"grid\", \"type\": \"array\", \"count\": 2, \"flags\": \"BASE\","
    "   \"element\": {\"type\": \"array\", \"count\": 3,"
    "                 \"element\": {\"type\": \"int32\", \"bits\": 10}}},\n"
    "  {\"name\": \"names\", \"type\": \"array\", \"count\": 2, \"flags\": \"BASE\","
    "   \"element\": {\"type\": \"string\", \"max_length\": 5}},\n"
    "  {\"name\": \"outer\", \"type\": \"Outer\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"qv\", \"type\": \"vector3\", \"flags\": \"BASE\","
    "   \"quantize\": {\"min\": -1, \"max\": 1, \"precision\": 0.001}},\n"
    "  {\"name\": \"qd\", \"type\": \"double\", \"flags\": \"BASE\","
    "   \"quantize\": {\"min\": 0, \"max\": 1e12, \"precision\": 0.001}},\n"
    "  {\"name\": \"small\", \"type\": \"uint64\", \"bits\": 1, \"flags\": \"BASE\"}\n"
    "]}]}\n";

static void test_every_type_parses(void **state) {
    entity_def_registry *reg = load_ok(every_type_doc);
    const entity_def_class *cls = entity_def_registry_find_class(reg, "All");
    assert_non_null(cls);
    struct {
        const char *name;
        entity_def_kind kind;
        unsigned bits;
    } expect[] = {
        {"i8", ENTITY_DEF_INT8, 8},        {"i16", ENTITY_DEF_INT16, 16},   {"i32", ENTITY_DEF_INT32, 32},
        {"i64", ENTITY_DEF_INT64, 64},     {"u8", ENTITY_DEF_UINT8, 8},     {"u16", ENTITY_DEF_UINT16, 16},
        {"u32", ENTITY_DEF_UINT32, 32},    {"u64", ENTITY_DEF_UINT64, 64},  {"f", ENTITY_DEF_FLOAT, 32},
        {"d", ENTITY_DEF_DOUBLE, 64},      {"flag", ENTITY_DEF_BOOL, 1},    {"s", ENTITY_DEF_STRING, 0},
        {"raw", ENTITY_DEF_BYTES, 0},      {"v2", ENTITY_DEF_VECTOR2, 32},  {"v3", ENTITY_DEF_VECTOR3, 32},
        {"target", ENTITY_DEF_ENTITY, 64}, {"arr", ENTITY_DEF_ARRAY, 0},    {"grid", ENTITY_DEF_ARRAY, 0},
        {"names", ENTITY_DEF_ARRAY, 0},    {"outer", ENTITY_DEF_STRUCT, 0}, {"qv", ENTITY_DEF_VECTOR3, 11},
        {"qd", ENTITY_DEF_DOUBLE, 50},     {"small", ENTITY_DEF_UINT64, 1},
    };
    assert_int_equal(cls->property_count, sizeof expect / sizeof expect[0]);
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        const entity_def_property *prop = entity_def_class_find_property(cls, expect[i].name);
        assert_non_null(prop);
        assert_int_equal(prop->id, i);
        assert_ptr_equal(entity_def_class_property(cls, (uint16_t)i), prop);
        assert_int_equal(prop->type.kind, expect[i].kind);
        assert_int_equal(prop->type.bits, expect[i].bits);
        assert_string_not_equal(entity_def_kind_name(prop->type.kind), "?");
    }
    /* integer ranges from the natural width */
    const entity_def_property *p = entity_def_class_find_property(cls, "i8");
    assert_int_equal(p->type.int_min, -128);
    assert_int_equal(p->type.int_max, 127);
    p = entity_def_class_find_property(cls, "i64");
    assert_true(p->type.int_min == INT64_MIN);
    assert_true(p->type.int_max == (uint64_t)INT64_MAX);
    p = entity_def_class_find_property(cls, "u64");
    assert_int_equal(p->type.int_min, 0);
    assert_true(p->type.int_max == UINT64_MAX);
    p = entity_def_class_find_property(cls, "small");
    assert_true(p->type.int_max == 1);
    p = entity_def_class_find_property(cls, "s");
    assert_int_equal(p->type.max_length, 16);
    p = entity_def_class_find_property(cls, "raw");
    assert_int_equal(p->type.max_length, 8);
    p = entity_def_class_find_property(cls, "arr");
    assert_int_equal(p->type.count, 8);
    assert_int_equal(p->type.element->kind, ENTITY_DEF_UINT16);
    p = entity_def_class_find_property(cls, "grid");
    assert_int_equal(p->type.count, 2);
    assert_int_equal(p->type.element->kind, ENTITY_DEF_ARRAY);
    assert_int_equal(p->type.element->count, 3);
    assert_int_equal(p->type.element->element->kind, ENTITY_DEF_INT32);
    assert_int_equal(p->type.element->element->bits, 10);
    assert_int_equal(p->type.element->element->int_min, -512);
    assert_int_equal(p->type.element->element->int_max, 511);
    assert_int_equal(p->type.value_count, 6);
    assert_int_equal(entity_def_class_find_property(cls, "i8")->type.value_count, 1);
    p = entity_def_class_find_property(cls, "names");
    assert_int_equal(p->type.element->kind, ENTITY_DEF_STRING);
    assert_int_equal(p->type.element->max_length, 5);
    p = entity_def_class_find_property(cls, "outer");
    const entity_def_struct *outer = entity_def_registry_find_struct(reg, "Outer");
    assert_ptr_equal(p->type.structure, outer);
    assert_int_equal(outer->field_count, 2);
    assert_int_equal(outer->value_count, 6); /* inner (2) + list of 2 inner (4) */
    assert_int_equal(p->type.value_count, 6);
    assert_ptr_equal(outer->fields[0].type.structure, entity_def_registry_find_struct(reg, "Inner"));
    assert_int_equal(outer->fields[1].type.kind, ENTITY_DEF_ARRAY);
    p = entity_def_class_find_property(cls, "qv");
    assert_true(p->type.quantized);
    assert_true(p->type.quant_min == -1 && p->type.quant_max == 1 && p->type.quant_precision == 0.001);
    /* structs are listed by name */
    assert_int_equal(entity_def_registry_struct_count(reg), 2);
    assert_string_equal(entity_def_registry_struct(reg, 0)->name, "Inner");
    assert_string_equal(entity_def_registry_struct(reg, 1)->name, "Outer");
    assert_null(entity_def_registry_struct(reg, 2));
    entity_def_registry_free(reg);
}

/* ---- defaults --------------------------------------------------------- */

static char *print(const cJSON *json) {
    char *text = cJSON_PrintUnformatted(json);
    assert_non_null(text);
    return text;
}

static void assert_default(const entity_def_class *cls, const char *prop, const char *expected) {
    const entity_def_property *p = entity_def_class_find_property(cls, prop);
    assert_non_null(p);
    assert_non_null(p->default_value);
    char *text = print(p->default_value);
    if (strcmp(text, expected) != 0) fail_msg("default of %s is %s, expected %s", prop, text, expected);
    free(text);
}

static void test_defaults_implied(void **state) {
    entity_def_registry *reg = load_ok(every_type_doc);
    const entity_def_class *cls = entity_def_registry_find_class(reg, "All");
    assert_default(cls, "i8", "0");
    assert_default(cls, "f", "0");
    assert_default(cls, "flag", "false");
    assert_default(cls, "s", "\"\"");
    assert_default(cls, "raw", "\"\"");
    assert_default(cls, "v2", "[0,0]");
    assert_default(cls, "target", "0");
    assert_default(cls, "arr", "[0,0,0,0,0,0,0,0]");
    assert_default(cls, "grid", "[[0,0,0],[0,0,0]]");
    /* a struct takes its fields' declared defaults */
    assert_default(cls, "outer",
                   "{\"inner\":{\"a\":0,\"b\":\"hi\"},\"list\":[{\"a\":0,\"b\":\"hi\"},"
                   "{\"a\":0,\"b\":\"hi\"}]}");
    entity_def_registry_free(reg);

    /* a quantized range without 0: the end nearest to 0 */
    reg = load_ok(with_props("{\"name\": \"scale\", \"type\": \"float\", \"flags\": \"ALL_CLIENTS\","
                             " \"quantize\": {\"min\": 0.5, \"max\": 2, \"precision\": 0.01}},"
                             "{\"name\": \"depth\", \"type\": \"vector2\", \"flags\": \"ALL_CLIENTS\","
                             " \"quantize\": {\"min\": -10, \"max\": -2, \"precision\": 0.5}}"));
    cls = entity_def_registry_find_class(reg, "Avatar");
    assert_default(cls, "scale", "0.5");
    assert_default(cls, "depth", "[-2,-2]");
    entity_def_registry_free(reg);
}

static void test_defaults_given(void **state) {
    entity_def_registry *reg = load_ok(
        "{\"types\": [{\"name\": \"Pair\", \"fields\": ["
        "   {\"name\": \"x\", \"type\": \"uint8\", \"default\": 7},"
        "   {\"name\": \"y\", \"type\": \"uint8\"}]}],"
        " \"entities\": [{\"name\": \"Avatar\", \"properties\": ["
        "  {\"name\": \"hp\", \"type\": \"int16\", \"bits\": 12, \"flags\": \"BASE\", \"default\": -2048},"
        "  {\"name\": \"top\", \"type\": \"int16\", \"bits\": 12, \"flags\": \"BASE\", \"default\": 2047},"
        "  {\"name\": \"big\", \"type\": \"uint64\", \"flags\": \"BASE\", \"default\": 9007199254740992},"
        "  {\"name\": \"f\", \"type\": \"float\", \"flags\": \"BASE\", \"default\": 1.5},"
        "  {\"name\": \"on\", \"type\": \"bool\", \"flags\": \"BASE\", \"default\": true},"
        "  {\"name\": \"s\", \"type\": \"string\", \"max_length\": 3, \"flags\": \"BASE\", \"default\": \"abc\"},"
        "  {\"name\": \"raw\", \"type\": \"bytes\", \"max_length\": 2, \"flags\": \"BASE\", \"default\": \"A0fF\"},"
        "  {\"name\": \"v\", \"type\": \"vector3\", \"flags\": \"BASE\", \"default\": [1, -2.5, 3]},"
        "  {\"name\": \"arr\", \"type\": \"array\", \"element\": \"Pair\", \"count\": 2, \"flags\": \"BASE\","
        "   \"default\": [{\"y\": 1}, {\"x\": 2, \"y\": 3}]},"
        "  {\"name\": \"p\", \"type\": \"Pair\", \"flags\": \"BASE\", \"default\": {\"y\": 9}},"
        "  {\"name\": \"nz\", \"type\": \"double\", \"flags\": \"BASE\", \"default\": -0.0}"
        "]}]}");
    const entity_def_class *cls = entity_def_registry_find_class(reg, "Avatar");
    assert_default(cls, "hp", "-2048");
    assert_default(cls, "top", "2047");
    assert_true(entity_def_class_find_property(cls, "big")->default_value->valuedouble == 9007199254740992.0);
    assert_default(cls, "f", "1.5");
    assert_default(cls, "on", "true");
    assert_default(cls, "s", "\"abc\"");
    assert_default(cls, "raw", "\"a0ff\"");
    assert_default(cls, "v", "[1,-2.5,3]");
    assert_default(cls, "arr", "[{\"x\":7,\"y\":1},{\"x\":2,\"y\":3}]");
    assert_default(cls, "p", "{\"x\":7,\"y\":9}");
    assert_default(cls, "nz", "0");
    entity_def_registry_free(reg);
}

static void test_defaults_rejected(void **state) {
    static const struct {
        const char *prop;
        const char *needle;
    } cases[] = {
        {"{\"name\": \"hp\", \"type\": \"int16\", \"bits\": 12, \"flags\": \"BASE\", \"default\": 2048}",
         "outside [-2048, 2047]"},
        {"{\"name\": \"hp\", \"type\": \"uint8\", \"flags\": \"BASE\", \"default\": -1}", "outside [0, 255]"},
        {"{\"name\": \"hp\", \"type\": \"uint8\", \"flags\": \"BASE\", \"default\": 1.5}", "integer"},
        {"{\"name\": \"hp\", \"type\": \"uint8\", \"flags\": \"BASE\", \"default\": \"1\"}", "integer"},
        {"{\"name\": \"hp\", \"type\": \"int64\", \"flags\": \"BASE\", \"default\": 1e300}", "2^53"},
        {"{\"name\": \"hp\", \"type\": \"float\", \"flags\": \"BASE\", \"default\": 1e300}", "float"},
        {"{\"name\": \"hp\", \"type\": \"float\", \"flags\": \"BASE\", \"default\": 3,"
         " \"quantize\": {\"min\": 0.5, \"max\": 2, \"precision\": 0.01}}",
         "quantization range"},
        {"{\"name\": \"hp\", \"type\": \"bool\", \"flags\": \"BASE\", \"default\": 0}", "true or false"},
        {"{\"name\": \"hp\", \"type\": \"string\", \"max_length\": 2, \"flags\": \"BASE\", \"default\": \"abc\"}",
         "more than max_length 2"},
        {"{\"name\": \"hp\", \"type\": \"bytes\", \"max_length\": 2, \"flags\": \"BASE\", \"default\": \"abc\"}",
         "even number"},
        {"{\"name\": \"hp\", \"type\": \"bytes\", \"max_length\": 2, \"flags\": \"BASE\", \"default\": \"zz\"}",
         "hex digits"},
        {"{\"name\": \"hp\", \"type\": \"bytes\", \"max_length\": 1, \"flags\": \"BASE\", \"default\": \"0011\"}",
         "more than max_length 1"},
        {"{\"name\": \"hp\", \"type\": \"vector2\", \"flags\": \"BASE\", \"default\": [1, 2, 3]}",
         "array of 2 numbers"},
        {"{\"name\": \"hp\", \"type\": \"vector2\", \"flags\": \"BASE\", \"default\": [1, \"x\"]}", "default[1]"},
        {"{\"name\": \"hp\", \"type\": \"entity\", \"flags\": \"BASE\", \"default\": 5}", "must be 0"},
        {"{\"name\": \"hp\", \"type\": \"array\", \"element\": \"uint8\", \"count\": 3, \"flags\": \"BASE\","
         " \"default\": [1, 2]}",
         "exactly 3"},
        {"{\"name\": \"hp\", \"type\": \"array\", \"element\": \"uint8\", \"count\": 2, \"flags\": \"BASE\","
         " \"default\": [1, 256]}",
         "default[1] 256 is outside"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(state, with_props(cases[i].prop), NEEDLES("Avatar.hp", cases[i].needle));

    /* struct defaults: unknown field, bad field value, field default */
    expect_error(state,
                 "{\"types\": [{\"name\": \"P\", \"fields\": [{\"name\": \"x\", \"type\": \"uint8\"}]}],"
                 " \"entities\": [{\"name\": \"Avatar\", \"properties\": ["
                 "  {\"name\": \"hp\", \"type\": \"P\", \"flags\": \"BASE\", \"default\": {\"z\": 1}}]}]}",
                 NEEDLES("Avatar.hp", "no field 'z'"));
    expect_error(state,
                 "{\"types\": [{\"name\": \"P\", \"fields\": [{\"name\": \"x\", \"type\": \"uint8\"}]}],"
                 " \"entities\": [{\"name\": \"Avatar\", \"properties\": ["
                 "  {\"name\": \"hp\", \"type\": \"P\", \"flags\": \"BASE\", \"default\": {\"x\": 300}}]}]}",
                 NEEDLES("Avatar.hp", "default.x 300"));
    expect_error(state,
                 "{\"types\": [{\"name\": \"P\", \"fields\": [{\"name\": \"x\", \"type\": \"uint8\","
                 "  \"default\": 999}]}]}",
                 NEEDLES("P.x", "default 999 is outside [0, 255]"));
}

/* ---- errors ----------------------------------------------------------- */

static const char good_method_class_fmt[] = "{\"entities\": [{\"name\": \"Avatar\", \"%s\": [%s]}]}";

static const char *with_methods(const char *section, const char *methods) {
    static char text[4096];
    snprintf(text, sizeof text, good_method_class_fmt, section, methods);
    return text;
}

static void test_error_unknown_keys(void **state) {
    expect_error(state, "{\"entities\": [], \"extra\": 1}", NEEDLES("unknown key 'extra'"));
    expect_error(state, with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": \"BASE\", \"colour\": 1}"),
                 NEEDLES("Avatar.hp", "unknown key 'colour'"));
    expect_error(state, with_props("{\"name\": \"hp\", \"type\": \"float\", \"flags\": \"BASE\", \"bits\": 8}"),
                 NEEDLES("Avatar.hp", "'bits' does not apply to type float"));
    expect_error(state,
                 with_props("{\"name\": \"hp\", \"type\": \"float\", \"flags\": \"BASE\","
                            " \"quantize\": {\"min\": 0, \"max\": 1, \"precision\": 0.1, \"step\": 1}}"),
                 NEEDLES("Avatar.hp", "unknown key 'step'"));
    expect_error(state,
                 with_props("{\"name\": \"hp\", \"type\": \"array\", \"count\": 2, \"flags\": \"BASE\","
                            " \"element\": {\"type\": \"uint8\", \"flags\": \"BASE\"}}"),
                 NEEDLES("Avatar.hp[]", "unknown key 'flags'"));
    expect_error(state, with_methods("cell_methods", "{\"name\": \"castSpell\", \"exposed\": true, \"colour\": 1}"),
                 NEEDLES("Avatar.castSpell", "unknown key 'colour'"));
    expect_error(state,
                 with_methods("base_methods",
                              "{\"name\": \"chat\", \"args\": [{\"name\": \"text\", \"type\": \"uint8\","
                              " \"colour\": 1}]}"),
                 NEEDLES("Avatar.chat(text)", "unknown key 'colour'"));
    expect_error(state, "{\"entities\": [{\"name\": \"Avatar\", \"bogus\": []}]}",
                 NEEDLES("Avatar", "unknown key 'bogus'"));
    expect_error(state, "{\"types\": [{\"name\": \"P\", \"bogus\": 1, \"fields\": []}]}",
                 NEEDLES("P", "unknown key 'bogus'"));
    expect_error(state,
                 "{\"types\": [{\"name\": \"P\", \"fields\": [{\"name\": \"x\", \"type\": \"uint8\","
                 " \"flags\": \"BASE\"}]}]}",
                 NEEDLES("P.x", "unknown key 'flags'"));
    /* a key given twice is caught too (cJSON keeps both) */
    expect_error(state, with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": \"BASE\", \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.hp", "duplicate key 'flags'"));
}

static void test_error_types(void **state) {
    expect_error(state, with_props("{\"name\": \"hp\", \"type\": \"int17\", \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.hp", "unknown type 'int17'"));
    expect_error(state, with_props("{\"name\": \"hp\", \"flags\": \"BASE\"}"), NEEDLES("Avatar.hp", "missing 'type'"));
    expect_error(state, with_props("{\"name\": \"nick\", \"type\": \"string\", \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.nick", "needs 'max_length'"));
    expect_error(state, with_props("{\"name\": \"blob\", \"type\": \"bytes\", \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.blob", "needs 'max_length'"));
    expect_error(state,
                 with_props("{\"name\": \"nick\", \"type\": \"string\", \"max_length\": 0, \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.nick", "max_length must be an integer from 1 to 65535"));
    expect_error(state,
                 with_props("{\"name\": \"nicks\", \"type\": \"array\", \"count\": 2, \"element\": \"string\","
                            " \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.nicks[]", "needs 'max_length'"));
    expect_error(
        state,
        with_methods("base_methods", "{\"name\": \"chat\", \"args\": [{\"name\": \"text\", \"type\": \"string\"}]}"),
        NEEDLES("Avatar.chat(text)", "needs 'max_length'"));
    expect_error(state, with_props("{\"name\": \"health\", \"type\": \"int16\", \"bits\": 40, \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.health: bit width 40 does not fit type int16"));
    expect_error(state, with_props("{\"name\": \"health\", \"type\": \"uint8\", \"bits\": 9, \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.health", "bit width 9 does not fit type uint8"));
    expect_error(state, with_props("{\"name\": \"health\", \"type\": \"uint8\", \"bits\": 0, \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.health", "from 1 to 64"));
    expect_error(state,
                 with_props("{\"name\": \"a\", \"type\": \"array\", \"element\": \"uint8\", \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.a", "needs 'element' and 'count'"));
    expect_error(state,
                 with_props("{\"name\": \"a\", \"type\": \"array\", \"element\": \"uint8\", \"count\": 1025,"
                            " \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.a", "count must be an integer from 1 to 1024"));
    /* nested arrays multiply: capped before any default is built */
    expect_error(state,
                 with_props("{\"name\": \"cube\", \"type\": \"array\", \"count\": 1024, \"flags\": \"BASE\","
                            " \"element\": {\"type\": \"array\", \"count\": 1024, \"element\": \"uint8\"}}"),
                 NEEDLES("Avatar.cube", "1048576 values when flattened, more than 4096"));
    expect_error(state,
                 "{\"types\": [{\"name\": \"Big\", \"fields\": ["
                 " {\"name\": \"a\", \"type\": \"array\", \"count\": 1024, \"element\": {\"type\": \"array\","
                 "  \"count\": 4, \"element\": \"bool\"}},"
                 " {\"name\": \"b\", \"type\": \"bool\"}]}]}",
                 NEEDLES("Big.b", "more than 4096 values"));
    expect_error(state, with_props("{\"name\": \"9lives\", \"type\": \"uint8\", \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.properties[0]", "not an identifier"));
    expect_error(state, "{\"types\": [{\"name\": \"uint8\", \"fields\": [{\"name\": \"x\", \"type\": \"bool\"}]}]}",
                 NEEDLES("uint8", "built-in type"));
    expect_error(state, "{\"types\": [{\"name\": \"Empty\", \"fields\": []}]}", NEEDLES("Empty", "at least one field"));
    expect_error(state, "{\"format\": 2, \"entities\": []}", NEEDLES("'format' must be 1"));
}

static void test_error_quantization(void **state) {
    expect_error(state,
                 with_props("{\"name\": \"scale\", \"type\": \"float\", \"flags\": \"BASE\","
                            " \"quantize\": {\"min\": 2, \"max\": 0.5, \"precision\": 0.01}}"),
                 NEEDLES("Avatar.scale", "quantize.max (0.5) must be greater than quantize.min (2)"));
    expect_error(state,
                 with_props("{\"name\": \"scale\", \"type\": \"float\", \"flags\": \"BASE\","
                            " \"quantize\": {\"min\": 1, \"max\": 1, \"precision\": 0.01}}"),
                 NEEDLES("Avatar.scale", "must be greater than quantize.min"));
    expect_error(state,
                 with_props("{\"name\": \"scale\", \"type\": \"vector3\", \"flags\": \"BASE\","
                            " \"quantize\": {\"min\": 0, \"max\": 1, \"precision\": 0}}"),
                 NEEDLES("Avatar.scale", "precision (0) must be greater than 0"));
    expect_error(state,
                 with_props("{\"name\": \"scale\", \"type\": \"double\", \"flags\": \"BASE\","
                            " \"quantize\": {\"min\": 0, \"max\": 1, \"precision\": -0.5}}"),
                 NEEDLES("Avatar.scale", "precision (-0.5) must be greater than 0"));
    expect_error(state,
                 with_props("{\"name\": \"scale\", \"type\": \"float\", \"flags\": \"BASE\","
                            " \"quantize\": {\"min\": 0, \"max\": 1}}"),
                 NEEDLES("Avatar.scale", "quantize needs 'precision'"));
    expect_error(state,
                 with_props("{\"name\": \"scale\", \"type\": \"float\", \"flags\": \"BASE\","
                            " \"quantize\": {\"min\": 0, \"max\": 1e10, \"precision\": 0.001}}"),
                 NEEDLES("Avatar.scale", "more than 32 bits"));
}

static void test_error_duplicates(void **state) {
    expect_error(state,
                 with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": \"BASE\"},"
                            "{\"name\": \"mp\", \"type\": \"int16\", \"flags\": \"BASE\"},"
                            "{\"name\": \"hp\", \"type\": \"uint8\", \"flags\": \"BASE\"}"),
                 NEEDLES("Avatar.hp", "duplicate property name"));
    expect_error(state, with_methods("cell_methods", "{\"name\": \"go\"}, {\"name\": \"go\"}"),
                 NEEDLES("Avatar.go", "duplicate cell method name"));
    expect_error(state,
                 with_methods("base_methods", "{\"name\": \"go\", \"args\": [{\"name\": \"a\", \"type\": \"bool\"},"
                                              " {\"name\": \"a\", \"type\": \"bool\"}]}"),
                 NEEDLES("Avatar.go(a)", "duplicate argument name"));
    expect_error(state, "{\"entities\": [{\"name\": \"Avatar\"}, {\"name\": \"Avatar\"}]}",
                 NEEDLES("Avatar", "duplicate class name"));
    expect_error(state,
                 "{\"types\": [{\"name\": \"P\", \"fields\": [{\"name\": \"x\", \"type\": \"bool\"},"
                 " {\"name\": \"x\", \"type\": \"bool\"}]}]}",
                 NEEDLES("P.x", "duplicate field name"));
    expect_error(state,
                 "{\"types\": [{\"name\": \"P\", \"fields\": [{\"name\": \"x\", \"type\": \"bool\"}]},"
                 " {\"name\": \"P\", \"fields\": [{\"name\": \"y\", \"type\": \"bool\"}]}]}",
                 NEEDLES("P", "duplicate struct name"));
    /* the same method name in two parts is fine */
    entity_def_registry *reg =
        load_ok("{\"entities\": [{\"name\": \"A\", \"base_methods\": [{\"name\": \"go\"}],"
                " \"cell_methods\": [{\"name\": \"go\"}], \"client_methods\": [{\"name\": \"go\"}]}]}");
    entity_def_registry_free(reg);
}

static void test_error_flags(void **state) {
    expect_error(state, with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": \"EVERYONE\"}"),
                 NEEDLES("Avatar.hp", "unknown flag 'EVERYONE'"));
    expect_error(state, with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": \"base\"}"),
                 NEEDLES("Avatar.hp", "unknown flag 'base'"));
    expect_error(state, with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": \"ALL_CLIENTS|OWN_CLIENT\"}"),
                 NEEDLES("Avatar.hp", "exactly one flag"));
    expect_error(state,
                 with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": [\"ALL_CLIENTS\", \"OWN_CLIENT\"]}"),
                 NEEDLES("Avatar.hp", "exactly one flag"));
    expect_error(state, with_props("{\"name\": \"hp\", \"type\": \"int16\"}"), NEEDLES("Avatar.hp", "missing 'flags'"));
    expect_error(state, with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": \"BASE\", \"persistent\": 1}"),
                 NEEDLES("Avatar.hp", "'persistent' must be true or false"));
    expect_error(
        state, with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": \"ALL_CLIENTS\", \"detail\": \"close\"}"),
        NEEDLES("Avatar.hp", "'detail' must be"));
    /* a detail level on a property no other client sees */
    expect_error(state,
                 with_props("{\"name\": \"hp\", \"type\": \"int16\", \"flags\": \"OWN_CLIENT\", \"detail\": \"near\"}"),
                 NEEDLES("Avatar.hp", "detail 'near' needs a property other clients see"));
}

static void test_error_methods(void **state) {
    expect_error(state, with_methods("client_methods", "{\"name\": \"onHit\", \"exposed\": true}"),
                 NEEDLES("Avatar.onHit", "client methods cannot be exposed"));
    expect_error(state, with_methods("client_methods", "{\"name\": \"onHit\", \"exposed\": false}"),
                 NEEDLES("Avatar.onHit", "client methods cannot be exposed"));
    expect_error(state, with_methods("cell_methods", "{\"name\": \"go\", \"exposed\": \"yes\"}"),
                 NEEDLES("Avatar.go", "'exposed' must be true or false"));
    expect_error(state, with_methods("cell_methods", "{\"name\": \"go\", \"args\": {}}"),
                 NEEDLES("Avatar.go", "'args' must be an array"));
    expect_error(state, with_methods("cell_methods", "{\"name\": \"go\", \"args\": [{\"type\": \"bool\"}]}"),
                 NEEDLES("Avatar.go(args[0])", "missing 'name'"));
    expect_error(state, with_methods("cell_methods", "{\"exposed\": true}"),
                 NEEDLES("Avatar.cell_methods[0]", "missing 'name'"));
}

static void test_error_recursive_struct(void **state) {
    expect_error(state, "{\"types\": [{\"name\": \"Node\", \"fields\": [{\"name\": \"next\", \"type\": \"Node\"}]}]}",
                 NEEDLES("Node.next", "struct Node contains itself (Node -> Node)"));
    /* through another struct and an array */
    expect_error(state,
                 "{\"types\": ["
                 " {\"name\": \"A\", \"fields\": [{\"name\": \"b\", \"type\": \"B\"}]},"
                 " {\"name\": \"B\", \"fields\": [{\"name\": \"list\", \"type\": \"array\", \"count\": 2,"
                 "    \"element\": \"A\"}]}]}",
                 NEEDLES("B.list[]", "struct A contains itself (A -> B -> A)"));
    /* a struct used twice (a diamond) is not recursion */
    entity_def_registry *reg = load_ok(
        "{\"types\": ["
        " {\"name\": \"D\", \"fields\": [{\"name\": \"l\", \"type\": \"L\"}, {\"name\": \"r\", \"type\": \"L\"}]},"
        " {\"name\": \"L\", \"fields\": [{\"name\": \"x\", \"type\": \"bool\"}]}]}");
    entity_def_registry_free(reg);
}

static void test_error_files(void **state) {
    char path[256];
    snprintf(path, sizeof path, "%s/missing.json", env_of(state)->dir);
    entity_def_registry *reg = (entity_def_registry *)0x1;
    char err[512] = "";
    assert_int_equal(entity_def_load_file(path, &reg, err, sizeof err), -1);
    assert_null(reg);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "cannot open"));

    expect_error(state, "{\"entities\": [\n  {\"name\": \"Avatar\",,}\n]}", NEEDLES("invalid JSON near line 2"));
    expect_error(state, "[1, 2]", NEEDLES("top level must be a JSON object"));
    expect_error(state, "", NEEDLES("invalid JSON"));
    expect_error(state, "{\"entities\": {}}", NEEDLES("'entities' must be an array"));

    /* a string names itself */
    assert_int_equal(entity_def_load_string("{", "login description", &reg, err, sizeof err), -1);
    assert_null(reg);
    assert_non_null(strstr(err, "login description: invalid JSON"));
    /* a short buffer is cut, not overrun */
    char tiny[8];
    assert_int_equal(entity_def_load_string("{", "x", &reg, tiny, sizeof tiny), -1);
    assert_int_equal(strlen(tiny), sizeof tiny - 1);
    assert_int_equal(entity_def_load_string("{", "x", &reg, NULL, 0), -1);
}

/* ---- audience --------------------------------------------------------- */

static void check_audience(entity_def_flags flags, const char *name, bool base, bool cell, bool ghosts, bool own,
                           bool others) {
    entity_def_audience a = entity_def_property_audience(flags);
    assert_int_equal(a.on_base, base);
    assert_int_equal(a.on_cell, cell);
    assert_int_equal(a.to_ghosts, ghosts);
    assert_int_equal(a.to_own_client, own);
    assert_int_equal(a.to_other_clients, others);
    assert_string_equal(entity_def_flags_name(flags), name);
    /* and a loaded property carries the same audience */
    char props[256];
    snprintf(props, sizeof props, "{\"name\": \"p\", \"type\": \"uint8\", \"flags\": \"%s\"}", name);
    entity_def_registry *reg = load_ok(with_props(props));
    const entity_def_property *p = entity_def_class_find_property(entity_def_registry_find_class(reg, "Avatar"), "p");
    assert_int_equal(p->flags, flags);
    assert_memory_equal(&p->audience, &a, sizeof a);
    entity_def_registry_free(reg);
}

/*                                                    base   cell   ghosts own    others */
static void test_audience_base(void **state) {
    check_audience(ENTITY_DEF_FLAG_BASE, "BASE", true, false, false, false, false);
}
static void test_audience_base_and_client(void **state) {
    check_audience(ENTITY_DEF_FLAG_BASE_AND_CLIENT, "BASE_AND_CLIENT", true, false, false, true, false);
}
static void test_audience_cell_private(void **state) {
    check_audience(ENTITY_DEF_FLAG_CELL_PRIVATE, "CELL_PRIVATE", false, true, false, false, false);
}
static void test_audience_cell_public(void **state) {
    check_audience(ENTITY_DEF_FLAG_CELL_PUBLIC, "CELL_PUBLIC", false, true, true, false, false);
}
static void test_audience_cell_public_and_own(void **state) {
    check_audience(ENTITY_DEF_FLAG_CELL_PUBLIC_AND_OWN, "CELL_PUBLIC_AND_OWN", false, true, true, true, false);
}
static void test_audience_all_clients(void **state) {
    check_audience(ENTITY_DEF_FLAG_ALL_CLIENTS, "ALL_CLIENTS", false, true, true, true, true);
}
static void test_audience_own_client(void **state) {
    check_audience(ENTITY_DEF_FLAG_OWN_CLIENT, "OWN_CLIENT", false, true, false, true, false);
}
static void test_audience_other_clients(void **state) {
    check_audience(ENTITY_DEF_FLAG_OTHER_CLIENTS, "OTHER_CLIENTS", false, true, true, false, true);
}

static void test_audience_out_of_range(void **state) {
    entity_def_audience a = entity_def_property_audience((entity_def_flags)ENTITY_DEF_FLAG_COUNT);
    assert_false(a.on_base || a.on_cell || a.to_ghosts || a.to_own_client || a.to_other_clients);
    assert_string_equal(entity_def_flags_name((entity_def_flags)99), "?");
}

/* ---- quantization ----------------------------------------------------- */

static void test_quantization_bits(void **state) {
    assert_int_equal(entity_def_quantization_bits(0.5, 2, 0.01), 8);  /* 151 levels */
    assert_int_equal(entity_def_quantization_bits(0, 255, 1), 8);     /* 256 levels */
    assert_int_equal(entity_def_quantization_bits(0, 256, 1), 9);     /* 257 levels */
    assert_int_equal(entity_def_quantization_bits(0, 1, 1), 1);       /* 2 levels */
    assert_int_equal(entity_def_quantization_bits(-1, 1, 0.001), 11); /* 2001 levels */
    assert_int_equal(entity_def_quantization_bits(0, 1, 0.1), 4);     /* 11 levels */
    assert_int_equal(entity_def_quantization_bits(0, 0.7, 0.1), 3);   /* 0.7/0.1 = 6.999..: 8 levels */
    assert_int_equal(entity_def_quantization_bits(0, 1.5, 0.1), 4);   /* 16 levels */
    /* 2.1 / 0.3 is 7.000000000000001 and 7.65 / 0.03 is 255.00000000000003:
     * still 8 and 256 levels, not one more bit */
    assert_int_equal(entity_def_quantization_bits(0, 2.1, 0.3), 3);
    assert_int_equal(entity_def_quantization_bits(0, 7.65, 0.03), 8);
    assert_int_equal(entity_def_quantization_bits(0, 1, 3), 1); /* one step covers it */
    assert_int_equal(entity_def_quantization_bits(0, 1e12, 0.001), 50);
    assert_int_equal(entity_def_quantization_bits(0, 1, 0), -1);
    assert_int_equal(entity_def_quantization_bits(0, 1, -1), -1);
    assert_int_equal(entity_def_quantization_bits(1, 1, 0.1), -1);
    assert_int_equal(entity_def_quantization_bits(2, 1, 0.1), -1);
    assert_int_equal(entity_def_quantization_bits(0, 1e300, 1e-300), -1);
    assert_int_equal(entity_def_quantization_bits(0, NAN, 1), -1);
    assert_int_equal(entity_def_quantization_bits(0, 1, INFINITY), -1);

    /* a loaded property records its count */
    entity_def_registry *reg =
        load_ok(with_props("{\"name\": \"s\", \"type\": \"float\", \"flags\": \"BASE\", \"default\": 1,"
                           " \"quantize\": {\"min\": 0.5, \"max\": 2, \"precision\": 0.01}}"));
    const entity_def_property *p = entity_def_class_find_property(entity_def_registry_find_class(reg, "Avatar"), "s");
    assert_true(p->type.quantized);
    assert_int_equal(p->type.bits, 8);
    entity_def_registry_free(reg);
}

/* ---- digest ----------------------------------------------------------- */

static void digest_of(const char *text, char hex[65]) {
    entity_def_registry *reg = load_ok(text);
    const char *digest = entity_def_registry_digest_hex(reg);
    assert_int_equal(strlen(digest), 64);
    memcpy(hex, digest, 65);
    char check[65];
    for (int i = 0; i < 32; i++) snprintf(check + (size_t)2 * i, 3, "%02x", entity_def_registry_digest(reg)[i]);
    assert_string_equal(check, digest);
    entity_def_registry_free(reg);
}

static const char digest_base[] =
    "{\"types\": [{\"name\": \"Eq\", \"fields\": [{\"name\": \"w\", \"type\": \"uint16\"}]},"
    "             {\"name\": \"Ab\", \"fields\": [{\"name\": \"z\", \"type\": \"bool\"}]}],"
    " \"entities\": [{\"name\": \"Avatar\", \"properties\": ["
    "  {\"name\": \"hp\", \"type\": \"int16\", \"bits\": 12, \"flags\": \"CELL_PUBLIC_AND_OWN\", \"default\": 100},"
    "  {\"name\": \"lvl\", \"type\": \"uint8\", \"flags\": \"ALL_CLIENTS\", \"persistent\": true},"
    "  {\"name\": \"eq\", \"type\": \"Eq\", \"flags\": \"ALL_CLIENTS\", \"detail\": \"near\"}],"
    " \"cell_methods\": [{\"name\": \"go\", \"exposed\": true, \"args\": [{\"name\": \"t\", \"type\": \"entity\"}]}]"
    "}]}";

static void test_digest_stable(void **state) {
    char a[65], b[65];
    digest_of(digest_base, a);
    /* whitespace, key order, implied values spelled out, struct order */
    digest_of("{\n  \"entities\": [ { \"cell_methods\": [ { \"args\": [ { \"type\": \"entity\", \"name\": \"t\" } ],"
              "    \"exposed\": true, \"name\": \"go\" } ],\n"
              "    \"properties\": [\n"
              "      { \"flags\": \"CELL_PUBLIC_AND_OWN\", \"default\": 100, \"bits\": 12, \"type\": \"int16\", "
              "\"name\": \"hp\" },\n"
              "      { \"persistent\": true, \"name\": \"lvl\", \"flags\": \"ALL_CLIENTS\", \"type\": \"uint8\", "
              "\"bits\": 8, \"default\": 0 },\n"
              "      { \"detail\": \"near\", \"name\": \"eq\", \"type\": \"Eq\", \"flags\": \"ALL_CLIENTS\", "
              "\"default\": {\"w\": 0} }\n"
              "    ], \"name\": \"Avatar\", \"client_methods\": [] } ],\n"
              "  \"types\": [ { \"fields\": [ { \"type\": \"bool\", \"name\": \"z\", \"default\": false } ], \"name\": "
              "\"Ab\" },\n"
              "             { \"name\": \"Eq\", \"fields\": [ { \"name\": \"w\", \"type\": \"uint16\" } ] } ],\n"
              "  \"format\": 1\n}\n",
              b);
    assert_string_equal(a, b);

    /* each change of meaning changes it */
    static const char *const changes[][2] = {
        {"\"bits\": 12", "\"bits\": 11"},
        {"CELL_PUBLIC_AND_OWN", "ALL_CLIENTS"},
        {"\"default\": 100", "\"default\": 99"},
        {"\"persistent\": true", "\"persistent\": false"},
        {"\"detail\": \"near\"", "\"detail\": \"medium\""},
        {"\"name\": \"lvl\"", "\"name\": \"lv\""},
        {"\"type\": \"uint8\"", "\"type\": \"int8\""},
        {"\"exposed\": true", "\"exposed\": false"},
        {"\"type\": \"entity\"", "\"type\": \"uint64\""},
        {"{\"name\": \"w\", \"type\": \"uint16\"}", "{\"name\": \"w\", \"type\": \"uint16\", \"default\": 1}"},
        {"\"cell_methods\"", "\"base_methods\""},
        {"\"name\": \"Avatar\"", "\"name\": \"Player\""},
    };
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        char text[sizeof digest_base + 64];
        const char *at = strstr(digest_base, changes[i][0]);
        assert_non_null(at);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - digest_base), digest_base, changes[i][1],
                 at + strlen(changes[i][0]));
        digest_of(text, b);
        if (strcmp(a, b) == 0) fail_msg("changing %s to %s kept the digest", changes[i][0], changes[i][1]);
    }

    /* property order gives the ids: swapping two properties changes it */
    entity_def_registry *reg = load_ok(with_props("{\"name\": \"a\", \"type\": \"uint8\", \"flags\": \"BASE\"},"
                                                  "{\"name\": \"b\", \"type\": \"uint8\", \"flags\": \"BASE\"}"));
    memcpy(a, entity_def_registry_digest_hex(reg), 65);
    entity_def_registry_free(reg);
    reg = load_ok(with_props("{\"name\": \"b\", \"type\": \"uint8\", \"flags\": \"BASE\"},"
                             "{\"name\": \"a\", \"type\": \"uint8\", \"flags\": \"BASE\"}"));
    assert_string_not_equal(a, entity_def_registry_digest_hex(reg));
    entity_def_registry_free(reg);
}

/* describe -> print -> load -> describe: same digest and same text. */
static void check_round_trip(const entity_def_registry *reg) {
    char *text = entity_def_registry_describe(reg);
    assert_non_null(text);
    entity_def_registry *again = NULL;
    char err[512];
    if (entity_def_load_string(text, "description", &again, err, sizeof err) != 0)
        fail_msg("description does not load: %s\n%s", err, text);
    assert_string_equal(entity_def_registry_digest_hex(reg), entity_def_registry_digest_hex(again));
    char *text2 = entity_def_registry_describe(again);
    assert_string_equal(text, text2);
    /* ids survive */
    assert_int_equal(entity_def_registry_class_count(reg), entity_def_registry_class_count(again));
    for (size_t c = 0; c < entity_def_registry_class_count(reg); c++) {
        const entity_def_class *x = entity_def_registry_class(reg, c);
        const entity_def_class *y = entity_def_registry_class(again, c);
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->property_count, y->property_count);
        for (uint16_t p = 0; p < x->property_count; p++)
            assert_string_equal(x->properties[p].name, y->properties[p].name);
    }
    free(text);
    free(text2);
    entity_def_registry_free(again);
}

static void test_describe_round_trip(void **state) {
    entity_def_registry *reg = load_ok(every_type_doc);
    check_round_trip(reg);
    entity_def_registry_free(reg);
    reg = load_ok(digest_base);
    check_round_trip(reg);
    /* compact: implied values are left out */
    char *text = entity_def_registry_describe(reg);
    assert_null(strstr(text, "\"persistent\":false"));
    assert_null(strstr(text, "\"bits\":8"));
    assert_non_null(strstr(text, "\"bits\":12"));
    assert_non_null(strstr(text, "\"default\":100"));
    assert_null(strstr(text, "\"default\":0"));
    free(text);
    entity_def_registry_free(reg);

    /* numbers survive exactly, even where cJSON's own printer would round
     * them to 15 digits */
    reg = load_ok(
        with_props("{\"name\": \"a\", \"type\": \"double\", \"flags\": \"BASE\", \"default\": 0.30000000000000004},"
                   "{\"name\": \"b\", \"type\": \"uint64\", \"flags\": \"BASE\", \"default\": 9007199254740992},"
                   "{\"name\": \"c\", \"type\": \"double\", \"flags\": \"BASE\", \"default\": -1.7976931348623157e308},"
                   "{\"name\": \"d\", \"type\": \"float\", \"flags\": \"BASE\", \"default\": 0.2,"
                   " \"quantize\": {\"min\": 0.1, \"max\": 0.30000000000000004, \"precision\": 0.1}}"));
    text = entity_def_registry_describe(reg);
    assert_non_null(strstr(text, "0.30000000000000004"));
    assert_non_null(strstr(text, "9007199254740992"));
    assert_non_null(strstr(text, "-1.7976931348623157e+308"));
    free(text);
    check_round_trip(reg);
    entity_def_registry_free(reg);
}

/* ---- directory -------------------------------------------------------- */

static void test_directory(void **state) {
    const char *dir = env_of(state)->dir;
    /* b.json uses a struct declared in a.json; z.json is loaded last */
    write_file(state, "b.json",
               "{\"entities\": [{\"name\": \"Bee\", \"properties\": ["
               "  {\"name\": \"s\", \"type\": \"Shared\", \"flags\": \"ALL_CLIENTS\"}]},"
               " {\"name\": \"Bee2\"}]}");
    write_file(state, "a.json",
               "{\"types\": [{\"name\": \"Shared\", \"fields\": [{\"name\": \"x\", \"type\": \"bool\"}]}],"
               " \"entities\": [{\"name\": \"Ant\"}]}");
    write_file(state, "z.json", "{\"entities\": [{\"name\": \"Zed\"}]}");
    write_file(state, ".hidden.json", "not json");
    write_file(state, "notes.txt", "not json");
    char sub[256];
    snprintf(sub, sizeof sub, "%s/sub.json", dir);
    assert_int_equal(mkdir(sub, 0700), 0);

    entity_def_registry *reg = NULL;
    char err[512] = "";
    if (entity_def_load_directory(dir, &reg, err, sizeof err) != 0) fail_msg("%s", err);
    assert_int_equal(entity_def_registry_class_count(reg), 4);
    const char *order[] = {"Ant", "Bee", "Bee2", "Zed"};
    for (uint16_t i = 0; i < 4; i++) {
        const entity_def_class *cls = entity_def_registry_class(reg, i);
        assert_string_equal(cls->name, order[i]);
        assert_int_equal(cls->id, i);
        assert_ptr_equal(entity_def_registry_find_class(reg, order[i]), cls);
    }
    assert_null(entity_def_registry_class(reg, 4));
    assert_null(entity_def_registry_find_class(reg, "Nobody"));
    assert_non_null(strstr(entity_def_registry_class(reg, 1)->source, "b.json"));
    check_round_trip(reg);
    entity_def_registry_free(reg);

    /* a duplicate class in a later file names both files */
    write_file(state, "c.json", "{\"entities\": [{\"name\": \"Ant\"}]}");
    reg = (entity_def_registry *)0x1;
    assert_int_equal(entity_def_load_directory(dir, &reg, err, sizeof err), -1);
    assert_null(reg);
    assert_non_null(strstr(err, "c.json: Ant: duplicate class name"));
    assert_non_null(strstr(err, "a.json"));

    /* an error in one file fails the whole load and names that file */
    write_file(state, "c.json",
               "{\"entities\": [{\"name\": \"Cat\", \"properties\": ["
               "{\"name\": \"hp\", \"type\": \"int16\", \"bits\": 40, \"flags\": \"BASE\"}]}]}");
    assert_int_equal(entity_def_load_directory(dir, &reg, err, sizeof err), -1);
    assert_non_null(strstr(err, "c.json: Cat.hp: bit width 40 does not fit type int16"));
    empty_dir(dir, false);

    /* nothing to load, and no directory at all */
    assert_int_equal(entity_def_load_directory(dir, &reg, err, sizeof err), -1);
    assert_non_null(strstr(err, "no *.json files"));
    assert_int_equal(entity_def_load_directory("/nonexistent/tessera", &reg, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/tessera: cannot open directory"));
}

/* ---- lookup ----------------------------------------------------------- */

static void test_lookup_methods(void **state) {
    entity_def_registry *reg = load_ok(
        "{\"entities\": [{\"name\": \"A\","
        " \"base_methods\": [{\"name\": \"b0\"}, {\"name\": \"b1\", \"exposed\": true}],"
        " \"cell_methods\": [{\"name\": \"c0\", \"exposed\": true, \"args\": ["
        "    {\"name\": \"x\", \"type\": \"vector3\"}, {\"name\": \"s\", \"type\": \"string\", \"max_length\": 9}]}],"
        " \"client_methods\": [{\"name\": \"k0\"}, {\"name\": \"k1\"}, {\"name\": \"k2\"}]}]}");
    const entity_def_class *cls = entity_def_registry_class(reg, 0);
    assert_int_equal(cls->method_count[ENTITY_DEF_PART_BASE], 2);
    assert_int_equal(cls->method_count[ENTITY_DEF_PART_CELL], 1);
    assert_int_equal(cls->method_count[ENTITY_DEF_PART_CLIENT], 3);
    const entity_def_method *m = entity_def_class_find_method(cls, ENTITY_DEF_PART_BASE, "b1");
    assert_non_null(m);
    assert_int_equal(m->id, 1);
    assert_true(m->exposed);
    assert_int_equal(m->part, ENTITY_DEF_PART_BASE);
    assert_ptr_equal(entity_def_class_method(cls, ENTITY_DEF_PART_BASE, 1), m);
    assert_false(entity_def_class_method(cls, ENTITY_DEF_PART_BASE, 0)->exposed);
    m = entity_def_class_find_method(cls, ENTITY_DEF_PART_CELL, "c0");
    assert_int_equal(m->arg_count, 2);
    assert_int_equal(m->args[0].type.kind, ENTITY_DEF_VECTOR3);
    assert_int_equal(m->args[1].type.max_length, 9);
    assert_int_equal(entity_def_class_find_method(cls, ENTITY_DEF_PART_CLIENT, "k2")->id, 2);
    assert_null(entity_def_class_find_method(cls, ENTITY_DEF_PART_CELL, "b0"));
    assert_null(entity_def_class_method(cls, ENTITY_DEF_PART_CLIENT, 3));
    assert_null(entity_def_class_method(cls, (entity_def_part)3, 0));
    assert_null(entity_def_class_find_method(cls, (entity_def_part)3, "k0"));
    assert_null(entity_def_class_property(cls, 0));
    assert_null(entity_def_class_find_property(cls, "k0"));
    assert_string_equal(entity_def_part_name(ENTITY_DEF_PART_CLIENT), "client");
    assert_string_equal(entity_def_detail_name(ENTITY_DEF_DETAIL_MEDIUM), "medium");
    entity_def_registry_free(reg);
    entity_def_registry_free(NULL);
}

/* ---- events ----------------------------------------------------------- */

/* Four events of every sort of argument; the Avatar has a client method of
 * the same name as an event, which is no clash. */
static const char events_doc[] =
    "{\"types\": [{\"name\": \"Loot\", \"fields\": [{\"name\": \"item\", \"type\": \"uint16\"},"
    "                                            {\"name\": \"count\", \"type\": \"uint8\"}]}],"
    " \"entities\": [{\"name\": \"Avatar\", \"client_methods\": [{\"name\": \"spell_hit\","
    "   \"args\": [{\"name\": \"x\", \"type\": \"bool\"}]}]}],"
    " \"events\": ["
    "  {\"name\": \"spell_hit\", \"args\": ["
    "    {\"name\": \"caster\", \"type\": \"entity\"},"
    "    {\"name\": \"spell_id\", \"type\": \"uint16\"},"
    "    {\"name\": \"amount\", \"type\": \"int16\", \"bits\": 12},"
    "    {\"name\": \"where\", \"type\": \"vector3\","
    "     \"quantize\": {\"min\": -1, \"max\": 1, \"precision\": 0.001}}]},"
    "  {\"name\": \"chat_line\", \"args\": ["
    "    {\"name\": \"text\", \"type\": \"string\", \"max_length\": 40},"
    "    {\"name\": \"tags\", \"type\": \"array\", \"count\": 3, \"element\": \"uint8\"}]},"
    "  {\"name\": \"round_over\"},"
    "  {\"name\": \"loot_dropped\", \"args\": [{\"name\": \"loot\", \"type\": \"Loot\"}]}"
    "]}";

/* `base` (a document ending in '}') with an "events" section holding
 * `events` (the inside of the array). Static buffer. */
static const char *with_events(const char *base, const char *events) {
    static char text[8192];
    size_t n = strlen(base);
    assert_true(n > 0 && base[n - 1] == '}');
    int written = snprintf(text, sizeof text, "%.*s, \"events\": [%s]}", (int)(n - 1), base, events);
    assert_true(written > 0 && (size_t)written < sizeof text);
    return text;
}

/* A document of `count` events named <prefix>0, <prefix>1, ... (malloc'd). */
static char *many_events(const char *prefix, size_t count) {
    size_t size = 32 + count * (24 + strlen(prefix));
    char *text = malloc(size);
    assert_non_null(text);
    size_t at = (size_t)snprintf(text, size, "{\"events\": [");
    for (size_t i = 0; i < count; i++)
        at += (size_t)snprintf(text + at, size - at, "%s{\"name\": \"%s%zu\"}", i > 0 ? "," : "", prefix, i);
    snprintf(text + at, size - at, "]}");
    return text;
}

static void test_events_parse(void **state) {
    entity_def_registry *reg = load_ok(events_doc);
    static const char *const names[] = {"spell_hit", "chat_line", "round_over", "loot_dropped"};
    static const size_t arg_counts[] = {4, 2, 0, 1};
    assert_int_equal(entity_def_registry_event_count(reg), 4);
    for (uint32_t i = 0; i < 4; i++) {
        const entity_def_method *e = entity_def_registry_event(reg, i);
        assert_non_null(e);
        assert_string_equal(e->name, names[i]);
        assert_int_equal(e->id, i);
        assert_int_equal(e->part, ENTITY_DEF_PART_CLIENT);
        assert_false(e->exposed);
        assert_int_equal(e->arg_count, arg_counts[i]);
        assert_ptr_equal(entity_def_registry_find_event(reg, names[i]), e);
        /* the args as a class of their own, for entity_state and method_call */
        assert_int_equal(e->args_class.id, UINT16_MAX);
        assert_int_equal(e->args_class.property_count, e->arg_count);
        for (uint16_t a = 0; a < e->arg_count; a++) {
            assert_string_equal(e->args_class.properties[a].name, e->args[a].name);
            assert_int_equal(e->args_class.properties[a].id, a);
            assert_int_equal(e->args_class.properties[a].type.kind, e->args[a].type.kind);
            assert_non_null(e->args_class.properties[a].default_value);
        }
    }
    assert_null(entity_def_registry_event(reg, 4));
    assert_null(entity_def_registry_event(reg, 65536)); /* not event 0 by truncation */
    assert_null(entity_def_registry_event(reg, UINT32_MAX));
    assert_null(entity_def_registry_find_event(reg, "nope"));
    assert_null(entity_def_registry_find_event(reg, "Avatar"));
    assert_null(entity_def_registry_find_event(reg, NULL));

    /* the argument types */
    const entity_def_method *e = entity_def_registry_find_event(reg, "spell_hit");
    assert_string_equal(e->args[0].name, "caster");
    assert_int_equal(e->args[0].type.kind, ENTITY_DEF_ENTITY);
    assert_string_equal(e->args[1].name, "spell_id");
    assert_int_equal(e->args[1].type.kind, ENTITY_DEF_UINT16);
    assert_int_equal(e->args[1].type.bits, 16);
    assert_true(e->args[1].type.int_max == 65535);
    assert_string_equal(e->args[2].name, "amount");
    assert_int_equal(e->args[2].type.kind, ENTITY_DEF_INT16);
    assert_int_equal(e->args[2].type.bits, 12);
    assert_int_equal(e->args[2].type.int_min, -2048);
    assert_int_equal(e->args[2].type.int_max, 2047);
    assert_int_equal(e->args[3].type.kind, ENTITY_DEF_VECTOR3);
    assert_true(e->args[3].type.quantized);
    assert_int_equal(e->args[3].type.bits, 11);
    e = entity_def_registry_find_event(reg, "chat_line");
    assert_int_equal(e->args[0].type.kind, ENTITY_DEF_STRING);
    assert_int_equal(e->args[0].type.max_length, 40);
    assert_int_equal(e->args[1].type.kind, ENTITY_DEF_ARRAY);
    assert_int_equal(e->args[1].type.count, 3);
    assert_int_equal(e->args[1].type.element->kind, ENTITY_DEF_UINT8);
    assert_int_equal(e->args[1].type.value_count, 3);
    e = entity_def_registry_find_event(reg, "loot_dropped");
    assert_int_equal(e->args[0].type.kind, ENTITY_DEF_STRUCT);
    assert_ptr_equal(e->args[0].type.structure, entity_def_registry_find_struct(reg, "Loot"));

    /* events are no class, and an event and a client method of the same
     * name are two things */
    assert_int_equal(entity_def_registry_class_count(reg), 1);
    assert_null(entity_def_registry_find_class(reg, "events"));
    const entity_def_method *m = entity_def_class_find_method(entity_def_registry_find_class(reg, "Avatar"),
                                                              ENTITY_DEF_PART_CLIENT, "spell_hit");
    assert_non_null(m);
    assert_true(m != entity_def_registry_find_event(reg, "spell_hit"));
    assert_int_equal(m->arg_count, 1);
    assert_int_equal(m->args[0].type.kind, ENTITY_DEF_BOOL);
    entity_def_registry_free(reg);

    /* no events: none, and an empty section is the same */
    reg = load_ok(digest_base);
    assert_int_equal(entity_def_registry_event_count(reg), 0);
    assert_null(entity_def_registry_event(reg, 0));
    assert_null(entity_def_registry_find_event(reg, "go"));
    entity_def_registry_free(reg);
    reg = load_ok(with_events(digest_base, ""));
    assert_int_equal(entity_def_registry_event_count(reg), 0);
    assert_null(entity_def_registry_event(reg, 0));
    entity_def_registry_free(reg);
    /* a document of events only */
    reg = load_ok("{\"events\": [{\"name\": \"alone\", \"args\": []}]}");
    assert_int_equal(entity_def_registry_class_count(reg), 0);
    assert_int_equal(entity_def_registry_event_count(reg), 1);
    assert_int_equal(entity_def_registry_event(reg, 0)->arg_count, 0);
    entity_def_registry_free(reg);
}

static void test_events_directory(void **state) {
    const char *dir = env_of(state)->dir;
    /* ids follow the file order, then the order within a file; an event's
     * arg may be a struct declared in a later file */
    write_file(state, "a.json",
               "{\"events\": [{\"name\": \"first\"},"
               " {\"name\": \"second\", \"args\": [{\"name\": \"n\", \"type\": \"uint8\"}]}]}");
    write_file(state, "b.json",
               "{\"entities\": [{\"name\": \"Bee\"}],"
               " \"events\": [{\"name\": \"third\", \"args\": [{\"name\": \"s\", \"type\": \"Shared\"}]}]}");
    write_file(state, "c.json",
               "{\"types\": [{\"name\": \"Shared\", \"fields\": [{\"name\": \"x\", \"type\": \"bool\"}]}],"
               " \"events\": [{\"name\": \"fourth\"}]}");
    entity_def_registry *reg = NULL;
    char err[512] = "";
    if (entity_def_load_directory(dir, &reg, err, sizeof err) != 0) fail_msg("%s", err);
    static const char *const order[] = {"first", "second", "third", "fourth"};
    assert_int_equal(entity_def_registry_event_count(reg), 4);
    for (uint32_t i = 0; i < 4; i++) {
        const entity_def_method *e = entity_def_registry_event(reg, i);
        assert_non_null(e);
        assert_string_equal(e->name, order[i]);
        assert_int_equal(e->id, i);
        assert_ptr_equal(entity_def_registry_find_event(reg, order[i]), e);
    }
    const entity_def_method *third = entity_def_registry_event(reg, 2);
    assert_ptr_equal(third->args[0].type.structure, entity_def_registry_find_struct(reg, "Shared"));
    assert_non_null(strstr(third->args_class.source, "b.json"));
    assert_non_null(strstr(entity_def_registry_event(reg, 3)->args_class.source, "c.json"));
    assert_int_equal(entity_def_registry_event(reg, 1)->args[0].type.kind, ENTITY_DEF_UINT8);
    check_round_trip(reg);
    /* the same definitions in one document: the same digest */
    char split[65];
    memcpy(split, entity_def_registry_digest_hex(reg), 65);
    entity_def_registry_free(reg);
    char whole[65];
    digest_of("{\"types\": [{\"name\": \"Shared\", \"fields\": [{\"name\": \"x\", \"type\": \"bool\"}]}],"
              " \"entities\": [{\"name\": \"Bee\"}],"
              " \"events\": [{\"name\": \"first\"},"
              "  {\"name\": \"second\", \"args\": [{\"name\": \"n\", \"type\": \"uint8\"}]},"
              "  {\"name\": \"third\", \"args\": [{\"name\": \"s\", \"type\": \"Shared\"}]},"
              "  {\"name\": \"fourth\"}]}",
              whole);
    assert_string_equal(split, whole);

    /* a name used again in a later file */
    write_file(state, "d.json", "{\"events\": [{\"name\": \"first\"}]}");
    reg = (entity_def_registry *)0x1;
    assert_int_equal(entity_def_load_directory(dir, &reg, err, sizeof err), -1);
    assert_null(reg);
    if (strstr(err, "d.json: events.first: duplicate event name") == NULL) fail_msg("unexpected error: %s", err);
    empty_dir(dir, false);

    /* at most ENTITY_DEF_MAX_EVENTS in all, whatever the files */
    char *half = many_events("a", ENTITY_DEF_MAX_EVENTS / 2);
    char *rest = many_events("b", ENTITY_DEF_MAX_EVENTS / 2);
    write_file(state, "a.json", half);
    write_file(state, "b.json", rest);
    if (entity_def_load_directory(dir, &reg, err, sizeof err) != 0) fail_msg("%s", err);
    assert_int_equal(entity_def_registry_event_count(reg), ENTITY_DEF_MAX_EVENTS);
    const entity_def_method *last = entity_def_registry_event(reg, ENTITY_DEF_MAX_EVENTS - 1);
    assert_non_null(last);
    char name[32];
    snprintf(name, sizeof name, "b%d", ENTITY_DEF_MAX_EVENTS / 2 - 1);
    assert_string_equal(last->name, name);
    assert_int_equal(last->id, ENTITY_DEF_MAX_EVENTS - 1);
    assert_null(entity_def_registry_event(reg, ENTITY_DEF_MAX_EVENTS));
    entity_def_registry_free(reg);
    free(rest);
    rest = many_events("b", ENTITY_DEF_MAX_EVENTS / 2 + 1);
    write_file(state, "b.json", rest);
    assert_int_equal(entity_def_load_directory(dir, &reg, err, sizeof err), -1);
    assert_null(reg);
    if (strstr(err, "more than 4096 events in all") == NULL) fail_msg("unexpected error: %s", err);
    free(half);
    free(rest);
    /* and one document of too many */
    char *all = many_events("e", ENTITY_DEF_MAX_EVENTS + 1);
    expect_error(state, all, NEEDLES("'events' has 4097 entries, more than 4096"));
    free(all);
}

static void test_error_events(void **state) {
    expect_error(state, "{\"events\": [{\"name\": \"a\"}, {\"name\": \"b\"}, {\"name\": \"a\"}]}",
                 NEEDLES("events.a", "duplicate event name", "also event 0"));
    expect_error(state, "{\"events\": [{\"name\": \"a\", \"exposed\": true}]}",
                 NEEDLES("events.a", "events cannot be exposed"));
    expect_error(state, "{\"events\": [{\"name\": \"a\", \"exposed\": false}]}",
                 NEEDLES("events.a", "events cannot be exposed"));
    expect_error(state, "{\"events\": [{\"name\": \"a\", \"colour\": 1}]}",
                 NEEDLES("events.a", "unknown key 'colour'"));
    expect_error(state, "{\"events\": [{\"name\": \"a\", \"args\": [], \"args\": []}]}",
                 NEEDLES("events.a", "duplicate key 'args'"));
    expect_error(state, "{\"events\": [{\"args\": []}]}", NEEDLES("events[0]", "missing 'name'"));
    expect_error(state, "{\"events\": [{\"name\": \"a\"}, {\"args\": []}]}", NEEDLES("events[1]", "missing 'name'"));
    expect_error(state, "{\"events\": [{\"name\": \"9a\"}]}", NEEDLES("events[0]", "not an identifier"));
    expect_error(state, "{\"events\": [{\"name\": 5}]}", NEEDLES("events[0]", "'name' must be a string"));
    expect_error(state, "{\"events\": {}}", NEEDLES("'events' must be an array"));
    expect_error(state, "{\"events\": [1]}", NEEDLES("'events'[0] must be an object"));
    expect_error(state, "{\"events\": [{\"name\": \"a\", \"args\": {}}]}",
                 NEEDLES("events.a", "'args' must be an array"));
    /* the arguments, as a method's */
    static const struct {
        const char *args;
        const char *where;
        const char *needle;
    } cases[] = {
        {"{\"name\": \"text\", \"type\": \"string\"}", "events.a(text)", "needs 'max_length'"},
        {"{\"name\": \"n\", \"type\": \"int17\"}", "events.a(n)", "unknown type 'int17'"},
        {"{\"name\": \"n\", \"type\": \"Nowhere\"}", "events.a(n)", "unknown type 'Nowhere'"},
        {"{\"name\": \"n\"}", "events.a(n)", "missing 'type'"},
        {"{\"name\": \"n\", \"type\": \"int16\", \"bits\": 40}", "events.a(n)", "bit width 40 does not fit type int16"},
        {"{\"name\": \"n\", \"type\": \"uint8\", \"flags\": \"BASE\"}", "events.a(n)", "unknown key 'flags'"},
        {"{\"name\": \"n\", \"type\": \"uint8\", \"default\": 1}", "events.a(n)", "unknown key 'default'"},
        {"{\"name\": \"n\", \"type\": \"uint8\"}, {\"name\": \"n\", \"type\": \"bool\"}", "events.a(n)",
         "duplicate argument name"},
        {"{\"type\": \"uint8\"}", "events.a(args[0])", "missing 'name'"},
        {"{\"name\": \"p\", \"type\": \"vector2\", \"quantize\": {\"min\": 0, \"max\": 1, \"precision\": 0}}",
         "events.a(p)", "precision (0) must be greater than 0"},
        {"{\"name\": \"l\", \"type\": \"array\", \"element\": \"uint8\", \"count\": 1025}", "events.a(l)",
         "count must be an integer from 1 to 1024"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, "{\"events\": [{\"name\": \"ok\"}, {\"name\": \"a\", \"args\": [%s]}]}",
                 cases[i].args);
        expect_error(state, text, NEEDLES(cases[i].where, cases[i].needle));
    }
}

/* The digest of digest_base as computed before events existed (commit
 * adda89f): definitions without events must keep it. */
static const char digest_base_hex[] = "c6cdc0a25ce9deffe976961fbe803810c285457ce022e5d5a60b8d790277df45";

static void test_events_digest(void **state) {
    char none[65], empty[65], b[65];
    digest_of(digest_base, none);
    assert_string_equal(none, digest_base_hex);
    digest_of(with_events(digest_base, ""), empty);
    assert_string_equal(none, empty);

    /* each a change of meaning: all different, and none the base's */
    static const char *const variants[] = {
        "{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"uint16\"}]}",
        "{\"name\": \"hat\", \"args\": [{\"name\": \"n\", \"type\": \"uint16\"}]}",               /* renamed */
        "{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"uint32\"}]}",               /* arg type */
        "{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"int16\"}]}",                /* arg type */
        "{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"uint16\", \"bits\": 12}]}", /* bits */
        "{\"name\": \"hit\", \"args\": [{\"name\": \"m\", \"type\": \"uint16\"}]}",               /* arg name */
        ("{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"uint16\"},"
         " {\"name\": \"t\", \"type\": \"entity\"}]}"), /* an arg more: one literal in two */
        "{\"name\": \"hit\"}",                          /* no args */
        "{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"string\", \"max_length\": 8}]}",
        "{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"string\", \"max_length\": 9}]}",
        "{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"Eq\"}]}",                           /* a struct */
        "{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"uint16\"}]}, {\"name\": \"miss\"}", /* added */
        "{\"name\": \"miss\"}, {\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"uint16\"}]}", /* ids */
    };
    enum { VARIANTS = sizeof variants / sizeof variants[0] };
    char digests[VARIANTS][65];
    for (size_t i = 0; i < VARIANTS; i++) {
        digest_of(with_events(digest_base, variants[i]), digests[i]);
        if (strcmp(digests[i], none) == 0) fail_msg("events [%s] kept the digest of no events", variants[i]);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(digests[i], digests[j]) == 0)
                fail_msg("events [%s] and [%s] have the same digest", variants[i], variants[j]);
        }
    }
    /* a change to the classes still shows with events present */
    static const char renamed[] = "\"name\": \"Avatar\"";
    char text[sizeof digest_base + 64];
    const char *at = strstr(digest_base, renamed);
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s\"name\": \"Player\"%s", (int)(at - digest_base), digest_base,
             at + strlen(renamed));
    digest_of(with_events(text, variants[0]), b);
    assert_string_not_equal(b, digests[0]);
    /* an event is not a client method of the same shape */
    static const char cell[] = "\"cell_methods\"";
    at = strstr(digest_base, cell);
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s\"client_methods\": [{\"name\": \"hit\"}], %s", (int)(at - digest_base),
             digest_base, at);
    digest_of(text, b);
    assert_string_not_equal(b, digests[7]);
    assert_string_not_equal(b, none);

    /* how an event is written does not count */
    digest_of(
        with_events(digest_base, "{ \"args\": [ { \"type\": \"uint16\", \"name\": \"n\" } ], \"name\": \"hit\" }"), b);
    assert_string_equal(b, digests[0]);
    digest_of(with_events(digest_base,
                          "{\"name\": \"hit\", \"args\": [{\"name\": \"n\", \"type\": \"uint16\", \"bits\": 16}]}"),
              b);
    assert_string_equal(b, digests[0]);
    digest_of(with_events(digest_base, "{\"name\": \"hit\", \"args\": []}"), b);
    assert_string_equal(b, digests[7]);
}

/* Loads the description of `reg` and checks that every event came back the
 * same: id, name, and each argument's name and type. */
static void check_events_round_trip(const entity_def_registry *reg) {
    char *text = entity_def_registry_describe(reg);
    assert_non_null(text);
    entity_def_registry *again = NULL;
    char err[512];
    if (entity_def_load_string(text, "description", &again, err, sizeof err) != 0)
        fail_msg("description does not load: %s\n%s", err, text);
    assert_string_equal(entity_def_registry_digest_hex(reg), entity_def_registry_digest_hex(again));
    assert_int_equal(entity_def_registry_event_count(again), entity_def_registry_event_count(reg));
    for (uint32_t i = 0; i < entity_def_registry_event_count(reg); i++) {
        const entity_def_method *x = entity_def_registry_event(reg, i);
        const entity_def_method *y = entity_def_registry_event(again, i);
        assert_non_null(y);
        assert_string_equal(x->name, y->name);
        assert_int_equal(y->id, i);
        assert_false(y->exposed);
        assert_int_equal(x->arg_count, y->arg_count);
        for (size_t a = 0; a < x->arg_count; a++) {
            const entity_def_type *tx = &x->args[a].type, *ty = &y->args[a].type;
            assert_string_equal(x->args[a].name, y->args[a].name);
            assert_int_equal(tx->kind, ty->kind);
            assert_int_equal(tx->bits, ty->bits);
            assert_int_equal(tx->max_length, ty->max_length);
            assert_int_equal(tx->count, ty->count);
            assert_int_equal(tx->quantized, ty->quantized);
            assert_int_equal(tx->value_count, ty->value_count);
            if (tx->kind == ENTITY_DEF_STRUCT) assert_string_equal(tx->structure->name, ty->structure->name);
        }
    }
    free(text);
    entity_def_registry_free(again);
}

static void test_events_describe(void **state) {
    entity_def_registry *reg = load_ok(events_doc);
    check_round_trip(reg);
    check_events_round_trip(reg);
    char *text = entity_def_registry_describe(reg);
    assert_non_null(strstr(text, "\"events\":[{\"name\":\"spell_hit\""));
    assert_non_null(strstr(text, "{\"name\":\"round_over\"}"));
    assert_non_null(strstr(text, "\"bits\":12"));
    assert_null(strstr(text, "\"exposed\""));
    /* in id order */
    const char *p1 = strstr(text, "\"name\":\"chat_line\"");
    const char *p2 = strstr(text, "\"name\":\"round_over\"");
    const char *p3 = strstr(text, "\"name\":\"loot_dropped\"");
    assert_true(p1 != NULL && p2 != NULL && p3 != NULL && p1 < p2 && p2 < p3);
    free(text);
    entity_def_registry_free(reg);

    /* no events: no section, and the digest of before */
    reg = load_ok(with_events(digest_base, ""));
    text = entity_def_registry_describe(reg);
    assert_null(strstr(text, "\"events\""));
    free(text);
    check_round_trip(reg);
    assert_string_equal(entity_def_registry_digest_hex(reg), digest_base_hex);
    entity_def_registry_free(reg);

    /* events only */
    reg = load_ok(
        "{\"events\": [{\"name\": \"e\", \"args\": [{\"name\": \"s\", \"type\": \"bytes\", \"max_length\": 3}]}]}");
    check_events_round_trip(reg);
    entity_def_registry_free(reg);
}

/* ---- the demo --------------------------------------------------------- */

static void demo_dir(char *buf, size_t len) {
    const char *root = getenv("TESSERA_SOURCE_DIR");
    if (root != NULL && root[0] != '\0')
        snprintf(buf, len, "%s/demo/entities", root);
    else
        snprintf(buf, len, "../demo/entities");
}

static const entity_def_property *prop_of(const entity_def_class *cls, const char *name, entity_def_kind kind,
                                          entity_def_flags flags) {
    const entity_def_property *p = entity_def_class_find_property(cls, name);
    if (p == NULL) {
        fail_msg("%s has no property %s", cls->name, name);
        abort(); /* not reached (fail_msg jumps out), but the analyzer cannot tell */
    }
    assert_int_equal(p->type.kind, kind);
    assert_int_equal(p->flags, flags);
    return p;
}

static void test_demo_entities(void **state) {
    char dir[512];
    demo_dir(dir, sizeof dir);
    entity_def_registry *reg = NULL;
    char err[512] = "";
    if (entity_def_load_directory(dir, &reg, err, sizeof err) != 0) fail_msg("loading %s: %s", dir, err);

    const entity_def_class *account = entity_def_registry_find_class(reg, "Account");
    const entity_def_class *avatar = entity_def_registry_find_class(reg, "Avatar");
    const entity_def_class *npc = entity_def_registry_find_class(reg, "Npc");
    const entity_def_class *census = entity_def_registry_find_class(reg, "Census");
    assert_non_null(census);
    assert_non_null(account);
    assert_non_null(avatar);
    assert_non_null(npc);
    /* In file name order: Account, Avatar, Census, Door, LogicTimer, Npc,
     * Trigger. */
    assert_int_equal(account->id, 0);
    assert_int_equal(avatar->id, 1);
    assert_int_equal(census->id, 2);
    assert_int_equal(npc->id, 5);
    assert_int_equal(entity_def_registry_class_count(reg), 7);
    /* The Account is base-only: no cell part. */
    assert_int_equal(account->method_count[ENTITY_DEF_PART_CELL], 0);
    assert_non_null(entity_def_class_find_method(account, ENTITY_DEF_PART_BASE, "enterWorld"));

    const entity_def_property *p;
    p = prop_of(avatar, "name", ENTITY_DEF_STRING, ENTITY_DEF_FLAG_ALL_CLIENTS);
    assert_int_equal(p->type.max_length, 32);
    assert_true(p->persistent);
    p = prop_of(avatar, "level", ENTITY_DEF_UINT8, ENTITY_DEF_FLAG_ALL_CLIENTS);
    assert_true(p->persistent);
    p = prop_of(avatar, "health", ENTITY_DEF_INT16, ENTITY_DEF_FLAG_CELL_PUBLIC_AND_OWN);
    assert_int_equal(p->type.bits, 12);
    assert_int_equal(p->type.int_min, -2048);
    assert_int_equal(p->type.int_max, 2047);
    assert_false(p->persistent);
    p = prop_of(avatar, "mana", ENTITY_DEF_UINT16, ENTITY_DEF_FLAG_OWN_CLIENT);
    assert_false(p->audience.to_other_clients);
    p = prop_of(avatar, "gold", ENTITY_DEF_UINT32, ENTITY_DEF_FLAG_BASE_AND_CLIENT);
    assert_true(p->persistent);
    assert_true(p->audience.on_base && !p->audience.on_cell);
    p = prop_of(avatar, "equipment", ENTITY_DEF_STRUCT, ENTITY_DEF_FLAG_ALL_CLIENTS);
    assert_int_equal(p->detail, ENTITY_DEF_DETAIL_NEAR);
    assert_string_equal(p->type.structure->name, "Equipment");
    assert_int_equal(p->type.structure->field_count, 2);
    assert_string_equal(p->type.structure->fields[0].name, "weapon");
    assert_int_equal(p->type.structure->fields[0].type.kind, ENTITY_DEF_UINT16);
    assert_string_equal(p->type.structure->fields[1].name, "armor");
    p = prop_of(avatar, "buffs", ENTITY_DEF_ARRAY, ENTITY_DEF_FLAG_OWN_CLIENT);
    assert_int_equal(p->type.count, 8);
    assert_int_equal(p->type.element->kind, ENTITY_DEF_UINT16);
    p = prop_of(avatar, "secret_note", ENTITY_DEF_STRING, ENTITY_DEF_FLAG_CELL_PRIVATE);
    assert_false(p->audience.to_ghosts || p->audience.to_own_client || p->audience.to_other_clients);
    assert_null(entity_def_class_find_property(avatar, "position"));

    const entity_def_method *m;
    m = entity_def_class_find_method(avatar, ENTITY_DEF_PART_CELL, "castSpell");
    assert_non_null(m);
    assert_true(m->exposed);
    assert_int_equal(m->arg_count, 2);
    assert_string_equal(m->args[0].name, "spell_id");
    assert_int_equal(m->args[0].type.kind, ENTITY_DEF_UINT16);
    assert_string_equal(m->args[1].name, "target");
    assert_int_equal(m->args[1].type.kind, ENTITY_DEF_ENTITY);
    m = entity_def_class_find_method(avatar, ENTITY_DEF_PART_BASE, "chat");
    assert_non_null(m);
    assert_true(m->exposed);
    assert_int_equal(m->args[0].type.kind, ENTITY_DEF_STRING);
    assert_int_equal(m->args[0].type.max_length, 200);
    m = entity_def_class_find_method(avatar, ENTITY_DEF_PART_CLIENT, "onDamage");
    assert_non_null(m);
    assert_false(m->exposed);
    assert_int_equal(m->args[0].type.kind, ENTITY_DEF_INT16);

    prop_of(npc, "name", ENTITY_DEF_STRING, ENTITY_DEF_FLAG_ALL_CLIENTS);
    prop_of(npc, "level", ENTITY_DEF_UINT8, ENTITY_DEF_FLAG_ALL_CLIENTS);
    prop_of(npc, "health", ENTITY_DEF_INT16, ENTITY_DEF_FLAG_ALL_CLIENTS);
    p = prop_of(npc, "mood", ENTITY_DEF_UINT8, ENTITY_DEF_FLAG_OTHER_CLIENTS);
    assert_int_equal(p->detail, ENTITY_DEF_DETAIL_MEDIUM);
    assert_false(p->audience.to_own_client);
    p = prop_of(npc, "scale", ENTITY_DEF_FLOAT, ENTITY_DEF_FLAG_ALL_CLIENTS);
    assert_true(p->type.quantized);
    assert_int_equal(p->type.bits, 8);
    assert_true(p->default_value->valuedouble == 1.0);
    prop_of(npc, "ai_state", ENTITY_DEF_UINT8, ENTITY_DEF_FLAG_CELL_PRIVATE);

    check_round_trip(reg);
    entity_def_registry_free(reg);
}

/* The demo's events (demo/entities/events.json), in file order. */
static void test_demo_events(void **state) {
    char dir[512];
    demo_dir(dir, sizeof dir);
    entity_def_registry *reg = NULL;
    char err[512] = "";
    if (entity_def_load_directory(dir, &reg, err, sizeof err) != 0) fail_msg("loading %s: %s", dir, err);
    assert_int_equal(entity_def_registry_event_count(reg), 4);
    assert_string_equal(entity_def_registry_event(reg, 0)->name, "player_joined");
    assert_string_equal(entity_def_registry_event(reg, 1)->name, "door_changed");
    const entity_def_method *e = entity_def_registry_find_event(reg, "spell_hit");
    assert_non_null(e);
    assert_int_equal(e->id, 2);
    assert_int_equal(e->arg_count, 4);
    assert_int_equal(e->args[0].type.kind, ENTITY_DEF_ENTITY);
    assert_int_equal(e->args[1].type.kind, ENTITY_DEF_ENTITY);
    assert_int_equal(e->args[2].type.kind, ENTITY_DEF_UINT16);
    assert_int_equal(e->args[3].type.kind, ENTITY_DEF_INT16);
    e = entity_def_registry_find_event(reg, "player_joined");
    assert_int_equal(e->args[1].type.kind, ENTITY_DEF_STRING);
    assert_int_equal(e->args[1].type.max_length, 32); /* a display name, not an account */
    e = entity_def_registry_find_event(reg, "welcome");
    assert_non_null(e);
    assert_int_equal(e->id, 3);
    assert_int_equal(e->arg_count, 1);
    assert_int_equal(e->args[0].type.kind, ENTITY_DEF_STRING);
    check_events_round_trip(reg);
    entity_def_registry_free(reg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_every_type_parses, test_teardown),
        cmocka_unit_test_teardown(test_defaults_implied, test_teardown),
        cmocka_unit_test_teardown(test_defaults_given, test_teardown),
        cmocka_unit_test_teardown(test_defaults_rejected, test_teardown),
        cmocka_unit_test_teardown(test_error_unknown_keys, test_teardown),
        cmocka_unit_test_teardown(test_error_types, test_teardown),
        cmocka_unit_test_teardown(test_error_quantization, test_teardown),
        cmocka_unit_test_teardown(test_error_duplicates, test_teardown),
        cmocka_unit_test_teardown(test_error_flags, test_teardown),
        cmocka_unit_test_teardown(test_error_methods, test_teardown),
        cmocka_unit_test_teardown(test_error_recursive_struct, test_teardown),
        cmocka_unit_test_teardown(test_error_files, test_teardown),
        cmocka_unit_test(test_audience_base),
        cmocka_unit_test(test_audience_base_and_client),
        cmocka_unit_test(test_audience_cell_private),
        cmocka_unit_test(test_audience_cell_public),
        cmocka_unit_test(test_audience_cell_public_and_own),
        cmocka_unit_test(test_audience_all_clients),
        cmocka_unit_test(test_audience_own_client),
        cmocka_unit_test(test_audience_other_clients),
        cmocka_unit_test(test_audience_out_of_range),
        cmocka_unit_test(test_quantization_bits),
        cmocka_unit_test(test_digest_stable),
        cmocka_unit_test(test_describe_round_trip),
        cmocka_unit_test_teardown(test_directory, test_teardown),
        cmocka_unit_test(test_lookup_methods),
        cmocka_unit_test(test_events_parse),
        cmocka_unit_test_teardown(test_events_directory, test_teardown),
        cmocka_unit_test_teardown(test_error_events, test_teardown),
        cmocka_unit_test(test_events_digest),
        cmocka_unit_test(test_events_describe),
        cmocka_unit_test(test_demo_entities),
        cmocka_unit_test(test_demo_events),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
