/* volatile-codec.ts -- one volatile position+yaw record (a MOVE record's
 * body), bit for bit common/volatile_codec.c: the space's quantization from
 * the login reply, the per-entity track both ends keep, the decoder with
 * every check, and the encoder (for tests that build streams by hand).
 *
 * A coordinate is an unsigned count of `precision` units from the world's
 * min corner (0..units); a yaw a step 0..yaw_steps-1. Layout (LSB-first, in
 * this order; signed fields two's complement in their width):
 *
 *   mode          1   0 = delta (needs a tracked position), 1 = absolute
 *   delta:  hclass 2 (widths 0, 5, 7, 12), dx W, dz W, ychanged 1,
 *           [yclass 1 (6 or 14 bits), dy], yawchanged 1, [yawdelta 1,
 *           dyaw 4 signed (yaw_steps >= 16 only) | yaw yaw_bits]
 *   absolute: x axis_bits[0], y axis_bits[1], z axis_bits[2], yaw yaw_bits
 *
 * A record is read whole before the track changes; a delta leaving the
 * world, an absolute coordinate above units or a yaw step >= yaw_steps is
 * refused, and the reader is left failed.
 */

import { BitReader, BitWriter, bitsFor } from './bits.js';
import { DecodeError } from './errors.js';

const TWO_PI = 6.283185307179586;
const HORIZONTAL_WIDTHS = [0, 5, 7, 12];
const VERTICAL_WIDTHS = [6, 14];
const TURN_BITS = 4;
/* 2^30 units per axis keeps every coordinate and delta in an int32. */
const MAX_UNITS = 2 ** 30;

export interface VolatileConfig {
    precision: number; /* metres per unit */
    min: [number, number, number];
    max: [number, number, number];
    yawSteps: number;
    units: [number, number, number]; /* largest coordinate, in units */
    axisBits: [number, number, number];
    yawBits: number;
}

/* What one client holds of one entity: units and a yaw step. */
export interface VolatileTrack {
    x: number;
    y: number;
    z: number;
    yaw: number;
    valid: boolean; /* false until the first record: the next is absolute */
}

export interface VolatilePosition {
    x: number;
    y: number;
    z: number;
    yaw: number; /* radians in (-pi, pi] */
}

/* The space's quantization, or null when precision is not a positive finite
 * number, an axis has max <= min or more than 2^30 units, or yaw_steps is
 * outside 2..65536 (volatile_codec_config_init). */
export function createVolatileConfig(
    precision: number,
    min: readonly number[],
    max: readonly number[],
    yawSteps: number,
): VolatileConfig | null {
    if (!(precision > 0) || !Number.isFinite(precision) || !(yawSteps >= 2) || yawSteps > 65536) return null;
    const units: number[] = [];
    for (let a = 0; a < 3; a++) {
        if (!Number.isFinite(min[a]) || !Number.isFinite(max[a]) || !(max[a] > min[a])) return null;
        const u = Math.ceil((max[a] - min[a]) / precision);
        if (!(u <= MAX_UNITS)) return null;
        units.push(u);
    }
    return {
        precision,
        min: [min[0], min[1], min[2]],
        max: [max[0], max[1], max[2]],
        yawSteps,
        units: [units[0], units[1], units[2]],
        /* A world thinner than one unit still takes a bit. */
        axisBits: [Math.max(1, bitsFor(units[0])), Math.max(1, bitsFor(units[1])), Math.max(1, bitsFor(units[2]))],
        yawBits: bitsFor(yawSteps - 1),
    };
}

export function newTrack(): VolatileTrack {
    return { x: 0, y: 0, z: 0, yaw: 0, valid: false };
}

function readSigned(r: BitReader, width: number): number {
    if (width === 0) return 0;
    const u = r.read(width);
    return u >= 2 ** (width - 1) ? u - 2 ** width : u;
}

