// helpers.mjs -- what the tests share: the SDK build, the repository's
// definition files, and a hand-written record writer for entity streams.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
// The SDK as the build made it: TESSERA_JS_MODULE names the ES module meson
// bundles into the build directory (client/js/meson.build); without it,
// npm run build's dist/tessera.mjs.
const Tessera = await import(
    process.env.TESSERA_JS_MODULE
        ? pathToFileURL(process.env.TESSERA_JS_MODULE).href
        : new URL('../dist/tessera.mjs', import.meta.url).href
);

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

// ---- a WebSocket stand-in and a scripted server ----------------------------

// Records what the client sends (decoded) and lets a test play the server.
// Events fire as a browser's do: open/message when the test says, close
// asynchronously after close().
export class FakeSocket {
    static sockets = [];
    constructor(url) {
        this.url = url;
        this.readyState = 0;
        this.bufferedAmount = 0;
        this.binaryType = 'blob';
        this.sent = [];
        this.closedWith = null;
        this.onopen = this.onmessage = this.onclose = this.onerror = null;
        FakeSocket.sockets.push(this);
    }
    static last() {
        return FakeSocket.sockets.at(-1);
    }
    send(bytes) {
        this.sent.push(Tessera.decodeClientToServer(bytes));
    }
    close(code = 1000, reason = '') {
        if (this.readyState >= 2) return;
        this.closedWith = { code, reason };
        this.readyState = 2;
        setTimeout(() => {
            this.readyState = 3;
            this.onclose?.({ code, reason });
        }, 0);
    }
    // The server's side.
    open() {
        this.readyState = 1;
        this.onopen?.({});
    }
    deliver(message) {
        const bytes = Tessera.encodeServerToClient(message);
        this.onmessage?.({ data: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) });
    }
    drop(code = 1006) {
        this.readyState = 3;
        this.onclose?.({ code, reason: '' });
    }
    bodies() {
        return this.sent.map((m) => m.body);
    }
}

export const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

export const WORLD = { min: { x: -512, y: -32, z: -512 }, max: { x: 512, y: 32, z: 512 } };

// A login reply with the demo's definitions for entity `id` of `type`.
export function loginReply(overrides = {}) {
    const text = demoDefinitionsText();
    return {
        login_reply: {
            entity_id: '77',
            position: { x: 0, y: 0, z: 10 },
            yaw: 0,
            view_radius: 50,
            view_hysteresis: 5,
            max_speed: 7,
            tick_hz: 10,
            space_name: 'default',
            definitions: text,
            definitions_digest: Tessera.parseDefinitions(text).digest,
            max_aliases: 1024,
            position_precision: 1 / 64,
            world_min: WORLD.min,
            world_max: WORLD.max,
            yaw_steps: 256,
            detail_near_distance: 20,
            detail_medium_distance: 40,
            entity_type: 'Avatar',
            max_frame_bytes: 65536,
            moves_per_second: 20,
            calls_per_second: 10,
            session_token: 'session-1',
            detached_grace_ms: 30000,
            baseapps: ['127.0.0.1:7001', '[::1]:7002', 'example.com:7003', '127.0.0.1:0'],
            ...overrides,
        },
    };
}

// A client over FakeSocket that has connected, said hello and logged in
// (the login reply applied); `events` records every callback in order.
export function loggedInClient(options = {}) {
    const events = [];
    const record =
        (name) =>
        (...args) =>
            events.push([name, ...args]);
    const callbacks = {};
    for (const name of [
        'onLoggedIn', 'onFrameBegin', 'onFrameEnd', 'onEnter', 'onLeave', 'onMove', 'onPropertiesChanged',
        'onClientCall', 'onEvent', 'onCorrection', 'onTeleport', 'onRestored', 'onError', 'onPlayerChanged',
        'onEnteredSpace', 'onRedirected', 'onClosed',
    ])
        callbacks[name] = record(name);
    const client = new Tessera.TesseraClient({ WebSocket: FakeSocket, callbacks: { ...callbacks, ...options.callbacks } });
    client.connect('ws://127.0.0.1:7000/');
    const socket = FakeSocket.last();
    client.login('alice', 'secret');
    socket.open();
    socket.deliver({ hello: { protocol_version: Tessera.PROTOCOL_VERSION, server_name: 'baseapp-1' } });
    if (options.reply !== null) socket.deliver(options.reply ?? loginReply());
    return { client, socket, events };
}

// A ViewUpdate message whose stream the builder callback writes.
export function viewUpdate(tick, build, extra = {}) {
    const builder = new StreamBuilder(demoDefinitions(), Tessera.aliasBits(1024));
    build(builder);
    builder.end();
    return { view: { tick, stream: builder.bytes(), stamp_us: String(1000 * tick), calls: [], events: [], ...extra } };
}

// An absolute MOVE body in the WORLD above at 1/64 m and 256 yaw steps.
export function absoluteAt(x, y, z, yawStep = 0) {
    const config = Tessera.createVolatileConfig(1 / 64, [-512, -32, -512], [512, 32, 512], 256);
    return (w) => {
        w.write(1, 1);
        w.write(Math.round((x + 512) * 64), config.axisBits[0]);
        w.write(Math.round((y + 32) * 64), config.axisBits[1]);
        w.write(Math.round((z + 512) * 64), config.axisBits[2]);
        w.write(yawStep, config.yawBits);
    };
}

// A method call's or event's argument bytes.
export function argumentBytes(method, args) {
    return Tessera.encodeArguments(method, args);
}

// ---- comparing replays ------------------------------------------------------

// Numbers agree within 1e-4 * max(1, |expected|); everything else exactly.
// Where two JSON values first differ, or null.
export function firstDifference(expected, got, where = '$') {
    if (typeof expected === 'number' && typeof got === 'number') {
        const tolerance = 1e-4 * Math.max(1, Math.abs(expected));
        return Math.abs(expected - got) <= tolerance ? null : `${where}: expected ${expected}, got ${got}`;
    }
    if (Array.isArray(expected) || Array.isArray(got)) {
        if (!Array.isArray(expected) || !Array.isArray(got)) return `${where}: an array on one side only`;
        if (expected.length !== got.length) return `${where}: ${expected.length} items expected, ${got.length} got`;
        for (let i = 0; i < expected.length; i++) {
            const found = firstDifference(expected[i], got[i], `${where}[${i}]`);
            if (found) return found;
        }
        return null;
    }
    if (expected !== null && got !== null && typeof expected === 'object' && typeof got === 'object') {
        for (const key of new Set([...Object.keys(expected), ...Object.keys(got)])) {
            if (!(key in expected) || !(key in got)) return `${where}.${key}: present on one side only`;
            const found = firstDifference(expected[key], got[key], `${where}.${key}`);
            if (found) return found;
        }
        return null;
    }
    return expected === got ? null : `${where}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(got)}`;
}
