/* definitions.ts -- the game's entity definitions as the login reply sends
 * them (entity_def_registry_describe's JSON): classes with typed properties,
 * base/cell/client methods, struct types and game events, loaded with every
 * check common/entity_def.c makes, their digest, and the audience masks
 * replication_schema_create computes. It owns what exists and who may see
 * it; values, their wire form and their JSON view live in values.ts and
 * property-codec.ts.
 *
 * The document (demo/entities/README.md has a full example):
 *
 *   { "format": 1, "types": [STRUCT...], "entities": [CLASS...], "events": [EVENT...] }
 *
 * Class ids are the order of "entities" (over several documents: document
 * order, then declaration order); property ids the order of "properties";
 * method ids the order within each part; event ids the order of "events".
 * Structs are sorted by name. Loading is all or nothing: any problem throws
 * a DefinitionsError naming the document, the place and the problem.
 *
 * One difference from cJSON: JSON.parse keeps the last of a key given twice,
 * so a duplicate key is not seen here (the server's description never has
 * one).
 */

import { bitsFor } from './bits.js';
import { blake2b, toHex } from './blake2b.js';
import { DefinitionsError } from './errors.js';

/* Value kinds, in the order of their numbers (part of the digest). */
export const KINDS = [
    'int8',
    'int16',
    'int32',
    'int64',
    'uint8',
    'uint16',
    'uint32',
    'uint64',
    'float',
    'double',
    'bool',
    'string',
    'bytes',
    'vector2',
    'vector3',
    'entity',
    'array',
    'struct',
] as const;
export type Kind = (typeof KINDS)[number];

/* The KBEngine property flags, in the order of their numbers. */
export const FLAGS = [
    'BASE',
    'BASE_AND_CLIENT',
    'CELL_PRIVATE',
    'CELL_PUBLIC',
    'CELL_PUBLIC_AND_OWN',
    'ALL_CLIENTS',
    'OWN_CLIENT',
    'OTHER_CLIENTS',
] as const;
export type Flag = (typeof FLAGS)[number];

export const DETAILS = ['near', 'medium', 'far'] as const;
export type Detail = (typeof DETAILS)[number];

export const PARTS = ['base', 'cell', 'client'] as const;
export type MethodPart = (typeof PARTS)[number];

/* Names are identifiers of at most 63 bytes. */
const NAME_MAX = 63;
/* Properties per class, methods per part, fields per struct, arguments. */
const MAX_MEMBERS = 256;
const MAX_EVENTS = 4096;
const MAX_LENGTH = 65535;
const MAX_ARRAY = 1024;
/* Scalars in one value once arrays and structs are flattened. */
const MAX_VALUES = 4096;
const MAX_CLASSES = 65535;
/* 2^53: integer defaults are limited to magnitudes where doubles are exact. */
const EXACT_INT = 9007199254740992;
const FLOAT_MAX = 3.4028234663852886e38;

/* A default value, normalised as entity_def.c does: integers and floats as
 * numbers, bool a boolean, string a string, bytes lowercase hex, vectors
 * arrays, entity 0, arrays of exactly `count` values, structs objects with
 * every field in declaration order. */
export type JsonValue = number | string | boolean | JsonValue[] | { [field: string]: JsonValue };

type Group = 'int' | 'real' | 'sized' | 'array' | 'plain' | 'struct';

interface KindInfo {
    group: Group;
    bits: number; /* natural bits of one value or component */
    components: number; /* numbers and vectors: 1, 2 or 3; others 0 */
    signed: boolean;
    maxQuantBits: number;
}

const KIND_INFO: Record<Kind, KindInfo> = {
    int8: { group: 'int', bits: 8, components: 1, signed: true, maxQuantBits: 0 },
    int16: { group: 'int', bits: 16, components: 1, signed: true, maxQuantBits: 0 },
    int32: { group: 'int', bits: 32, components: 1, signed: true, maxQuantBits: 0 },
    int64: { group: 'int', bits: 64, components: 1, signed: true, maxQuantBits: 0 },
    uint8: { group: 'int', bits: 8, components: 1, signed: false, maxQuantBits: 0 },
    uint16: { group: 'int', bits: 16, components: 1, signed: false, maxQuantBits: 0 },
    uint32: { group: 'int', bits: 32, components: 1, signed: false, maxQuantBits: 0 },
    uint64: { group: 'int', bits: 64, components: 1, signed: false, maxQuantBits: 0 },
    /* Quantizing a float to more than 32 bits would cost more than the float. */
    float: { group: 'real', bits: 32, components: 1, signed: true, maxQuantBits: 32 },
    double: { group: 'real', bits: 64, components: 1, signed: true, maxQuantBits: 64 },
    bool: { group: 'plain', bits: 1, components: 0, signed: false, maxQuantBits: 0 },
    string: { group: 'sized', bits: 0, components: 0, signed: false, maxQuantBits: 0 },
    bytes: { group: 'sized', bits: 0, components: 0, signed: false, maxQuantBits: 0 },
    vector2: { group: 'real', bits: 32, components: 2, signed: true, maxQuantBits: 32 },
    vector3: { group: 'real', bits: 32, components: 3, signed: true, maxQuantBits: 32 },
    entity: { group: 'plain', bits: 64, components: 0, signed: false, maxQuantBits: 0 },
    array: { group: 'array', bits: 0, components: 0, signed: false, maxQuantBits: 0 },
    struct: { group: 'struct', bits: 0, components: 0, signed: false, maxQuantBits: 0 },
};

