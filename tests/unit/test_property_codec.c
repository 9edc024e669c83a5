/* test_property_codec.c -- unit tests for property_codec: the round trip of
 * every type (int8..int64, uint8..uint64 at natural and narrow widths,
 * float, double, quantized, bool, string, bytes, vector2, vector3, entity,
 * fixed arrays, nested structs), the documented bit counts, the
 * quantization error bound, change lists (round trip, audience masks,
 * changed sets), and malformed input: truncation at every bit and byte,
 * unknown and unaccepted ids, lengths over max_length, bad UTF-8, values
 * out of range, duplicate ids, random garbage. Every rejected input must
 * leave the state byte-for-byte as it was, with nothing marked dirty. */
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

#include "bit_stream.h"
#include "entity_def.h"
#include "entity_state.h"
#include "property_codec.h"

/* Every type. Property ids follow the order below. */
static const char defs[] =
    "{\"types\": [\n"
    "  {\"name\": \"Stats\", \"fields\": [\n"
    "    {\"name\": \"hp\", \"type\": \"int16\", \"bits\": 12, \"default\": 100},\n"
    "    {\"name\": \"pos\", \"type\": \"vector3\",\n"
    "     \"quantize\": {\"min\": -100, \"max\": 100, \"precision\": 0.01}},\n"
    "    {\"name\": \"tag\", \"type\": \"string\", \"max_length\": 8, \"default\": \"x\"}]},\n"
    "  {\"name\": \"Outer\", \"fields\": [\n"
    "    {\"name\": \"inner\", \"type\": \"Stats\"},\n"
    "    {\"name\": \"flags\", \"type\": \"array\", \"element\": \"bool\", \"count\": 3},\n"
    "    {\"name\": \"ids\", \"type\": \"array\", \"element\": \"uint8\", \"count\": 2}]}\n"
    "],\n"
    "\"entities\": [{\"name\": \"Thing\", \"properties\": [\n"
    "  {\"name\": \"i8\", \"type\": \"int8\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"i16\", \"type\": \"int16\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"i32\", \"type\": \"int32\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"i64\", \"type\": \"int64\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"u8\", \"type\": \"uint8\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"u16\", \"type\": \"uint16\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"u32\", \"type\": \"uint32\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"u64\", \"type\": \"uint64\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"i16_12\", \"type\": \"int16\", \"bits\": 12, \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"u8_5\", \"type\": \"uint8\", \"bits\": 5, \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"i32_20\", \"type\": \"int32\", \"bits\": 20, \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"i64_40\", \"type\": \"int64\", \"bits\": 40, \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"u64_33\", \"type\": \"uint64\", \"bits\": 33, \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"f\", \"type\": \"float\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"d\", \"type\": \"double\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"q\", \"type\": \"float\", \"flags\": \"ALL_CLIENTS\",\n"
    "   \"quantize\": {\"min\": -10, \"max\": 10, \"precision\": 0.5}},\n"
    "  {\"name\": \"qd\", \"type\": \"double\", \"flags\": \"ALL_CLIENTS\",\n"
    "   \"quantize\": {\"min\": 0, \"max\": 1000, \"precision\": 0.001}},\n"
    "  {\"name\": \"b\", \"type\": \"bool\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"s\", \"type\": \"string\", \"max_length\": 5, \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"by\", \"type\": \"bytes\", \"max_length\": 300, \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"v2\", \"type\": \"vector2\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"v3\", \"type\": \"vector3\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"qv3\", \"type\": \"vector3\", \"flags\": \"ALL_CLIENTS\",\n"
    "   \"quantize\": {\"min\": -1000, \"max\": 1000, \"precision\": 0.01}},\n"
    "  {\"name\": \"e\", \"type\": \"entity\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"arr\", \"type\": \"array\", \"element\": \"int16\", \"count\": 4,\n"
    "   \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"stats\", \"type\": \"Stats\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"outer\", \"type\": \"Outer\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"statsarr\", \"type\": \"array\", \"element\": \"Stats\", \"count\": 3,\n"
    "   \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"strs\", \"type\": \"array\", \"count\": 2, \"flags\": \"ALL_CLIENTS\",\n"
    "   \"element\": {\"type\": \"string\", \"max_length\": 300}},\n"
    "  {\"name\": \"grid\", \"type\": \"array\", \"count\": 2, \"flags\": \"ALL_CLIENTS\",\n"
    "   \"element\": {\"type\": \"array\", \"element\": \"uint8\", \"count\": 3}}\n"
    "]}]}\n";

enum {
    P_I8,
    P_I16,
    P_I32,
    P_I64,
    P_U8,
    P_U16,
    P_U32,
    P_U64,
    P_I16_12,
    P_U8_5,
    P_I32_20,
    P_I64_40,
    P_U64_33,
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
    P_STRS,
    P_GRID,
    P_COUNT
};

/* A fixed-seed xorshift64*, so that a failure replays. */
static uint64_t rng_state = 0x243f6a8885a308d3ULL;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}
static double uniform(void) { return (double)(rng() >> 11) / 9007199254740992.0; }

typedef struct fixture {
    entity_def_registry *reg;
    const entity_def_class *cls;
    entity_state *a, *b;
    bit_writer w;
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
    fx->a = entity_state_create(fx->cls);
    fx->b = entity_state_create(fx->cls);
    bit_writer_init(&fx->w);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    entity_state_free(fx->a);
    entity_state_free(fx->b);
    bit_writer_close(&fx->w);
    entity_def_registry_free(fx->reg);
    free(fx);
    return 0;
}

