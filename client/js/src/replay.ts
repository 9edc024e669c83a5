/* replay.ts -- a recorded session fed back through the client: a file of
 * frames as on a TCP connection (each a 4-byte big-endian length, then a
 * ServerToClient body; tessera-bots --record-file writes them), applied with
 * processFrame to a client that never connected, and what it ends up
 * holding as the JSON the golden tests compare with the C SDK's
 * (tessera-stream-replay):
 *
 *   { "player": id,
 *     "entities": [ { "id", "class", "owner", "x", "y", "z", "yaw",
 *                     "properties": { name: value } } ] (sorted by id),
 *     "events": [ { "event", "source", "fields" } ] (arrival order),
 *     "calls": [ { "entity", "method", "args" } ] (arrival order) }
 *
 * Ids and integers are numbers, or decimal strings above 2^53; values in
 * entity_state_json.h's shape (values.ts's valueToJson). */

import { TesseraClient } from './client.js';
import type { ArgumentDefinition } from './definitions.js';
import { integerToJson, valueToJson, type JsonView, type Value } from './values.js';

export interface ReplayEntity {
    id: number | string;
    class: string;
    owner: boolean;
    x: number;
    y: number;
    z: number;
    yaw: number;
    properties: { [name: string]: JsonView };
}

export interface ReplayResult {
    player: number | string;
    entities: ReplayEntity[];
    events: { event: string; source: number | string; fields: { [name: string]: JsonView } }[];
    calls: { entity: number | string; method: string; args: { [name: string]: JsonView } }[];
}

/* A call's arguments or an event's fields in the JSON shape. */
function fieldsJson(args: readonly ArgumentDefinition[], values: { [name: string]: Value }): { [name: string]: JsonView } {
    const out: { [name: string]: JsonView } = {};
    for (const arg of args) out[arg.name] = valueToJson(arg.type, values[arg.name]);
    return out;
}

/* The frame bodies of a recording. Throws when a length prefix promises
 * more bytes than are left. */
export function splitFrames(file: Uint8Array): Uint8Array[] {
    const frames: Uint8Array[] = [];
    const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
    let offset = 0;
    while (offset < file.length) {
        if (file.length - offset < 4) throw new Error(`recording: ${file.length - offset} bytes left, a length prefix is 4`);
        const length = view.getUint32(offset, false);
        offset += 4;
        if (length > file.length - offset)
            throw new Error(`recording: frame ${frames.length} says ${length} bytes, ${file.length - offset} are left`);
        frames.push(file.subarray(offset, offset + length));
        offset += length;
    }
    return frames;
}

/* Replays a recording and returns what the client holds. Throws when a
 * frame closes the client (naming the frame and the reason). */
export function replayFrames(file: Uint8Array): ReplayResult {
    const result: ReplayResult = { player: 0, entities: [], events: [], calls: [] };
    const client = new TesseraClient({
        callbacks: {
            onClientCall(entity, method, args) {
                const definition = entity.definition.methods.client.find((m) => m.name === method)!;
                result.calls.push({ entity: integerToJson(entity.id), method, args: fieldsJson(definition.args, args) });
            },
            onEvent(event) {
                result.events.push({
                    event: event.name,
                    source: integerToJson(event.source),
                    fields: fieldsJson(event.definition.args, event.fields),
                });
            },
        },
    });
    const frames = splitFrames(file);
    frames.forEach((frame, index) => {
        if (!client.processFrame(frame)) {
            const reason = client.closingReason;
            client.close();
            throw new Error(`recording: frame ${index} of ${frames.length} closed the client: ${reason}`);
        }
    });
    result.player = integerToJson(client.loginInfo?.entityId ?? 0n);
    const entities = [...client.entities.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const entity of entities) {
        const properties: { [name: string]: JsonView } = {};
        entity.definition.properties.forEach((p) => (properties[p.name] = valueToJson(p.type, entity.properties[p.name])));
        result.entities.push({
            id: integerToJson(entity.id),
            class: entity.class,
            owner: entity.owner,
            x: entity.x,
            y: entity.y,
            z: entity.z,
            yaw: entity.yaw,
            properties,
        });
    }
    client.close();
    return result;
}
