/* property-codec.ts -- property values and change lists on the bit stream,
 * bit for bit common/property_codec.c, with every check its decoder makes.
 * It owns the wire form of one value and of a change list; values as
 * JavaScript holds them are values.ts's, bits are bits.ts's.
 *
 * One value of a type (both ends know the type, so nothing describes it):
 *
 *   integers narrower than 32/64  (v - int_min) in `bits` bits (every
 *   bits (int8, int16, uint8,     pattern is a legal value)
 *   uint16, or a declared width)
 *   int32, int64 at full width    zigzag svar; range-checked
 *   uint32, uint64 at full width  uvar; range-checked
 *   float/double quantized        q = round((v - min) / precision), halves
 *                                 up, in `bits` bits; decoded as
 *                                 min + q * precision, at most max; a q
 *                                 above that of max is refused
 *   float, double                 IEEE 754, 32 / 64 bits (NaN and
 *                                 infinities refused)
 *   bool                          1 bit
 *   string, bytes                 length in bitsFor(max_length) bits, then
 *                                 the bytes; a string must be UTF-8
 *                                 without NUL
 *   vector2, vector3              each component as a float of the same
 *                                 quantization
 *   entity                        the 64-bit id
 *   array, struct                 each element / field in order
 *
 * A change list of a class with N properties: a count in bitsFor(N) bits
 * (at most N), then per entry its id in bitsFor(N - 1) bits, strictly
 * increasing, and its value.
 *
 * Decoding is all or nothing: a change list is read whole into a list of
 * (id, value) before anything is applied; any problem throws a DecodeError
 * and leaves the reader failed.
 */

import { BitReader, BitWriter, bitsFor } from './bits.js';
import type { ClassDefinition, TypeDefinition } from './definitions.js';
import { DecodeError } from './errors.js';
import type { Value } from './values.js';

/* One property's new value in a change list. */
export interface PropertyChange {
    id: number;
    value: Value;
}

/* Integers sent as variable-length: the 32- and 64-bit kinds at full width. */
function isVarint(type: TypeDefinition): boolean {
    switch (type.kind) {
        case 'int32':
        case 'uint32':
            return type.bits === 32;
        case 'int64':
        case 'uint64':
            return type.bits === 64;
        default:
            return false;
    }
}

/* round(steps), halves up, as an index of `bits` bits (clamped). */
function quantizedIndex(type: TypeDefinition, steps: number): bigint {
    const rounded = Math.floor(steps + 0.5);
    if (!(rounded > 0)) return 0n;
    if (rounded >= 2 ** type.bits) return (1n << BigInt(type.bits)) - 1n;
    return BigInt(rounded);
}

export function quantize(type: TypeDefinition, value: number): bigint {
    return quantizedIndex(type, (value - type.quantMin) / type.quantPrecision);
}

/* The largest index an encoder sends: that of quant_max. */
export function quantizeMax(type: TypeDefinition): bigint {
    return quantize(type, type.quantMax);
}

export function dequantize(type: TypeDefinition, index: bigint): number {
    const v = type.quantMin + Number(index) * type.quantPrecision;
    return v > type.quantMax ? type.quantMax : v;
}

/* ---- UTF-8, as entity_state__utf8_feed checks it --------------------------- */

/* An incremental check: continuation ranges exclude overlong forms (E0, F0),
 * surrogates (ED) and code points past U+10FFFF (F4); C0, C1 and F5..FF
 * never start a sequence; NUL is refused. */
class Utf8Check {
    private need = 0;
    private low = 0x80;
    private high = 0xbf;

    feed(bytes: Uint8Array): boolean {
        for (const c of bytes) {
            if (this.need !== 0) {
                if (c < this.low || c > this.high) return false;
                this.need--;
                this.low = 0x80;
                this.high = 0xbf;
                continue;
            }
            if (c < 0x80) {
                if (c === 0) return false;
                continue;
            }
            if (c < 0xc2 || c > 0xf4) return false;
            this.low = 0x80;
            this.high = 0xbf;
            if (c < 0xe0) {
                this.need = 1;
            } else if (c < 0xf0) {
                this.need = 2;
                if (c === 0xe0) this.low = 0xa0;
                else if (c === 0xed) this.high = 0x9f;
            } else {
                this.need = 3;
                if (c === 0xf0) this.low = 0x90;
                else if (c === 0xf4) this.high = 0x8f;
            }
        }
        return true;
    }