/* ---- helpers ---------------------------------------------------------- */

static double random_real(const entity_def_type *t) {
    if (t->quantized) {
        switch (rng() % 8) {
            case 0:
                return t->quant_min;
            case 1:
                return t->quant_max;
            default:
                return t->quant_min + (t->quant_max - t->quant_min) * uniform();
        }
    }
    if (t->kind == ENTITY_DEF_DOUBLE) {
        double d;
        uint64_t u;
        do {
            u = rng();
            memcpy(&d, &u, sizeof d);
        } while (!isfinite(d));
        return d;
    }
    return (uniform() - 0.5) * 1e6;
}

/* Gives value `index` of property `prop` a random legal value. */
static void randomize_value(entity_state *st, uint16_t prop, uint32_t index) {
    const entity_def_type *t = entity_state_value_type(entity_state_class(st), prop, index);
    int rc = -1;
    uint64_t mask = t->bits >= 64 ? UINT64_MAX : (UINT64_C(1) << t->bits) - 1;
    switch (t->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64: {
            /* Small magnitudes half the time: they take the short varint forms. */
            uint64_t zero = UINT64_C(0) - (uint64_t)t->int_min; /* raw form of 0 */
            uint64_t raw = rng() % 2 ? rng() & mask : zero + (rng() % 17) - 8;
            rc = entity_state_set_int(st, prop, index, (int64_t)((raw & mask) + (uint64_t)t->int_min));
            break;
        }
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64:
            rc = entity_state_set_uint(st, prop, index, (rng() >> (rng() % 64)) & mask);
            break;
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE:
            rc = entity_state_set_float(st, prop, index, random_real(t));
            break;
        case ENTITY_DEF_BOOL:
            rc = entity_state_set_bool(st, prop, index, rng() & 1);
            break;
        case ENTITY_DEF_STRING: {
            char text[ENTITY_DEF_MAX_LENGTH];
            size_t n = (size_t)(rng() % (t->max_length + 1)), len = 0;
            while (len < n) {
                if (n - len >= 2 && rng() % 4 == 0) {
                    text[len++] = (char)0xc3; /* e acute: multi-byte UTF-8 */
                    text[len++] = (char)0xa9;
                } else {
                    text[len++] = (char)('a' + rng() % 26);
                }
            }
            rc = entity_state_set_string(st, prop, index, text, len);
            break;
        }
        case ENTITY_DEF_BYTES: {
            uint8_t bytes[ENTITY_DEF_MAX_LENGTH];
            size_t n = (size_t)(rng() % (t->max_length + 1));
            for (size_t k = 0; k < n; k++) bytes[k] = (uint8_t)rng();
            rc = entity_state_set_bytes(st, prop, index, bytes, n);
            break;
        }
        case ENTITY_DEF_VECTOR2:
            rc = entity_state_set_vector2(st, prop, index, random_real(t), random_real(t));
            break;
        case ENTITY_DEF_VECTOR3:
            rc = entity_state_set_vector3(st, prop, index, random_real(t), random_real(t), random_real(t));
            break;
        case ENTITY_DEF_ENTITY:
            rc = entity_state_set_entity(st, prop, index, rng());
            break;
        default:
            fail_msg("value type %d", (int)t->kind);
    }
    if (rc != 0) fail_msg("random value for %u[%u]: %s", prop, index, entity_state_strerror(rc));
}

static void randomize(entity_state *st, uint16_t prop) {
    uint32_t n = entity_state_class(st)->properties[prop].type.value_count;
    for (uint32_t i = 0; i < n; i++) randomize_value(st, prop, i);
}

/* Asserts that value `index` of `prop` in `got` equals that of `want`,
 * within precision / 2 for quantized numbers (inside [min, max]). */
