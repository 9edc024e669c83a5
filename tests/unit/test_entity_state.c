/* test_entity_state.c -- unit tests for entity_state: the flattened layout
 * and defaults, every accessor's type errors, range errors at and one past
 * each limit (int8, uint8, int16 with 12 bits, uint32, int64, narrow
 * widths, quantized numbers, floats, max_length, UTF-8), that a rejected
 * write changes nothing, dirty marking only on change, struct and array
 * element access by index and by path, copying, and the property sets. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entity_def.h"
#include "entity_state.h"

/* Every type, with defaults. Property ids follow the order below. */
static const char defs[] = "{\"types\": [\n"
                           "  {\"name\": \"Stats\", \"fields\": [\n"
                           "    {\"name\": \"hp\", \"type\": \"int16\", \"bits\": 12, \"default\": 100},\n"
                           "    {\"name\": \"pos\", \"type\": \"vector3\",\n"
                           "     \"quantize\": {\"min\": -100, \"max\": 100, \"precision\": 0.01}},\n"
                           "    {\"name\": \"tag\", \"type\": \"string\", \"max_length\": 8, \"default\": \"x\"}]},\n"
                           "  {\"name\": \"Outer\", \"fields\": [\n"
                           "    {\"name\": \"inner\", \"type\": \"Stats\"},\n"
                           "    {\"name\": \"flags\", \"type\": \"array\", \"element\": \"bool\", \"count\": 3},\n"
                           "    {\"name\": \"ids\", \"type\": \"array\", \"element\": \"uint8\", \"count\": 2,\n"
                           "     \"default\": [1, 2]}]}\n"
                           "],\n"
                           "\"entities\": [{\"name\": \"Thing\", \"properties\": [\n"
                           "  {\"name\": \"i8\", \"type\": \"int8\", \"flags\": \"ALL_CLIENTS\", \"default\": -5},\n"
                           "  {\"name\": \"u8\", \"type\": \"uint8\", \"flags\": \"ALL_CLIENTS\", \"default\": 200},\n"
                           "  {\"name\": \"i16_12\", \"type\": \"int16\", \"bits\": 12, \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"u32\", \"type\": \"uint32\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"i64\", \"type\": \"int64\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"u64\", \"type\": \"uint64\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"i32\", \"type\": \"int32\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"u16\", \"type\": \"uint16\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"f\", \"type\": \"float\", \"flags\": \"ALL_CLIENTS\", \"default\": 1.5},\n"
                           "  {\"name\": \"d\", \"type\": \"double\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"q\", \"type\": \"float\", \"flags\": \"ALL_CLIENTS\", \"default\": 2.5,\n"
                           "   \"quantize\": {\"min\": -10, \"max\": 10, \"precision\": 0.5}},\n"
                           "  {\"name\": \"qd\", \"type\": \"double\", \"flags\": \"ALL_CLIENTS\",\n"
                           "   \"quantize\": {\"min\": 0, \"max\": 1000, \"precision\": 0.001}},\n"
                           "  {\"name\": \"b\", \"type\": \"bool\", \"flags\": \"ALL_CLIENTS\", \"default\": true},\n"
                           "  {\"name\": \"s\", \"type\": \"string\", \"max_length\": 5, \"flags\": \"ALL_CLIENTS\",\n"
                           "   \"default\": \"hi\"},\n"
                           "  {\"name\": \"by\", \"type\": \"bytes\", \"max_length\": 4, \"flags\": \"ALL_CLIENTS\",\n"
                           "   \"default\": \"0aFF\"},\n"
                           "  {\"name\": \"v2\", \"type\": \"vector2\", \"flags\": \"ALL_CLIENTS\",\n"
                           "   \"default\": [1, 2]},\n"
                           "  {\"name\": \"v3\", \"type\": \"vector3\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"qv3\", \"type\": \"vector3\", \"flags\": \"ALL_CLIENTS\",\n"
                           "   \"quantize\": {\"min\": -1000, \"max\": 1000, \"precision\": 0.01}},\n"
                           "  {\"name\": \"e\", \"type\": \"entity\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"arr\", \"type\": \"array\", \"element\": \"int16\", \"count\": 4,\n"
                           "   \"flags\": \"ALL_CLIENTS\", \"default\": [1, 2, 3, 4]},\n"
                           "  {\"name\": \"stats\", \"type\": \"Stats\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"outer\", \"type\": \"Outer\", \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"statsarr\", \"type\": \"array\", \"element\": \"Stats\", \"count\": 3,\n"
                           "   \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"u8_5\", \"type\": \"uint8\", \"bits\": 5, \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"i64_40\", \"type\": \"int64\", \"bits\": 40, \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"u64_33\", \"type\": \"uint64\", \"bits\": 33, \"flags\": \"ALL_CLIENTS\"},\n"
                           "  {\"name\": \"strs\", \"type\": \"array\", \"count\": 2, \"flags\": \"ALL_CLIENTS\",\n"
                           "   \"element\": {\"type\": \"string\", \"max_length\": 3}, \"default\": [\"a\", \"bc\"]}\n"
                           "]}]}\n";