const GROUP_KEYS: Record<Group, readonly string[]> = {
    int: ['bits'],
    real: ['quantize'],
    sized: ['max_length'],
    array: ['element', 'count'],
    plain: [],
    struct: [],
};
const ALL_TYPE_KEYS = ['bits', 'quantize', 'max_length', 'element', 'count'];

const DOCUMENT_KEYS = ['format', 'types', 'entities', 'events'];
const STRUCT_KEYS = ['name', 'fields'];
const FIELD_KEYS = ['name', 'type', 'default'];
const CLASS_KEYS = ['name', 'properties', 'base_methods', 'cell_methods', 'client_methods'];
const PROPERTY_KEYS = ['name', 'type', 'flags', 'persistent', 'detail', 'default'];
const METHOD_KEYS = ['name', 'exposed', 'args'];
const CLIENT_METHOD_KEYS = ['name', 'args'];
const ARG_KEYS = ['name', 'type'];
const ELEMENT_KEYS = ['type'];
const QUANTIZE_KEYS = ['min', 'max', 'precision'];
const PART_SECTIONS: Record<MethodPart, string> = {
    base: 'base_methods',
    cell: 'cell_methods',
    client: 'client_methods',
};

/* Who holds and receives a property with each flag (entity_def.h). */
export interface Audience {
    onBase: boolean;
    onCell: boolean;
    toGhosts: boolean;
    toOwnClient: boolean;
    toOtherClients: boolean;
}

const FLAG_AUDIENCE: Record<Flag, Audience> = {
    BASE: { onBase: true, onCell: false, toGhosts: false, toOwnClient: false, toOtherClients: false },
    BASE_AND_CLIENT: { onBase: true, onCell: false, toGhosts: false, toOwnClient: true, toOtherClients: false },
    CELL_PRIVATE: { onBase: false, onCell: true, toGhosts: false, toOwnClient: false, toOtherClients: false },
    CELL_PUBLIC: { onBase: false, onCell: true, toGhosts: true, toOwnClient: false, toOtherClients: false },
    CELL_PUBLIC_AND_OWN: { onBase: false, onCell: true, toGhosts: true, toOwnClient: true, toOtherClients: false },
    ALL_CLIENTS: { onBase: false, onCell: true, toGhosts: true, toOwnClient: true, toOtherClients: true },
    OWN_CLIENT: { onBase: false, onCell: true, toGhosts: false, toOwnClient: true, toOtherClients: false },
    OTHER_CLIENTS: { onBase: false, onCell: true, toGhosts: true, toOwnClient: false, toOtherClients: true },
};

/* The type of one value. Only the fields of its kind mean anything. */
export interface TypeDefinition {
    kind: Kind;
    /* Bits of one packed value (per component for vectors): integers the
     * declared width, else the natural one; float/double/vectors the
     * quantized bit count, else 32 (64 for double); bool 1; entity 64;
     * string, bytes, array, struct 0. */
    bits: number;
    /* Integers: the legal range, both ends inclusive. */
    intMin: bigint;
    intMax: bigint;
    quantized: boolean;
    quantMin: number;
    quantMax: number;
    quantPrecision: number;
    valueCount: number; /* scalars once arrays and structs are flattened */
    maxLength: number; /* string, bytes */
    count: number; /* array */
    element: TypeDefinition | null; /* array */
    structure: StructDefinition | null; /* struct */
}

export interface FieldDefinition {
    name: string;
    type: TypeDefinition;
    defaultValue: JsonValue;
}

export interface StructDefinition {
    name: string;
    index: number; /* in the sorted struct list */
    fields: FieldDefinition[];
    valueCount: number;
}

export interface PropertyDefinition {
    name: string;
    id: number;
    type: TypeDefinition;
    flags: Flag;
    audience: Audience;
    persistent: boolean;
    detail: Detail;
    defaultValue: JsonValue;
}

export interface ArgumentDefinition {
    name: string;
    type: TypeDefinition;
}

export interface MethodDefinition {
    name: string;
    id: number; /* within its part (for events: within the events) */
    part: MethodPart;
    exposed: boolean;
    args: ArgumentDefinition[];
}

/* The property ids each audience receives (replication_schema_create). */
export interface AudienceMasks {
    own: ReadonlySet<number>; /* on the cell and sent to the owner's client */
    othersNear: ReadonlySet<number>; /* other clients, every detail level */
    othersMedium: ReadonlySet<number>;
    othersFar: ReadonlySet<number>;
    ghosts: ReadonlySet<number>;
    /* BASE_AND_CLIENT: what BaseProperties may carry (the C SDK's base mask). */
    baseToClient: ReadonlySet<number>;
}

export interface ClassDefinition {
    name: string;
    id: number;
    source: string;
    properties: PropertyDefinition[];
    methods: Record<MethodPart, MethodDefinition[]>;
    masks: AudienceMasks;
}

export class Definitions {
    readonly classes: readonly ClassDefinition[];
    readonly structs: readonly StructDefinition[];
    readonly events: readonly MethodDefinition[];
    /* 64 lowercase hex digits: BLAKE2b-256 of the canonical form. */
    readonly digest: string;
    /* Bits of a class id in an ENTER record. */
    readonly classBits: number;

    constructor(
        classes: ClassDefinition[],
        structs: StructDefinition[],
        events: MethodDefinition[],
        digest: string,
    ) {
        this.classes = classes;
        this.structs = structs;
        this.events = events;
        this.digest = digest;
        this.classBits = classes.length > 0 ? bitsFor(classes.length - 1) : 0;
    }