static void assert_value(const entity_state *want, const entity_state *got, uint16_t prop, uint32_t index) {
    const entity_def_type *t = entity_state_value_type(entity_state_class(want), prop, index);
    int64_t i1, i2;
    uint64_t u1, u2;
    double d1[3], d2[3];
    bool b1, b2;
    const char *s1, *s2;
    const uint8_t *y1, *y2;
    size_t l1, l2;
    unsigned n = 1;
    switch (t->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64:
            assert_int_equal(entity_state_get_int(want, prop, index, &i1), 0);
            assert_int_equal(entity_state_get_int(got, prop, index, &i2), 0);
            if (i1 != i2) fail_msg("%u[%u]: %lld != %lld", prop, index, (long long)i1, (long long)i2);
            return;
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64:
            assert_int_equal(entity_state_get_uint(want, prop, index, &u1), 0);
            assert_int_equal(entity_state_get_uint(got, prop, index, &u2), 0);
            assert_true(u1 == u2);
            return;
        case ENTITY_DEF_ENTITY:
            assert_int_equal(entity_state_get_entity(want, prop, index, &u1), 0);
            assert_int_equal(entity_state_get_entity(got, prop, index, &u2), 0);
            assert_true(u1 == u2);
            return;
        case ENTITY_DEF_BOOL:
            assert_int_equal(entity_state_get_bool(want, prop, index, &b1), 0);
            assert_int_equal(entity_state_get_bool(got, prop, index, &b2), 0);
            assert_true(b1 == b2);
            return;
        case ENTITY_DEF_STRING:
            assert_int_equal(entity_state_get_string(want, prop, index, &s1, &l1), 0);
            assert_int_equal(entity_state_get_string(got, prop, index, &s2, &l2), 0);
            assert_int_equal(l1, l2);
            assert_string_equal(s1, s2);
            return;
        case ENTITY_DEF_BYTES:
            assert_int_equal(entity_state_get_bytes(want, prop, index, &y1, &l1), 0);
            assert_int_equal(entity_state_get_bytes(got, prop, index, &y2, &l2), 0);
            assert_int_equal(l1, l2);
            assert_memory_equal(y1, y2, l1);
            return;
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE:
            assert_int_equal(entity_state_get_float(want, prop, index, d1), 0);
            assert_int_equal(entity_state_get_float(got, prop, index, d2), 0);
            break;
        case ENTITY_DEF_VECTOR2:
            n = 2;
            assert_int_equal(entity_state_get_vector2(want, prop, index, d1), 0);
            assert_int_equal(entity_state_get_vector2(got, prop, index, d2), 0);
            break;
        case ENTITY_DEF_VECTOR3:
            n = 3;
            assert_int_equal(entity_state_get_vector3(want, prop, index, d1), 0);
            assert_int_equal(entity_state_get_vector3(got, prop, index, d2), 0);
            break;
        default:
            fail_msg("value type %d", (int)t->kind);
            return; /* not reached (fail_msg jumps out), but the analyzer cannot tell */
    }
    for (unsigned k = 0; k < n; k++) {
        if (!t->quantized) {
            if (d1[k] != d2[k]) fail_msg("%u[%u].%u: %.17g != %.17g", prop, index, k, d1[k], d2[k]);
            continue;
        }
        /* precision / 2, plus a few units in the last place of the range. */
        double bound = t->quant_precision / 2 + 1e-12 * fmax(fabs(t->quant_min), fabs(t->quant_max));
        if (!(fabs(d1[k] - d2[k]) <= bound))
            fail_msg("%u[%u].%u: %.17g decoded as %.17g (precision %g)", prop, index, k, d1[k], d2[k],
                     t->quant_precision);
        assert_true(d2[k] >= t->quant_min && d2[k] <= t->quant_max);
    }
}

static void assert_property(const entity_state *want, const entity_state *got, uint16_t prop) {
    uint32_t n = entity_state_class(want)->properties[prop].type.value_count;
    for (uint32_t i = 0; i < n; i++) assert_value(want, got, prop, i);
}

/* The whole state as bytes, to prove that a rejected decode changed
 * nothing. Caller frees. */
static uint8_t *snapshot(const entity_state *st, size_t *bytes) {
    bit_writer w;
    bit_writer_init(&w);
    entity_state_encode_all(st, &w);
    *bytes = bit_writer_bytes(&w);
    uint8_t *copy = malloc(*bytes + 1);
    assert_non_null(copy);
    memcpy(copy, bit_writer_data(&w), *bytes);
    bit_writer_close(&w);
    return copy;
}

static void assert_same_state(const entity_state *st, const uint8_t *before, size_t bytes) {
    size_t n;
    uint8_t *now = snapshot(st, &n);
    assert_int_equal(n, bytes);
    assert_memory_equal(now, before, bytes);
    free(now);
    assert_int_equal(entity_state_next_dirty(st, -1), -1);
}

/* Decodes a change list from an exact-size heap copy of `data` (so that
 * ASan sees any over-read) and returns the result. */
static int decode_copy(entity_state *st, const uint8_t *data, size_t bytes, size_t bits,
                       const entity_state_mask *accept, entity_state_mask *changed) {
    uint8_t *copy = malloc(bytes > 0 ? bytes : 1);
    assert_non_null(copy);
    if (bytes > 0) memcpy(copy, data, bytes);
    bit_reader r;
    bit_reader_init_bits(&r, bytes > 0 ? copy : NULL, bits);
    int rc = property_codec_decode_changes(&r, st, accept, changed);
    assert_true(bit_reader_failed(&r) == (rc != 0));
    free(copy);
    return rc;
}

/* ---- round trips ------------------------------------------------------ */

/* Encodes property `prop` of a, decodes it into b, checks the value and
 * that the reader consumed exactly what was written. Returns the bits. */
static size_t round_trip(fixture *fx, uint16_t prop) {
    bit_writer_reset(&fx->w);
    assert_int_equal(property_codec_encode(&fx->w, fx->a, prop), 0);
    size_t bits = bit_writer_bits(&fx->w);
    bit_reader r;
    bit_reader_init_bits(&r, bit_writer_data(&fx->w), bits);
    int rc = property_codec_decode(&r, fx->b, prop);
    if (rc != 0) fail_msg("property %s: %s", fx->cls->properties[prop].name, property_codec_strerror(rc));
    assert_int_equal(bit_reader_remaining(&r), 0);
    assert_property(fx->a, fx->b, prop);
    return bits;
}

