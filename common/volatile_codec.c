/* volatile_codec.c -- one volatile position+yaw record: quantizing, choosing
 * the delta or absolute form, and reading it back without ever applying half
 * a record. Framing (record kind, alias) and send rates belong to the
 * witness, not here.
 *
 * Quantization. A coordinate is an unsigned number of `precision` units
 * from the space's min corner: q = round((v - min) / precision), 0..units.
 * The client reconstructs v' = min + q * precision, so |v' - v| <=
 * precision / 2. A yaw is a step 0..yaw_steps-1: round(yaw / 2pi * steps)
 * mod steps, reconstructed as step * 2pi / steps folded into (-pi, pi].
 * Both ends keep the last SENT quantized values (volatile_track); deltas are
 * taken from those, so error never accumulates.
 *
 * Bit layout of a record (bit_stream order: fields LSB-first, in this order;
 * signed fields are two's complement in their width):
 *
 *   mode          1   0 = delta, 1 = absolute
 *
 *   delta (mode 0; the tracker must hold a position):
 *   hclass        2   width W of both horizontal deltas: 0, 5, 7, 12 bits
 *   dx            W   signed, units (absent when W = 0)
 *   dz            W   signed, units
 *   ychanged      1   0: y unchanged, nothing follows for y
 *   yclass        1   (if ychanged) width of dy: 0 -> 6 bits, 1 -> 14 bits
 *   dy         6|14   (if ychanged) signed, units
 *   yawchanged    1   0: yaw unchanged
 *   yawdelta      1   (if yawchanged) 1: a small turn follows, 0: the
 *                     absolute step
 *   dyaw          4   (if yawdelta) signed steps, -8..7, added modulo
 *                     yaw_steps (only when yaw_steps >= 16)
 *   yaw    yaw_bits   (if yawchanged and not yawdelta) the absolute step
 *
 *   absolute (mode 1; first update, teleport, or whenever not longer):
 *   x   axis_bits[0]  unsigned, units from min[0], at most units[0]
 *   y   axis_bits[1]
 *   z   axis_bits[2]
 *   yaw    yaw_bits   the absolute step, below yaw_steps
 *
 * Why these widths, at 1/64 m and 10 Hz: a walk at 5 m/s moves up to 32
 * units per tick on an axis (33 after rounding), which fits class 7 (-64..63,
 * up to 10 m/s); class 5 (-16..15) covers a 2.5 m/s stroll; class 0 is a turn
 * in place; class 12 (+-2048 units, 32 m) covers mounts and vehicles; beyond
 * it a record is a teleport and goes absolute. Walking straight on flat
 * ground costs 1 + 2 + 14 + 1 + 1 = 19 bits; steering as a player does
 * with a mouse (under 12 degrees a tick at 256 steps) 6 bits more, a sharp
 * turn 10 more. dy uses 6 bits (+-0.5 m: slopes, stairs) or 14 bits
 * (+-128 m: jumps, falls).
 *
 * The encoder computes the delta form's cost and the absolute form's and
 * sends the shorter (absolute on a tie: same size, and it needs no base).
 * The decoder rejects a delta whose result leaves the world, an absolute
 * coordinate above units, and a yaw step >= yaw_steps; it reads the whole
 * record into locals before touching the tracker.
 */
#include "volatile_codec.h"

#include <math.h>
#include <stddef.h>

#define VOLATILE_CODEC__TWO_PI 6.283185307179586476925286766559

/* Horizontal delta widths, indexed by hclass (see the layout above). */
static const unsigned volatile_codec__hwidth[4] = {0, 5, 7, 12};
/* Vertical delta widths, indexed by yclass. */
static const unsigned volatile_codec__ywidth[2] = {6, 14};
/* Width of a small turn, in yaw steps, signed. */
#define VOLATILE_CODEC__DYAW_BITS 4

/* The turn from `from` to `to` in yaw steps, folded into
 * [-steps/2, steps/2). */
static int64_t volatile_codec__turn(int64_t from, int64_t to, int64_t steps) {
    int64_t d = (to - from) % steps;
    if (d < -steps / 2) d += steps;
    if (d >= steps - steps / 2) d -= steps;
    return d;
}

/* Bits needed to write every value 0..n. */
static unsigned volatile_codec__bits_for(uint64_t n) {
    unsigned bits = 0;
    while (bits < 64 && (n >> bits) != 0) bits++;
    return bits;
}

