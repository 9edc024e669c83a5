/* values.ts -- property values in JavaScript: how each type is held, the
 * class defaults, the checks a value must pass to be sent (entity_state.c's
 * setter rules), equality (what counts as a change), and the JSON view
 * common/entity_state_json.h documents. It does not know the wire
 * (property-codec.ts) or who sees what (definitions.ts).
 *
 * How a value of each type is held:
 *   int8..int32, uint8..uint32   number
 *   int64, uint64, entity        bigint (an entity id; 0n is "no entity")
 *   float, double                number (an unquantized float is a float32)
 *   bool                         boolean
 *   string                       string (valid UTF-8 on the wire, no NUL)
 *   bytes                        Uint8Array
 *   vector2, vector3             number[] of 2 or 3
 *   array                        Value[] of exactly `count`
 *   struct                       { field: Value } in declaration order
 */

import type { JsonValue, TypeDefinition } from './definitions.js';

export type Value = number | bigint | boolean | string | Uint8Array | Value[] | { [field: string]: Value };

/* The JSON view's values: entity_state_json.h's shape. */
export type JsonView = number | string | boolean | JsonView[] | { [field: string]: JsonView };

/* 2^53: integers above it in magnitude go to JSON as decimal strings. */
const EXACT_INT = 9007199254740992n;
const FLOAT_MAX = 3.4028234663852886e38;

export function isWideInteger(type: TypeDefinition): boolean {
    return type.kind === 'int64' || type.kind === 'uint64' || type.kind === 'entity';
}

function isInteger(type: TypeDefinition): boolean {
    return /^u?int(8|16|32|64)$/.test(type.kind);
}

/* A stored float or double: rounded to a float32 unless double or
 * quantized, -0 as 0 (entity_state__number). */
export function storedNumber(type: TypeDefinition, value: number): number {
    const v = !type.quantized && type.kind !== 'double' ? Math.fround(value) : value;
    return v === 0 ? 0 : v;
}

/* The value a normalised default (definitions.ts) stands for. */
export function valueFromDefault(type: TypeDefinition, json: JsonValue): Value {
    switch (type.kind) {
        case 'int8':
        case 'int16':
        case 'int32':
        case 'uint8':
        case 'uint16':
        case 'uint32':
            return json as number;
        case 'int64':
        case 'uint64':
            return BigInt(json as number);
        case 'entity':
            return 0n;
        case 'float':
        case 'double':
            return storedNumber(type, json as number);
        case 'vector2':
        case 'vector3':
            return (json as number[]).map((c) => storedNumber(type, c));
        case 'bool':
            return json as boolean;
        case 'string':
            return json as string;
        case 'bytes':
            return fromHex(json as string);
        case 'array':
            return (json as JsonValue[]).map((item) => valueFromDefault(type.element as TypeDefinition, item));
        case 'struct': {
            const object = json as { [field: string]: JsonValue };
            const out: { [field: string]: Value } = {};
            for (const field of type.structure!.fields) out[field.name] = valueFromDefault(field.type, object[field.name]);
            return out;
        }
    }
}

/* Whether two values of one type are the same (no change). */
export function valuesEqual(a: Value, b: Value): boolean {
    if (a instanceof Uint8Array && b instanceof Uint8Array) {
        if (a.length !== b.length) return false;
        for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
        return true;
    }
    if (Array.isArray(a) && Array.isArray(b)) {
        if (a.length !== b.length) return false;
        for (let i = 0; i < a.length; i++) if (!valuesEqual(a[i], b[i])) return false;
        return true;
    }
    if (typeof a === 'object' && typeof b === 'object') {
        const keys = Object.keys(a);
        if (keys.length !== Object.keys(b).length) return false;
        const x = a as { [field: string]: Value };
        const y = b as { [field: string]: Value };
        return keys.every((k) => k in y && valuesEqual(x[k], y[k]));
    }
    return a === b;
}

/* ---- the checks of a value to send --------------------------------------- */

/* Whether `text` encodes to UTF-8 at all (no lone surrogate) and holds no
 * NUL: what a string property may hold. */
function isSendableText(text: string): boolean {
    for (let i = 0; i < text.length; i++) {
        const c = text.charCodeAt(i);
        if (c === 0) return false;
        if (c >= 0xd800 && c <= 0xdbff) {
            const next = text.charCodeAt(i + 1);
            if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
            i++;
        } else if (c >= 0xdc00 && c <= 0xdfff) {
            return false;
        }
    }
    return true;
}

function describe(value: unknown): string {
    if (typeof value === 'string') return JSON.stringify(value.length > 40 ? value.slice(0, 40) + '...' : value);
    if (typeof value === 'bigint') return `${value}n`;
    if (value instanceof Uint8Array) return `${value.length} bytes`;
    if (Array.isArray(value)) return `an array of ${value.length}`;
    if (value === null) return 'null';
    if (typeof value === 'object') return 'an object';
    return String(value);
}

function checkNumber(type: TypeDefinition, value: unknown, path: string): number {
    if (typeof value !== 'number' || !Number.isFinite(value))
        throw new TypeError(`${path} must be a finite number, got ${describe(value)}`);
    if (type.quantized) {
        if (value < type.quantMin || value > type.quantMax)
            throw new RangeError(`${path} ${value} is outside [${type.quantMin}, ${type.quantMax}]`);
    } else if (type.kind !== 'double' && Math.abs(value) > FLOAT_MAX) {
        throw new RangeError(`${path} ${value} does not fit a float`);
    }
    return storedNumber(type, value);
}