static void test_round_trip_every_type(void **state) {
    fixture *fx = *state;
    for (int round = 0; round < 300; round++) {
        for (int p = 0; p < P_COUNT; p++) {
            randomize(fx->a, p);
            round_trip(fx, p);
        }
    }
    /* Extremes of every integer kind. */
    assert_int_equal(entity_state_set_int(fx->a, P_I8, 0, INT8_MIN), 0);
    round_trip(fx, P_I8);
    assert_int_equal(entity_state_set_int(fx->a, P_I8, 0, INT8_MAX), 0);
    round_trip(fx, P_I8);
    assert_int_equal(entity_state_set_int(fx->a, P_I16, 0, INT16_MIN), 0);
    round_trip(fx, P_I16);
    assert_int_equal(entity_state_set_int(fx->a, P_I32, 0, INT32_MIN), 0);
    round_trip(fx, P_I32);
    assert_int_equal(entity_state_set_int(fx->a, P_I32, 0, INT32_MAX), 0);
    round_trip(fx, P_I32);
    assert_int_equal(entity_state_set_int(fx->a, P_I64, 0, INT64_MIN), 0);
    round_trip(fx, P_I64);
    assert_int_equal(entity_state_set_int(fx->a, P_I64, 0, INT64_MAX), 0);
    round_trip(fx, P_I64);
    assert_int_equal(entity_state_set_uint(fx->a, P_U64, 0, UINT64_MAX), 0);
    round_trip(fx, P_U64);
    assert_int_equal(entity_state_set_uint(fx->a, P_U32, 0, UINT32_MAX), 0);
    round_trip(fx, P_U32);
    assert_int_equal(entity_state_set_int(fx->a, P_I64_40, 0, -(INT64_C(1) << 39)), 0);
    round_trip(fx, P_I64_40);
    assert_int_equal(entity_state_set_uint(fx->a, P_U64_33, 0, (UINT64_C(1) << 33) - 1), 0);
    round_trip(fx, P_U64_33);
    assert_int_equal(entity_state_set_float(fx->a, P_F, 0, -(double)FLT_MAX), 0);
    round_trip(fx, P_F);
    assert_int_equal(entity_state_set_float(fx->a, P_D, 0, DBL_MIN / 4), 0); /* subnormal */
    round_trip(fx, P_D);
    assert_int_equal(entity_state_set_string(fx->a, P_S, 0, "", 0), 0);
    round_trip(fx, P_S);
}

static void test_bit_counts(void **state) {
    fixture *fx = *state;
    /* The table at the top of property_codec.c. */
    assert_int_equal(round_trip(fx, P_I8), 8);
    assert_int_equal(round_trip(fx, P_I16), 16);
    assert_int_equal(round_trip(fx, P_U8), 8);
    assert_int_equal(round_trip(fx, P_U16), 16);
    assert_int_equal(round_trip(fx, P_I16_12), 12);
    assert_int_equal(round_trip(fx, P_U8_5), 5);
    assert_int_equal(round_trip(fx, P_I32_20), 20);
    assert_int_equal(round_trip(fx, P_I64_40), 40);
    assert_int_equal(round_trip(fx, P_U64_33), 33);
    /* Natural-width 32/64-bit integers are varints. */
    assert_int_equal(round_trip(fx, P_I32), 8); /* 0 */
    assert_int_equal(entity_state_set_int(fx->a, P_I32, 0, -1000), 0);
    assert_int_equal(round_trip(fx, P_I32), 16);
    assert_int_equal(entity_state_set_int(fx->a, P_I32, 0, INT32_MIN), 0);
    assert_int_equal(round_trip(fx, P_I32), 36);
    assert_int_equal(entity_state_set_uint(fx->a, P_U64, 0, 7), 0);
    assert_int_equal(round_trip(fx, P_U64), 8);
    assert_int_equal(entity_state_set_uint(fx->a, P_U64, 0, UINT64_MAX), 0);
    assert_int_equal(round_trip(fx, P_U64), 68);
    assert_int_equal(round_trip(fx, P_F), 32);
    assert_int_equal(round_trip(fx, P_D), 64);
    assert_int_equal(round_trip(fx, P_Q), 6);   /* 41 levels */
    assert_int_equal(round_trip(fx, P_QD), 20); /* 1,000,001 levels */
    assert_int_equal(round_trip(fx, P_B), 1);
    assert_int_equal(entity_state_set_string(fx->a, P_S, 0, "abc", 3), 0);
    assert_int_equal(round_trip(fx, P_S), 3 + 24); /* length in bits_for(5) = 3 bits */
    assert_int_equal(entity_state_set_bytes(fx->a, P_BY, 0, "\0\1", 2), 0);
    assert_int_equal(round_trip(fx, P_BY), 9 + 16);
    assert_int_equal(round_trip(fx, P_V2), 64);
    assert_int_equal(round_trip(fx, P_V3), 96);
    assert_int_equal(round_trip(fx, P_QV3), 3 * 18); /* 200,001 levels each */
    assert_int_equal(round_trip(fx, P_E), 64);
    assert_int_equal(round_trip(fx, P_ARR), 4 * 16);
    assert_int_equal(round_trip(fx, P_STATS), 12 + 3 * 15 + 4 + 8); /* hp, pos, "x" */
    assert_int_equal(round_trip(fx, P_OUTER), (12 + 45 + 4 + 8) + 3 + 16);
    assert_int_equal(round_trip(fx, P_STATSARR), 3 * (12 + 45 + 4 + 8));
    assert_int_equal(round_trip(fx, P_GRID), 6 * 8);
    assert_int_equal(property_codec_bits_for(0), 0);
    assert_int_equal(property_codec_bits_for(1), 1);
    assert_int_equal(property_codec_bits_for(255), 8);
    assert_int_equal(property_codec_bits_for(256), 9);
    assert_int_equal(property_codec_bits_for(UINT64_MAX), 64);
}

