/* bit_stream.c -- the bit writer and the bounds-checked bit reader.
 *
 * It owns the bit-level wire format and nothing above it: which fields a
 * message holds is the business of property_codec.c and its callers.
 *
 * Bit order (as Source's bf_write): LSB-first. Bit i of the stream is bit
 * (i % 8) of byte (i / 8), bit 0 being the least significant. A field of n
 * bits is written least significant bit first, so a field that fits in the
 * current byte fills it from the low end, and a byte-aligned field of 8, 16,
 * 32 or 64 bits is exactly its little-endian bytes. The unused high bits of
 * the last byte are zero.
 *
 * Variable-length unsigned integers ("uvar"), for values whose size is
 * unknown in advance: a 4-bit prefix k (0..15), then the value in 4*(k+1)
 * bits. The writer picks the smallest k, i.e. the number of significant
 * nibbles minus one (0 for the value 0):
 *
 *   value         bits on the wire
 *   0..15          8  (4 + 4)
 *   16..255       12
 *   < 2^16        20
 *   < 2^32        36
 *   < 2^64        68
 *
 * A reader accepts a longer form than needed (leading zero nibbles): it
 * decodes to the same value, and the codec checks every value's range.
 *
 * Signed integers ("svar") are zigzag-mapped first, so that small
 * magnitudes of either sign stay short: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3,
 * i.e. (v << 1) ^ (v >> 63).
 *
 * Floats and doubles are their IEEE 754 bits as 32- and 64-bit fields; raw
 * bytes are 8-bit fields in order.
 */
#include "bit_stream.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>

/* The first allocation: room for a typical entity update without growing
 * again; larger messages double it. */
#define BIT_STREAM__INITIAL_CAPACITY 256

/* ---- writer ----------------------------------------------------------- */

void bit_writer_init(bit_writer *w) {
    w->data = NULL;
    w->capacity = 0;
    w->bits = 0;
}

void bit_writer_close(bit_writer *w) {
    free(w->data);
    bit_writer_init(w);
}

void bit_writer_reset(bit_writer *w) { w->bits = 0; }

void bit_writer_reserve(bit_writer *w, size_t bytes) {
    if (bytes <= w->capacity) return;
    size_t capacity = w->capacity != 0 ? w->capacity : BIT_STREAM__INITIAL_CAPACITY;
    while (capacity < bytes) {
        if (capacity > SIZE_MAX / 2) log_panic("bit_writer: %zu bytes do not fit in memory", bytes);
        capacity *= 2;
    }
    w->data = xrealloc(w->data, capacity);
    w->capacity = capacity;
}

const uint8_t *bit_writer_data(const bit_writer *w) { return w->data; }

size_t bit_writer_bits(const bit_writer *w) { return w->bits; }

size_t bit_writer_bytes(const bit_writer *w) { return (w->bits + 7) / 8; }

/* Makes room for `bits` more bits. */
static inline void bit_writer__room(bit_writer *w, size_t bits) {
    size_t need = (w->bits + bits + 7) / 8;
    if (need > w->capacity) bit_writer_reserve(w, need);
}

/* Appends `bits` (1..64) bits of `value`, which has no bit set above them.
 * The bytes past the end are never read, so they need not be zero: a
 * partial last byte has zero high bits (the invariant), and a fresh byte is
 * assigned whole. */
static inline void bit_writer__put(bit_writer *w, uint64_t value, unsigned bits) {
    uint8_t *p = w->data + (w->bits >> 3);
    unsigned off = (unsigned)(w->bits & 7);
    unsigned left = bits;
    w->bits += bits;
    if (off != 0) {
        *p |= (uint8_t)(value << off);
        unsigned taken = 8 - off;
        if (left <= taken) return;
        value >>= taken;
        left -= taken;
        p++;
    }
    while (left >= 8) {
        *p++ = (uint8_t)value;
        value >>= 8;
        left -= 8;
    }
    if (left != 0) *p = (uint8_t)value;
}

void bit_writer_write(bit_writer *w, uint64_t value, unsigned bits) {
    if (bits == 0 && value == 0) return;
    if (bits > 64 || (bits < 64 && (value >> bits) != 0))
        log_panic("bit_writer: value 0x%llx does not fit in %u bits", (unsigned long long)value, bits);
    bit_writer__room(w, bits);
    bit_writer__put(w, value, bits);
}

void bit_writer_write_bool(bit_writer *w, bool value) { bit_writer_write(w, value ? 1 : 0, 1); }

void bit_writer_write_uvar(bit_writer *w, uint64_t value) {
    unsigned nibbles = 1;
    while (nibbles < 16 && (value >> (4 * nibbles)) != 0) nibbles++;
    bit_writer__room(w, 4 + 4 * nibbles);
    bit_writer__put(w, nibbles - 1, 4);
    bit_writer__put(w, value, 4 * nibbles);
}