    findClass(name: string): ClassDefinition | undefined {
        return this.classes.find((c) => c.name === name);
    }

    findStruct(name: string): StructDefinition | undefined {
        return this.structs.find((s) => s.name === name);
    }

    findEvent(name: string): MethodDefinition | undefined {
        return this.events.find((e) => e.name === name);
    }
}

export function findProperty(cls: ClassDefinition, name: string): PropertyDefinition | undefined {
    return cls.properties.find((p) => p.name === name);
}

export function findMethod(cls: ClassDefinition, part: MethodPart, name: string): MethodDefinition | undefined {
    return cls.methods[part].find((m) => m.name === name);
}

/* Bits needed for a value of [min, max] at `precision`:
 * ceil(log2((max - min) / precision + 1)), the division's rounding forgiven
 * within 1e-12 relative; -1 when impossible or over 64 bits
 * (entity_def_quantization_bits). */
export function quantizationBits(min: number, max: number, precision: number): number {
    if (!Number.isFinite(min) || !Number.isFinite(max) || !Number.isFinite(precision)) return -1;
    if (!(max > min) || !(precision > 0)) return -1;
    let steps = (max - min) / precision;
    if (!Number.isFinite(steps)) return -1;
    /* 0.3 / 0.1 is 2.9999999999999996: this close to a whole number is it. */
    const nearest = Math.round(steps);
    if (Math.abs(steps - nearest) <= 1e-12 * Math.max(1, nearest)) steps = nearest;
    const levels = Math.ceil(steps) + 1;
    for (let bits = 1; bits <= 64; bits++) {
        if (2 ** bits >= levels) return bits;
    }
    return -1;
}

/* ---- loading ------------------------------------------------------------- */

type JsonObject = { [key: string]: unknown };