/* Whether d fits a signed field of `width` bits (width 0 holds only 0). */
static bool volatile_codec__fits(int64_t d, unsigned width) {
    if (width == 0) return d == 0;
    int64_t half = (int64_t)1 << (width - 1);
    return d >= -half && d < half;
}

static void volatile_codec__write_signed(bit_writer *w, int64_t d, unsigned width) {
    if (width == 0) return;
    bit_writer_write(w, (uint64_t)d & ((UINT64_C(1) << width) - 1), width);
}

static int volatile_codec__read_signed(bit_reader *r, unsigned width, int64_t *out) {
    uint64_t u = 0;
    *out = 0;
    if (width == 0) return 0;
    int rc = bit_reader_read(r, width, &u);
    if (rc != 0) return rc;
    if ((u >> (width - 1)) & 1)
        *out = (int64_t)u - ((int64_t)1 << width);
    else
        *out = (int64_t)u;
    return 0;
}

int volatile_codec_config_init(volatile_codec_config *config, double precision, const double min[3],
                               const double max[3], uint32_t yaw_steps) {
    if (!(precision > 0) || !isfinite(precision) || yaw_steps < 2 || yaw_steps > 65536)
        return VOLATILE_CODEC_ERROR_CONFIG;
    for (int a = 0; a < 3; a++) {
        if (!isfinite(min[a]) || !isfinite(max[a]) || !(max[a] > min[a])) return VOLATILE_CODEC_ERROR_CONFIG;
        double units = ceil((max[a] - min[a]) / precision);
        if (!(units <= (double)VOLATILE_CODEC_MAX_UNITS)) return VOLATILE_CODEC_ERROR_CONFIG;
    }
    config->precision = precision;
    config->yaw_steps = yaw_steps;
    for (int a = 0; a < 3; a++) {
        config->min[a] = min[a];
        config->max[a] = max[a];
        config->units[a] = (uint32_t)ceil((max[a] - min[a]) / precision);
        config->axis_bits[a] = volatile_codec__bits_for(config->units[a]);
        if (config->axis_bits[a] == 0) /* a world thinner than one unit */
            config->axis_bits[a] = 1;
    }
    config->yaw_bits = volatile_codec__bits_for(yaw_steps - 1);
    return 0;
}

void volatile_track_init(volatile_track *track) {
    track->x = track->y = track->z = 0;
    track->yaw = 0;
    track->valid = false;
}

/* The unit coordinate of `v` on axis `a`; -1 if not finite or outside. */
static int64_t volatile_codec__quantize(const volatile_codec_config *config, int a, float v) {
    double d = (double)v;
    if (!isfinite(d) || d < config->min[a] || d > config->max[a]) return -1;
    int64_t q = llround((d - config->min[a]) / config->precision);
    if (q > (int64_t)config->units[a]) /* rounding at the max edge */
        q = config->units[a];
    return q;
}

bool volatile_codec_accepts(const volatile_codec_config *config, float x, float y, float z, float yaw) {
    return volatile_codec__quantize(config, 0, x) >= 0 && volatile_codec__quantize(config, 1, y) >= 0 &&
           volatile_codec__quantize(config, 2, z) >= 0 && isfinite(yaw);
}

int volatile_codec_quantize(const volatile_codec_config *config, float x, float y, float z, float yaw,
                            volatile_quantized *out) {
    int64_t qx = volatile_codec__quantize(config, 0, x);
    int64_t qy = volatile_codec__quantize(config, 1, y);
    int64_t qz = volatile_codec__quantize(config, 2, z);
    if (qx < 0 || qy < 0 || qz < 0 || !isfinite(yaw)) return VOLATILE_CODEC_ERROR_RANGE;
    int64_t steps = config->yaw_steps;
    /* fmod first, so a yaw of many turns cannot overflow llround. */
    double turns = fmod((double)yaw / VOLATILE_CODEC__TWO_PI, 1.0);
    int64_t qyaw = llround(turns * (double)steps) % steps;
    if (qyaw < 0) qyaw += steps;
    out->x = (uint32_t)qx;
    out->y = (uint32_t)qy;
    out->z = (uint32_t)qz;
    out->yaw = (uint32_t)qyaw;
    return 0;
}

int volatile_codec_encode(bit_writer *w, volatile_track *track, const volatile_codec_config *config, float x, float y,
                          float z, float yaw) {
    volatile_quantized position;
    if (volatile_codec_quantize(config, x, y, z, yaw, &position) != 0) return VOLATILE_CODEC_ERROR_RANGE;
    return volatile_codec_encode_quantized(w, track, config, &position);
}

