/* protocol.ts -- proto/client.proto's messages: ClientToServer encoded and
 * ServerToClient decoded with protobufjs, from the .proto text itself
 * (bundled by esbuild's text loader, parsed once with keepCase, so field
 * names are the proto's). One WebSocket message carries one frame body: no
 * length prefix. 64-bit integers come out as decimal strings (converted to
 * bigints by the client); bytes as Uint8Array; an absent message as null. */

import protobuf from 'protobufjs';
import Long from 'long';
import protoText from '../../../proto/client.proto';

/* Exact 64-bit integers in every build (a browser bundle has no require()
 * for protobufjs to find long.js with). */
protobuf.util.Long = Long as unknown as typeof protobuf.util.Long;
protobuf.configure();

const root = protobuf.parse(protoText, { keepCase: true }).root;
const clientToServer = root.lookupType('tessera.client.ClientToServer');
const serverToClient = root.lookupType('tessera.client.ServerToClient');

/* ProtocolVersion.PROTOCOL_VERSION, read from the proto. */
export const PROTOCOL_VERSION: number = root.lookupEnum('tessera.client.ProtocolVersion').values.PROTOCOL_VERSION;

/* ErrorCode names by number ("bad_credentials"), as the C SDK names them. */
export const ERROR_NAMES: ReadonlyMap<number, string> = new Map(
    Object.entries(root.lookupEnum('tessera.client.ErrorCode').values).map(([name, number]) => [
        number,
        name.replace(/^ERROR_/, '').toLowerCase(),
    ]),
);

export function errorName(code: number): string {
    return ERROR_NAMES.get(code) ?? 'unknown';
}

export const METHOD_PART_NUMBERS = { base: 0, cell: 1, client: 2 } as const;

/* ---- what the server sends, as decoded here ---- */

export type Uint64Text = string;

export interface Vector3Message {
    x: number;
    y: number;
    z: number;
}

export interface ServerHelloMessage {
    protocol_version: number;
    server_name: string;
}

export interface LoginReplyMessage {
    entity_id: Uint64Text;
    position: Vector3Message | null;
    yaw: number;
    view_radius: number;
    view_hysteresis: number;
    max_speed: number;
    tick_hz: number;
    space_name: string;
    definitions: string;
    definitions_digest: string;
    max_aliases: number;
    position_precision: number;
    world_min: Vector3Message | null;
    world_max: Vector3Message | null;
    yaw_steps: number;
    detail_near_distance: number;
    detail_medium_distance: number;
    entity_type: string;
    max_frame_bytes: number;
    moves_per_second: number;
    calls_per_second: number;
    login_timeout_ms: number;
    alias_cooldown_ms: number;
    detail_hysteresis: number;
    session_token: string;
    detached_grace_ms: number;
    reconnected: boolean;
    no_space: boolean;
    baseapps: string[];
}

export interface ClientCallMessage {
    entity_id: Uint64Text;
    method_id: number;
    args: Uint8Array;
}

export interface GameEventMessage {
    event_id: number;
    source_id: Uint64Text;
    args: Uint8Array;
}

export interface ViewUpdateMessage {
    tick: number;
    stream: Uint8Array;
    stamp_us: Uint64Text;
    calls: ClientCallMessage[];
    events: GameEventMessage[];
    ticks_restart: boolean;
}

export interface BasePropertiesMessage {
    entity_id: Uint64Text;
    changes: Uint8Array;
}

export interface CorrectionMessage {
    position: Vector3Message | null;
    yaw: number;
    sequence: number;
    reason: string;
}

export interface TeleportedMessage {
    position: Vector3Message | null;
    yaw: number;
    space_changed: boolean;
    space_name: string;
    position_precision: number;
    world_min: Vector3Message | null;
    world_max: Vector3Message | null;
    yaw_steps: number;
}

export interface ErrorMessage {
    code: number;
    message: string;
    retry_after_ms: number;
}

export interface EntityRestoredMessage {
    entity_id: Uint64Text;
    state_age_ms: number;
    from_ghost: boolean;
    position: Vector3Message | null;
    yaw: number;
}

export interface PlayerDestroyedMessage {
    entity_id: Uint64Text;
}

export interface PlayerCreatedMessage {
    entity_id: Uint64Text;
    entity_type: string;
    session_token: string;
}

export interface EnteredSpaceMessage {
    entity_id: Uint64Text;
    position: Vector3Message | null;
    yaw: number;
    view_radius: number;
    view_hysteresis: number;
    max_speed: number;
    tick_hz: number;
    space_name: string;
    max_aliases: number;
    position_precision: number;
    world_min: Vector3Message | null;
    world_max: Vector3Message | null;
    yaw_steps: number;
    detail_near_distance: number;
    detail_medium_distance: number;
    alias_cooldown_ms: number;
    detail_hysteresis: number;
}

export interface LoginRedirectMessage {
    host: string;
    port: number;
    token: string;
    reason: string;
}

export interface ServerToClientMessage {
    body?: string;
    hello?: ServerHelloMessage;
    login_reply?: LoginReplyMessage;
    view?: ViewUpdateMessage;
    correction?: CorrectionMessage;
    error?: ErrorMessage;
    base_properties?: BasePropertiesMessage;
    teleported?: TeleportedMessage;
    player_destroyed?: PlayerDestroyedMessage;
    player_created?: PlayerCreatedMessage;
    entered_space?: EnteredSpaceMessage;
    login_redirect?: LoginRedirectMessage;
    call?: ClientCallMessage;
    event?: GameEventMessage;
    restored?: EntityRestoredMessage;
}

/* Decodes one frame body. Throws when the bytes are not a ServerToClient. */
export function decodeServerToClient(bytes: Uint8Array): ServerToClientMessage {
    const message = serverToClient.decode(bytes);
    return serverToClient.toObject(message, {
        longs: String,
        enums: Number,
        defaults: true,
        arrays: true,
        oneofs: true,
    }) as ServerToClientMessage;
}

/* ---- what the client sends ---- */

export type ClientToServerMessage =
    | { hello: { protocol_version: number; client_name: string } }
    | { login: { account: string; password: string; known_definitions_digest?: string } }
    | { move: { position: Vector3Message; yaw: number; sequence: number } }
    | { call: { entity_id: Uint64Text; part: number; method_id: number; args: Uint8Array } }
    | { reconnect: { account: string; session_token: string; known_definitions_digest?: string } }
    | { token_login: { account: string; token: string; known_definitions_digest?: string } };

export function encodeClientToServer(message: ClientToServerMessage): Uint8Array {
    return clientToServer.encode(clientToServer.fromObject(message)).finish();
}

/* For tests and tools: decodes a ClientToServer as decodeServerToClient does. */
export function decodeClientToServer(bytes: Uint8Array): { body?: string; [field: string]: unknown } {
    return clientToServer.toObject(clientToServer.decode(bytes), {
        longs: String,
        enums: Number,
        defaults: true,
        arrays: true,
        oneofs: true,
    });
}

/* For tests and tools: encodes a ServerToClient given as decodeServerToClient
 * returns it (64-bit integers as strings or numbers). */
export function encodeServerToClient(message: object): Uint8Array {
    return serverToClient.encode(serverToClient.fromObject(message)).finish();
}