function isObject(value: unknown): value is JsonObject {
    return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describeJson(value: unknown): string {
    if (typeof value === 'number') return String(value);
    if (typeof value === 'string') return 'a string';
    if (typeof value === 'boolean') return String(value);
    if (value === null) return 'null';
    if (Array.isArray(value)) return 'an array';
    return 'an object';
}

function isIdentifier(name: string): boolean {
    return name.length <= NAME_MAX && /^[A-Za-z_][A-Za-z0-9_]*$/.test(name);
}

function jsonInteger(value: unknown, low: number, high: number): number | null {
    if (typeof value !== 'number' || !Number.isFinite(value)) return null;
    if (value !== Math.floor(value) || value < low || value > high) return null;
    return value;
}

function utf8Length(text: string): number {
    return new TextEncoder().encode(text).length;
}

/* The value nearest zero a number of this type may hold. */
function zeroNumber(type: TypeDefinition): number {
    if (!type.quantized) return 0;
    if (type.quantMin > 0) return type.quantMin;
    if (type.quantMax < 0) return type.quantMax;
    return 0;
}

/* The implied default of a type (entity_def__zero). */
export function zeroValue(type: TypeDefinition): JsonValue {
    const info = KIND_INFO[type.kind];
    switch (info.group) {
        case 'int':
            return 0;
        case 'real': {
            const zero = zeroNumber(type);
            if (info.components === 1) return zero;
            return Array.from({ length: info.components }, () => zero);
        }
        case 'sized':
            return '';
        case 'array':
            return Array.from({ length: type.count }, () => zeroValue(type.element as TypeDefinition));
        case 'plain':
            return type.kind === 'bool' ? false : 0;
        case 'struct': {
            const object: { [field: string]: JsonValue } = {};
            for (const field of (type.structure as StructDefinition).fields)
                object[field.name] = structuredClone(field.defaultValue);
            return object;
        }
    }
}

interface Declaration {
    json: JsonObject;
    source: string;
    name: string;
    order: number;
    state: 'unresolved' | 'resolving' | 'resolved';
}

class Loader {
    private readonly structs: StructDefinition[] = [];
    private readonly declarations: Declaration[] = [];
    private readonly stack: number[] = [];

    private fail(source: string, where: string | null, problem: string): never {
        throw new DefinitionsError(where ? `${source}: ${where}: ${problem}` : `${source}: ${problem}`);
    }

    /* Every key of `object` must be in `keys` or `typeKeys`. */
    private checkKeys(
        source: string,
        where: string | null,
        object: JsonObject,
        keys: readonly string[],
        typeKeys: readonly string[] = [],
        typeName: string | null = null,
    ): void {
        for (const key of Object.keys(object)) {
            if (keys.includes(key) || typeKeys.includes(key)) continue;
            if (typeName !== null && ALL_TYPE_KEYS.includes(key))
                this.fail(source, where, `key '${key}' does not apply to type ${typeName}`);
            this.fail(source, where, `unknown key '${key.slice(0, 80)}'`);
        }
    }

    private name(source: string, where: string, object: JsonObject): string {
        const item = object.name;
        if (item === undefined) this.fail(source, where, "missing 'name'");
        if (typeof item !== 'string') this.fail(source, where, "'name' must be a string");
        if (!isIdentifier(item))
            this.fail(
                source,
                where,
                `name '${item.slice(0, 80)}' is not an identifier (a letter or '_', then letters, digits or '_'; at most ${NAME_MAX} bytes)`,
            );
        return item;
    }

    /* An optional member that must be an array of objects, at most `max`. */
    private objectArray(
        source: string,
        where: string | null,
        object: JsonObject,
        key: string,
        max: number,
    ): JsonObject[] | null {
        const item = object[key];
        if (item === undefined) return null;
        if (!Array.isArray(item)) this.fail(source, where, `'${key}' must be an array of objects`);
        item.forEach((child, n) => {
            if (!isObject(child)) this.fail(source, where, `'${key}'[${n}] must be an object`);
        });
        if (item.length > max) this.fail(source, where, `'${key}' has ${item.length} entries, more than ${max}`);
        return item as JsonObject[];
    }

    /* ---- values ---- */

    private makeReal(source: string, where: string, path: string, type: TypeDefinition, json: unknown): number {
        if (typeof json !== 'number' || !Number.isFinite(json))
            this.fail(source, where, `${path} must be a finite number, got ${describeJson(json)}`);
        if (type.kind !== 'double' && Math.abs(json) > FLOAT_MAX)
            this.fail(source, where, `${path} ${json} does not fit a float`);
        if (type.quantized && (json < type.quantMin || json > type.quantMax))
            this.fail(
                source,
                where,
                `${path} ${json} is outside the quantization range [${type.quantMin}, ${type.quantMax}]`,
            );
        return json === 0 ? 0 : json;
    }

    /* Checks `json` against `type` and returns its normalised copy;
     * undefined means the implied default. */
    private makeValue(source: string, where: string, path: string, type: TypeDefinition, json: unknown): JsonValue {
        const info = KIND_INFO[type.kind];
        if (json === undefined) return zeroValue(type);
        const got = describeJson(json);
        switch (info.group) {
            case 'int': {
                const value = jsonInteger(json, -EXACT_INT, EXACT_INT);
                if (value === null)
                    this.fail(source, where, `${path} must be an integer (at most 2^53 in magnitude), got ${got}`);
                const low = Math.max(Number(type.intMin), -EXACT_INT);
                const high = Math.min(Number(type.intMax), EXACT_INT);
                if (value < low || value > high)
                    this.fail(
                        source,
                        where,
                        `${path} ${got} is outside [${type.intMin}, ${type.intMax}] (${type.kind}, ${type.bits} bits)`,
                    );
                return value;
            }
            case 'real': {
                if (info.components === 1) return this.makeReal(source, where, path, type, json);
                if (!Array.isArray(json) || json.length !== info.components)
                    this.fail(source, where, `${path} must be an array of ${info.components} numbers, got ${got}`);
                return json.map((item, i) => this.makeReal(source, where, `${path}[${i}]`, type, item));
            }
            case 'sized': {
                if (typeof json !== 'string')
                    this.fail(
                        source,
                        where,
                        `${path} must be a string${type.kind === 'bytes' ? ' of hex digits' : ''}, got ${got}`,
                    );
                if (type.kind === 'string') {
                    const length = utf8Length(json);
                    if (length > type.maxLength)
                        this.fail(
                            source,
                            where,
                            `${path} is ${length} bytes long, more than max_length ${type.maxLength}`,
                        );
                    return json;
                }
                if (json.length % 2 !== 0) this.fail(source, where, `${path} must be an even number of hex digits`);
                if (json.length / 2 > type.maxLength)
                    this.fail(
                        source,
                        where,
                        `${path} is ${json.length / 2} bytes long, more than max_length ${type.maxLength}`,
                    );
                for (let i = 0; i < json.length; i++) {
                    if (!/[0-9a-fA-F]/.test(json[i]))
                        this.fail(source, where, `${path} must be hex digits, got '${json[i]}' at offset ${i}`);
                }
                return json.toLowerCase();
            }
            case 'array': {
                if (!Array.isArray(json) || json.length !== type.count)
                    this.fail(source, where, `${path} must be an array of exactly ${type.count} values, got ${got}`);
                return json.map((item, i) =>
                    this.makeValue(source, where, `${path}[${i}]`, type.element as TypeDefinition, item),
                );
            }
            case 'plain':
                if (type.kind === 'bool') {
                    if (typeof json !== 'boolean') this.fail(source, where, `${path} must be true or false, got ${got}`);
                    return json;
                }
                if (json !== 0)
                    this.fail(
                        source,
                        where,
                        `${path} must be 0 (no entity): entity ids are allocated at run time, got ${got}`,
                    );
                return 0;
            case 'struct': {
                const structure = type.structure as StructDefinition;
                if (!isObject(json))
                    this.fail(
                        source,
                        where,
                        `${path} must be an object with fields of struct ${structure.name}, got ${got}`,
                    );
                for (const key of Object.keys(json)) {
                    if (!structure.fields.some((f) => f.name === key))
                        this.fail(source, where, `${path}: struct ${structure.name} has no field '${key.slice(0, 80)}'`);
                }
                const object: { [field: string]: JsonValue } = {};
                for (const field of structure.fields) {
                    const given = json[field.name];
                    object[field.name] =
                        given === undefined
                            ? structuredClone(field.defaultValue)
                            : this.makeValue(source, where, `${path}.${field.name}`, field.type, given);
                }
                return object;
            }
        }
    }

    /* ---- types ---- */

    private parseQuantize(source: string, where: string, q: unknown, kind: Kind, out: TypeDefinition): void {
        const info = KIND_INFO[kind];
        if (!isObject(q)) this.fail(source, where, `'quantize' must be an object {"min", "max", "precision"}`);
        this.checkKeys(source, where, q, QUANTIZE_KEYS);
        const values: number[] = [];
        for (const key of QUANTIZE_KEYS) {
            const item = q[key];
            if (item === undefined) this.fail(source, where, `quantize needs '${key}'`);
            if (typeof item !== 'number' || !Number.isFinite(item))
                this.fail(source, where, `quantize.${key} must be a finite number`);
            if (info.bits === 32 && Math.abs(item) > FLOAT_MAX)
                this.fail(source, where, `quantize.${key} does not fit a float`);
            values.push(item);
        }
        const [min, max, precision] = values;
        if (!(max > min)) this.fail(source, where, `quantize.max (${max}) must be greater than quantize.min (${min})`);
        if (!(precision > 0)) this.fail(source, where, `quantize.precision (${precision}) must be greater than 0`);
        const bits = quantizationBits(min, max, precision);
        if (bits < 0 || bits > info.maxQuantBits)
            this.fail(
                source,
                where,
                `quantization [${min}, ${max}] at ${precision} needs more than ${info.maxQuantBits} bits for ${kind}`,
            );
        out.quantized = true;
        out.quantMin = min;
        out.quantMax = max;
        out.quantPrecision = precision;
        out.bits = bits;
    }

    /* A type from `spec`: an object with "type" and the type's own keys
     * next to the context's `keys`, or (array elements) a bare name. */
    private parseType(source: string, where: string, spec: unknown, keys: readonly string[]): TypeDefinition {
        let object: JsonObject | null = null;
        let typeName: string;
        if (typeof spec === 'string') {
            typeName = spec;
        } else if (isObject(spec)) {
            object = spec;
            const item = object.type;
            if (item === undefined) this.fail(source, where, "missing 'type'");
            if (typeof item !== 'string') this.fail(source, where, "'type' must be a string (a type name)");
            typeName = item;
        } else {
            this.fail(source, where, "a type must be a type name or an object with 'type'");
        }
        let kind: Kind;
        let structure: StructDefinition | undefined;
        if ((KINDS as readonly string[]).includes(typeName) && typeName !== 'struct') {
            kind = typeName as Kind;
        } else {
            structure = this.structs.find((s) => s.name === typeName);
            if (!structure)
                this.fail(
                    source,
                    where,
                    `unknown type '${typeName.slice(0, 80)}' (not a built-in type or a struct declared in "types")`,
                );
            kind = 'struct';
        }
        const info = KIND_INFO[kind];
        const type: TypeDefinition = {
            kind,
            bits: info.bits,
            intMin: 0n,
            intMax: 0n,
            quantized: false,
            quantMin: 0,
            quantMax: 0,
            quantPrecision: 0,
            valueCount: 1,
            maxLength: 0,
            count: 0,
            element: null,
            structure: null,
        };
        if (object !== null) this.checkKeys(source, where, object, keys, GROUP_KEYS[info.group], typeName);
        const member = (key: string): unknown => (object !== null ? object[key] : undefined);
        switch (info.group) {
            case 'int': {
                const item = member('bits');
                if (item !== undefined) {
                    const bits = jsonInteger(item, 1, 64);
                    if (bits === null) this.fail(source, where, 'bit width must be an integer from 1 to 64');
                    if (bits > info.bits) this.fail(source, where, `bit width ${bits} does not fit type ${kind}`);
                    type.bits = bits;
                }
                const b = BigInt(type.bits);
                if (info.signed) {
                    type.intMin = -(1n << (b - 1n));
                    type.intMax = (1n << (b - 1n)) - 1n;
                } else {
                    type.intMin = 0n;
                    type.intMax = (1n << b) - 1n;
                }
                return type;
            }
            case 'real': {
                const item = member('quantize');
                if (item !== undefined) this.parseQuantize(source, where, item, kind, type);
                return type;
            }
            case 'sized': {
                const item = member('max_length');
                if (item === undefined)
                    this.fail(source, where, `type ${kind} needs 'max_length' (1 to ${MAX_LENGTH})`);
                const length = jsonInteger(item, 1, MAX_LENGTH);
                if (length === null) this.fail(source, where, `max_length must be an integer from 1 to ${MAX_LENGTH}`);
                type.maxLength = length;
                return type;
            }
            case 'array': {
                const element = member('element');
                const count = member('count');
                if (element === undefined || count === undefined)
                    this.fail(source, where, "an array needs 'element' and 'count'");
                const n = jsonInteger(count, 1, MAX_ARRAY);
                if (n === null) this.fail(source, where, `count must be an integer from 1 to ${MAX_ARRAY}`);
                type.count = n;
                type.element = this.parseType(source, `${where}[]`, element, ELEMENT_KEYS);
                const values = n * type.element.valueCount;
                if (values > MAX_VALUES)
                    this.fail(
                        source,
                        where,
                        `the array holds ${values} values when flattened, more than ${MAX_VALUES}`,
                    );
                type.valueCount = values;
                return type;
            }
            case 'plain':
                return type;
            case 'struct': {
                const found = structure as StructDefinition;
                const declaration = this.declarations[found.index];
                if (declaration.state === 'resolving') {
                    const first = this.stack.indexOf(found.index);
                    const chain = this.stack
                        .slice(first)
                        .map((i) => this.structs[i].name)
                        .concat(found.name)
                        .join(' -> ');
                    this.fail(source, where, `struct ${found.name} contains itself (${chain})`);
                }
                if (declaration.state === 'unresolved') this.resolveStruct(found.index);
                type.structure = found;
                type.valueCount = found.valueCount;
                return type;
            }
        }
    }

    private resolveStruct(index: number): void {
        const declaration = this.declarations[index];
        const structure = this.structs[index];
        const source = declaration.source;
        declaration.state = 'resolving';
        this.stack.push(index);
        const fields = this.objectArray(source, structure.name, declaration.json, 'fields', MAX_MEMBERS);
        if (fields === null) this.fail(source, structure.name, "missing 'fields'");
        if (fields.length === 0) this.fail(source, structure.name, 'a struct needs at least one field');
        fields.forEach((item, i) => {
            const name = this.name(source, `${structure.name}.fields[${i}]`, item);
            const where = `${structure.name}.${name}`;
            if (structure.fields.some((f) => f.name === name)) this.fail(source, where, 'duplicate field name');
            const type = this.parseType(source, where, item, FIELD_KEYS);
            const values = structure.valueCount + type.valueCount;
            if (values > MAX_VALUES)
                this.fail(source, where, `struct ${structure.name} holds more than ${MAX_VALUES} values when flattened`);
            structure.valueCount = values;
            const field: FieldDefinition = { name, type, defaultValue: 0 };
            structure.fields.push(field);
            field.defaultValue = this.makeValue(source, where, 'default', type, item.default);
        });
        this.stack.pop();
        declaration.state = 'resolved';
    }

    /* ---- classes ---- */

    private parseFlags(source: string, where: string, item: unknown): Flag {
        const oneOf =
            'BASE, BASE_AND_CLIENT, CELL_PRIVATE, CELL_PUBLIC, CELL_PUBLIC_AND_OWN, ALL_CLIENTS, OWN_CLIENT or OTHER_CLIENTS';
        if (item === undefined) this.fail(source, where, `missing 'flags' (one of ${oneOf})`);
        if (Array.isArray(item))
            this.fail(source, where, `'flags' must be exactly one flag, got an array of ${item.length}`);
        if (typeof item !== 'string') this.fail(source, where, `'flags' must be a string, one of ${oneOf}`);
        if ((FLAGS as readonly string[]).includes(item)) return item as Flag;
        if (/[|,+ ]/.test(item))
            this.fail(source, where, `'flags' must be exactly one flag, got '${item.slice(0, 80)}'`);
        this.fail(source, where, `unknown flag '${item.slice(0, 80)}' (one of ${oneOf})`);
    }

    private parseProperty(source: string, cls: ClassDefinition, index: number, item: JsonObject): PropertyDefinition {
        const name = this.name(source, `${cls.name}.properties[${index}]`, item);
        const where = `${cls.name}.${name}`;
        const previous = cls.properties.findIndex((p) => p.name === name);
        if (previous >= 0) this.fail(source, where, `duplicate property name (also property ${previous})`);
        const type = this.parseType(source, where, item, PROPERTY_KEYS);
        const flags = this.parseFlags(source, where, item.flags);
        const audience = FLAG_AUDIENCE[flags];
        if (item.persistent !== undefined && typeof item.persistent !== 'boolean')
            this.fail(source, where, "'persistent' must be true or false");
        let detail: Detail = 'far';
        if (item.detail !== undefined) {
            if (typeof item.detail !== 'string' || !(DETAILS as readonly string[]).includes(item.detail))
                this.fail(source, where, `'detail' must be "near", "medium" or "far"`);
            detail = item.detail as Detail;
            /* A property no other client receives has no use for a level. */
            if (detail !== 'far' && !audience.toOtherClients)
                this.fail(
                    source,
                    where,
                    `detail '${detail}' needs a property other clients see (ALL_CLIENTS or OTHER_CLIENTS), not ${flags}`,
                );
        }
        const defaultValue = this.makeValue(source, where, 'default', type, item.default);
        return { name, id: index, type, flags, audience, persistent: item.persistent === true, detail, defaultValue };
    }

    parseMethod(
        source: string,
        className: string,
        siblings: MethodDefinition[],
        part: MethodPart,
        index: number,
        item: JsonObject,
        isEvent: boolean,
    ): MethodDefinition {
        const name = this.name(
            source,
            isEvent ? `events[${index}]` : `${className}.${PART_SECTIONS[part]}[${index}]`,
            item,
        );
        const where = `${className}.${name}`;
        const previous = siblings.findIndex((m) => m.name === name);
        if (previous >= 0) {
            if (isEvent) this.fail(source, where, `duplicate event name (also event ${previous})`);
            this.fail(source, where, `duplicate ${part} method name (also method ${previous})`);
        }
        if (isEvent && item.exposed !== undefined)
            this.fail(source, where, 'events cannot be exposed: only the server fires them');
        if (part === 'client' && item.exposed !== undefined)
            this.fail(
                source,
                where,
                'client methods cannot be exposed: only base and cell methods may be called by a client',
            );
        this.checkKeys(source, where, item, part === 'client' ? CLIENT_METHOD_KEYS : METHOD_KEYS);
        if (item.exposed !== undefined && typeof item.exposed !== 'boolean')
            this.fail(source, where, "'exposed' must be true or false");
        const argsJson = this.objectArray(source, where, item, 'args', MAX_MEMBERS) ?? [];
        const args: ArgumentDefinition[] = [];
        argsJson.forEach((argJson, i) => {
            const argName = this.name(source, `${className}.${name}(args[${i}])`, argJson);
            const argWhere = `${className}.${name}(${argName})`;
            if (args.some((a) => a.name === argName)) this.fail(source, argWhere, 'duplicate argument name');
            args.push({ name: argName, type: this.parseType(source, argWhere, argJson, ARG_KEYS) });
        });
        return { name, id: index, part, exposed: item.exposed === true, args };
    }

    private parseClass(
        source: string,
        id: number,
        position: number,
        json: JsonObject,
        classes: ClassDefinition[],
    ): ClassDefinition {
        const name = this.name(source, `entities[${position}]`, json);
        const duplicate = classes.find((c) => c.name === name);
        if (duplicate) this.fail(source, name, `duplicate class name (also declared in ${duplicate.source})`);
        this.checkKeys(source, name, json, CLASS_KEYS);
        const cls: ClassDefinition = {
            name,
            id,
            source,
            properties: [],
            methods: { base: [], cell: [], client: [] },
            masks: emptyMasks(),
        };
        const properties = this.objectArray(source, name, json, 'properties', MAX_MEMBERS) ?? [];
        properties.forEach((item, i) => cls.properties.push(this.parseProperty(source, cls, i, item)));
        for (const part of PARTS) {
            const methods = this.objectArray(source, name, json, PART_SECTIONS[part], MAX_MEMBERS) ?? [];
            methods.forEach((item, i) =>
                cls.methods[part].push(this.parseMethod(source, name, cls.methods[part], part, i, item, false)),
            );
        }
        cls.masks = computeMasks(cls);
        return cls;
    }

    load(documents: readonly { source: string; text: string }[]): Definitions {
        const roots: JsonObject[] = documents.map(({ source, text }) => {
            let root: unknown;
            try {
                root = JSON.parse(text);
            } catch (error) {
                this.fail(source, null, `not JSON: ${(error as Error).message}`);
            }
            if (!isObject(root)) this.fail(source, null, 'the top level must be a JSON object');
            return root;
        });
        let structCount = 0;
        let classCount = 0;
        let eventCount = 0;
        roots.forEach((root, s) => {
            const source = documents[s].source;
            this.checkKeys(source, null, root, DOCUMENT_KEYS);
            if (root.format !== undefined && root.format !== 1) this.fail(source, null, "'format' must be 1");
            structCount += this.objectArray(source, null, root, 'types', MAX_CLASSES)?.length ?? 0;
            classCount += this.objectArray(source, null, root, 'entities', MAX_CLASSES)?.length ?? 0;
            eventCount += this.objectArray(source, null, root, 'events', MAX_EVENTS)?.length ?? 0;
        });
        const firstSource = documents.length > 0 ? documents[0].source : 'definitions';
        if (eventCount > MAX_EVENTS) this.fail(firstSource, null, `more than ${MAX_EVENTS} events in all`);
        if (structCount > MAX_CLASSES) this.fail(firstSource, null, `more than ${MAX_CLASSES} structs in all`);
        if (classCount > MAX_CLASSES) this.fail(firstSource, null, `more than ${MAX_CLASSES} classes in all`);

        /* Pass 1: struct declarations, sorted by name (byte order). */
        roots.forEach((root, s) => {
            const source = documents[s].source;
            ((root.types as JsonObject[] | undefined) ?? []).forEach((item, position) => {
                const name = this.name(source, `types[${position}]`, item);
                this.checkKeys(source, name, item, STRUCT_KEYS);
                if ((KINDS as readonly string[]).includes(name))
                    this.fail(source, name, 'a struct cannot take the name of a built-in type');
                this.declarations.push({ json: item, source, name, order: this.declarations.length, state: 'unresolved' });
            });
        });
        this.declarations.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.order - b.order));
        for (let i = 1; i < this.declarations.length; i++) {
            const current = this.declarations[i];
            if (current.name === this.declarations[i - 1].name)
                this.fail(
                    current.source,
                    current.name,
                    `duplicate struct name (also declared in ${this.declarations[i - 1].source})`,
                );
        }
        this.declarations.forEach((d, index) => this.structs.push({ name: d.name, index, fields: [], valueCount: 0 }));

        /* Pass 2: struct fields, depth first. */
        this.declarations.forEach((d, index) => {
            if (d.state === 'unresolved') this.resolveStruct(index);
        });

        /* Pass 3: classes, in document order. */
        const classes: ClassDefinition[] = [];
        roots.forEach((root, s) => {
            ((root.entities as JsonObject[] | undefined) ?? []).forEach((item, position) => {
                classes.push(this.parseClass(documents[s].source, classes.length, position, item, classes));
            });
        });

        /* Pass 4: the game events, as the client methods of a class "events". */
        const events: MethodDefinition[] = [];
        roots.forEach((root, s) => {
            ((root.events as JsonObject[] | undefined) ?? []).forEach((item) => {
                events.push(this.parseMethod(documents[s].source, 'events', events, 'client', events.length, item, true));
            });
        });
        return new Definitions(classes, this.structs, events, computeDigest(this.structs, classes, events));
    }
}