static void test_encode_all_round_trip(void **state) {
    fixture *fx = *state;
    for (int round = 0; round < 100; round++) {
        for (int p = 0; p < P_COUNT; p++) randomize(fx->a, p);
        bit_writer_reset(&fx->w);
        entity_state_encode_all(fx->a, &fx->w);
        bit_reader r;
        bit_reader_init(&r, bit_writer_data(&fx->w), bit_writer_bytes(&fx->w));
        entity_state_clear_dirty(fx->b);
        assert_int_equal(entity_state_decode_all(fx->b, &r), 0);
        assert_true(bit_reader_remaining(&r) < 8);
        for (int p = 0; p < P_COUNT; p++) assert_property(fx->a, fx->b, p);
        /* Re-encoding the decoded state gives the same bytes: quantized
         * values decode onto their own grid point. */
        size_t n;
        uint8_t *again = snapshot(fx->b, &n);
        assert_int_equal(n, bit_writer_bytes(&fx->w));
        assert_memory_equal(again, bit_writer_data(&fx->w), n);
        free(again);
    }
    /* Decoding the same state again changes nothing: nothing is dirty. */
    entity_state_clear_dirty(fx->b);
    bit_reader r;
    bit_reader_init(&r, bit_writer_data(&fx->w), bit_writer_bytes(&fx->w));
    assert_int_equal(entity_state_decode_all(fx->b, &r), 0);
    assert_int_equal(entity_state_next_dirty(fx->b, -1), -1);

    /* Truncated at every byte: rejected, and nothing changes. */
    for (int p = 0; p < P_COUNT; p++) randomize(fx->a, p);
    bit_writer_reset(&fx->w);
    entity_state_encode_all(fx->a, &fx->w);
    size_t before_bytes;
    uint8_t *before = snapshot(fx->b, &before_bytes);
    for (size_t cut = 0; cut < bit_writer_bytes(&fx->w); cut++) {
        uint8_t *copy = malloc(cut + 1);
        memcpy(copy, bit_writer_data(&fx->w), cut);
        bit_reader_init(&r, copy, cut);
        assert_int_equal(entity_state_decode_all(fx->b, &r), PROPERTY_CODEC_ERROR_TRUNCATED);
        assert_true(bit_reader_failed(&r));
        free(copy);
        assert_same_state(fx->b, before, before_bytes);
    }
    free(before);
}

static void test_quantization_bound(void **state) {
    fixture *fx = *state;
    const entity_def_type *types[] = {
        &fx->cls->properties[P_Q].type,
        &fx->cls->properties[P_QD].type,
        &fx->cls->properties[P_QV3].type,
        entity_state_value_type(fx->cls, P_STATS, 1),
    };
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const entity_def_type *t = types[k];
        uint64_t qmax = property_codec_quantize_max(t);
        assert_true(qmax < (UINT64_C(1) << t->bits));
        assert_true(property_codec_dequantize(t, 0) == t->quant_min);
        assert_true(property_codec_dequantize(t, qmax) == t->quant_max);
        assert_true(property_codec_quantize(t, t->quant_min) == 0);
        for (int i = 0; i < 100000; i++) {
            double v = t->quant_min + (t->quant_max - t->quant_min) * uniform();
            uint64_t q = property_codec_quantize(t, v);
            assert_true(q <= qmax);
            double back = property_codec_dequantize(t, q);
            double err = fabs(back - v);
            if (err > t->quant_precision / 2 * (1 + 1e-9))
                fail_msg("%.17g -> %llu -> %.17g: error %g over %g", v, (unsigned long long)q, back, err,
                         t->quant_precision / 2);
            /* The grid point is a fixed point. */
            assert_true(property_codec_quantize(t, back) == q);
        }
    }
    /* A range that is not a whole number of steps: max decodes as max. */
    const char text[] = "{\"entities\": [{\"name\": \"C\", \"properties\": [{\"name\": \"x\", \"type\": \"float\","
                        " \"flags\": \"BASE\", \"quantize\": {\"min\": 0, \"max\": 1, \"precision\": 0.4}}]}]}";
    entity_def_registry *reg;
    char err[256];
    assert_int_equal(entity_def_load_string(text, "t", &reg, err, sizeof err), 0);
    const entity_def_type *t = &entity_def_registry_class(reg, 0)->properties[0].type;
    assert_int_equal(property_codec_quantize(t, 1.0), 3); /* 2.5 rounds up */
    assert_true(property_codec_dequantize(t, 3) == 1.0);  /* 1.2, kept within max */
    assert_true(fabs(property_codec_dequantize(t, 2) - 0.8) < 1e-12);
    entity_def_registry_free(reg);
}

/* ---- change lists ----------------------------------------------------- */

