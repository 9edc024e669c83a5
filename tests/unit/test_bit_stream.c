/* test_bit_stream.c -- unit tests for bit_stream: the documented bit order,
 * round trips at every width, the variable-length integer sizes, random
 * sequences of every kind of field, and truncation at every bit and every
 * byte of a valid stream (each read fails cleanly, the error is sticky, and
 * nothing is read past the buffer: the cut buffers are exact-size heap
 * copies, so ASan would see an over-read). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bit_stream.h"

/* A fixed-seed xorshift64*, so that a failure replays. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

static uint64_t mask_of(unsigned bits) { return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1; }

/* ---- writer basics ---------------------------------------------------- */

static void test_bit_order_lsb_first(void **state) {
    (void)state;
    bit_writer w;
    bit_writer_init(&w);
    assert_null(bit_writer_data(&w));
    assert_int_equal(bit_writer_bytes(&w), 0);
    bit_writer_write(&w, 1, 1);       /* bit 0 */
    bit_writer_write(&w, 0x5, 3);     /* bits 1..3: 1, 0, 1 */
    bit_writer_write(&w, 0xf, 4);     /* bits 4..7 */
    bit_writer_write(&w, 0x1234, 16); /* aligned: little-endian bytes */
    bit_writer_write(&w, 0x3, 2);     /* a partial last byte */
    assert_int_equal(bit_writer_bits(&w), 26);
    assert_int_equal(bit_writer_bytes(&w), 4);
    const uint8_t *d = bit_writer_data(&w);
    assert_int_equal(d[0], 0xfb); /* 1111 101 1 */
    assert_int_equal(d[1], 0x34);
    assert_int_equal(d[2], 0x12);
    assert_int_equal(d[3], 0x03); /* the unused high bits are zero */

    /* A field straddling bytes: 0xabc at bit offset 4. */
    bit_writer_reset(&w);
    bit_writer_write(&w, 0x0, 4);
    bit_writer_write(&w, 0xabc, 12);
    assert_int_equal(d[0], 0xc0);
    assert_int_equal(d[1], 0xab);
    bit_writer_close(&w);
    bit_writer_close(&w); /* idempotent */
}

static void test_reset_keeps_buffer(void **state) {
    (void)state;
    bit_writer w;
    bit_writer_init(&w);
    for (int i = 0; i < 1000; i++) bit_writer_write(&w, (uint64_t)i & 0x1ff, 9);
    const uint8_t *data = bit_writer_data(&w);
    size_t capacity = w.capacity;
    assert_true(capacity >= bit_writer_bytes(&w));
    for (int tick = 0; tick < 10; tick++) {
        bit_writer_reset(&w);
        assert_int_equal(bit_writer_bits(&w), 0);
        for (int i = 0; i < 1000; i++) bit_writer_write(&w, (uint64_t)i & 0x1ff, 9);
        assert_ptr_equal(bit_writer_data(&w), data);
        assert_int_equal(w.capacity, capacity);
    }
    /* The reused buffer still reads back right (stale bytes do not leak
     * into partial bytes). */
    bit_writer_reset(&w);
    bit_writer_write(&w, 0x1, 3);
    assert_int_equal(bit_writer_data(&w)[0], 0x01);
    bit_writer_reserve(&w, capacity * 4);
    assert_true(w.capacity >= capacity * 4);
    bit_writer_close(&w);
}

/* ---- round trips ------------------------------------------------------ */