function emptyMasks(): AudienceMasks {
    return {
        own: new Set(),
        othersNear: new Set(),
        othersMedium: new Set(),
        othersFar: new Set(),
        ghosts: new Set(),
        baseToClient: new Set(),
    };
}

/* replication_schema_create's masks, and the C SDK's base mask. */
function computeMasks(cls: ClassDefinition): AudienceMasks {
    const own = new Set<number>();
    const othersNear = new Set<number>();
    const othersMedium = new Set<number>();
    const othersFar = new Set<number>();
    const ghosts = new Set<number>();
    const baseToClient = new Set<number>();
    for (const p of cls.properties) {
        const a = p.audience;
        if (a.onCell && a.toOwnClient) own.add(p.id);
        if (a.onCell && a.toGhosts) ghosts.add(p.id);
        if (a.onCell && a.toOtherClients) {
            /* Cumulative: a nearer observer gets what a farther one does. */
            othersNear.add(p.id);
            if (p.detail !== 'near') othersMedium.add(p.id);
            if (p.detail === 'far') othersFar.add(p.id);
        }
        if (a.onBase && a.toOwnClient) baseToClient.add(p.id);
    }
    return { own, othersNear, othersMedium, othersFar, ghosts, baseToClient };
}

/* Loads one document (the login reply's definitions). */
export function parseDefinitions(text: string, source = 'login reply'): Definitions {
    return new Loader().load([{ source, text }]);
}