static void test_change_list_round_trip(void **state) {
    fixture *fx = *state;
    entity_state_mask all;
    entity_state_mask_all(&all, P_COUNT);
    for (int round = 0; round < 300; round++) {
        entity_state_clear_dirty(fx->a);
        entity_state_mask props = {0};
        for (int p = 0; p < P_COUNT; p++) {
            if (rng() % 4 == 0) {
                randomize(fx->a, p);
                entity_state_mask_add(&props, p);
            }
        }
        bit_writer_reset(&fx->w);
        assert_int_equal(property_codec_encode_changes(&fx->w, fx->a, &props), 0);
        entity_state_clear_dirty(fx->b);
        entity_state_mask changed;
        size_t bits = bit_writer_bits(&fx->w);
        assert_int_equal(decode_copy(fx->b, bit_writer_data(&fx->w), bit_writer_bytes(&fx->w), bits,
                                     round % 2 ? &all : NULL, &changed),
                         0);
        for (int p = 0; p < P_COUNT; p++) {
            if (entity_state_mask_has(&props, p))
                assert_property(fx->a, fx->b, p);
            else
                assert_false(entity_state_mask_has(&changed, p));
            /* What changed is marked dirty in the receiver. */
            assert_true(entity_state_is_dirty(fx->b, p) == entity_state_mask_has(&changed, p));
        }
    }

    /* An empty list: the count alone, bits_for(30) = 5 bits. */
    entity_state_mask none = {0};
    bit_writer_reset(&fx->w);
    assert_int_equal(property_codec_encode_changes(&fx->w, fx->a, &none), 0);
    assert_int_equal(bit_writer_bits(&fx->w), 5);

    /* One 12-bit property: count (5) + id (bits_for(29) = 5) + 12 bits. */
    entity_state_mask one = {0};
    entity_state_mask_add(&one, P_I16_12);
    bit_writer_reset(&fx->w);
    assert_int_equal(property_codec_encode_changes(&fx->w, fx->a, &one), 0);
    assert_int_equal(bit_writer_bits(&fx->w), 5 + 5 + 12);

    /* An id the class does not have: an error, and nothing written. */
    entity_state_mask bad = one;
    entity_state_mask_add(&bad, P_COUNT);
    bit_writer_reset(&fx->w);
    assert_int_equal(property_codec_encode_changes(&fx->w, fx->a, &bad), ENTITY_STATE_ERROR_NO_SUCH_PROPERTY);
    assert_int_equal(bit_writer_bits(&fx->w), 0);
    assert_int_equal(property_codec_encode(&fx->w, fx->a, P_COUNT), ENTITY_STATE_ERROR_NO_SUCH_PROPERTY);
    bit_reader r;
    bit_reader_init(&r, NULL, 0);
    assert_int_equal(property_codec_decode(&r, fx->b, P_COUNT), ENTITY_STATE_ERROR_NO_SUCH_PROPERTY);
}

/* Packing once per audience: dirty AND audience, and the receiver accepts
 * exactly that audience. */
static void test_change_list_audience(void **state) {
    fixture *fx = *state;
    entity_state_clear_dirty(fx->a);
    randomize(fx->a, P_S);
    randomize(fx->a, P_QV3);
    randomize(fx->a, P_E);
    entity_state_mask audience = {0}, send;
    entity_state_mask_add(&audience, P_QV3);
    entity_state_mask_add(&audience, P_E);
    entity_state_mask_intersect(&send, entity_state_dirty(fx->a), &audience);
    bit_writer_reset(&fx->w);
    assert_int_equal(property_codec_encode_changes(&fx->w, fx->a, &send), 0);
    entity_state_mask changed;
    assert_int_equal(decode_copy(fx->b, bit_writer_data(&fx->w), bit_writer_bytes(&fx->w), bit_writer_bits(&fx->w),
                                 &audience, &changed),
                     0);
    assert_property(fx->a, fx->b, P_QV3);
    assert_property(fx->a, fx->b, P_E);
    assert_false(entity_state_mask_has(&changed, P_S));

    /* The same list is rejected by a receiver that does not accept P_E
     * (as a client must reject an OWN_CLIENT property about someone else). */
    entity_state_clear_dirty(fx->b);
    randomize(fx->a, P_QV3);
    randomize(fx->a, P_E);
    bit_writer_reset(&fx->w);
    assert_int_equal(property_codec_encode_changes(&fx->w, fx->a, &send), 0);
    entity_state_mask narrow = {0};
    entity_state_mask_add(&narrow, P_QV3);
    size_t before_bytes;
    uint8_t *before = snapshot(fx->b, &before_bytes);
    assert_int_equal(
        decode_copy(fx->b, bit_writer_data(&fx->w), bit_writer_bytes(&fx->w), bit_writer_bits(&fx->w), &narrow, NULL),
        PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY);
    assert_same_state(fx->b, before, before_bytes); /* not even P_QV3, listed first */
    free(before);
}