function reject(r: BitReader, code: 'move_range' | 'move_no_base'): never {
    r.fail();
    throw new DecodeError(code);
}

/* Reads one record and moves `track`; returns the position in metres
 * (float32, as the C SDK holds it) and the yaw in radians. */
export function decodeVolatile(r: BitReader, track: VolatileTrack, config: VolatileConfig): VolatilePosition {
    const mode = r.read(1);
    if (r.failed) throw new DecodeError('move_truncated');
    let q: number[];
    let yawStep = track.yaw;
    if (mode === 0) {
        /* The whole record first: the reader's sticky failure lets one check
         * at the end cover every field. */
        const horizontal = HORIZONTAL_WIDTHS[r.read(2)];
        const dx = readSigned(r, horizontal);
        const dz = readSigned(r, horizontal);
        let dy = 0;
        if (r.readBool()) dy = readSigned(r, VERTICAL_WIDTHS[r.read(1)]);
        let smallTurn = false;
        let turn = 0;
        if (r.readBool()) {
            smallTurn = r.readBool();
            if (smallTurn) turn = readSigned(r, TURN_BITS);
            else yawStep = r.read(config.yawBits);
        }
        if (r.failed) throw new DecodeError('move_truncated');
        if (!track.valid) reject(r, 'move_no_base');
        if (smallTurn) {
            /* A small turn exists only where the encoder can write one. */
            if (config.yawSteps < 16) reject(r, 'move_range');
            const steps = config.yawSteps;
            yawStep = (((track.yaw + turn) % steps) + steps) % steps;
        }
        q = [track.x + dx, track.y + dy, track.z + dz];
    } else {
        q = [r.read(config.axisBits[0]), r.read(config.axisBits[1]), r.read(config.axisBits[2])];
        yawStep = r.read(config.yawBits);
        if (r.failed) throw new DecodeError('move_truncated');
    }
    for (let a = 0; a < 3; a++) if (q[a] < 0 || q[a] > config.units[a]) reject(r, 'move_range');
    if (yawStep >= config.yawSteps) reject(r, 'move_range');
    track.x = q[0];
    track.y = q[1];
    track.z = q[2];
    track.yaw = yawStep;
    track.valid = true;
    let angle = (yawStep * TWO_PI) / config.yawSteps;
    if (angle > TWO_PI / 2) angle -= TWO_PI;
    return {
        x: Math.fround(config.min[0] + q[0] * config.precision),
        y: Math.fround(config.min[1] + q[1] * config.precision),
        z: Math.fround(config.min[2] + q[2] * config.precision),
        yaw: Math.fround(angle),
    };
}

/* Reads one record without applying it (an entity the client does not know). */
export function skipVolatile(r: BitReader, config: VolatileConfig): void {
    const mode = r.read(1);
    if (r.failed) throw new DecodeError('move_truncated');
    if (mode === 0) {
        r.skip(2 * HORIZONTAL_WIDTHS[r.read(2)]);
        if (r.readBool()) r.skip(VERTICAL_WIDTHS[r.read(1)]);
        if (r.readBool()) {
            if (r.readBool()) r.skip(TURN_BITS);
            else r.read(config.yawBits);
        }
    } else {
        for (let a = 0; a < 3; a++) r.read(config.axisBits[a]);
        r.read(config.yawBits);
    }
    if (r.failed) throw new DecodeError('move_truncated');
}

/* ---- encoding (the server's side, for tests) ----------------------------- */

function quantizeAxis(config: VolatileConfig, axis: number, v: number): number {
    const d = Math.fround(v);
    if (!Number.isFinite(d) || d < config.min[axis] || d > config.max[axis]) return -1;
    /* llround: halves away from zero (the argument is never negative). */
    const q = Math.floor((d - config.min[axis]) / config.precision + 0.5);
    return Math.min(q, config.units[axis]);
}

function fits(d: number, width: number): boolean {
    if (width === 0) return d === 0;
    const half = 2 ** (width - 1);
    return d >= -half && d < half;
}