/* Loads several documents as one set, in the order given (a directory's
 * files in byte order of their names, as entity_def_load_directory). */
export function parseDefinitionDocuments(documents: readonly { source: string; text: string }[]): Definitions {
    if (documents.length === 0) throw new DefinitionsError('definitions: no documents');
    return new Loader().load(documents);
}

/* ---- the digest ---------------------------------------------------------- */

/* The canonical form, documented at the top of common/entity_def.c:
 * little-endian integers, strings as u32 length and bytes, doubles as their
 * IEEE 754 bits, bools one byte. */
class CanonicalWriter {
    private chunks: number[] = [];
    private readonly encoder = new TextEncoder();
    private readonly view = new DataView(new ArrayBuffer(8));

    u8(v: number): void {
        this.chunks.push(v & 0xff);
    }
    u32(v: number): void {
        for (let i = 0; i < 4; i++) this.chunks.push((v >>> (8 * i)) & 0xff);
    }
    u64(v: bigint): void {
        const u = BigInt.asUintN(64, v);
        for (let i = 0; i < 8; i++) this.chunks.push(Number((u >> BigInt(8 * i)) & 0xffn));
    }
    double(v: number): void {
        this.view.setFloat64(0, v, true);
        for (let i = 0; i < 8; i++) this.chunks.push(this.view.getUint8(i));
    }
    str(s: string): void {
        const bytes = this.encoder.encode(s);
        this.u32(bytes.length);
        for (const b of bytes) this.chunks.push(b);
    }
    bytes(): Uint8Array {
        return Uint8Array.from(this.chunks);
    }
}