static void test_every_width_round_trip(void **state) {
    (void)state;
    bit_writer w;
    bit_writer_init(&w);
    for (unsigned offset = 0; offset < 8; offset++) {
        for (unsigned bits = 0; bits <= 64; bits++) {
            uint64_t values[5] = {0, mask_of(bits), rng() & mask_of(bits), rng() & mask_of(bits),
                                  bits > 0 ? UINT64_C(1) << (bits - 1) : 0};
            bit_writer_reset(&w);
            bit_writer_write(&w, 0, offset);
            for (int i = 0; i < 5; i++) bit_writer_write(&w, values[i], bits);
            assert_int_equal(bit_writer_bits(&w), offset + 5 * bits);
            bit_reader r;
            bit_reader_init(&r, bit_writer_data(&w), bit_writer_bytes(&w));
            assert_int_equal(bit_reader_skip(&r, offset), 0);
            for (int i = 0; i < 5; i++) {
                uint64_t got = 1;
                assert_int_equal(bit_reader_read(&r, bits, &got), 0);
                if (got != values[i])
                    fail_msg("width %u offset %u value %d: wrote %llx read %llx", bits, offset, i,
                             (unsigned long long)values[i], (unsigned long long)got);
            }
            assert_true(bit_reader_remaining(&r) < 8);
            assert_false(bit_reader_failed(&r));
        }
    }
    bit_writer_close(&w);
}

static size_t uvar_bits(uint64_t v) {
    bit_writer w;
    bit_writer_init(&w);
    bit_writer_write_uvar(&w, v);
    size_t bits = bit_writer_bits(&w);
    bit_reader r;
    bit_reader_init(&r, bit_writer_data(&w), bit_writer_bytes(&w));
    uint64_t got;
    assert_int_equal(bit_reader_read_uvar(&r, &got), 0);
    assert_true(got == v);
    assert_int_equal(bit_reader_position(&r), bits);
    bit_writer_close(&w);
    return bits;
}

static size_t svar_bits(int64_t v) {
    bit_writer w;
    bit_writer_init(&w);
    bit_writer_write_svar(&w, v);
    size_t bits = bit_writer_bits(&w);
    bit_reader r;
    bit_reader_init(&r, bit_writer_data(&w), bit_writer_bytes(&w));
    int64_t got;
    assert_int_equal(bit_reader_read_svar(&r, &got), 0);
    assert_true(got == v);
    bit_writer_close(&w);
    return bits;
}

static void test_varint_sizes(void **state) {
    (void)state;
    /* The table at the top of bit_stream.c. */
    assert_int_equal(uvar_bits(0), 8);
    assert_int_equal(uvar_bits(15), 8);
    assert_int_equal(uvar_bits(16), 12);
    assert_int_equal(uvar_bits(255), 12);
    assert_int_equal(uvar_bits(256), 16);
    assert_int_equal(uvar_bits(65535), 20);
    assert_int_equal(uvar_bits(UINT32_MAX), 36);
    assert_int_equal(uvar_bits(UINT64_MAX), 68);
    for (unsigned b = 0; b < 64; b++) {
        uvar_bits(UINT64_C(1) << b);
        uvar_bits((UINT64_C(1) << b) - 1);
    }
    /* Zigzag: small magnitudes of either sign are short. */
    assert_int_equal(svar_bits(0), 8);
    assert_int_equal(svar_bits(-1), 8);
    assert_int_equal(svar_bits(7), 8);
    assert_int_equal(svar_bits(-8), 8);
    assert_int_equal(svar_bits(8), 12);
    assert_int_equal(svar_bits(INT32_MIN), 36);
    assert_int_equal(svar_bits(INT32_MAX), 36);
    assert_int_equal(svar_bits(INT64_MIN), 68);
    assert_int_equal(svar_bits(INT64_MAX), 68);
    for (int i = 0; i < 1000; i++) svar_bits((int64_t)rng() >> (rng() % 64));

    /* A longer form than needed (leading zero nibbles) reads the same. */
    uint8_t longer[3];
    bit_writer w;
    bit_writer_init(&w);
    bit_writer_write(&w, 3, 4);
    bit_writer_write(&w, 5, 16);
    memcpy(longer, bit_writer_data(&w), 3);
    bit_writer_close(&w);
    bit_reader r;
    bit_reader_init(&r, longer, sizeof longer);
    uint64_t got;
    assert_int_equal(bit_reader_read_uvar(&r, &got), 0);
    assert_int_equal(got, 5);
}