int volatile_codec_encode_quantized(bit_writer *w, volatile_track *track, const volatile_codec_config *config,
                                    const volatile_quantized *position) {
    int64_t qx = position->x, qy = position->y, qz = position->z, qyaw = position->yaw;
    int64_t steps = config->yaw_steps;
    unsigned abs_cost = 1 + config->axis_bits[0] + config->axis_bits[1] + config->axis_bits[2] + config->yaw_bits;
    unsigned delta_cost = UINT32_MAX;
    int64_t dx = 0, dy = 0, dz = 0;
    unsigned hclass = 0, yclass = 0;
    bool ychanged = false, yawchanged = false, small_turn = false;
    int64_t dyaw = 0;
    if (track->valid) {
        dx = qx - track->x;
        dy = qy - track->y;
        dz = qz - track->z;
        while (hclass < 4 && !(volatile_codec__fits(dx, volatile_codec__hwidth[hclass]) &&
                               volatile_codec__fits(dz, volatile_codec__hwidth[hclass])))
            hclass++;
        ychanged = dy != 0;
        while (ychanged && yclass < 2 && !volatile_codec__fits(dy, volatile_codec__ywidth[yclass])) yclass++;
        yawchanged = qyaw != track->yaw;
        dyaw = volatile_codec__turn(track->yaw, qyaw, steps);
        small_turn = steps >= 16 && volatile_codec__fits(dyaw, VOLATILE_CODEC__DYAW_BITS);
        if (hclass < 4 && yclass < 2)
            delta_cost = 1 + 2 + 2 * volatile_codec__hwidth[hclass] + 1 +
                         (ychanged ? 1 + volatile_codec__ywidth[yclass] : 0) + 1 +
                         (yawchanged ? 1 + (small_turn ? VOLATILE_CODEC__DYAW_BITS : config->yaw_bits) : 0);
    }

    if (delta_cost < abs_cost) {
        bit_writer_write(w, 0, 1);
        bit_writer_write(w, hclass, 2);
        volatile_codec__write_signed(w, dx, volatile_codec__hwidth[hclass]);
        volatile_codec__write_signed(w, dz, volatile_codec__hwidth[hclass]);
        bit_writer_write_bool(w, ychanged);
        if (ychanged) {
            bit_writer_write(w, yclass, 1);
            volatile_codec__write_signed(w, dy, volatile_codec__ywidth[yclass]);
        }
        bit_writer_write_bool(w, yawchanged);
        if (yawchanged) {
            bit_writer_write_bool(w, small_turn);
            if (small_turn)
                volatile_codec__write_signed(w, dyaw, VOLATILE_CODEC__DYAW_BITS);
            else
                bit_writer_write(w, (uint64_t)qyaw, config->yaw_bits);
        }
    } else {
        bit_writer_write(w, 1, 1);
        bit_writer_write(w, (uint64_t)qx, config->axis_bits[0]);
        bit_writer_write(w, (uint64_t)qy, config->axis_bits[1]);
        bit_writer_write(w, (uint64_t)qz, config->axis_bits[2]);
        bit_writer_write(w, (uint64_t)qyaw, config->yaw_bits);
    }

    track->x = (uint32_t)qx;
    track->y = (uint32_t)qy;
    track->z = (uint32_t)qz;
    track->yaw = (uint32_t)qyaw;
    track->valid = true;
    return (int)(delta_cost < abs_cost ? delta_cost : abs_cost);
}

/* Fails the reader and returns `rc`, for a record rejected on its content. */
static int volatile_codec__reject(bit_reader *r, int rc) {
    bit_reader_fail(r);
    return rc;
}

