/* volatile_codec.h -- volatile position and direction updates on the client
 * wire: a position quantized to a declared precision, sent as a small delta
 * from what the client already holds, and a yaw in a fixed number of steps.
 *
 * It owns one record's bits (layout at the top of volatile_codec.c) and the
 * per-(client, entity) tracker both ends keep. It knows nothing of record
 * headers, aliases, how often an entity is sent or which client sees what:
 * the witness frames each record (kind + alias) and decides when to send.
 *
 * Lockstep: a tracker holds the quantized position and yaw last SENT, which
 * is exactly what the client reconstructed. The server encodes the delta from
 * that, not from the previous true position, so quantization error never
 * accumulates: every decoded value is within half a step of the truth it was
 * encoded from, however long the walk.
 */
#ifndef TESSERA_VOLATILE_CODEC_H
#define TESSERA_VOLATILE_CODEC_H

#include <stdbool.h>
#include <stdint.h>

#include "bit_stream.h"

/* The record ran past the end of its input (same value as bit_stream's). */
#define VOLATILE_CODEC_ERROR_TRUNCATED BIT_STREAM_ERROR_TRUNCATED
/* A value outside the world or the yaw steps: on encode, a non-finite or
 * out-of-world input; on decode, an absolute value or a delta's result
 * outside the world, or a yaw step >= yaw_steps. */
#define VOLATILE_CODEC_ERROR_RANGE (-2)
/* A delta record for a tracker that holds no position yet. */
#define VOLATILE_CODEC_ERROR_NO_BASE (-3)
/* volatile_codec_config_init: bad precision, bounds or yaw steps. */
#define VOLATILE_CODEC_ERROR_CONFIG (-4)

/* The largest world, in units of precision, per axis: 2^30 keeps every
 * coordinate and every delta inside an int32 with room to spare (at 1/64 m
 * that is 16,777 km). */
#define VOLATILE_CODEC_MAX_UNITS (1u << 30)

/* How a space quantizes volatile updates. Fill it with
 * volatile_codec_config_init, which derives the bit counts; the fields are
 * read-only afterwards. Axes are 0 = x, 1 = y (up), 2 = z. */
typedef struct volatile_codec_config {
    double precision;   /* metres per unit, e.g. 1/64 */
    double min[3];      /* the space's min corner, metres */
    double max[3];      /* the space's max corner, metres */
    uint32_t yaw_steps; /* yaw resolution: one turn in this many steps */
    /* derived */
    uint32_t units[3];     /* largest coordinate, in units: ceil((max-min)/precision) */
    unsigned axis_bits[3]; /* bits of an absolute coordinate: enough for 0..units */
    unsigned yaw_bits;     /* bits of a yaw step: enough for 0..yaw_steps-1 */
} volatile_codec_config;

/* What one client holds of one entity's volatile state: units of precision
 * from the space's min corner, and a yaw step. Plain data; both ends keep
 * one and they stay equal. */
typedef struct volatile_track {
    uint32_t x, y, z;
    uint32_t yaw;
    bool valid; /* false until the first record: the next one is absolute */
} volatile_track;

/* A position and yaw quantized for one config: what every client seeing the
 * entity is sent, worked out once however many see it. */
typedef struct volatile_quantized {
    uint32_t x, y, z;
    uint32_t yaw;
} volatile_quantized;

/* Fills `config` and derives its bit counts. Returns 0, or
 * VOLATILE_CODEC_ERROR_CONFIG when precision is not a positive finite number,
 * an axis has max <= min or more than VOLATILE_CODEC_MAX_UNITS units, or
 * yaw_steps is outside 2..65536. */
int volatile_codec_config_init(volatile_codec_config *config, double precision, const double min[3],
                               const double max[3], uint32_t yaw_steps);

/* An empty tracker: the next record for it will be absolute. Also the way to
 * force an absolute record (the entity re-entered the client's view). */
void volatile_track_init(volatile_track *track);

/* Appends one record moving the client from `track` to (x, y, z, yaw) and
 * updates `track` to the quantized values the client will hold. Yaw is in
 * radians, any finite value (it wraps). Picks the absolute form for a
 * tracker without a position, a jump too large for a delta (a teleport), or
 * whenever it is not longer than the delta.
 *
 * Returns the bits written (>= 13), or VOLATILE_CODEC_ERROR_RANGE, writing
 * nothing and leaving `track` alone, when a coordinate is not finite or lies
 * outside the config's world, or the yaw is not finite. */
int volatile_codec_encode(bit_writer *w, volatile_track *track, const volatile_codec_config *config, float x, float y,
                          float z, float yaw);

/* Quantizes (x, y, z, yaw) as volatile_codec_encode does. Returns 0, or
 * VOLATILE_CODEC_ERROR_RANGE (out untouched) for the inputs encode
 * refuses. */
int volatile_codec_quantize(const volatile_codec_config *config, float x, float y, float z, float yaw,
                            volatile_quantized *out);
/* volatile_codec_encode from a position volatile_codec_quantize made with
 * the same config. Returns the bits written (>= 13). */
int volatile_codec_encode_quantized(bit_writer *w, volatile_track *track, const volatile_codec_config *config,
                                    const volatile_quantized *position);
/* Whether volatile_codec_encode takes this position and yaw: all finite,
 * the position inside the config's world. A caller that frames records
 * asks before writing a header. */
bool volatile_codec_accepts(const volatile_codec_config *config, float x, float y, float z, float yaw);

/* Reads one record, the client side. On success updates `track`, stores the
 * reconstructed position (metres) and yaw (radians, in (-pi, pi]) and
 * returns 0. On failure returns VOLATILE_CODEC_ERROR_TRUNCATED,
 * VOLATILE_CODEC_ERROR_RANGE or VOLATILE_CODEC_ERROR_NO_BASE, leaves `track`
 * and the outputs untouched (a partial record is never applied) and leaves
 * the reader failed, so the rest of the packet is not misread. */
int volatile_codec_decode(bit_reader *r, volatile_track *track, const volatile_codec_config *config, float *x, float *y,
                          float *z, float *yaw);

/* Reads one record without applying it (a record for an entity the client
 * does not know). Returns 0, or VOLATILE_CODEC_ERROR_TRUNCATED with the
 * reader failed. */
int volatile_codec_skip(bit_reader *r, const volatile_codec_config *config);

#endif