static void test_floats_bytes_align(void **state) {
    (void)state;
    bit_writer w;
    bit_writer_init(&w);
    const uint8_t blob[5] = {0x00, 0xff, 0x80, 0x01, 0x7e};
    bit_writer_write_bool(&w, true);
    bit_writer_write_float(&w, -1.25f);
    bit_writer_write_double(&w, 3.141592653589793);
    bit_writer_write_bytes(&w, blob, sizeof blob); /* unaligned */
    bit_writer_write_float(&w, NAN);               /* bits are bits */
    bit_writer_align(&w);
    size_t aligned = bit_writer_bits(&w);
    assert_int_equal(aligned % 8, 0);
    bit_writer_write_bytes(&w, blob, sizeof blob); /* aligned */
    bit_writer_write_bytes(&w, NULL, 0);
    bit_writer_align(&w); /* already aligned: nothing */
    assert_int_equal(bit_writer_bits(&w), aligned + 40);

    bit_reader r;
    bit_reader_init(&r, bit_writer_data(&w), bit_writer_bytes(&w));
    bool b;
    float f;
    double d;
    uint8_t got[5];
    assert_int_equal(bit_reader_read_bool(&r, &b), 0);
    assert_true(b);
    assert_int_equal(bit_reader_read_float(&r, &f), 0);
    assert_true(f == -1.25f);
    assert_int_equal(bit_reader_read_double(&r, &d), 0);
    assert_true(d == 3.141592653589793);
    assert_int_equal(bit_reader_read_bytes(&r, got, sizeof got), 0);
    assert_memory_equal(got, blob, sizeof blob);
    assert_int_equal(bit_reader_read_float(&r, &f), 0);
    assert_true(isnan(f));
    assert_int_equal(bit_reader_align(&r), 0);
    assert_int_equal(bit_reader_position(&r), aligned);
    memset(got, 0, sizeof got);
    assert_int_equal(bit_reader_read_bytes(&r, got, sizeof got), 0);
    assert_memory_equal(got, blob, sizeof blob);
    assert_int_equal(bit_reader_remaining(&r), 0);
    assert_int_equal(bit_reader_read_bytes(&r, got, 0), 0);
    bit_writer_close(&w);
}

/* ---- random sequences and truncation ---------------------------------- */

typedef enum op_kind { OP_BITS, OP_UVAR, OP_SVAR, OP_BOOL, OP_FLOAT, OP_DOUBLE, OP_BYTES } op_kind;

typedef struct op {
    op_kind kind;
    unsigned bits;
    uint64_t value;
    uint8_t bytes[7];
    size_t length;
} op;

#define OPS 200

static void make_ops(op *ops, size_t n) {
    for (size_t i = 0; i < n; i++) {
        op *o = &ops[i];
        memset(o, 0, sizeof *o);
        o->kind = (op_kind)(rng() % 7);
        switch (o->kind) {
            case OP_BITS:
                o->bits = (unsigned)(rng() % 65);
                o->value = rng() & mask_of(o->bits);
                break;
            case OP_UVAR:
            case OP_SVAR:
                o->value = rng() >> (rng() % 64);
                break;
            case OP_BOOL:
                o->value = rng() & 1;
                break;
            case OP_FLOAT:
                o->value = rng() & 0xffffffffu;
                break;
            case OP_DOUBLE:
                o->value = rng();
                break;
            case OP_BYTES:
                o->length = (size_t)(rng() % 8);
                for (size_t k = 0; k < o->length; k++) o->bytes[k] = (uint8_t)rng();
                break;
        }
    }
}