void bit_writer_write_svar(bit_writer *w, int64_t value) {
    uint64_t u = (uint64_t)value;
    bit_writer_write_uvar(w, (u << 1) ^ (value < 0 ? UINT64_MAX : 0));
}

void bit_writer_write_float(bit_writer *w, float value) {
    uint32_t u;
    memcpy(&u, &value, sizeof u);
    bit_writer_write(w, u, 32);
}

void bit_writer_write_double(bit_writer *w, double value) {
    uint64_t u;
    memcpy(&u, &value, sizeof u);
    bit_writer_write(w, u, 64);
}

void bit_writer_write_bytes(bit_writer *w, const void *bytes, size_t length) {
    if (length == 0) return;
    if (length > (SIZE_MAX - w->bits) / 8 - 1) log_panic("bit_writer: %zu bytes do not fit in memory", length);
    bit_writer__room(w, length * 8);
    const uint8_t *src = bytes;
    if ((w->bits & 7) == 0) {
        memcpy(w->data + (w->bits >> 3), src, length);
        w->bits += length * 8;
        return;
    }
    for (size_t i = 0; i < length; i++) bit_writer__put(w, src[i], 8);
}

void bit_writer_align(bit_writer *w) {
    unsigned off = (unsigned)(w->bits & 7);
    if (off != 0) w->bits += 8 - off; /* the high bits of the last byte are already zero */
}

/* ---- reader ----------------------------------------------------------- */

void bit_reader_init(bit_reader *r, const void *data, size_t bytes) {
    if (bytes > SIZE_MAX / 8) log_panic("bit_reader: %zu bytes are more bits than size_t counts", bytes);
    bit_reader_init_bits(r, data, bytes * 8);
}

void bit_reader_init_bits(bit_reader *r, const void *data, size_t bits) {
    r->data = data;
    r->size = data != NULL ? bits : 0;
    r->pos = 0;
    r->failed = false;
}

void bit_reader_fail(bit_reader *r) { r->failed = true; }

bool bit_reader_failed(const bit_reader *r) { return r->failed; }

size_t bit_reader_position(const bit_reader *r) { return r->pos; }

size_t bit_reader_remaining(const bit_reader *r) { return r->failed ? 0 : r->size - r->pos; }

/* Fails unless `bits` more bits are there. */
static inline int bit_reader__need(bit_reader *r, size_t bits) {
    if (r->failed || r->size - r->pos < bits) {
        r->failed = true;
        return BIT_STREAM_ERROR_TRUNCATED;
    }
    return 0;
}

/* Takes `bits` (1..64) bits that are known to be there. It touches only the
 * bytes holding them: never a byte past the end of the input. */
static inline uint64_t bit_reader__take(bit_reader *r, unsigned bits) {
    const uint8_t *p = r->data + (r->pos >> 3);
    unsigned off = (unsigned)(r->pos & 7);
    uint64_t value = 0;
    unsigned got = 0;
    r->pos += bits;
    if (off != 0) {
        value = (uint64_t)(*p++ >> off);
        got = 8 - off;
    }
    while (got < bits) {
        value |= (uint64_t)*p++ << got;
        got += 8;
    }
    return bits < 64 ? value & ((UINT64_C(1) << bits) - 1) : value;
}

int bit_reader_read(bit_reader *r, unsigned bits, uint64_t *out) {
    *out = 0;
    if (bits > 64) log_panic("bit_reader: cannot read %u bits into 64", bits);
    if (bit_reader__need(r, bits) != 0) return BIT_STREAM_ERROR_TRUNCATED;
    if (bits != 0) *out = bit_reader__take(r, bits);
    return 0;
}

int bit_reader_read_bool(bit_reader *r, bool *out) {
    uint64_t v;
    int rc = bit_reader_read(r, 1, &v);
    *out = v != 0;
    return rc;
}

int bit_reader_read_uvar(bit_reader *r, uint64_t *out) {
    uint64_t prefix;
    *out = 0;
    if (bit_reader_read(r, 4, &prefix) != 0) return BIT_STREAM_ERROR_TRUNCATED;
    return bit_reader_read(r, 4 * ((unsigned)prefix + 1), out);
}

int bit_reader_read_svar(bit_reader *r, int64_t *out) {
    uint64_t u;
    int rc = bit_reader_read_uvar(r, &u);
    *out = (int64_t)((u >> 1) ^ (UINT64_C(0) - (u & 1)));
    return rc;
}

int bit_reader_read_float(bit_reader *r, float *out) {
    uint64_t v;
    int rc = bit_reader_read(r, 32, &v);
    uint32_t u = (uint32_t)v;
    memcpy(out, &u, sizeof *out);
    return rc;
}

int bit_reader_read_double(bit_reader *r, double *out) {
    uint64_t v;
    int rc = bit_reader_read(r, 64, &v);
    memcpy(out, &v, sizeof *out);
    return rc;
}