function writeSigned(w: BitWriter, d: number, width: number): void {
    if (width === 0) return;
    w.write(d < 0 ? d + 2 ** width : d, width);
}

/* Appends one record moving `track` to (x, y, z, yaw), as
 * volatile_codec_encode does: the delta form when shorter, else absolute.
 * Returns the bits written, or -1 (nothing written) for a position outside
 * the world or a number that is not finite. */
export function encodeVolatile(
    w: BitWriter,
    track: VolatileTrack,
    config: VolatileConfig,
    x: number,
    y: number,
    z: number,
    yaw: number,
): number {
    const qx = quantizeAxis(config, 0, x);
    const qy = quantizeAxis(config, 1, y);
    const qz = quantizeAxis(config, 2, z);
    const yaw32 = Math.fround(yaw);
    if (qx < 0 || qy < 0 || qz < 0 || !Number.isFinite(yaw32)) return -1;
    const steps = config.yawSteps;
    const turns = (yaw32 / TWO_PI) % 1;
    const scaled = turns * steps;
    let qyaw = (scaled < 0 ? -Math.floor(-scaled + 0.5) : Math.floor(scaled + 0.5)) % steps;
    if (qyaw < 0) qyaw += steps;

    const absoluteCost = 1 + config.axisBits[0] + config.axisBits[1] + config.axisBits[2] + config.yawBits;
    let deltaCost = Number.MAX_SAFE_INTEGER;
    let horizontal = 0;
    let vertical = 0;
    let smallTurn = false;
    let turn = 0;
    const dx = qx - track.x;
    const dy = qy - track.y;
    const dz = qz - track.z;
    const yawChanged = qyaw !== track.yaw;
    if (track.valid) {
        while (horizontal < 4 && !(fits(dx, HORIZONTAL_WIDTHS[horizontal]) && fits(dz, HORIZONTAL_WIDTHS[horizontal])))
            horizontal++;
        while (dy !== 0 && vertical < 2 && !fits(dy, VERTICAL_WIDTHS[vertical])) vertical++;
        turn = (qyaw - track.yaw) % steps;
        if (turn < -Math.floor(steps / 2)) turn += steps;
        if (turn >= steps - Math.floor(steps / 2)) turn -= steps;
        smallTurn = steps >= 16 && fits(turn, TURN_BITS);
        if (horizontal < 4 && vertical < 2)
            deltaCost =
                1 +
                2 +
                2 * HORIZONTAL_WIDTHS[horizontal] +
                1 +
                (dy !== 0 ? 1 + VERTICAL_WIDTHS[vertical] : 0) +
                1 +
                (yawChanged ? 1 + (smallTurn ? TURN_BITS : config.yawBits) : 0);
    }
    if (deltaCost < absoluteCost) {
        w.write(0, 1);
        w.write(horizontal, 2);
        writeSigned(w, dx, HORIZONTAL_WIDTHS[horizontal]);
        writeSigned(w, dz, HORIZONTAL_WIDTHS[horizontal]);
        w.writeBool(dy !== 0);
        if (dy !== 0) {
            w.write(vertical, 1);
            writeSigned(w, dy, VERTICAL_WIDTHS[vertical]);
        }
        w.writeBool(yawChanged);
        if (yawChanged) {
            w.writeBool(smallTurn);
            if (smallTurn) writeSigned(w, turn, TURN_BITS);
            else w.write(qyaw, config.yawBits);
        }
    } else {
        w.write(1, 1);
        w.write(qx, config.axisBits[0]);
        w.write(qy, config.axisBits[1]);
        w.write(qz, config.axisBits[2]);
        w.write(qyaw, config.yawBits);
    }
    track.x = qx;
    track.y = qy;
    track.z = qz;
    track.yaw = qyaw;
    track.valid = true;
    return Math.min(deltaCost, absoluteCost);
}