static void test_change_list_truncated_everywhere(void **state) {
    fixture *fx = *state;
    for (int round = 0; round < 10; round++) {
        entity_state_mask props = {0};
        for (int p = 0; p < P_COUNT; p++) {
            if (round == 0 || rng() % 3 == 0) {
                randomize(fx->a, p);
                entity_state_mask_add(&props, p);
            }
        }
        bit_writer_reset(&fx->w);
        assert_int_equal(property_codec_encode_changes(&fx->w, fx->a, &props), 0);
        size_t bits = bit_writer_bits(&fx->w), bytes = bit_writer_bytes(&fx->w);
        entity_state_clear_dirty(fx->b);
        size_t before_bytes;
        uint8_t *before = snapshot(fx->b, &before_bytes);
        for (size_t cut = 0; cut < bytes; cut++) {
            int rc = decode_copy(fx->b, bit_writer_data(&fx->w), cut, cut * 8, NULL, NULL);
            assert_int_equal(rc, PROPERTY_CODEC_ERROR_TRUNCATED);
            assert_same_state(fx->b, before, before_bytes);
        }
        for (size_t cut = 0; cut < bits; cut += round == 0 ? 1 : 7) {
            int rc = decode_copy(fx->b, bit_writer_data(&fx->w), (cut + 7) / 8, cut, NULL, NULL);
            assert_int_equal(rc, PROPERTY_CODEC_ERROR_TRUNCATED);
            assert_same_state(fx->b, before, before_bytes);
        }
        free(before);
        assert_int_equal(decode_copy(fx->b, bit_writer_data(&fx->w), bytes, bits, NULL, NULL), 0);
    }
}

/* Decodes the hand-made change list in `w` into fx->b (checking that a
 * rejection changes nothing), then empties `w`. */
static int decode_crafted(fixture *fx, bit_writer *w, const entity_state_mask *accept) {
    entity_state_clear_dirty(fx->b);
    size_t before_bytes;
    uint8_t *before = snapshot(fx->b, &before_bytes);
    int rc = decode_copy(fx->b, bit_writer_data(w), bit_writer_bytes(w), bit_writer_bits(w), accept, NULL);
    if (rc != 0) assert_same_state(fx->b, before, before_bytes);
    free(before);
    bit_writer_reset(w);
    return rc;
}

static void test_malformed_change_lists(void **state) {
    fixture *fx = *state;
    bit_writer *w = &fx->w;
    const unsigned C = 5, ID = 5; /* count and id bits: bits_for(30), bits_for(29) */
    bit_writer_reset(w);

    /* A valid list of one string, for reference. */
    bit_writer_write(w, 1, C);
    bit_writer_write(w, P_S, ID);
    bit_writer_write(w, 2, 3);
    bit_writer_write_bytes(w, "ok", 2);
    assert_int_equal(decode_crafted(fx, w, NULL), 0);

    /* An unknown property id (30, 31: the class has 30). */
    bit_writer_write(w, 1, C);
    bit_writer_write(w, P_COUNT, ID);
    bit_writer_write(w, 0, 8);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY);
    bit_writer_write(w, 1, C);
    bit_writer_write(w, 31, ID);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY);

    /* A string length over max_length (5; the 3-bit field allows 7). */
    bit_writer_write(w, 1, C);
    bit_writer_write(w, P_S, ID);
    bit_writer_write(w, 6, 3);
    bit_writer_write_bytes(w, "abcdef", 6);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    /* Bytes over max_length (300; the 9-bit field allows 511). */
    bit_writer_write(w, 1, C);
    bit_writer_write(w, P_BY, ID);
    bit_writer_write(w, 301, 9);
    for (int i = 0; i < 301; i++) bit_writer_write(w, 0, 8);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);

    /* Strings that are not UTF-8, or hold a NUL. */
    const char *bad_strings[] = {"\xff", "a\xc3", "\xc0\x80", "\xed\xa0\x80", "a\0"};
    const size_t bad_lengths[] = {1, 2, 2, 3, 2};
    for (size_t k = 0; k < 5; k++) {
        bit_writer_write(w, 1, C);
        bit_writer_write(w, P_S, ID);
        bit_writer_write(w, bad_lengths[k], 3);
        bit_writer_write_bytes(w, bad_strings[k], bad_lengths[k]);
        assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_INVALID);
    }
    /* A long string element whose bad byte is past the first 256-byte chunk. */
    char long_text[300];
    memset(long_text, 'a', sizeof long_text);
    long_text[290] = '\x80';
    bit_writer_write(w, 1, C);
    bit_writer_write(w, P_STRS, ID);
    bit_writer_write(w, 300, 9);
    bit_writer_write_bytes(w, long_text, 300);
    bit_writer_write(w, 0, 9);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_INVALID);

    /* More entries than the class has properties. */
    bit_writer_write(w, P_COUNT + 1, C);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_MALFORMED);
    /* The same id twice, and ids out of order. */
    for (int k = 0; k < 2; k++) {
        bit_writer_write(w, 2, C);
        bit_writer_write(w, P_B, ID);
        bit_writer_write(w, 1, 1);
        bit_writer_write(w, k == 0 ? P_B : P_I8, ID);
        bit_writer_write(w, 1, k == 0 ? 1 : 8);
        assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_MALFORMED);
    }

    /* Values out of range for their type. */
    bit_writer_write(w, 1, C); /* uint32 as uvar: 2^32 */
    bit_writer_write(w, P_U32, ID);
    bit_writer_write_uvar(w, UINT64_C(1) << 32);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    bit_writer_write(w, 1, C); /* int32 as svar: 2^31 */
    bit_writer_write(w, P_I32, ID);
    bit_writer_write_svar(w, INT64_C(1) << 31);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    bit_writer_write(w, 1, C); /* int32 as svar: -2^31 - 1 */
    bit_writer_write(w, P_I32, ID);
    bit_writer_write_svar(w, -(INT64_C(1) << 31) - 1);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    bit_writer_write(w, 1, C); /* quantized index past max: 41 levels in 6 bits */
    bit_writer_write(w, P_Q, ID);
    bit_writer_write(w, 41, 6);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    bit_writer_write(w, 1, C); /* ... and exactly max is fine */
    bit_writer_write(w, P_Q, ID);
    bit_writer_write(w, 40, 6);
    assert_int_equal(decode_crafted(fx, w, NULL), 0);
    bit_writer_write(w, 1, C); /* a quantized vector's last component */
    bit_writer_write(w, P_QV3, ID);
    bit_writer_write(w, 0, 18);
    bit_writer_write(w, 0, 18);
    bit_writer_write(w, 200001, 18);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    const float nan_f = NAN, inf_f = INFINITY;
    bit_writer_write(w, 1, C);
    bit_writer_write(w, P_F, ID);
    bit_writer_write_float(w, nan_f);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    bit_writer_write(w, 1, C);
    bit_writer_write(w, P_V2, ID);
    bit_writer_write_float(w, 1);
    bit_writer_write_float(w, -inf_f);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    bit_writer_write(w, 1, C);
    bit_writer_write(w, P_D, ID);
    bit_writer_write_double(w, INFINITY);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    bit_writer_write(w, 1, C); /* deep inside a struct in an array */
    bit_writer_write(w, P_STATSARR, ID);
    for (int k = 0; k < 2; k++) { /* two good elements: hp, pos, tag "" */
        bit_writer_write(w, 0, 12);
        bit_writer_write(w, 0, 45);
        bit_writer_write(w, 0, 4);
    }
    bit_writer_write(w, 0, 12);
    bit_writer_write(w, 20001, 15); /* pos.x past 200 / 0.01 */
    bit_writer_write(w, 0, 30);
    bit_writer_write(w, 0, 4);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);

    /* No partial writes: a good first entry, a bad second one. */
    bit_writer_write(w, 2, C);
    bit_writer_write(w, P_I8, ID);
    bit_writer_write(w, 0x7f, 8);
    bit_writer_write(w, P_S, ID);
    bit_writer_write(w, 7, 3);
    assert_int_equal(decode_crafted(fx, w, NULL), PROPERTY_CODEC_ERROR_RANGE);
    int64_t i8;
    assert_int_equal(entity_state_get_int(fx->b, P_I8, 0, &i8), 0);
    assert_int_not_equal(i8, (int64_t)0x7f - 128);
}