enum {
    P_I8,
    P_U8,
    P_I16_12,
    P_U32,
    P_I64,
    P_U64,
    P_I32,
    P_U16,
    P_F,
    P_D,
    P_Q,
    P_QD,
    P_B,
    P_S,
    P_BY,
    P_V2,
    P_V3,
    P_QV3,
    P_E,
    P_ARR,
    P_STATS,
    P_OUTER,
    P_STATSARR,
    P_U8_5,
    P_I64_40,
    P_U64_33,
    P_STRS,
    P_COUNT
};

typedef struct fixture {
    entity_def_registry *reg;
    const entity_def_class *cls;
    entity_state *st;
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    char err[512] = "";
    if (fx == NULL || entity_def_load_string(defs, "test", &fx->reg, err, sizeof err) != 0) {
        fprintf(stderr, "load failed: %s\n", err);
        free(fx);
        return -1;
    }
    fx->cls = entity_def_registry_find_class(fx->reg, "Thing");
    if (fx->cls == NULL || fx->cls->property_count != P_COUNT) return -1;
    fx->st = entity_state_create(fx->cls);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    entity_state_free(fx->st);
    entity_def_registry_free(fx->reg);
    free(fx);
    return 0;
}

static uint32_t idx(fixture *fx, uint16_t prop, const char *path) {
    uint32_t index = 999;
    int rc = entity_state_index(fx->cls, prop, path, &index);
    if (rc != 0) fail_msg("path %s of property %u: %s", path, prop, entity_state_strerror(rc));
    return index;
}

static void assert_nothing_dirty(const entity_state *st) { assert_int_equal(entity_state_next_dirty(st, -1), -1); }

/* ---- layout and defaults ---------------------------------------------- */

static void test_defaults(void **state) {
    fixture *fx = *state;
    entity_state *st = fx->st;
    assert_ptr_equal(entity_state_class(st), fx->cls);
    assert_nothing_dirty(st);
    int64_t i;
    uint64_t u;
    double d, v[3];
    bool b;
    const char *s;
    const uint8_t *by;
    size_t len;
    assert_int_equal(entity_state_get_int(st, P_I8, 0, &i), 0);
    assert_int_equal(i, -5);
    assert_int_equal(entity_state_get_uint(st, P_U8, 0, &u), 0);
    assert_int_equal(u, 200);
    assert_int_equal(entity_state_get_int(st, P_I16_12, 0, &i), 0);
    assert_int_equal(i, 0);
    assert_int_equal(entity_state_get_float(st, P_F, 0, &d), 0);
    assert_true(d == 1.5);
    assert_int_equal(entity_state_get_float(st, P_Q, 0, &d), 0);
    assert_true(d == 2.5);
    assert_int_equal(entity_state_get_bool(st, P_B, 0, &b), 0);
    assert_true(b);
    assert_int_equal(entity_state_get_string(st, P_S, 0, &s, &len), 0);
    assert_string_equal(s, "hi");
    assert_int_equal(len, 2);
    assert_int_equal(entity_state_get_bytes(st, P_BY, 0, &by, &len), 0);
    assert_int_equal(len, 2);
    assert_int_equal(by[0], 0x0a);
    assert_int_equal(by[1], 0xff);
    assert_int_equal(entity_state_get_vector2(st, P_V2, 0, v), 0);
    assert_true(v[0] == 1 && v[1] == 2);
    assert_int_equal(entity_state_get_vector3(st, P_V3, 0, v), 0);
    assert_true(v[0] == 0 && v[1] == 0 && v[2] == 0);
    assert_int_equal(entity_state_get_entity(st, P_E, 0, &u), 0);
    assert_int_equal(u, 0);
    for (uint32_t k = 0; k < 4; k++) {
        assert_int_equal(entity_state_get_int(st, P_ARR, k, &i), 0);
        assert_int_equal(i, k + 1);
    }
    /* Struct defaults, nested and in arrays. */
    assert_int_equal(entity_state_get_int(st, P_STATS, idx(fx, P_STATS, "hp"), &i), 0);
    assert_int_equal(i, 100);
    assert_int_equal(entity_state_get_string(st, P_STATS, idx(fx, P_STATS, ".tag"), &s, NULL), 0);
    assert_string_equal(s, "x");
    assert_int_equal(entity_state_get_uint(st, P_OUTER, idx(fx, P_OUTER, "ids[1]"), &u), 0);
    assert_int_equal(u, 2);
    assert_int_equal(entity_state_get_int(st, P_OUTER, idx(fx, P_OUTER, "inner.hp"), &i), 0);
    assert_int_equal(i, 100);
    assert_int_equal(entity_state_get_int(st, P_STATSARR, idx(fx, P_STATSARR, "[2].hp"), &i), 0);
    assert_int_equal(i, 100);
    assert_int_equal(entity_state_get_string(st, P_STRS, 1, &s, &len), 0);
    assert_string_equal(s, "bc");
}