function hashType(h: CanonicalWriter, type: TypeDefinition): void {
    h.u8(KINDS.indexOf(type.kind));
    switch (KIND_INFO[type.kind].group) {
        case 'int':
            h.u32(type.bits);
            break;
        case 'real':
            h.u8(type.quantized ? 1 : 0);
            if (type.quantized) {
                h.double(type.quantMin);
                h.double(type.quantMax);
                h.double(type.quantPrecision);
            }
            break;
        case 'sized':
            h.u32(type.maxLength);
            break;
        case 'array':
            h.u32(type.count);
            hashType(h, type.element as TypeDefinition);
            break;
        case 'plain':
            break;
        case 'struct':
            h.str((type.structure as StructDefinition).name);
            break;
    }
}

function hashValue(h: CanonicalWriter, type: TypeDefinition, value: JsonValue): void {
    const info = KIND_INFO[type.kind];
    switch (info.group) {
        case 'int':
            h.u64(BigInt(value as number));
            break;
        case 'real':
            if (info.components === 1) h.double(value as number);
            else for (const c of value as number[]) h.double(c);
            break;
        case 'sized':
            h.str(value as string);
            break;
        case 'array':
            for (const item of value as JsonValue[]) hashValue(h, type.element as TypeDefinition, item);
            break;
        case 'plain':
            if (type.kind === 'bool') h.u8(value ? 1 : 0);
            else h.u64(0n);
            break;
        case 'struct': {
            const object = value as { [field: string]: JsonValue };
            for (const field of (type.structure as StructDefinition).fields)
                hashValue(h, field.type, object[field.name]);
            break;
        }
    }
}