static void write_ops(bit_writer *w, const op *ops, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const op *o = &ops[i];
        float f;
        double d;
        uint32_t u32 = (uint32_t)o->value;
        switch (o->kind) {
            case OP_BITS:
                bit_writer_write(w, o->value, o->bits);
                break;
            case OP_UVAR:
                bit_writer_write_uvar(w, o->value);
                break;
            case OP_SVAR:
                bit_writer_write_svar(w, (int64_t)o->value);
                break;
            case OP_BOOL:
                bit_writer_write_bool(w, o->value != 0);
                break;
            case OP_FLOAT:
                memcpy(&f, &u32, sizeof f);
                bit_writer_write_float(w, f);
                break;
            case OP_DOUBLE:
                memcpy(&d, &o->value, sizeof d);
                bit_writer_write_double(w, d);
                break;
            case OP_BYTES:
                bit_writer_write_bytes(w, o->bytes, o->length);
                break;
        }
    }
}

/* Reads op `o` back; returns the read's result, failing the test if a
 * successful read gives another value. On failure the output must be 0. */
static int read_op(bit_reader *r, const op *o) {
    int rc = 0;
    uint64_t u = 0;
    int64_t s = 0;
    bool b = false;
    float f = 0;
    double d = 0;
    uint8_t bytes[7] = {0};
    switch (o->kind) {
        case OP_BITS:
            rc = bit_reader_read(r, o->bits, &u);
            if (rc == 0)
                assert_true(u == o->value);
            else
                assert_true(u == 0);
            break;
        case OP_UVAR:
            rc = bit_reader_read_uvar(r, &u);
            assert_true(rc == 0 ? u == o->value : u == 0);
            break;
        case OP_SVAR:
            rc = bit_reader_read_svar(r, &s);
            assert_true(rc == 0 ? s == (int64_t)o->value : s == 0);
            break;
        case OP_BOOL:
            rc = bit_reader_read_bool(r, &b);
            assert_true(rc == 0 ? b == (o->value != 0) : !b);
            break;
        case OP_FLOAT: {
            rc = bit_reader_read_float(r, &f);
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            assert_true(rc == 0 ? bits == (uint32_t)o->value : bits == 0);
            break;
        }
        case OP_DOUBLE:
            rc = bit_reader_read_double(r, &d);
            memcpy(&u, &d, sizeof u);
            assert_true(rc == 0 ? u == o->value : u == 0);
            break;
        case OP_BYTES:
            memset(bytes, 0xee, sizeof bytes);
            rc = bit_reader_read_bytes(r, bytes, o->length);
            if (rc == 0) {
                assert_memory_equal(bytes, o->bytes, o->length);
            } else {
                for (size_t k = 0; k < sizeof bytes; k++) assert_int_equal(bytes[k], 0xee); /* nothing copied */
            }
            break;
    }
    if (rc != 0) assert_int_equal(rc, BIT_STREAM_ERROR_TRUNCATED);
    return rc;
}

static void test_random_sequences(void **state) {
    (void)state;
    bit_writer w;
    bit_writer_init(&w);
    op ops[OPS];
    for (int round = 0; round < 50; round++) {
        make_ops(ops, OPS);
        bit_writer_reset(&w);
        write_ops(&w, ops, OPS);
        bit_reader r;
        bit_reader_init_bits(&r, bit_writer_data(&w), bit_writer_bits(&w));
        for (size_t i = 0; i < OPS; i++) assert_int_equal(read_op(&r, &ops[i]), 0);
        assert_int_equal(bit_reader_remaining(&r), 0);
        assert_false(bit_reader_failed(&r));
    }
    bit_writer_close(&w);
}

/* Reads ops back from a stream cut to `bits` bits of an exact-size copy of
 * `bytes` bytes: the reads before the cut succeed, one fails, and every
 * read after it fails too. */
