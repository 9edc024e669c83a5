/* test_method_call.c -- a call's arguments: round trips of every kind of
 * argument, and the exact-length check that refuses wrong types, truncated
 * calls and trailing bytes without touching the destination. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "entity_def.h"
#include "entity_state.h"
#include "method_call.h"
#include "property_codec.h"

static const char *defs =
    "{\"format\":1,"
    " \"types\":[{\"name\":\"Slot\",\"fields\":[{\"name\":\"item\",\"type\":\"uint16\"},"
    "                                         {\"name\":\"count\",\"type\":\"uint8\",\"default\":1}]}],"
    " \"entities\":[{\"name\":\"Hero\",\"properties\":[],"
    "  \"cell_methods\":["
    "   {\"name\":\"cast\",\"exposed\":true,\"args\":[{\"name\":\"spell\",\"type\":\"uint16\"},"
    "                                           {\"name\":\"target\",\"type\":\"entity\"}]},"
    "   "
    "{\"name\":\"all\",\"args\":[{\"name\":\"a\",\"type\":\"int16\"},{\"name\":\"b\",\"type\":\"string\",\"max_"
    "length\":20},"
    "                          {\"name\":\"c\",\"type\":\"vector3\"},{\"name\":\"d\",\"type\":\"bool\"},"
    "                          "
    "{\"name\":\"e\",\"type\":\"float\",\"quantize\":{\"min\":0,\"max\":10,\"precision\":0.5}},"
    "                          {\"name\":\"f\",\"type\":\"array\",\"element\":\"Slot\",\"count\":2},"
    "                          "
    "{\"name\":\"g\",\"type\":\"int64\"},{\"name\":\"h\",\"type\":\"bytes\",\"max_length\":4}]},"
    "   {\"name\":\"none\"}]}]}";

typedef struct fixture {
    entity_def_registry *reg;
    const entity_def_class *cls;
    const entity_def_method *cast, *all, *none;
} fixture;

static int setup(void **state) {
    static fixture fx;
    char err[512] = "";
    if (entity_def_load_string(defs, "test", &fx.reg, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    fx.cls = entity_def_registry_find_class(fx.reg, "Hero");
    fx.cast = entity_def_class_find_method(fx.cls, ENTITY_DEF_PART_CELL, "cast");
    fx.all = entity_def_class_find_method(fx.cls, ENTITY_DEF_PART_CELL, "all");
    fx.none = entity_def_class_find_method(fx.cls, ENTITY_DEF_PART_CELL, "none");
    *state = &fx;
    return fx.cast && fx.all && fx.none ? 0 : -1;
}

static int teardown(void **state) {
    fixture *fx = *state;
    entity_def_registry_free(fx->reg);
    return 0;
}

/* The argument class mirrors the method: one property per argument. */
static void test_args_class(void **state) {
    fixture *fx = *state;
    assert_int_equal(fx->all->args_class.property_count, 8);
    assert_string_equal(fx->all->args_class.properties[1].name, "b");
    assert_int_equal(fx->all->args_class.properties[1].type.max_length, 20);
    entity_state *args = method_call_args_create(fx->all);
    uint64_t count;
    assert_int_equal(entity_state_get_uint(args, 5, 1, &count), 0);
    assert_int_equal(count, 1); /* a struct field's declared default */
    entity_state_free(args);
}

static void test_round_trip(void **state) {
    fixture *fx = *state;
    entity_state *in = method_call_args_create(fx->all), *out = method_call_args_create(fx->all);
    assert_int_equal(entity_state_set_int(in, 0, 0, -1234), 0);
    assert_int_equal(entity_state_set_string(in, 1, 0, "fireball", 8), 0);
    assert_int_equal(entity_state_set_vector3(in, 2, 0, 1.5, -2.25, 1e6), 0);
    assert_int_equal(entity_state_set_bool(in, 3, 0, true), 0);
    assert_int_equal(entity_state_set_float(in, 4, 0, 7.5), 0);
    assert_int_equal(entity_state_set_uint(in, 5, 2, 999), 0); /* [1].item */
    assert_int_equal(entity_state_set_int(in, 6, 0, INT64_MIN), 0);
    assert_int_equal(entity_state_set_bytes(in, 7, 0, "\x00\xff", 2), 0);
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(in, &w);
    assert_int_equal(bit_writer_bits(&w) % 8, 0);
    assert_int_equal(method_call_check(fx->all, bit_writer_data(&w), bit_writer_bytes(&w)), 0);
    assert_int_equal(method_call_decode(out, bit_writer_data(&w), bit_writer_bytes(&w)), 0);
    int64_t i;
    const char *text;
    double v[3], f;
    bool b;
    uint64_t u;
    const uint8_t *bytes;
    size_t length;
    entity_state_get_int(out, 0, 0, &i);
    assert_int_equal(i, -1234);
    entity_state_get_string(out, 1, 0, &text, &length);
    assert_string_equal(text, "fireball");
    entity_state_get_vector3(out, 2, 0, v);
    assert_true(v[0] == 1.5 && v[1] == -2.25 && v[2] == 1e6);
    entity_state_get_bool(out, 3, 0, &b);
    assert_true(b);
    entity_state_get_float(out, 4, 0, &f);
    assert_true(f == 7.5);
    entity_state_get_uint(out, 5, 2, &u);
    assert_int_equal(u, 999);
    entity_state_get_int(out, 6, 0, &i);
    assert_true(i == INT64_MIN);
    entity_state_get_bytes(out, 7, 0, &bytes, &length);
    assert_int_equal(length, 2);
    assert_memory_equal(bytes, "\x00\xff", 2);
    bit_writer_close(&w);
    entity_state_free(in);
    entity_state_free(out);
}

