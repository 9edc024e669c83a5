/* bit_stream.h -- packing values into a stream of bits and reading them back:
 * a writer that appends to a growable buffer it reuses from tick to tick,
 * and a reader over a const buffer that never reads past its end.
 *
 * This module knows bits, unsigned fields, variable-length integers and raw
 * bytes. It knows nothing of entities or property types (property_codec.c
 * maps those onto it). The bit order and the variable-length integer scheme
 * are documented once, at the top of bit_stream.c: they are part of the wire.
 *
 * Errors: writing cannot fail (running out of memory stops the process, and
 * a value wider than its field is a caller bug that stops it too). Reading
 * input from the network fails cleanly: a read past the end returns
 * BIT_STREAM_ERROR_TRUNCATED, stores 0 in the output, and leaves the reader
 * failed, so every later read fails too and a caller may check once at the
 * end of a message.
 */
#ifndef TESSERA_BIT_STREAM_H
#define TESSERA_BIT_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A read ran past the end of the input, or the reader had already failed. */
#define BIT_STREAM_ERROR_TRUNCATED (-1)

/* ---- writer ----------------------------------------------------------- */

/* A caller-owned writer. The buffer belongs to the writer; its bytes are
 * valid until the next write, reset or close. The fields are private. */
typedef struct bit_writer {
    uint8_t *data;
    size_t capacity; /* bytes allocated */
    size_t bits;     /* bits written */
} bit_writer;

/* Starts an empty writer. Allocates nothing until the first write. */
void bit_writer_init(bit_writer *w);
/* Frees the buffer; the writer may be initialised again. Idempotent. */
void bit_writer_close(bit_writer *w);
/* Empties the writer and keeps its buffer, so a writer reused every tick
 * stops allocating once it has grown to the largest message. */
void bit_writer_reset(bit_writer *w);
/* Makes room for `bytes` bytes in total without further allocation. */
void bit_writer_reserve(bit_writer *w, size_t bytes);

/* The written bytes: bit_writer_bytes() of them, the unused high bits of the
 * last byte zero. NULL while nothing was ever written. */
const uint8_t *bit_writer_data(const bit_writer *w);
/* Bits written, and the bytes they take (bits rounded up to whole bytes). */
size_t bit_writer_bits(const bit_writer *w);
size_t bit_writer_bytes(const bit_writer *w);

/* Appends the low `bits` bits of `value` (0..64; 0 writes nothing). A value
 * with a bit set above `bits` is a caller bug: it stops the process rather
 * than being cut (a silent wrap is what the codec must never do). */
void bit_writer_write(bit_writer *w, uint64_t value, unsigned bits);
void bit_writer_write_bool(bit_writer *w, bool value);
/* Unsigned integer of any size in 8..68 bits (see bit_stream.c). */
void bit_writer_write_uvar(bit_writer *w, uint64_t value);
/* Signed integer: zigzag (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...), then uvar. */
void bit_writer_write_svar(bit_writer *w, int64_t value);
/* IEEE 754 bits of a float (32 bits) or a double (64 bits). */
void bit_writer_write_float(bit_writer *w, float value);
void bit_writer_write_double(bit_writer *w, double value);
/* `length` raw bytes, 8 bits each in order; they need not be byte-aligned. */
void bit_writer_write_bytes(bit_writer *w, const void *bytes, size_t length);
/* Zero bits up to the next byte boundary (nothing if already aligned). */
void bit_writer_align(bit_writer *w);
/* For encoders that store whole 64-bit words (replication's hot path):
 * makes room for `bytes` more bytes past the current end and returns where
 * the next bit goes -- the byte, and the bit offset within it in *phase
 * (bits below *phase in that byte are already written). The caller ORs its
 * words in there, leaves every byte past its last bit zero, then calls
 * bit_writer_advance with the number of bits it wrote. */
/* A little-endian 64-bit word at any address: the unit the word-at-a-time
 * paths (bit_writer_tail, bit_writer_append_bits) read and write. */
static inline uint64_t bit_stream_load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void bit_stream_store_le64(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, sizeof v);
}

static inline uint8_t *bit_writer_tail(bit_writer *w, size_t bytes, unsigned *phase) {
    size_t need = (w->bits >> 3) + bytes + 1;
    if (need > w->capacity) bit_writer_reserve(w, need);
    *phase = (unsigned)(w->bits & 7);
    return w->data + (w->bits >> 3);
}
static inline void bit_writer_advance(bit_writer *w, size_t bits) { w->bits += bits; }

/* Appends `head_bits` (0..64) bits of `head`, then the bits [pos, pos + n)
 * of the `src_bytes`-long buffer `src` -- another stream's bits, copied as
 * they are, never re-encoded (whole bytes by memcpy when the two streams
 * are at the same bit phase). The way to share one encoding among many
 * streams (replication's pack-once). */
void bit_writer_append_bits(bit_writer *w, uint64_t head, unsigned head_bits, const uint8_t *src, size_t src_bytes,
                            size_t pos, size_t n);

/* ---- reader ----------------------------------------------------------- */

/* A caller-owned reader over a buffer it does not own (the buffer must
 * outlive it). Copying the struct saves a position to come back to. The
 * fields are private. */
typedef struct bit_reader {
    const uint8_t *data;
    size_t size; /* bits of input */
    size_t pos;  /* bits read */
    bool failed;
} bit_reader;

/* Reads the `bytes` bytes at `data` (NULL is allowed when bytes is 0). */
void bit_reader_init(bit_reader *r, const void *data, size_t bytes);
/* Reads only the first `bits` bits of `data`, for streams that do not end
 * on a byte boundary. */
void bit_reader_init_bits(bit_reader *r, const void *data, size_t bits);

/* Each read returns 0, or BIT_STREAM_ERROR_TRUNCATED with the output zeroed
 * (see the top of this file). */
int bit_reader_read(bit_reader *r, unsigned bits, uint64_t *out); /* 0..64 bits */
int bit_reader_read_bool(bit_reader *r, bool *out);
int bit_reader_read_uvar(bit_reader *r, uint64_t *out);
int bit_reader_read_svar(bit_reader *r, int64_t *out);
/* Any bit pattern, NaN and infinities included: checking is the caller's. */
int bit_reader_read_float(bit_reader *r, float *out);
int bit_reader_read_double(bit_reader *r, double *out);
/* On failure nothing is copied into `bytes`. */
int bit_reader_read_bytes(bit_reader *r, void *bytes, size_t length);
int bit_reader_skip(bit_reader *r, size_t bits);
/* Skips to the next byte boundary (see bit_writer_align). */
int bit_reader_align(bit_reader *r);

/* Marks the reader failed, for a caller that found the content wrong (a
 * value out of range) and wants later reads to fail as after truncation. */
void bit_reader_fail(bit_reader *r);
bool bit_reader_failed(const bit_reader *r);
/* Bits read so far, and bits left (0 once failed). */
size_t bit_reader_position(const bit_reader *r);
size_t bit_reader_remaining(const bit_reader *r);

#endif