/* Checks `value` against `type` as the C SDK's setters do and returns it as
 * it will be held (a float rounded to float32, an integer of a 64-bit kind
 * as a bigint). Throws a TypeError or RangeError naming `path`. */
export function checkValue(type: TypeDefinition, value: unknown, path: string): Value {
    if (isInteger(type) || type.kind === 'entity') {
        let big: bigint;
        if (typeof value === 'bigint') big = value;
        else if (typeof value === 'number' && Number.isSafeInteger(value)) big = BigInt(value);
        else throw new TypeError(`${path} must be an integer (a safe integer or a bigint), got ${describe(value)}`);
        const [low, high] = type.kind === 'entity' ? [0n, (1n << 64n) - 1n] : [type.intMin, type.intMax];
        if (big < low || big > high)
            throw new RangeError(`${path} ${big} is outside [${low}, ${high}] (${type.kind}, ${type.bits} bits)`);
        return isWideInteger(type) ? big : Number(big);
    }
    switch (type.kind) {
        case 'float':
        case 'double':
            return checkNumber(type, value, path);
        case 'vector2':
        case 'vector3': {
            const n = type.kind === 'vector2' ? 2 : 3;
            if (!Array.isArray(value) || value.length !== n)
                throw new TypeError(`${path} must be an array of ${n} numbers, got ${describe(value)}`);
            return value.map((c, i) => checkNumber(type, c, `${path}[${i}]`));
        }
        case 'bool':
            if (typeof value !== 'boolean') throw new TypeError(`${path} must be true or false, got ${describe(value)}`);
            return value;
        case 'string': {
            if (typeof value !== 'string') throw new TypeError(`${path} must be a string, got ${describe(value)}`);
            if (!isSendableText(value))
                throw new TypeError(`${path} must be text without NUL characters or lone surrogates`);
            const length = new TextEncoder().encode(value).length;
            if (length > type.maxLength)
                throw new RangeError(`${path} is ${length} bytes of UTF-8, more than max_length ${type.maxLength}`);
            return value;
        }
        case 'bytes': {
            if (!(value instanceof Uint8Array)) throw new TypeError(`${path} must be a Uint8Array, got ${describe(value)}`);
            if (value.length > type.maxLength)
                throw new RangeError(`${path} is ${value.length} bytes, more than max_length ${type.maxLength}`);
            return value.slice();
        }
        case 'array': {
            if (!Array.isArray(value) || value.length !== type.count)
                throw new TypeError(`${path} must be an array of exactly ${type.count} values, got ${describe(value)}`);
            return value.map((item, i) => checkValue(type.element!, item, `${path}[${i}]`));
        }
        case 'struct': {
            const structure = type.structure!;
            if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof Uint8Array)
                throw new TypeError(`${path} must be an object with the fields of ${structure.name}, got ${describe(value)}`);
            const given = value as { [field: string]: unknown };
            for (const key of Object.keys(given)) {
                if (!structure.fields.some((f) => f.name === key))
                    throw new TypeError(`${path}: struct ${structure.name} has no field '${key}'`);
            }
            const out: { [field: string]: Value } = {};
            for (const field of structure.fields) {
                if (!(field.name in given)) throw new TypeError(`${path}.${field.name} is missing`);
                out[field.name] = checkValue(field.type, given[field.name], `${path}.${field.name}`);
            }
            return out;
        }
        default:
            throw new TypeError(`${path}: type ${type.kind} has no values`);
    }
}

/* ---- the JSON view ------------------------------------------------------- */

export function toHexString(bytes: Uint8Array): string {
    let text = '';
    for (const byte of bytes) text += byte.toString(16).padStart(2, '0');
    return text;
}

export function fromHex(text: string): Uint8Array {
    const out = new Uint8Array(text.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
    return out;
}

/* An integer as entity_state_json writes it: a number, or a decimal string
 * when its magnitude is above 2^53. */
export function integerToJson(value: number | bigint): number | string {
    const big = BigInt(value);
    const magnitude = big < 0n ? -big : big;
    return magnitude > EXACT_INT ? big.toString() : Number(big);
}

/* A value in the JSON shape of entity_state_to_json. */
export function valueToJson(type: TypeDefinition, value: Value): JsonView {
    switch (type.kind) {
        case 'int8':
        case 'int16':
        case 'int32':
        case 'int64':
        case 'uint8':
        case 'uint16':
        case 'uint32':
        case 'uint64':
        case 'entity':
            return integerToJson(value as number | bigint);
        case 'float':
        case 'double':
        case 'bool':
        case 'string':
            return value as number | boolean | string;
        case 'bytes':
            return toHexString(value as Uint8Array);
        case 'vector2':
        case 'vector3':
            return (value as number[]).slice();
        case 'array':
            return (value as Value[]).map((item) => valueToJson(type.element!, item));
        case 'struct': {
            const object = value as { [field: string]: Value };
            const out: { [field: string]: JsonView } = {};
            for (const field of type.structure!.fields) out[field.name] = valueToJson(field.type, object[field.name]);
            return out;
        }
    }
}