int bit_reader_read_bytes(bit_reader *r, void *bytes, size_t length) {
    if (r->failed || length > (r->size - r->pos) / 8) {
        r->failed = true;
        return BIT_STREAM_ERROR_TRUNCATED;
    }
    if (length == 0) return 0;
    uint8_t *dst = bytes;
    if ((r->pos & 7) == 0) {
        memcpy(dst, r->data + (r->pos >> 3), length);
        r->pos += length * 8;
        return 0;
    }
    for (size_t i = 0; i < length; i++) dst[i] = (uint8_t)bit_reader__take(r, 8);
    return 0;
}

int bit_reader_skip(bit_reader *r, size_t bits) {
    if (bit_reader__need(r, bits) != 0) return BIT_STREAM_ERROR_TRUNCATED;
    r->pos += bits;
    return 0;
}

int bit_reader_align(bit_reader *r) {
    unsigned off = (unsigned)(r->pos & 7);
    return bit_reader_skip(r, off != 0 ? 8 - off : 0);
}

/* ---- bit copy ---------------------------------------------------------- */

/* The 64 bits of `src` (`src_bytes` long) from bit `pos` on; bits past the
 * end read as 0. */
static inline uint64_t bit_stream__load64(const uint8_t *src, size_t src_bytes, size_t pos) {
    size_t byte = pos >> 3;
    unsigned off = (unsigned)(pos & 7);
    if (byte + 9 <= src_bytes) {
        uint64_t v = bit_stream_load_le64(src + byte) >> off;
        if (off != 0) v |= (uint64_t)src[byte + 8] << (64 - off);
        return v;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < 9 && byte + i < src_bytes; i++) {
        uint64_t b = src[byte + i];
        int shift = (int)(8 * i) - (int)off;
        if (shift >= 64) break;
        v |= shift >= 0 ? b << shift : b >> -shift;
    }
    return v;
}

/* Slack past the last written byte that the 64-bit stores below may touch:
 * a store covers 8 bytes from the current byte, plus one for the bits that
 * spill over when the writer is not at a byte boundary. */
#define BIT_STREAM_SLACK 16

/* Appends `bits` (1..64) bits of `v` (no bit set above them) with one
 * 64-bit store; room for BIT_STREAM_SLACK bytes past the end must be
 * reserved. Bytes past the new end are left zero, so the writer's invariant
 * (the unused high bits of the last byte are zero) holds.
 * A range check and a byte loop per call (bit_writer_write) were most of
 * the cost of sharing pre-encoded records, hence this path. */
static inline void bit_stream__put64(bit_writer *w, uint64_t v, unsigned bits) {
    uint8_t *p = w->data + (w->bits >> 3);
    unsigned d = (unsigned)(w->bits & 7);
    uint64_t word = (uint64_t)(p[0] & ((1u << d) - 1)) | (v << d);
    bit_stream_store_le64(p, word);
    if (d != 0) p[8] = (uint8_t)(v >> (64 - d)); /* 0 when nothing spills */
    w->bits += bits;
}

/* Appends `head_bits` (0..64) bits of `head`, then bits [pos, pos + n) of
 * `src` (`src_bytes` long), to `w`. When the source and the writer are at
 * the same bit phase, whole bytes go by memcpy; otherwise in 64-bit chunks.
 * Nothing is re-encoded. */
void bit_writer_append_bits(bit_writer *w, uint64_t head, unsigned head_bits, const uint8_t *src, size_t src_bytes,
                            size_t pos, size_t n) {
    size_t need = (w->bits + head_bits + n + 7) / 8 + BIT_STREAM_SLACK;
    if (need > w->capacity) bit_writer_reserve(w, need);
    if (head_bits != 0) bit_stream__put64(w, head, head_bits);
    unsigned dst_phase = (unsigned)(w->bits & 7);
    /* 128: below that, the chunk loop is as fast as the setup of memcpy. */
    if (n >= 128 && (unsigned)(pos & 7) == dst_phase) {
        if (dst_phase != 0) {
            unsigned lead = 8 - dst_phase;
            bit_stream__put64(w, bit_stream__load64(src, src_bytes, pos) & ((1u << lead) - 1), lead);
            pos += lead;
            n -= lead;
        }
        size_t bytes = n >> 3;
        memcpy(w->data + (w->bits >> 3), src + (pos >> 3), bytes);
        w->bits += bytes * 8;
        pos += bytes * 8;
        n -= bytes * 8;
        if (n > 0) w->data[w->bits >> 3] = 0; /* a fresh byte for the tail below */
    }
    while (n >= 64) {
        bit_stream__put64(w, bit_stream__load64(src, src_bytes, pos), 64);
        pos += 64;
        n -= 64;
    }
    if (n > 0) bit_stream__put64(w, bit_stream__load64(src, src_bytes, pos) & ((UINT64_C(1) << n) - 1), (unsigned)n);
}
