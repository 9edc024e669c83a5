// helpers.mjs -- what the tests share: the SDK build, the repository's
// definition files, and a hand-written record writer for entity streams.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as Tessera from '../dist/tessera.mjs';

export { Tessera };

export const REPOSITORY = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

// demo/entities/*.json in byte order of their names, as
// entity_def_load_directory reads them.
export function demoDocuments() {
    const directory = path.join(REPOSITORY, 'demo/entities');
    return fs
        .readdirSync(directory)
        .filter((name) => name.endsWith('.json') && !name.startsWith('.'))
        .sort()
        .map((name) => ({ source: name, text: fs.readFileSync(path.join(directory, name), 'utf8') }));
}

export function demoDefinitions() {
    return Tessera.parseDefinitionDocuments(demoDocuments());
}

// The demo's documents merged into one, as a login reply carries them.
export function demoDefinitionsText() {
    const merged = { format: 1, types: [], entities: [], events: [] };
    for (const { text } of demoDocuments()) {
        const document = JSON.parse(text);
        for (const key of ['types', 'entities', 'events']) merged[key].push(...(document[key] ?? []));
    }
    return JSON.stringify(merged);
}

export function everyTypeDefinitions() {
    const text = fs.readFileSync(path.join(REPOSITORY, 'fuzz/definitions/every_type.json'), 'utf8');
    return Tessera.parseDefinitions(text, 'every_type.json');
}

// The bytes a writer callback produces.
export function bytesOf(build) {
    const w = new Tessera.BitWriter();
    build(w);
    return w.bytes();
}

// A reader over exactly the bits a writer callback produces (no padding).
export function readerOf(build) {
    const w = new Tessera.BitWriter();
    build(w);
    return new Tessera.BitReader(w.bytes(), w.bitLength);
}

// Whether two values of `type` agree, quantized numbers within half a step.
export function valuesClose(type, a, b) {
    if (type.kind === 'array') return a.every((item, i) => valuesClose(type.element, item, b[i]));
    if (type.kind === 'struct') return type.structure.fields.every((f) => valuesClose(f.type, a[f.name], b[f.name]));
    if (type.quantized) {
        const tolerance = type.quantPrecision / 2 + 1e-9;
        return [a].flat().every((v, i) => Math.abs(v - [b].flat()[i]) <= tolerance);
    }
    return Tessera.valuesEqual(a, b);
}

// A record writer for entity streams, by the layout at the top of
// common/replication.c. Change lists are given as bit builders, so a test
// can write anything, broken ones included.
export class StreamBuilder {
    constructor(definitions, aliasBits) {
        this.w = new Tessera.BitWriter();
        this.definitions = definitions;
        this.aliasBits = aliasBits;
    }
    // ENTER: kind 2, alias, length, owner, class id, entity id, body.
    enter(alias, entityId, className, owner, writeChanges, { lengthAdjust = 0, classId } = {}) {
        const cls = this.definitions.findClass(className);
        const body = new Tessera.BitWriter();
        body.writeBool(owner);
        body.write(classId ?? cls.id, this.definitions.classBits);
        body.writeUvar(entityId);
        writeChanges(body, cls);
        this.header(2, alias);
        this.w.writeUvar(body.bitLength + lengthAdjust);
        this.copy(body);
        return this;
    }
    // UPDATE: kind 1, alias, length, change list.
    update(alias, className, writeChanges, { lengthAdjust = 0 } = {}) {
        const cls = this.definitions.findClass(className);
        const body = new Tessera.BitWriter();
        writeChanges(body, cls);
        this.header(1, alias);
        this.w.writeUvar(body.bitLength + lengthAdjust);
        this.copy(body);
        return this;
    }
    // MOVE: kind 0, alias, then the volatile record the builder writes.
    move(alias, writeRecord) {
        this.header(0, alias);
        writeRecord(this.w);
        return this;
    }
    leave(alias) {
        this.w.write(3 | (1 << 2), 4);
        this.w.write(alias, this.aliasBits);
        return this;
    }
    end() {
        this.w.write(3, 2);
        this.w.write(0, 2);
        this.w.align();
        return this;
    }
    header(kind, alias) {
        this.w.write(kind, 2);
        this.w.write(alias, this.aliasBits);
    }
    copy(body) {
        const bytes = body.bytes();
        const r = new Tessera.BitReader(bytes, body.bitLength);
        for (let left = body.bitLength; left > 0; ) {
            const n = Math.min(32, left);
            this.w.write(r.read(n), n);
            left -= n;
        }
    }
    bytes() {
        return this.w.bytes();
    }
}

// A change list of `cls` with the given {name: value} (encoded by the SDK's
// own encoder, which the property codec tests check bit by bit).
export function changes(values) {
    return (w, cls) => {
        const ids = Object.keys(values).map((name) => cls.properties.findIndex((p) => p.name === name));
        const all = cls.properties.map((p) => Tessera.valueFromDefault(p.type, p.defaultValue));
        for (const [name, value] of Object.entries(values)) {
            const id = cls.properties.findIndex((p) => p.name === name);
            all[id] = Tessera.checkValue(cls.properties[id].type, value, name);
        }
        Tessera.encodeChangeList(w, cls, all, ids);
    };
}

// A stream handler recording what the decoder asked, over a small table.
export class RecordingHandler {
    constructor() {
        this.table = new Map(); // alias -> {state, isOwner, id}
        this.log = [];
        this.refuseEnter = false;
    }
    enter(alias, entityId, cls, isOwner) {
        this.log.push(['enter', alias, entityId, cls.name, isOwner]);
        if (this.refuseEnter) return null;
        const state = new Tessera.EntityState(cls);
        this.table.set(alias, { state, isOwner, id: entityId, track: Tessera.newTrack() });
        return state;
    }
    find(alias) {
        return this.table.get(alias) ?? null;
    }
    move(alias, reader) {
        const entry = this.table.get(alias);
        if (!entry) {
            Tessera.skipVolatile(reader, this.config);
            this.log.push(['skip-move', alias]);
            return false;
        }
        entry.position = Tessera.decodeVolatile(reader, entry.track, this.config);
        this.log.push(['move', alias]);
        return true;
    }
    leave(alias) {
        this.log.push(['leave', alias]);
        this.table.delete(alias);
    }
    changed(alias, state, ids) {
        this.log.push(['changed', alias, ids.map((id) => state.cls.properties[id].name)]);
    }
}