function hashArgs(h: CanonicalWriter, method: MethodDefinition): void {
    h.u32(method.args.length);
    for (const arg of method.args) {
        h.str(arg.name);
        hashType(h, arg.type);
    }
}

function computeDigest(structs: StructDefinition[], classes: ClassDefinition[], events: MethodDefinition[]): string {
    const h = new CanonicalWriter();
    h.str('tessera-entity-def/1');
    h.u32(structs.length);
    for (const s of structs) {
        h.str(s.name);
        h.u32(s.fields.length);
        for (const f of s.fields) {
            h.str(f.name);
            hashType(h, f.type);
            hashValue(h, f.type, f.defaultValue);
        }
    }
    h.u32(classes.length);
    for (const cls of classes) {
        h.str(cls.name);
        h.u32(cls.properties.length);
        for (const p of cls.properties) {
            h.str(p.name);
            hashType(h, p.type);
            h.u8(FLAGS.indexOf(p.flags));
            h.u8(p.persistent ? 1 : 0);
            h.u8(DETAILS.indexOf(p.detail));
            hashValue(h, p.type, p.defaultValue);
        }
        for (const part of PARTS) {
            h.u32(cls.methods[part].length);
            for (const m of cls.methods[part]) {
                h.str(m.name);
                h.u8(m.exposed ? 1 : 0);
                hashArgs(h, m);
            }
        }
    }
    /* Only with events, so definitions without any keep their old digest. */
    if (events.length > 0) {
        h.str('events');
        h.u32(events.length);
        for (const e of events) {
            h.str(e.name);
            hashArgs(h, e);
        }
    }
    return toHex(blake2b(h.bytes(), 32));
}