/* Every cut of a valid call, and every extra byte, is refused, and the
 * destination keeps its values. */
static void test_exact_length(void **state) {
    fixture *fx = *state;
    entity_state *in = method_call_args_create(fx->cast), *out = method_call_args_create(fx->cast);
    entity_state_set_uint(in, 0, 0, 7);
    entity_state_set_entity(in, 1, 0, 0x0102030405060708ull);
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(in, &w);
    size_t n = bit_writer_bytes(&w);
    assert_int_equal(n, 10);
    uint8_t buffer[16];
    memcpy(buffer, bit_writer_data(&w), n);
    for (size_t cut = 0; cut < n; cut++) {
        assert_int_equal(method_call_check(fx->cast, buffer, cut), PROPERTY_CODEC_ERROR_TRUNCATED);
        assert_int_equal(method_call_decode(out, buffer, cut), PROPERTY_CODEC_ERROR_TRUNCATED);
    }
    buffer[n] = 0;
    assert_int_equal(method_call_check(fx->cast, buffer, n + 1), METHOD_CALL_ERROR_TRAILING);
    assert_int_equal(method_call_decode(out, buffer, n + 1), METHOD_CALL_ERROR_TRAILING);
    uint64_t spell;
    entity_state_get_uint(out, 0, 0, &spell);
    assert_int_equal(spell, 0);
    assert_int_equal(method_call_decode(out, buffer, n), 0);
    entity_state_get_uint(out, 0, 0, &spell);
    assert_int_equal(spell, 7);
    /* No arguments: only an empty call is one. */
    assert_int_equal(method_call_check(fx->none, NULL, 0), 0);
    assert_int_equal(method_call_check(fx->none, buffer, 1), METHOD_CALL_ERROR_TRAILING);
    bit_writer_close(&w);
    entity_state_free(in);
    entity_state_free(out);
}

/* Values a type does not allow: a string over max_length, a quantized
 * index past the range, a string that is not UTF-8, non-zero padding. */
static void test_wrong_types(void **state) {
    fixture *fx = *state;
    entity_state *in = method_call_args_create(fx->all);
    entity_state_set_string(in, 1, 0, "ok", 2);
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(in, &w);
    size_t n = bit_writer_bytes(&w);
    uint8_t good[256], bad[256];
    memcpy(good, bit_writer_data(&w), n);
    assert_int_equal(method_call_check(fx->all, good, n), 0);
    /* b's length field (5 bits for max 20) follows a's 16 bits: 31 > 20. */
    memcpy(bad, good, n);
    bad[2] |= 0x1f;
    assert_int_equal(method_call_check(fx->all, bad, n), PROPERTY_CODEC_ERROR_RANGE);
    /* b = "o\xff": not UTF-8. */
    memcpy(bad, good, n);
    bad[3] = (uint8_t)((bad[3] & 0x1f) | (0xff << 5));
    bad[4] = (uint8_t)((bad[4] & 0xe0) | (0xff >> 3));
    assert_int_equal(method_call_check(fx->all, bad, n), PROPERTY_CODEC_ERROR_INVALID);
    /* A set padding bit. */
    memcpy(bad, good, n);
    unsigned pad_bits = (unsigned)(n * 8 - bit_writer_bits(&w));
    if (pad_bits > 0) {
        bad[n - 1] |= 0x80;
        assert_int_equal(method_call_check(fx->all, bad, n), METHOD_CALL_ERROR_TRAILING);
    }
    /* Random bytes never crash and never pass for cast with a wrong size. */
    for (int round = 0; round < 2000; round++) {
        uint8_t junk[24];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)((size_t)round * 131 + i * 17);
        size_t length = (size_t)round % sizeof junk;
        int rc = method_call_check(fx->cast, junk, length);
        if (length != 10) assert_true(rc != 0);
        (void)method_call_check(fx->all, junk, length);
    }
    bit_writer_close(&w);
    entity_state_free(in);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args_class),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_exact_length),
        cmocka_unit_test(test_wrong_types),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