static void replay_cut(const uint8_t *data, size_t bytes, size_t bits, const op *ops, size_t n, size_t full_bits) {
    uint8_t *copy = malloc(bytes > 0 ? bytes : 1);
    assert_non_null(copy);
    memcpy(copy, data, bytes);
    bit_reader r;
    bit_reader_init_bits(&r, bytes > 0 ? copy : NULL, bits);
    size_t failed_at = n;
    for (size_t i = 0; i < n; i++) {
        int rc = read_op(&r, &ops[i]);
        if (rc != 0 && failed_at == n) failed_at = i;
        if (failed_at < i) assert_int_not_equal(rc, 0); /* sticky */
    }
    if (bits < full_bits) {
        assert_true(failed_at < n);
        assert_true(bit_reader_failed(&r));
        assert_int_equal(bit_reader_remaining(&r), 0);
        uint64_t u = 7;
        assert_int_equal(bit_reader_read(&r, 0, &u), BIT_STREAM_ERROR_TRUNCATED);
        assert_int_equal(u, 0);
        assert_int_equal(bit_reader_skip(&r, 0), BIT_STREAM_ERROR_TRUNCATED);
    } else {
        assert_int_equal(failed_at, n);
    }
    free(copy);
}

static void test_truncation_every_cut(void **state) {
    (void)state;
    bit_writer w;
    bit_writer_init(&w);
    op ops[40];
    for (int round = 0; round < 20; round++) {
        make_ops(ops, 40);
        bit_writer_reset(&w);
        write_ops(&w, ops, 40);
        size_t full = bit_writer_bits(&w);
        const uint8_t *data = bit_writer_data(&w);
        /* Every bit cut, over an exact-size copy of the bytes it covers. */
        for (size_t cut = 0; cut <= full; cut++) replay_cut(data, (cut + 7) / 8, cut, ops, 40, full);
        /* Every byte cut, read as whole bytes. */
        for (size_t cut = 0; cut <= bit_writer_bytes(&w); cut++) replay_cut(data, cut, cut * 8, ops, 40, full);
    }
    bit_writer_close(&w);
}

static void test_reader_edges(void **state) {
    (void)state;
    bit_reader r;
    uint64_t u = 5;
    bit_reader_init(&r, NULL, 0);
    assert_int_equal(bit_reader_read(&r, 0, &u), 0); /* a zero-bit read fits */
    assert_int_equal(bit_reader_read(&r, 1, &u), BIT_STREAM_ERROR_TRUNCATED);
    assert_true(bit_reader_failed(&r));

    const uint8_t one[1] = {0xa5};
    bit_reader_init(&r, one, 1);
    assert_int_equal(bit_reader_read(&r, 9, &u), BIT_STREAM_ERROR_TRUNCATED);
    assert_int_equal(bit_reader_read(&r, 8, &u), BIT_STREAM_ERROR_TRUNCATED); /* sticky */
    bit_reader_init(&r, one, 1);
    assert_int_equal(bit_reader_read(&r, 8, &u), 0);
    assert_int_equal(u, 0xa5);

    /* A huge byte count is truncation, not an overflow. */
    uint8_t sink[1];
    bit_reader_init(&r, one, 1);
    assert_int_equal(bit_reader_read_bytes(&r, sink, SIZE_MAX), BIT_STREAM_ERROR_TRUNCATED);
    bit_reader_init(&r, one, 1);
    assert_int_equal(bit_reader_skip(&r, SIZE_MAX), BIT_STREAM_ERROR_TRUNCATED);

    /* A uvar whose prefix fits but whose payload does not. */
    const uint8_t prefix_only[1] = {0x0f}; /* k = 15: 64 payload bits */
    bit_reader_init(&r, prefix_only, 1);
    assert_int_equal(bit_reader_read_uvar(&r, &u), BIT_STREAM_ERROR_TRUNCATED);
    assert_int_equal(u, 0);

    /* bit_reader_fail makes later reads fail. */
    bit_reader_init(&r, one, 1);
    bit_reader_fail(&r);
    assert_int_equal(bit_reader_read(&r, 1, &u), BIT_STREAM_ERROR_TRUNCATED);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bit_order_lsb_first),    cmocka_unit_test(test_reset_keeps_buffer),
        cmocka_unit_test(test_every_width_round_trip), cmocka_unit_test(test_varint_sizes),
        cmocka_unit_test(test_floats_bytes_align),     cmocka_unit_test(test_random_sequences),
        cmocka_unit_test(test_truncation_every_cut),   cmocka_unit_test(test_reader_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