int volatile_codec_decode(bit_reader *r, volatile_track *track, const volatile_codec_config *config, float *x, float *y,
                          float *z, float *yaw) {
    uint64_t mode = 0;
    int64_t q[3];
    uint64_t qyaw = track->yaw;
    if (bit_reader_read(r, 1, &mode) != 0) return VOLATILE_CODEC_ERROR_TRUNCATED;

    if (mode == 0) {
        uint64_t hclass = 0, yclass = 0;
        bool ychanged = false, yawchanged = false;
        int64_t dx = 0, dy = 0, dz = 0;
        /* Read the whole record first: the reader's sticky failure lets one
         * check at the end cover every field. */
        bit_reader_read(r, 2, &hclass);
        volatile_codec__read_signed(r, volatile_codec__hwidth[hclass], &dx);
        volatile_codec__read_signed(r, volatile_codec__hwidth[hclass], &dz);
        bit_reader_read_bool(r, &ychanged);
        if (ychanged) {
            bit_reader_read(r, 1, &yclass);
            volatile_codec__read_signed(r, volatile_codec__ywidth[yclass], &dy);
        }
        bit_reader_read_bool(r, &yawchanged);
        bool small_turn = false;
        int64_t dyaw = 0;
        if (yawchanged) {
            bit_reader_read_bool(r, &small_turn);
            if (small_turn)
                volatile_codec__read_signed(r, VOLATILE_CODEC__DYAW_BITS, &dyaw);
            else
                bit_reader_read(r, config->yaw_bits, &qyaw);
        }
        if (bit_reader_failed(r)) return VOLATILE_CODEC_ERROR_TRUNCATED;
        if (!track->valid) return volatile_codec__reject(r, VOLATILE_CODEC_ERROR_NO_BASE);
        if (small_turn) {
            /* A small turn exists only where the encoder can write one. */
            if (config->yaw_steps < 16) return volatile_codec__reject(r, VOLATILE_CODEC_ERROR_RANGE);
            int64_t steps = config->yaw_steps;
            qyaw = (uint64_t)((((int64_t)track->yaw + dyaw) % steps + steps) % steps);
        }
        q[0] = (int64_t)track->x + dx;
        q[1] = (int64_t)track->y + dy;
        q[2] = (int64_t)track->z + dz;
    } else {
        uint64_t u[3] = {0, 0, 0};
        for (int a = 0; a < 3; a++) bit_reader_read(r, config->axis_bits[a], &u[a]);
        bit_reader_read(r, config->yaw_bits, &qyaw);
        if (bit_reader_failed(r)) return VOLATILE_CODEC_ERROR_TRUNCATED;
        for (int a = 0; a < 3; a++) q[a] = (int64_t)u[a];
    }

    for (int a = 0; a < 3; a++)
        if (q[a] < 0 || q[a] > (int64_t)config->units[a]) return volatile_codec__reject(r, VOLATILE_CODEC_ERROR_RANGE);
    if (qyaw >= config->yaw_steps) return volatile_codec__reject(r, VOLATILE_CODEC_ERROR_RANGE);

    track->x = (uint32_t)q[0];
    track->y = (uint32_t)q[1];
    track->z = (uint32_t)q[2];
    track->yaw = (uint32_t)qyaw;
    track->valid = true;
    *x = (float)(config->min[0] + (double)q[0] * config->precision);
    *y = (float)(config->min[1] + (double)q[1] * config->precision);
    *z = (float)(config->min[2] + (double)q[2] * config->precision);
    double angle = (double)qyaw * VOLATILE_CODEC__TWO_PI / (double)config->yaw_steps;
    if (angle > VOLATILE_CODEC__TWO_PI / 2) angle -= VOLATILE_CODEC__TWO_PI;
    *yaw = (float)angle;
    return 0;
}

int volatile_codec_skip(bit_reader *r, const volatile_codec_config *config) {
    uint64_t mode = 0, hclass = 0, yclass = 0, ignored;
    bool ychanged = false, yawchanged = false;
    if (bit_reader_read(r, 1, &mode) != 0) return VOLATILE_CODEC_ERROR_TRUNCATED;
    if (mode == 0) {
        bit_reader_read(r, 2, &hclass);
        bit_reader_skip(r, 2 * (size_t)volatile_codec__hwidth[hclass & 3]);
        bit_reader_read_bool(r, &ychanged);
        if (ychanged) {
            bit_reader_read(r, 1, &yclass);
            bit_reader_skip(r, volatile_codec__ywidth[yclass & 1]);
        }
        bit_reader_read_bool(r, &yawchanged);
        if (yawchanged) {
            bool small_turn = false;
            bit_reader_read_bool(r, &small_turn);
            if (small_turn)
                bit_reader_skip(r, VOLATILE_CODEC__DYAW_BITS);
            else
                bit_reader_read(r, config->yaw_bits, &ignored);
        }
    } else {
        for (int a = 0; a < 3; a++) bit_reader_read(r, config->axis_bits[a], &ignored);
        bit_reader_read(r, config->yaw_bits, &ignored);
    }
    return bit_reader_failed(r) ? VOLATILE_CODEC_ERROR_TRUNCATED : 0;
}