    get complete(): boolean {
        return this.need === 0;
    }
}

/* Strings are read and checked in chunks of this many bytes, as the C
 * decoder does, so that a truncation and a bad byte are told apart in the
 * same order. */
const CHUNK_BYTES = 256;

const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/* ---- decoding ------------------------------------------------------------ */

function truncated(): never {
    throw new DecodeError('value_truncated');
}

function readReal(r: BitReader, type: TypeDefinition): number {
    let v: number;
    if (type.quantized) {
        const q = r.readBig(type.bits);
        if (r.failed) truncated();
        if (q > quantizeMax(type)) throw new DecodeError('range');
        v = dequantize(type, q);
    } else if (type.kind === 'double') {
        v = r.readDouble();
        if (r.failed) truncated();
    } else {
        v = r.readFloat();
        if (r.failed) truncated();
    }
    if (!Number.isFinite(v)) throw new DecodeError('range');
    return v === 0 ? 0 : v; /* -0 is held as 0, as the setters do */
}

function readBlob(r: BitReader, type: TypeDefinition): Value {
    const length = r.read(bitsFor(type.maxLength));
    if (r.failed) truncated();
    if (length > type.maxLength) throw new DecodeError('range');
    if (type.kind === 'bytes') {
        const bytes = r.readBytes(length);
        if (bytes === null) truncated();
        return bytes;
    }
    const check = new Utf8Check();
    const text = new Uint8Array(length);
    for (let done = 0; done < length; ) {
        const n = Math.min(length - done, CHUNK_BYTES);
        const chunk = r.readBytes(n);
        if (chunk === null) truncated();
        if (!check.feed(chunk)) throw new DecodeError('invalid');
        text.set(chunk, done);
        done += n;
    }
    if (!check.complete) throw new DecodeError('invalid');
    return utf8Decoder.decode(text);
}

function readValue(r: BitReader, type: TypeDefinition): Value {
    switch (type.kind) {
        case 'int8':
        case 'int16':
        case 'int32':
        case 'int64': {
            let v: bigint;
            if (isVarint(type)) {
                v = r.readSvar();
                if (r.failed) truncated();
                if (v < type.intMin || v > type.intMax) throw new DecodeError('range');
            } else {
                const raw = r.readBig(type.bits);
                if (r.failed) truncated();
                v = raw + type.intMin;
            }
            return type.kind === 'int64' ? v : Number(v);
        }
        case 'uint8':
        case 'uint16':
        case 'uint32':
        case 'uint64': {
            let v: bigint;
            if (isVarint(type)) {
                v = r.readUvar();
                if (r.failed) truncated();
                if (v > type.intMax) throw new DecodeError('range');
            } else {
                v = r.readBig(type.bits);
                if (r.failed) truncated();
            }
            return type.kind === 'uint64' ? v : Number(v);
        }
        case 'float':
        case 'double':
            return readReal(r, type);
        case 'bool': {
            const v = r.readBool();
            if (r.failed) truncated();
            return v;
        }
        case 'string':
        case 'bytes':
            return readBlob(r, type);
        case 'vector2':
        case 'vector3': {
            const n = type.kind === 'vector2' ? 2 : 3;
            const v: number[] = [];
            for (let i = 0; i < n; i++) v.push(readReal(r, type));
            return v;
        }
        case 'entity': {
            const v = r.readBig(64);
            if (r.failed) truncated();
            return v;
        }
        case 'array': {
            const v: Value[] = [];
            for (let i = 0; i < type.count; i++) v.push(readValue(r, type.element!));
            return v;
        }
        case 'struct': {
            const v: { [field: string]: Value } = {};
            for (const field of type.structure!.fields) v[field.name] = readValue(r, field.type);
            return v;
        }
    }
}