/* Random garbage never crashes, never reads out of bounds, and a list that
 * happens to decode leaves legal values (encoding them again must not stop
 * the process on a value that does not fit). */
static void test_random_garbage(void **state) {
    fixture *fx = *state;
    uint8_t garbage[64] = {0};
    int accepted = 0;
    for (int round = 0; round < 20000; round++) {
        size_t n = (size_t)(rng() % sizeof garbage);
        for (size_t k = 0; k < n; k++) garbage[k] = (uint8_t)rng();
        /* Small counts are likelier to decode. */
        if (n > 0 && rng() % 2) garbage[0] = (uint8_t)((garbage[0] & 0xe0) | (rng() % 3));
        int rc = decode_copy(fx->b, garbage, n, n * 8, NULL, NULL);
        if (rc == 0)
            accepted++;
        else
            assert_true(rc <= PROPERTY_CODEC_ERROR_TRUNCATED && rc >= PROPERTY_CODEC_ERROR_MALFORMED);
    }
    assert_true(accepted > 0);
    bit_writer_reset(&fx->w);
    entity_state_encode_all(fx->b, &fx->w);
}

/* Encoding reuses the writer's buffer: once it is large enough, a tick of
 * encoding does not move it. */
static void test_encoding_reuses_buffer(void **state) {
    fixture *fx = *state;
    entity_state_mask all;
    entity_state_mask_all(&all, P_COUNT);
    bit_writer_reset(&fx->w);
    bit_writer_reserve(&fx->w, (size_t)64 * 1024);
    const uint8_t *data = bit_writer_data(&fx->w);
    size_t capacity = fx->w.capacity;
    for (int tick = 0; tick < 50; tick++) {
        bit_writer_reset(&fx->w);
        for (int p = 0; p < P_COUNT; p++) assert_int_equal(property_codec_encode(&fx->w, fx->a, p), 0);
        assert_int_equal(property_codec_encode_changes(&fx->w, fx->a, &all), 0);
        entity_state_encode_all(fx->a, &fx->w);
        assert_ptr_equal(bit_writer_data(&fx->w), data);
        assert_int_equal(fx->w.capacity, capacity);
    }
}

static void test_strerror(void **state) {
    (void)state;
    const char *fallback = property_codec_strerror(-999);
    for (int code = -24; code <= -20; code++) assert_string_not_equal(property_codec_strerror(code), fallback);
    /* entity_state's codes pass through (encode and decode return them). */
    assert_string_equal(property_codec_strerror(ENTITY_STATE_ERROR_NO_SUCH_PROPERTY),
                        entity_state_strerror(ENTITY_STATE_ERROR_NO_SUCH_PROPERTY));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_every_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bit_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encode_all_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quantization_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_change_list_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_change_list_audience, setup, teardown),
        cmocka_unit_test_setup_teardown(test_change_list_truncated_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_change_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encoding_reuses_buffer, setup, teardown),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