static void test_layout_and_paths(void **state) {
    fixture *fx = *state;
    const entity_def_class *cls = fx->cls;
    /* Stats = hp, pos, tag: 3 values; Outer = Stats + 3 bools + 2 uint8s. */
    assert_int_equal(cls->properties[P_STATS].type.value_count, 3);
    assert_int_equal(cls->properties[P_OUTER].type.value_count, 8);
    assert_int_equal(idx(fx, P_STATS, ""), 0);
    assert_int_equal(idx(fx, P_STATS, "pos"), 1);
    assert_int_equal(idx(fx, P_STATS, "tag"), 2);
    assert_int_equal(idx(fx, P_OUTER, "inner.tag"), 2);
    assert_int_equal(idx(fx, P_OUTER, "flags[0]"), 3);
    assert_int_equal(idx(fx, P_OUTER, ".flags[2]"), 5);
    assert_int_equal(idx(fx, P_OUTER, "ids[0]"), 6);
    assert_int_equal(idx(fx, P_STATSARR, "[0].hp"), 0);
    assert_int_equal(idx(fx, P_STATSARR, "[1].hp"), 3);
    assert_int_equal(idx(fx, P_STATSARR, "[2].tag"), 8);
    assert_int_equal(idx(fx, P_ARR, "[3]"), 3);

    uint32_t index;
    assert_int_equal(entity_state_index(cls, P_COUNT, "", &index), ENTITY_STATE_ERROR_NO_SUCH_PROPERTY);
    const char *bad[] = {"[4]", "x", "[", "[1", "[a]", ".hp", "[1]x"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        assert_int_equal(entity_state_index(cls, P_ARR, bad[k], &index), ENTITY_STATE_ERROR_INDEX);
    assert_int_equal(entity_state_index(cls, P_STATS, "nope", &index), ENTITY_STATE_ERROR_INDEX);
    assert_int_equal(entity_state_index(cls, P_OUTER, "inner", &index), ENTITY_STATE_ERROR_INDEX);
    assert_int_equal(entity_state_index(cls, P_STATSARR, "[1]", &index), ENTITY_STATE_ERROR_INDEX);
    assert_int_equal(entity_state_index(cls, P_I8, "[0]", &index), ENTITY_STATE_ERROR_INDEX);

    /* Value types. */
    assert_int_equal(entity_state_value_type(cls, P_OUTER, 3)->kind, ENTITY_DEF_BOOL);
    assert_int_equal(entity_state_value_type(cls, P_OUTER, 1)->kind, ENTITY_DEF_VECTOR3);
    assert_int_equal(entity_state_value_type(cls, P_STATSARR, 8)->kind, ENTITY_DEF_STRING);
    assert_null(entity_state_value_type(cls, P_STATSARR, 9));
    assert_null(entity_state_value_type(cls, P_COUNT, 0));
}

/* ---- errors ----------------------------------------------------------- */

static void test_no_such_property_or_index(void **state) {
    fixture *fx = *state;
    entity_state *st = fx->st;
    int64_t i;
    assert_int_equal(entity_state_set_int(st, P_COUNT, 0, 1), ENTITY_STATE_ERROR_NO_SUCH_PROPERTY);
    assert_int_equal(entity_state_get_int(st, 9999, 0, &i), ENTITY_STATE_ERROR_NO_SUCH_PROPERTY);
    assert_int_equal(entity_state_set_int(st, P_I8, 1, 1), ENTITY_STATE_ERROR_INDEX);
    assert_int_equal(entity_state_set_int(st, P_ARR, 4, 1), ENTITY_STATE_ERROR_INDEX);
    assert_int_equal(entity_state_set_int(st, P_STATSARR, 9, 1), ENTITY_STATE_ERROR_INDEX);
    assert_int_equal(entity_state_mark_dirty(st, P_COUNT), ENTITY_STATE_ERROR_NO_SUCH_PROPERTY);
    assert_nothing_dirty(st);
}

static void test_type_errors(void **state) {
    fixture *fx = *state;
    entity_state *st = fx->st;
    int64_t i = 1;
    uint64_t u = 1;
    double d = 1, v[3] = {1, 1, 1};
    bool b = true;
    const char *s = NULL;
    const uint8_t *by = NULL;
    /* int on unsigned, float, bool, string, vector, entity, struct field. */
    assert_int_equal(entity_state_set_int(st, P_U8, 0, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_set_int(st, P_F, 0, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_set_int(st, P_B, 0, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_set_int(st, P_E, 0, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_set_int(st, P_STATS, 1, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_get_int(st, P_U8, 0, &i), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(i, 0);
    assert_int_equal(entity_state_set_uint(st, P_I8, 0, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_set_uint(st, P_E, 0, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_get_uint(st, P_I8, 0, &u), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(u, 0);
    assert_int_equal(entity_state_set_float(st, P_I8, 0, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_set_float(st, P_V2, 0, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_get_float(st, P_B, 0, &d), ENTITY_STATE_ERROR_TYPE);
    assert_true(d == 0);
    assert_int_equal(entity_state_set_bool(st, P_U8, 0, true), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_get_bool(st, P_U8, 0, &b), ENTITY_STATE_ERROR_TYPE);
    assert_false(b);
    assert_int_equal(entity_state_set_string(st, P_BY, 0, "a", 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_set_bytes(st, P_S, 0, "a", 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_get_string(st, P_BY, 0, &s, NULL), ENTITY_STATE_ERROR_TYPE);
    assert_string_equal(s, "");
    assert_int_equal(entity_state_get_bytes(st, P_S, 0, &by, NULL), ENTITY_STATE_ERROR_TYPE);
    assert_non_null(by);
    assert_int_equal(entity_state_set_vector2(st, P_V3, 0, 1, 2), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_set_vector3(st, P_V2, 0, 1, 2, 3), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_get_vector3(st, P_V2, 0, v), ENTITY_STATE_ERROR_TYPE);
    assert_true(v[0] == 0 && v[1] == 0 && v[2] == 0);
    assert_int_equal(entity_state_set_entity(st, P_U64, 0, 1), ENTITY_STATE_ERROR_TYPE);
    assert_int_equal(entity_state_get_entity(st, P_U64, 0, &u), ENTITY_STATE_ERROR_TYPE);
    assert_nothing_dirty(st);
}

/* Sets an int and checks the result; a rejected write must change nothing. */
static void int_case(entity_state *st, uint16_t prop, int64_t value, int expect) {
    int64_t before, after;
    assert_int_equal(entity_state_get_int(st, prop, 0, &before), 0);
    entity_state_clear_dirty(st);
    int rc = entity_state_set_int(st, prop, 0, value);
    if (rc != expect) fail_msg("property %u value %lld: got %d, expected %d", prop, (long long)value, rc, expect);
    assert_int_equal(entity_state_get_int(st, prop, 0, &after), 0);
    if (expect == 0) {
        assert_true(after == value);
    } else {
        assert_true(after == before);
        assert_nothing_dirty(st);
    }
}

static void uint_case(entity_state *st, uint16_t prop, uint64_t value, int expect) {
    uint64_t before, after;
    assert_int_equal(entity_state_get_uint(st, prop, 0, &before), 0);
    entity_state_clear_dirty(st);
    int rc = entity_state_set_uint(st, prop, 0, value);
    if (rc != expect)
        fail_msg("property %u value %llu: got %d, expected %d", prop, (unsigned long long)value, rc, expect);
    assert_int_equal(entity_state_get_uint(st, prop, 0, &after), 0);
    if (expect == 0) {
        assert_true(after == value);
    } else {
        assert_true(after == before);
        assert_nothing_dirty(st);
    }
}

static void test_integer_ranges(void **state) {
    fixture *fx = *state;
    entity_state *st = fx->st;
    const int R = ENTITY_STATE_ERROR_RANGE;
    /* int8 */
    int_case(st, P_I8, -128, 0);
    int_case(st, P_I8, 127, 0);
    int_case(st, P_I8, -129, R);
    int_case(st, P_I8, 128, R);
    /* uint8 */
    uint_case(st, P_U8, 0, 0);
    uint_case(st, P_U8, 255, 0);
    uint_case(st, P_U8, 256, R);
    uint_case(st, P_U8, UINT64_MAX, R);
    /* int16 with a 12-bit width: [-2048, 2047], not the int16 range. */
    int_case(st, P_I16_12, -2048, 0);
    int_case(st, P_I16_12, 2047, 0);
    int_case(st, P_I16_12, -2049, R);
    int_case(st, P_I16_12, 2048, R);
    int_case(st, P_I16_12, 32767, R);
    /* uint32 */
    uint_case(st, P_U32, UINT32_MAX, 0);
    uint_case(st, P_U32, (uint64_t)UINT32_MAX + 1, R);
    /* int32 */
    int_case(st, P_I32, INT32_MIN, 0);
    int_case(st, P_I32, INT32_MAX, 0);
    int_case(st, P_I32, (int64_t)INT32_MIN - 1, R);
    int_case(st, P_I32, (int64_t)INT32_MAX + 1, R);
    /* int64: the whole range (nothing is one past). */
    int_case(st, P_I64, INT64_MIN, 0);
    int_case(st, P_I64, INT64_MAX, 0);
    uint_case(st, P_U64, UINT64_MAX, 0);
    uint_case(st, P_U16, 65535, 0);
    uint_case(st, P_U16, 65536, R);
    /* Narrow widths. */
    uint_case(st, P_U8_5, 31, 0);
    uint_case(st, P_U8_5, 32, R);
    int_case(st, P_I64_40, -(INT64_C(1) << 39), 0);
    int_case(st, P_I64_40, (INT64_C(1) << 39) - 1, 0);
    int_case(st, P_I64_40, -(INT64_C(1) << 39) - 1, R);
    int_case(st, P_I64_40, INT64_C(1) << 39, R);
    uint_case(st, P_U64_33, (UINT64_C(1) << 33) - 1, 0);
    uint_case(st, P_U64_33, UINT64_C(1) << 33, R);
    /* Array elements and struct fields are checked by their own type. */
    int64_t i;
    uint32_t hp = idx(fx, P_STATSARR, "[1].hp");
    entity_state_clear_dirty(st);
    assert_int_equal(entity_state_set_int(st, P_STATSARR, hp, 2048), R);
    assert_int_equal(entity_state_set_int(st, P_STATSARR, hp, 2047), 0);
    assert_int_equal(entity_state_get_int(st, P_STATSARR, hp, &i), 0);
    assert_int_equal(i, 2047);
    assert_int_equal(entity_state_set_int(st, P_ARR, 2, -32769), R);
    assert_int_equal(entity_state_set_int(st, P_ARR, 2, -32768), 0);
}

static void float_case(entity_state *st, uint16_t prop, double value, int expect) {
    double before, after;
    assert_int_equal(entity_state_get_float(st, prop, 0, &before), 0);
    entity_state_clear_dirty(st);
    int rc = entity_state_set_float(st, prop, 0, value);
    if (rc != expect) fail_msg("property %u value %.17g: got %d, expected %d", prop, value, rc, expect);
    assert_int_equal(entity_state_get_float(st, prop, 0, &after), 0);
    if (expect != 0) {
        assert_true(after == before);
        assert_nothing_dirty(st);
    }
}

static void test_float_ranges(void **state) {
    fixture *fx = *state;
    entity_state *st = fx->st;
    const int R = ENTITY_STATE_ERROR_RANGE;
    double d;
    /* Quantized float [-10, 10]: the ends are accepted, just past is not. */
    float_case(st, P_Q, -10, 0);
    float_case(st, P_Q, 10, 0);
    float_case(st, P_Q, nextafter(10, 11), R);
    float_case(st, P_Q, nextafter(-10, -11), R);
    float_case(st, P_Q, 10.5, R);
    float_case(st, P_Q, 3.3, 0); /* not a multiple of the precision: stored exactly */
    assert_int_equal(entity_state_get_float(st, P_Q, 0, &d), 0);
    assert_true(d == 3.3);
    /* Quantized double [0, 1000]. */
    float_case(st, P_QD, 0, 0);
    float_case(st, P_QD, 1000, 0);
    float_case(st, P_QD, -0.0001, R);
    float_case(st, P_QD, 1000.0001, R);
    /* Non-finite values, for every real type. */
    const uint16_t reals[] = {P_F, P_D, P_Q, P_QD};
    for (size_t k = 0; k < 4; k++) {
        float_case(st, reals[k], NAN, R);
        float_case(st, reals[k], INFINITY, R);
        float_case(st, reals[k], -INFINITY, R);
    }
    /* An unquantized float must fit a float; it is stored rounded to one. */
    float_case(st, P_F, FLT_MAX, 0);
    float_case(st, P_F, -(double)FLT_MAX, 0);
    float_case(st, P_F, (double)FLT_MAX * 2, R);
    float_case(st, P_F, 0.1, 0);
    assert_int_equal(entity_state_get_float(st, P_F, 0, &d), 0);
    assert_true(d == (double)0.1f);
    float_case(st, P_D, 1e300, 0);
    float_case(st, P_D, 0.1, 0);
    assert_int_equal(entity_state_get_float(st, P_D, 0, &d), 0);
    assert_true(d == 0.1);
    /* -0 is stored as 0: writing it over 0 is no change. */
    float_case(st, P_D, 0, 0);
    entity_state_clear_dirty(st);
    assert_int_equal(entity_state_set_float(st, P_D, 0, -0.0), 0);
    assert_false(entity_state_is_dirty(st, P_D));
    assert_int_equal(entity_state_get_float(st, P_D, 0, &d), 0);
    assert_false(signbit(d));
}

static void test_vector_ranges(void **state) {
    fixture *fx = *state;
    entity_state *st = fx->st;
    const int R = ENTITY_STATE_ERROR_RANGE;
    double v[3];
    assert_int_equal(entity_state_set_vector3(st, P_QV3, 0, -1000, 1000, 0), 0);
    entity_state_clear_dirty(st);
    /* One bad component rejects the whole vector. */
    assert_int_equal(entity_state_set_vector3(st, P_QV3, 0, 1, 2, 1000.01), R);
    assert_int_equal(entity_state_set_vector3(st, P_QV3, 0, -1000.01, 2, 3), R);
    assert_int_equal(entity_state_set_vector3(st, P_QV3, 0, 1, NAN, 3), R);
    assert_int_equal(entity_state_get_vector3(st, P_QV3, 0, v), 0);
    assert_true(v[0] == -1000 && v[1] == 1000 && v[2] == 0);
    assert_int_equal(entity_state_set_vector2(st, P_V2, 0, INFINITY, 0), R);
    assert_int_equal(entity_state_set_vector2(st, P_V2, 0, 0, 1e39), R);
    assert_int_equal(entity_state_set_vector3(st, P_V3, 0, 0, 0, -1e39), R);
    assert_nothing_dirty(st);
    /* Unquantized components are stored as floats. */
    assert_int_equal(entity_state_set_vector3(st, P_V3, 0, 0.1, 0.2, 0.3), 0);
    assert_int_equal(entity_state_get_vector3(st, P_V3, 0, v), 0);
    assert_true(v[0] == (double)0.1f && v[1] == (double)0.2f && v[2] == (double)0.3f);
    assert_true(entity_state_is_dirty(st, P_V3));
    /* A vector inside a struct inside an array. */
    uint32_t pos = idx(fx, P_STATSARR, "[2].pos");
    assert_int_equal(entity_state_set_vector3(st, P_STATSARR, pos, 100, -100, 0.5), 0);
    assert_int_equal(entity_state_set_vector3(st, P_STATSARR, pos, 100.5, 0, 0), R);
    assert_int_equal(entity_state_get_vector3(st, P_STATSARR, pos, v), 0);
    assert_true(v[0] == 100 && v[1] == -100 && v[2] == 0.5);
}

static void test_string_and_bytes_limits(void **state) {
    fixture *fx = *state;
    entity_state *st = fx->st;
    const char *s;
    size_t len;
    const uint8_t *by;
    /* max_length 5: five bytes are fine, six are not. */
    assert_int_equal(entity_state_set_string(st, P_S, 0, "abcde", 5), 0);
    entity_state_clear_dirty(st);
    assert_int_equal(entity_state_set_string(st, P_S, 0, "abcdef", 6), ENTITY_STATE_ERROR_RANGE);
    /* Not UTF-8, or with a NUL: rejected. */
    assert_int_equal(entity_state_set_string(st, P_S, 0, "a\0b", 3), ENTITY_STATE_ERROR_INVALID);
    assert_int_equal(entity_state_set_string(st, P_S, 0, "\xff", 1), ENTITY_STATE_ERROR_INVALID);
    assert_int_equal(entity_state_set_string(st, P_S, 0, "\xc3", 1), ENTITY_STATE_ERROR_INVALID);
    assert_int_equal(entity_state_set_string(st, P_S, 0, "\xc0\x80", 2), ENTITY_STATE_ERROR_INVALID); /* overlong NUL */
    assert_int_equal(entity_state_set_string(st, P_S, 0, "\xed\xa0\x80", 3),
                     ENTITY_STATE_ERROR_INVALID); /* surrogate */
    assert_int_equal(entity_state_set_string(st, P_S, 0, "\xf4\x90\x80\x80", 4),
                     ENTITY_STATE_ERROR_INVALID); /* past U+10FFFF */
    assert_int_equal(entity_state_set_string(st, P_S, 0, NULL, 1), ENTITY_STATE_ERROR_INVALID);
    assert_nothing_dirty(st);
    assert_int_equal(entity_state_get_string(st, P_S, 0, &s, &len), 0);
    assert_string_equal(s, "abcde");
    /* Multi-byte UTF-8 counts bytes: "é€" is 5 bytes. */
    assert_int_equal(entity_state_set_string(st, P_S, 0, "\xc3\xa9\xe2\x82\xac", 5), 0);
    assert_int_equal(entity_state_set_string(st, P_S, 0, "\xf0\x9f\x98\x80", 4), 0);
    assert_int_equal(entity_state_set_string(st, P_S, 0, NULL, 0), 0);
    assert_int_equal(entity_state_get_string(st, P_S, 0, &s, &len), 0);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    /* Bytes: anything, NULs included, up to max_length 4. */
    const uint8_t raw[5] = {0, 0xff, 0, 0xc0, 1};
    assert_int_equal(entity_state_set_bytes(st, P_BY, 0, raw, 4), 0);
    assert_int_equal(entity_state_set_bytes(st, P_BY, 0, raw, 5), ENTITY_STATE_ERROR_RANGE);
    assert_int_equal(entity_state_get_bytes(st, P_BY, 0, &by, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(by, raw, 4);
    /* String elements of an array have their own max_length (3). */
    assert_int_equal(entity_state_set_string(st, P_STRS, 0, "abc", 3), 0);
    assert_int_equal(entity_state_set_string(st, P_STRS, 1, "abcd", 4), ENTITY_STATE_ERROR_RANGE);
    assert_int_equal(entity_state_get_string(st, P_STRS, 1, &s, NULL), 0);
    assert_string_equal(s, "bc");
}

/* ---- dirty marking ---------------------------------------------------- */

static void test_dirty_only_on_change(void **state) {
    fixture *fx = *state;
    entity_state *st = fx->st;
    assert_nothing_dirty(st);
    /* Writing the stored value: no change. */
    assert_int_equal(entity_state_set_int(st, P_I8, 0, -5), 0);
    assert_int_equal(entity_state_set_uint(st, P_U8, 0, 200), 0);
    assert_int_equal(entity_state_set_float(st, P_F, 0, 1.5), 0);
    assert_int_equal(entity_state_set_bool(st, P_B, 0, true), 0);
    assert_int_equal(entity_state_set_string(st, P_S, 0, "hi", 2), 0);
    assert_int_equal(entity_state_set_bytes(st, P_BY, 0, "\x0a\xff", 2), 0);
    assert_int_equal(entity_state_set_vector2(st, P_V2, 0, 1, 2), 0);
    assert_int_equal(entity_state_set_entity(st, P_E, 0, 0), 0);
    assert_int_equal(entity_state_set_int(st, P_ARR, 3, 4), 0);
    assert_int_equal(entity_state_set_float(st, P_F, 0, 1.5000000000000001), 0); /* same float */
    assert_nothing_dirty(st);

    /* Changes mark exactly their property. */
    assert_int_equal(entity_state_set_int(st, P_ARR, 3, 5), 0);
    assert_int_equal(entity_state_set_bool(st, P_OUTER, idx(fx, P_OUTER, "flags[1]"), true), 0);
    assert_int_equal(entity_state_set_entity(st, P_E, 0, 0x1234567890ULL), 0);
    assert_int_equal(entity_state_set_string(st, P_S, 0, "hj", 2), 0);
    int expected[] = {P_S, P_E, P_ARR, P_OUTER};
    int k = 0;
    for (int p = entity_state_next_dirty(st, -1); p >= 0; p = entity_state_next_dirty(st, p))
        assert_int_equal(p, expected[k++]);
    assert_int_equal(k, 4);
    assert_true(entity_state_is_dirty(st, P_OUTER));
    assert_false(entity_state_is_dirty(st, P_STATS));

    entity_state_clear_dirty(st);
    assert_nothing_dirty(st);
    /* A string of the same length and other bytes is a change. */
    assert_int_equal(entity_state_set_string(st, P_S, 0, "hk", 2), 0);
    assert_true(entity_state_is_dirty(st, P_S));
    /* Marking by hand. */
    assert_int_equal(entity_state_mark_dirty(st, P_STATSARR), 0);
    assert_true(entity_state_is_dirty(st, P_STATSARR));
    assert_true(entity_state_mask_has(entity_state_dirty(st), P_STATSARR));
}

/* ---- copies and sets -------------------------------------------------- */

static void test_copy(void **state) {
    fixture *fx = *state;
    entity_state *a = fx->st;
    entity_state *b = entity_state_create(fx->cls);
    assert_int_equal(entity_state_set_string(a, P_STRS, 0, "xyz", 3), 0);
    assert_int_equal(entity_state_set_vector3(a, P_QV3, 0, 1, 2, 3), 0);
    assert_int_equal(entity_state_set_int(a, P_STATSARR, idx(fx, P_STATSARR, "[1].hp"), -7), 0);
    assert_int_equal(entity_state_copy(b, a), 0);
    assert_true(entity_state_is_dirty(b, P_STRS));
    const char *s;
    assert_int_equal(entity_state_get_string(b, P_STRS, 0, &s, NULL), 0);
    assert_string_equal(s, "xyz");
    assert_int_equal(entity_state_get_string(b, P_STRS, 1, &s, NULL), 0);
    assert_string_equal(s, "bc");
    /* The copy owns its strings. */
    assert_int_equal(entity_state_set_string(a, P_STRS, 0, "q", 1), 0);
    assert_int_equal(entity_state_get_string(b, P_STRS, 0, &s, NULL), 0);
    assert_string_equal(s, "xyz");
    int64_t i;
    assert_int_equal(entity_state_get_int(b, P_STATSARR, idx(fx, P_STATSARR, "[1].hp"), &i), 0);
    assert_int_equal(i, -7);
    assert_int_equal(entity_state_copy(b, b), 0);

    /* Another class cannot be copied into. */
    entity_def_registry *reg2;
    char err[256];
    assert_int_equal(entity_def_load_string("{\"entities\": [{\"name\": \"Other\", \"properties\": "
                                            "[{\"name\": \"x\", \"type\": \"int8\", \"flags\": "
                                            "\"BASE\"}]}]}",
                                            "other", &reg2, err, sizeof err),
                     0);
    entity_state *c = entity_state_create(entity_def_registry_class(reg2, 0));
    assert_int_equal(entity_state_copy(c, a), ENTITY_STATE_ERROR_CLASS);
    entity_state_free(c);
    entity_def_registry_free(reg2);
    entity_state_free(b);
    entity_state_free(NULL);
}

static void test_masks(void **state) {
    (void)state;
    entity_state_mask m = {0}, all, both;
    assert_true(entity_state_mask_empty(&m));
    assert_int_equal(entity_state_mask_next(&m, -1), -1);
    entity_state_mask_add(&m, 0);
    entity_state_mask_add(&m, 63);
    entity_state_mask_add(&m, 64);
    entity_state_mask_add(&m, 255);
    entity_state_mask_add(&m, 256); /* out of range: ignored */
    assert_int_equal(entity_state_mask_next(&m, -1), 0);
    assert_int_equal(entity_state_mask_next(&m, 0), 63);
    assert_int_equal(entity_state_mask_next(&m, 63), 64);
    assert_int_equal(entity_state_mask_next(&m, 64), 255);
    assert_int_equal(entity_state_mask_next(&m, 255), -1);
    entity_state_mask_remove(&m, 63);
    assert_false(entity_state_mask_has(&m, 63));
    entity_state_mask_all(&all, 65);
    assert_true(entity_state_mask_has(&all, 64));
    assert_false(entity_state_mask_has(&all, 65));
    entity_state_mask_intersect(&both, &m, &all);
    assert_int_equal(entity_state_mask_next(&both, -1), 0);
    assert_int_equal(entity_state_mask_next(&both, 0), 64);
    assert_int_equal(entity_state_mask_next(&both, 64), -1);
    entity_state_mask_all(&all, 256);
    assert_int_equal(entity_state_mask_next(&all, 254), 255);
    assert_false(entity_state_mask_empty(&all));
}

/* Every error code has a message. */
static void test_strerror(void **state) {
    (void)state;
    for (int code = -15; code <= -10; code++) assert_null(strstr(entity_state_strerror(code), "unknown"));
    assert_non_null(strstr(entity_state_strerror(-99), "unknown"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout_and_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_such_property_or_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_type_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integer_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_float_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vector_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_string_and_bytes_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dirty_only_on_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy, setup, teardown),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