/* Reads one value of `type` with every check (property_codec_check). Throws
 * a DecodeError and leaves the reader failed on any problem. */
export function decodeValue(r: BitReader, type: TypeDefinition): Value {
    try {
        return readValue(r, type);
    } catch (error) {
        r.fail();
        throw error;
    }
}

/* Reads a change list of `cls` whose ids must lie in `accept` (null: any
 * property of the class), all or nothing. */
export function decodeChangeList(
    r: BitReader,
    cls: ClassDefinition,
    accept: ReadonlySet<number> | null,
): PropertyChange[] {
    try {
        const n = cls.properties.length;
        const count = r.read(bitsFor(n));
        if (r.failed) truncated();
        if (count > n) throw new DecodeError('malformed_change_list');
        const idBits = n > 0 ? bitsFor(n - 1) : 0;
        const changes: PropertyChange[] = [];
        let previous = -1;
        for (let i = 0; i < count; i++) {
            const id = r.read(idBits);
            if (r.failed) truncated();
            if (id >= n || (accept !== null && !accept.has(id))) throw new DecodeError('unexpected_property');
            if (id <= previous) throw new DecodeError('malformed_change_list');
            previous = id;
            changes.push({ id, value: readValue(r, cls.properties[id].type) });
        }
        return changes;
    } catch (error) {
        r.fail();
        throw error;
    }
}

/* ---- encoding ------------------------------------------------------------ */

function writeReal(w: BitWriter, type: TypeDefinition, v: number): void {
    if (type.quantized) w.write(quantize(type, v), type.bits);
    else if (type.kind === 'double') w.writeDouble(v);
    else w.writeFloat(v);
}

/* Appends a value of `type` that passed values.ts's checkValue (an
 * unchecked value may throw a RangeError half-way). */
export function encodeValue(w: BitWriter, type: TypeDefinition, value: Value): void {
    switch (type.kind) {
        case 'int8':
        case 'int16':
        case 'int32':
        case 'int64':
            if (isVarint(type)) w.writeSvar(value as number | bigint);
            else w.write(BigInt(value as number | bigint) - type.intMin, type.bits);
            return;
        case 'uint8':
        case 'uint16':
        case 'uint32':
        case 'uint64':
            if (isVarint(type)) w.writeUvar(value as number | bigint);
            else w.write(value as number | bigint, type.bits);
            return;
        case 'float':
        case 'double':
            writeReal(w, type, value as number);
            return;
        case 'bool':
            w.writeBool(value as boolean);
            return;
        case 'string':
        case 'bytes': {
            const bytes = type.kind === 'string' ? new TextEncoder().encode(value as string) : (value as Uint8Array);
            w.write(bytes.length, bitsFor(type.maxLength));
            w.writeBytes(bytes);
            return;
        }
        case 'vector2':
        case 'vector3':
            for (const component of value as number[]) writeReal(w, type, component);
            return;
        case 'entity':
            w.write(value as bigint, 64);
            return;
        case 'array':
            for (const item of value as Value[]) encodeValue(w, type.element!, item);
            return;
        case 'struct': {
            const object = value as { [field: string]: Value };
            for (const field of type.structure!.fields) encodeValue(w, field.type, object[field.name]);
            return;
        }
    }
}

/* Appends a change list of `cls` carrying `values[id]` for each id in
 * `ids` (sorted here). */
export function encodeChangeList(w: BitWriter, cls: ClassDefinition, values: readonly Value[], ids: Iterable<number>): void {
    const n = cls.properties.length;
    const sorted = [...ids].sort((a, b) => a - b);
    for (const id of sorted) if (id < 0 || id >= n) throw new RangeError(`${cls.name} has no property ${id}`);
    w.write(sorted.length, bitsFor(n));
    const idBits = n > 0 ? bitsFor(n - 1) : 0;
    for (const id of sorted) {
        w.write(id, idBits);
        encodeValue(w, cls.properties[id].type, values[id]);
    }
}
