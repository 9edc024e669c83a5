/* client.ts -- TesseraClient: one game client talking to one baseapp over
 * WebSocket (one binary message per frame body), the port of the C SDK
 * (client/tessera_client.c). It does the hello and login exchange (password,
 * one-time token after a LoginRedirect, or Reconnect with the session
 * token), learns the game's definitions from the login reply, keeps the
 * table of entities the player sees up to date from ViewUpdates and
 * BaseProperties, and sends moves and checked calls of exposed methods.
 *
 * Lifecycle, as the C SDK's (tessera_client.h):
 *
 *   new TesseraClient -> connect(url) -> ... -> close() (or the connection
 *   ends) -> onClosed
 *
 *  - onClosed fires exactly once for a client that connected or was fed a
 *    frame, never inside close() (a client that never dialled closes on a
 *    timer); afterwards the client holds nothing.
 *  - After close() no callback but onClosed fires, even for data already
 *    received. close() is idempotent and safe inside any callback.
 *
 * Input from the server is never trusted: a frame that does not decode,
 * breaks the stream's rules or arrives out of order closes the client with
 * cause "protocol". The SDK follows redirects (at most 4 per login) but
 * does not decide to reconnect: a caller makes a new client and calls
 * reconnect(account, loginInfo.sessionToken) with a retry hint's wait.
 *
 * The frame's callbacks fire after its whole stream is applied, in the C
 * SDK's order: onLeave (entities that left), onEnter, onMove (not for those
 * that entered), onPropertiesChanged (not for those that entered),
 * onClientCall in the update's order, onEvent; an entity that entered and
 * left in one update gets none. If a callback closes the client, the rest
 * is skipped.
 */

import { BitReader, BitWriter } from './bits.js';
import {
    Definitions,
    findMethod,
    parseDefinitions,
    type ClassDefinition,
    type MethodDefinition,
    type MethodPart,
} from './definitions.js';
import { CallError, DecodeError, DefinitionsError } from './errors.js';
import { decodeArguments, encodeArguments, type ArgumentValues } from './method-call.js';
import { decodeChangeList, encodeChangeList } from './property-codec.js';
import {
    METHOD_PART_NUMBERS,
    PROTOCOL_VERSION,
    decodeServerToClient,
    encodeClientToServer,
    errorName,
    type BasePropertiesMessage,
    type ClientCallMessage,
    type ClientToServerMessage,
    type CorrectionMessage,
    type EnteredSpaceMessage,
    type EntityRestoredMessage,
    type ErrorMessage,
    type GameEventMessage,
    type LoginRedirectMessage,
    type LoginReplyMessage,
    type PlayerCreatedMessage,
    type PlayerDestroyedMessage,
    type ServerHelloMessage,
    type TeleportedMessage,
    type Vector3Message,
    type ViewUpdateMessage,
} from './protocol.js';
import { EntityState } from './state.js';
import { aliasBits, decodeStream, type StreamHandler } from './stream.js';
import type { Value } from './values.js';
import {
    createVolatileConfig,
    decodeVolatile,
    newTrack,
    skipVolatile,
    type VolatileConfig,
    type VolatileTrack,
} from './volatile-codec.js';

/* The largest frame the client takes: a crowded view's ViewUpdate is well
 * under 4 MiB (the C SDK's TESSERA_CLIENT_MAX_FRAME_BYTES). */
const MAX_FRAME_BYTES = 4 << 20;
/* 64 MiB unsent means the server is gone (TESSERA_CLIENT_WRITE_LIMIT_BYTES). */
const WRITE_LIMIT_BYTES = 64 << 20;
const ACCOUNT_MAX = 64;
const PASSWORD_MAX = 128;
const HELLO_NAME_MAX = 64;
const SESSION_TOKEN_MAX = 64;
/* Aliases are 0..max_aliases-1 with max_aliases at most 65536. */
const MAX_ALIASES = 65536;
/* A cluster sends a login on once, or once more from a stopping baseapp. */
const MAX_REDIRECTS = 4;
/* BaseProperties waiting for the player's entity: 1 MiB means a broken server. */
const PENDING_BASE_MAX_BYTES = 1 << 20;
/* Lone client calls waiting for the player's own ENTER. */
const MAX_HELD_CALLS = 64;
/* The WebSocket readyState of an open socket. */
const WEBSOCKET_OPEN = 1;

/* ---- what the API hands out ------------------------------------------------ */

export type ClientState =
    | 'disconnected' /* created; connect() not called yet (or it failed) */
    | 'connecting' /* WebSocket opening; nothing sent yet */
    | 'hello_sent' /* hello sent; waiting for the server's */
    | 'awaiting_login' /* hello exchanged; waiting for login() */
    | 'login_sent' /* login sent; waiting for the reply (or an error) */
    | 'in_world' /* logged in: moves out, view updates in */
    | 'closing' /* close() called or the connection ended; onClosed pending */
    | 'closed'; /* onClosed ran */

export type CloseCause =
    | 'closed_by_caller'
    | 'connect_failed' /* the WebSocket could not be opened */
    | 'server_error' /* an Error before login completed (onError told) */
    | 'protocol' /* an undecodable, unknown or out-of-order frame */
    | 'disconnected'; /* the connection ended */

/* One entity in the view. Owned by the client; read-only for callers. */
export interface Entity {
    readonly id: bigint;
    /* The per-client alias the stream names it by; -1 for the player's
     * entity while it is in no space. */
    readonly alias: number;
    /* This client owns it: the player's own entity. */
    readonly owner: boolean;
    /* Its class's name, and the class. */
    readonly class: string;
    readonly definition: ClassDefinition;
    /* Metres (float32, quantized to the space's precision) and radians in
     * (-pi, pi]. The player's own entity is where the last move sent or the
     * last correction put it. */
    readonly x: number;
    readonly y: number;
    readonly z: number;
    readonly yaw: number;
    /* Its properties by name: the class defaults until the server sends a
     * value (see values.ts for how each type is held). */
    readonly properties: { readonly [name: string]: Value };
    /* stamp_us of the ViewUpdate of the last move applied (0n until one). */
    readonly lastMoveStampUs: bigint;
    /* Cell tick of the update that last touched it. */
    readonly lastTick: number;
}

export interface LoginInfo {
    entityId: bigint;
    x: number;
    y: number;
    z: number;
    yaw: number;
    viewRadius: number;
    viewHysteresis: number;
    maxSpeed: number;
    tickHz: number;
    spaceName: string;
    definitionsDigest: string;
    definitionClasses: number;
    maxAliases: number;
    positionPrecision: number;
    worldMin: [number, number, number];
    worldMax: [number, number, number];
    yawSteps: number;
    detailNearDistance: number;
    detailMediumDistance: number;
    /* Limits to keep to (beyond them the server drops the client or the excess). */
    maxFrameBytes: number;
    movesPerSecond: number;
    callsPerSecond: number;
    loginTimeoutMs: number;
    aliasCooldownMs: number;
    detailHysteresis: number;
    /* reconnect(account, sessionToken) takes the entity back within
     * detachedGraceMs of a drop. Keep it secret, like a password. */
    sessionToken: string;
    detachedGraceMs: number;
    reconnected: boolean;
    /* The player's entity is in a space (false for an Account until
     * onEnteredSpace). */
    inSpace: boolean;
    entityType: string;
    /* The other baseapps' client addresses ("host:port"), for a reconnect
     * when this one is gone. */
    baseapps: string[];
}

export interface Correction {
    x: number;
    y: number;
    z: number;
    yaw: number;
    sequence: number; /* the refused move's */
    reason: string;
}

export interface Teleport {
    x: number;
    y: number;
    z: number;
    yaw: number;
    spaceChanged: boolean; /* the view was emptied first */
    spaceName: string;
}

export interface Restore {
    x: number;
    y: number;
    z: number;
    yaw: number;
    stateAgeMs: number;
    fromGhost: boolean;
}

export interface ServerError {
    code: number; /* client.proto's ErrorCode */
    name: string; /* "bad_credentials", "unavailable", ... */
    message: string;
    retryAfterMs: number; /* when to try again (0: no hint) */
}

/* A game event or a user message. */
export interface GameEvent {
    name: string;
    source: bigint; /* the entity that fired it; 0n: the game as a whole */
    fields: { [name: string]: Value };
    definition: MethodDefinition;
}

export interface ClientStats {
    framesIn: number;
    bytesIn: number;
    framesOut: number;
    bytesOut: number;
    viewUpdates: number;
    streamBytes: number;
    enters: number;
    leaves: number;
    moves: number;
    propertyUpdates: number;
    discardedRecords: number;
    staleLeaves: number;
    clientCalls: number;
    staleCalls: number;
    gameEvents: number;
    basePropertyUpdates: number;
    callsOut: number;
    corrections: number;
    teleports: number;
    restores: number;
    playerChanges: number;
    redirects: number;
    errors: number;
    passwordLogins: number;
    reconnectRequests: number;
}

/* Every callback is optional. */
export interface ClientCallbacks {
    onLoggedIn?(info: LoginInfo): void;
    onFrameBegin?(tick: number): void;
    onFrameEnd?(tick: number): void;
    onEnter?(entity: Entity): void;
    /* The entity is no longer in the table (the object stays readable). */
    onLeave?(entity: Entity): void;
    onMove?(entity: Entity, stampUs: bigint): void;
    /* Once per entity per update (and for the player's entity when
     * BaseProperties changed something): the names of what changed. */
    onPropertiesChanged?(entity: Entity, changed: string[]): void;
    onClientCall?(entity: Entity, method: string, args: { [name: string]: Value }): void;
    onEvent?(event: GameEvent): void;
    onCorrection?(correction: Correction): void;
    onTeleport?(teleport: Teleport): void;
    onRestored?(restore: Restore): void;
    /* Before login the client then closes (cause "server_error"). */
    onError?(error: ServerError): void;
    onPlayerChanged?(info: LoginInfo): void;
    onEnteredSpace?(info: LoginInfo): void;
    onRedirected?(reason: string): void;
    onClosed?(cause: CloseCause, reason: string): void;
    /* Every frame body from the socket, before it is acted on (a recorder's
     * hook; not for processFrame's). */
    onFrameReceived?(frame: Uint8Array): void;
}

/* The part of the WebSocket API the client uses: the browser's WebSocket
 * and node's `ws` both have it. */
export interface WebSocketLike {
    binaryType: string;
    readonly readyState: number;
    readonly bufferedAmount: number;
    onopen: ((event: unknown) => void) | null;
    onmessage: ((event: { data: unknown }) => void) | null;
    onclose: ((event: { code: number; reason: string }) => void) | null;
    onerror: ((event: unknown) => void) | null;
    send(data: Uint8Array): void;
    close(code?: number, reason?: string): void;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface ClientOptions {
    callbacks?: ClientCallbacks;
    /* The WebSocket class: the global WebSocket by default (browsers, node
     * 22); in node 20, `ws`'s. */
    WebSocket?: WebSocketConstructor;
    /* Free text for the server's logs, at most 64 bytes. */
    name?: string;
}

/* ---- internals ------------------------------------------------------------ */

const EVENT_ENTERED = 1;
const EVENT_MOVED = 2;
const EVENT_CHANGED = 4;
const EVENT_DEPARTED = 8;

/* What the client keeps per entity: the public part and its stream state. */
class EntityRecord implements Entity {
    id: bigint;
    alias: number;
    owner: boolean;
    class: string;
    definition: ClassDefinition;
    x = 0;
    y = 0;
    z = 0;
    yaw = 0;
    lastMoveStampUs = 0n;
    lastTick = 0;
    readonly state: EntityState;
    track: VolatileTrack = newTrack();
    events = 0; /* EVENT_* noted in the current frame */
    changed = new Set<number>(); /* properties changed in the current frame */

    constructor(id: bigint, alias: number, owner: boolean, cls: ClassDefinition) {
        this.id = id;
        this.alias = alias;
        this.owner = owner;
        this.class = cls.name;
        this.definition = cls;
        this.state = new EntityState(cls);
    }

    get properties(): { readonly [name: string]: Value } {
        return this.state.properties;
    }
}

type LoginKind = 'none' | 'password' | 'token' | 'reconnect';

interface HeldCall {
    methodId: number;
    args: Uint8Array;
}

function newStats(): ClientStats {
    return {
        framesIn: 0,
        bytesIn: 0,
        framesOut: 0,
        bytesOut: 0,
        viewUpdates: 0,
        streamBytes: 0,
        enters: 0,
        leaves: 0,
        moves: 0,
        propertyUpdates: 0,
        discardedRecords: 0,
        staleLeaves: 0,
        clientCalls: 0,
        staleCalls: 0,
        gameEvents: 0,
        basePropertyUpdates: 0,
        callsOut: 0,
        corrections: 0,
        teleports: 0,
        restores: 0,
        playerChanges: 0,
        redirects: 0,
        errors: 0,
        passwordLogins: 0,
        reconnectRequests: 0,
    };
}

function emptyLoginInfo(): LoginInfo {
    return {
        entityId: 0n,
        x: 0,
        y: 0,
        z: 0,
        yaw: 0,
        viewRadius: 0,
        viewHysteresis: 0,
        maxSpeed: 0,
        tickHz: 0,
        spaceName: '',
        definitionsDigest: '',
        definitionClasses: 0,
        maxAliases: 0,
        positionPrecision: 0,
        worldMin: [0, 0, 0],
        worldMax: [0, 0, 0],
        yawSteps: 0,
        detailNearDistance: 0,
        detailMediumDistance: 0,
        maxFrameBytes: 0,
        movesPerSecond: 0,
        callsPerSecond: 0,
        loginTimeoutMs: 0,
        aliasCooldownMs: 0,
        detailHysteresis: 0,
        sessionToken: '',
        detachedGraceMs: 0,
        reconnected: false,
        inSpace: false,
        entityType: '',
        baseapps: [],
    };
}

/* A Vector3 that may be absent (the origin, as proto3 says); null when a
 * coordinate is not finite. */
function readVector(v: Vector3Message | null | undefined): [number, number, number] | null {
    if (!v) return [0, 0, 0];
    if (!Number.isFinite(v.x) || !Number.isFinite(v.y) || !Number.isFinite(v.z)) return null;
    return [v.x, v.y, v.z];
}

function isIPv4(host: string): boolean {
    const parts = host.split('.');
    return parts.length === 4 && parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255);
}

/* Whether `host` is an IPv4 or IPv6 literal (inet_pton's test). */
export function isIpLiteral(host: string): boolean {
    if (isIPv4(host)) return true;
    if (!host.includes(':') || !/^[0-9A-Fa-f:.]+$/.test(host)) return false;
    try {
        new URL(`ws://[${host}]/`);
        return true;
    } catch {
        return false;
    }
}

/* Whether `text` is a baseapp address a client can dial: "host:port" with an
 * IP literal ("[v6]:port" or "v6:port") and a port 1..65535. */
function isUsableAddress(text: string): boolean {
    const colon = text.lastIndexOf(':');
    if (text.length >= 64 || colon <= 0) return false;
    let host = text.slice(0, colon);
    if (text.startsWith('[')) {
        if (!host.endsWith(']')) return false;
        host = host.slice(1, -1);
    }
    const port = text.slice(colon + 1);
    if (!/^[0-9]{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) return false;
    return isIpLiteral(host);
}

function validAccount(account: string): boolean {
    return account.length >= 1 && account.length <= ACCOUNT_MAX && /^[A-Za-z0-9_.-]+$/.test(account);
}

function utf8Length(text: string): number {
    return new TextEncoder().encode(text).length;
}

export class TesseraClient {
    private readonly callbacks: ClientCallbacks;
    private readonly WebSocketClass: WebSocketConstructor | undefined;
    private readonly name: string;
    private stateValue: ClientState = 'disconnected';
    private socket: WebSocketLike | null = null;
    private connected = false; /* the WebSocket opened */
    private closeTimer: ReturnType<typeof setTimeout> | null = null;
    private causeSet = false;
    private closeCause: CloseCause = 'closed_by_caller';
    private closeReason = '';
    private loginRequested = false;
    private account = '';
    private password = '';
    /* Non-empty: reconnect instead of login; kept until answered. */
    private sessionToken = '';
    private loginSent: LoginKind = 'none';
    /* A LoginRedirect's one-time token (a TokenLogin instead of the login). */
    private loginToken = '';
    private redirectUrl = '';
    private redirecting = false;
    private redirects = 0;
    private urlValue = '';
    private retryAfterMs = 0;
    private sequence = 0;
    private info: LoginInfo = emptyLoginInfo(); /* the login reply, kept up to date */
    private serverNameValue = '';
    private readonly statsValue: ClientStats = newStats();

    /* From the login reply. */
    private definitionsValue: Definitions | null = null;
    private volatileConfig: VolatileConfig | null = null;
    private aliasWidth = 0;

    /* The view: an entity is in `entities`, and in `aliases` unless it is
     * the placeholder. */
    private readonly entitiesById = new Map<bigint, EntityRecord>();
    private own: EntityRecord | null = null;
    private aliases: (EntityRecord | undefined)[] = [];
    private placeholder: EntityRecord | null = null;
    private pending: Uint8Array[] = [];
    private pendingBytes = 0;
    private heldCalls: HeldCall[] = [];
    private changingSpaceValue = false;

    /* The ViewUpdate being applied. */
    private frame = {
        tick: 0,
        ticksRestart: false,
        stampUs: 0n,
        broken: '' /* a rule the decoder cannot see was broken: why */,
        entered: [] as EntityRecord[],
        moved: [] as EntityRecord[],
        changed: [] as EntityRecord[],
        departed: [] as EntityRecord[],
    };

    private readonly streamHandler: StreamHandler = {
        enter: (alias, entityId, cls, isOwner) => this.streamEnter(alias, entityId, cls, isOwner),
        find: (alias) => {
            const entity = this.aliases[alias];
            return entity ? { state: entity.state, isOwner: entity.owner } : null;
        },
        move: (alias, reader) => this.streamMove(alias, reader),
        leave: (alias) => this.streamLeave(alias),
        changed: (alias, state, changedIds) => this.streamChanged(alias, state, changedIds),
    };

    constructor(options: ClientOptions = {}) {
        this.callbacks = options.callbacks ?? {};
        this.WebSocketClass =
            options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket ?? undefined;
        const name = options.name ?? 'tessera-js';
        if (utf8Length(name) > HELLO_NAME_MAX) throw new RangeError(`a client name is at most ${HELLO_NAME_MAX} bytes`);
        this.name = name;
    }

    /* ---- queries ---- */

    get state(): ClientState {
        return this.stateValue;
    }

    /* The login reply (updated by giveClientTo and teleports), or null before it. */
    get loginInfo(): Readonly<LoginInfo> | null {
        return this.info.entityId !== 0n ? this.info : null;
    }

    get definitions(): Definitions | null {
        return this.definitionsValue;
    }

    get serverName(): string {
        return this.serverNameValue;
    }

    /* The URL last dialled (after a redirect, the one it went on to). */
    get url(): string {
        return this.urlValue;
    }

    /* retry_after_ms of the last Error: how long to wait before trying again. */
    get errorRetryAfterMs(): number {
        return this.retryAfterMs;
    }

    /* In onClosed with cause "connect_failed": the one-time token of the
     * redirect whose baseapp could not be reached, for tokenLogin elsewhere. */
    get redirectToken(): string {
        return this.stateValue === 'closed' && !this.connected ? this.loginToken : '';
    }

    get lastSequence(): number {
        return this.sequence;
    }

    /* From onFrameBegin to onFrameEnd: this update starts a new tick counter. */
    get frameTicksRestart(): boolean {
        return this.frame.ticksRestart;
    }

    /* Why the client is closing or closed ("" while open): the reason
     * onClosed gets, readable at once after a frame closed it. */
    get closingReason(): string {
        return this.isOpen() ? '' : this.closeReason;
    }

    /* True inside the onLeave callbacks of a view emptied whole. */
    get changingSpace(): boolean {
        return this.changingSpaceValue;
    }

    get stats(): Readonly<ClientStats> {
        return this.statsValue;
    }

    get entities(): ReadonlyMap<bigint, Entity> {
        return this.entitiesById;
    }

    entity(id: bigint | number): Entity | undefined {
        return this.entitiesById.get(BigInt(id));
    }

    entityByAlias(alias: number): Entity | undefined {
        return this.aliases[alias];
    }

    /* The player's own entity while it is in the table. */
    get player(): Entity | null {
        return this.own;
    }

    /* ---- lifecycle ---- */

    private isOpen(): boolean {
        return this.stateValue !== 'closing' && this.stateValue !== 'closed';
    }

    private inWorld(): boolean {
        return this.stateValue === 'in_world';
    }

    /* A client that never dialled: frames reach it through processFrame only. */
    private detached(): boolean {
        return this.socket === null && !this.connected;
    }

    /* Opens `url` (ws:// or wss://) and says hello once it is open. Only from
     * "disconnected". Throws when there is no WebSocket class, the URL is not
     * a WebSocket URL, or the state is wrong. */
    connect(url: string): void {
        if (this.stateValue !== 'disconnected') throw new Error(`connect: the client is ${this.stateValue}`);
        if (!this.WebSocketClass) throw new Error('connect: no WebSocket class (pass options.WebSocket, e.g. ws)');
        const parsed = new URL(url);
        if (parsed.protocol !== 'ws:' && parsed.protocol !== 'wss:')
            throw new Error(`connect: ${url} is not a ws:// or wss:// URL`);
        this.dial(url);
    }

    private dial(url: string): void {
        const socket = new this.WebSocketClass!(url);
        socket.binaryType = 'arraybuffer';
        this.socket = socket;
        this.urlValue = url;
        this.stateValue = 'connecting';
        socket.onopen = () => {
            if (socket !== this.socket || this.stateValue !== 'connecting') return;
            this.connected = true;
            this.sendHello();
        };
        socket.onmessage = (event) => {
            if (socket !== this.socket || !this.isOpen()) return;
            if (!(event.data instanceof ArrayBuffer)) {
                this.protocolError('a text message where frames are binary');
                return;
            }
            const frame = new Uint8Array(event.data);
            if (frame.length > MAX_FRAME_BYTES) {
                this.closeWith('disconnected', `a frame of ${frame.length} bytes, above ${MAX_FRAME_BYTES}`);
                return;
            }
            this.callbacks.onFrameReceived?.(frame);
            if (!this.isOpen()) return;
            this.handleFrame(frame);
        };
        socket.onerror = () => {
            /* The close event follows and says what happened. */
        };
        socket.onclose = (event) => {
            if (socket !== this.socket) return;
            this.onSocketClose(event.code, event.reason);
        };
    }

    private onSocketClose(code: number, reason: string): void {
        if (this.redirecting && this.stateValue !== 'closing') {
            /* The old connection is gone: the login goes on at the new one. */
            this.redirecting = false;
            this.socket = null;
            this.connected = false;
            this.stateValue = 'disconnected';
            try {
                this.dial(this.redirectUrl);
                return;
            } catch (error) {
                this.causeSet = true;
                this.closeCause = 'connect_failed';
                this.closeReason = `redirected to ${this.redirectUrl}, which cannot be dialled: ${(error as Error).message}`;
            }
        }
        this.finish(`connection closed (${code}${reason ? ': ' + reason : ''})`);
    }

    /* Fires onClosed and lets go of everything. */
    private finish(reason: string): void {
        if (this.stateValue === 'closed') return;
        if (this.closeTimer !== null) clearTimeout(this.closeTimer);
        this.closeTimer = null;
        let cause = this.closeCause;
        if (!this.causeSet) {
            cause = this.connected ? 'disconnected' : 'connect_failed';
            this.closeReason = reason;
        }
        this.stateValue = 'closed';
        if (this.socket) {
            const socket = this.socket;
            socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
        }
        this.socket = null;
        this.callbacks.onClosed?.(cause, this.closeReason);
        /* A reconnect that got no answer holds its session token, and a
         * redirect that could not be dialled its one-time token
         * (redirectToken, read in onClosed). */
        this.sessionToken = '';
        this.loginToken = '';
        this.password = '';
        this.freeWorld();
    }

    /* Closes with a cause of our own; the first cause wins. */
    private closeWith(cause: CloseCause, reason: string): void {
        if (!this.isOpen()) return;
        this.causeSet = true;
        this.closeCause = cause;
        this.closeReason = reason;
        this.stateValue = 'closing';
        const socket = this.socket;
        if (socket) {
            /* The close event finishes; a socket that never reports it (a
             * broken one) is finished after a while anyway. */
            try {
                socket.close(1000, cause);
            } catch {
                /* already closed */
            }
            this.closeTimer = setTimeout(() => this.finish(reason), 5000);
        } else {
            this.closeTimer = setTimeout(() => this.finish(reason), 0);
        }
    }

    /* Starts closing. Idempotent; onClosed follows asynchronously. */
    close(): void {
        this.closeWith('closed_by_caller', 'closed by the client');
    }

    private protocolError(what: string): void {
        this.closeWith('protocol', `protocol error: ${what}`);
    }

    /* ---- sending ---- */

    /* Sends one message. False when there is no open socket (a client fed by
     * processFrame) or the server stopped reading (the client closes). */
    private send(message: ClientToServerMessage): boolean {
        const socket = this.socket;
        if (!socket || socket.readyState !== WEBSOCKET_OPEN) return false;
        const bytes = encodeClientToServer(message);
        if (socket.bufferedAmount + bytes.length > WRITE_LIMIT_BYTES) {
            this.closeWith('disconnected', 'the server stopped reading: 64 MiB unsent');
            return false;
        }
        socket.send(bytes);
        this.statsValue.framesOut++;
        this.statsValue.bytesOut += bytes.length;
        return true;
    }

    private sendHello(): void {
        this.stateValue = 'hello_sent';
        this.send({ hello: { protocol_version: PROTOCOL_VERSION, client_name: this.name } });
    }

    /* Sends the login asked for: a TokenLogin after a redirect, a Reconnect
     * with a session token, or the password. Without a socket it is only
     * pretended. The password and the one-time token are not kept after. */
    private sendLogin(): void {
        let message: ClientToServerMessage;
        if (this.loginToken) {
            message = { token_login: { account: this.account, token: this.loginToken } };
            this.loginSent = 'token';
        } else if (this.sessionToken) {
            message = { reconnect: { account: this.account, session_token: this.sessionToken } };
            this.loginSent = 'reconnect';
        } else {
            message = { login: { account: this.account, password: this.password } };
            this.loginSent = 'password';
        }
        this.stateValue = 'login_sent';
        if (this.socket && this.send(message)) {
            if (this.loginSent === 'password') this.statsValue.passwordLogins++;
            if (this.loginSent === 'reconnect') this.statsValue.reconnectRequests++;
        }
        this.password = '';
        this.loginToken = '';
        if (this.loginSent !== 'reconnect') this.sessionToken = '';
    }

    private requestLogin(account: string, secret: string, maxLength: number, slot: 'password' | 'session' | 'token'): void {
        if (this.loginRequested) throw new Error('a login was already requested');
        if (!this.isOpen()) throw new Error(`the client is ${this.stateValue}`);
        if (typeof account !== 'string' || !validAccount(account))
            throw new RangeError('an account is 1..64 characters of [A-Za-z0-9_.-]');
        if (typeof secret !== 'string' || secret.length === 0 || utf8Length(secret) > maxLength)
            throw new RangeError(`the ${slot === 'password' ? 'password' : 'token'} must be 1..${maxLength} bytes`);
        this.account = account;
        if (slot === 'password') this.password = secret;
        else if (slot === 'session') this.sessionToken = secret;
        else this.loginToken = secret;
        this.loginRequested = true;
        if (this.stateValue === 'awaiting_login') this.sendLogin();
    }

    /* Asks to log in; may come before the connection is up (sent right after
     * the hello exchange). Throws for a bad account or password, or when a
     * login was already requested. */
    login(account: string, password: string): void {
        this.requestLogin(account, password, PASSWORD_MAX, 'password');
    }

    /* Instead of login: takes the player's entity back after a dropped
     * connection, with the session token of the last login reply, at any
     * baseapp (one that does not hold the session redirects, and the SDK
     * follows). The answer is a login reply with `reconnected` and a fresh
     * view; ERROR_UNAVAILABLE with a retry hint while a dead baseapp's
     * sessions are restored; ERROR_SESSION_EXPIRED when it is over. */
    reconnect(account: string, sessionToken: string): void {
        this.requestLogin(account, sessionToken, SESSION_TOKEN_MAX, 'session');
    }

    /* Instead of login: a TokenLogin with the one-time token of a redirect
     * that could not be followed (redirectToken). */
    tokenLogin(account: string, token: string): void {
        this.requestLogin(account, token, SESSION_TOKEN_MAX, 'token');
    }

    /* The server does not echo the player's moves: its entity is where the
     * player last said (or was put back). The track is the server's. */
    private placeOwn(x: number, y: number, z: number, yaw: number): void {
        const own = this.own;
        if (!own) return;
        own.x = Math.fround(x);
        own.y = Math.fround(y);
        own.z = Math.fround(z);
        own.yaw = Math.fround(yaw);
    }

    /* Sends the player's position (metres) and yaw (radians) with the next
     * sequence number. False (nothing sent) when not in the world or a
     * number is not finite. */
    move(x: number, y: number, z: number, yaw: number): boolean {
        if (!this.inWorld()) return false;
        if (![x, y, z, yaw].every((v) => typeof v === 'number' && Number.isFinite(v))) return false;
        const sequence = (this.sequence + 1) >>> 0;
        if (!this.send({ move: { position: { x, y, z }, yaw, sequence } })) return false;
        this.sequence = sequence;
        this.placeOwn(x, y, z, yaw);
        return true;
    }

    /* Calls exposed method `methodName` of `part` ("base" or "cell") on an
     * entity in the view (a base method on the player's own only, as the
     * server allows), with every argument by name. Everything is checked
     * against the definitions first: a CallError (code: not_in_world,
     * bad_part, unknown_entity, unknown_method, not_exposed, bad_arguments,
     * too_large) is thrown and nothing is sent when a check fails. */
    call(entityId: bigint | number, part: MethodPart, methodName: string, args: ArgumentValues = {}): void {
        if (!this.inWorld()) throw new CallError('not_in_world', `call: the client is ${this.stateValue}`);
        if (part !== 'base' && part !== 'cell')
            throw new CallError('bad_part', `call: part must be "base" or "cell", not ${JSON.stringify(part)}`);
        const id = BigInt(entityId);
        const entity = id !== 0n ? this.entitiesById.get(id) : undefined;
        if (!entity) throw new CallError('unknown_entity', `call: entity ${id} is not in view`);
        if (part === 'base' && id !== this.info.entityId)
            throw new CallError('unknown_entity', `call: base methods go to the player's own entity only, not ${id}`);
        const method = findMethod(entity.definition, part, methodName);
        if (!method) throw new CallError('unknown_method', `call: ${entity.class} has no ${part} method ${methodName}`);
        if (!method.exposed)
            throw new CallError('not_exposed', `call: ${entity.class}.${methodName} is not exposed to clients`);
        let bytes: Uint8Array;
        try {
            bytes = encodeArguments(method, args);
        } catch (error) {
            throw new CallError('bad_arguments', `call: ${entity.class}.${(error as Error).message}`);
        }
        const message: ClientToServerMessage = {
            call: { entity_id: id.toString(), part: METHOD_PART_NUMBERS[part], method_id: method.id, args: bytes },
        };
        /* The login reply's largest frame counts the 4-byte length prefix. */
        const frameBytes = encodeClientToServer(message).length + 4;
        if (this.info.maxFrameBytes > 0 && frameBytes > this.info.maxFrameBytes)
            throw new CallError('too_large', `call: ${frameBytes} bytes, above max_frame_bytes ${this.info.maxFrameBytes}`);
        if (this.send(message)) this.statsValue.callsOut++;
    }

    /* Sends an EntityCall exactly as given, unchecked: for tests of the
     * server's refusals. False when not in the world. */
    callRaw(entityId: bigint | number, part: number, methodId: number, args: Uint8Array = new Uint8Array()): boolean {
        if (!this.inWorld()) return false;
        const sent = this.send({ call: { entity_id: BigInt(entityId).toString(), part, method_id: methodId, args } });
        if (sent) this.statsValue.callsOut++;
        return sent;
    }

    /* Handles one ServerToClient body as if just received (callbacks
     * included), for tests, replays and benchmarks. On a client that never
     * connected a ServerHello answers a hello it did not send and a
     * LoginReply a login it did not send. True while the client stays open. */
    processFrame(frame: Uint8Array): boolean {
        if (!this.isOpen()) return false;
        this.handleFrame(frame);
        return this.isOpen();
    }

    /* ---- receiving: the dispatch ---- */

    private handleFrame(frame: Uint8Array): void {
        this.statsValue.framesIn++;
        this.statsValue.bytesIn += frame.length + 4;
        let message;
        try {
            message = decodeServerToClient(frame);
        } catch {
            this.protocolError('a frame that does not decode as ServerToClient');
            return;
        }
        switch (message.body) {
            case 'hello':
                return this.onServerHello(message.hello!);
            case 'login_reply':
                return this.onLoginReply(message.login_reply!);
            case 'view':
                return this.onView(message.view!);
            case 'base_properties':
                return this.onBaseProperties(message.base_properties!);
            case 'correction':
                return this.onCorrection(message.correction!);
            case 'restored':
                return this.onRestored(message.restored!);
            case 'teleported':
                return this.onTeleported(message.teleported!);
            case 'error':
                return this.onServerError(message.error!);
            case 'player_destroyed':
                return this.onPlayerDestroyed(message.player_destroyed!);
            case 'player_created':
                return this.onPlayerCreated(message.player_created!);
            case 'entered_space':
                return this.onEnteredSpace(message.entered_space!);
            case 'login_redirect':
                return this.onLoginRedirect(message.login_redirect!);
            case 'call':
                return this.onLoneCall(message.call!);
            case 'event':
                return this.onLoneEvent(message.event!);
            default:
                return this.protocolError('a frame with no body this client knows');
        }
    }

    /* ---- receiving: hello, login ---- */

    private onServerHello(hello: ServerHelloMessage): void {
        const expected = this.stateValue === 'hello_sent' || (this.detached() && this.stateValue === 'disconnected');
        if (!expected) return this.protocolError('server hello out of order');
        if (hello.protocol_version !== PROTOCOL_VERSION)
            return this.protocolError(
                `server speaks protocol version ${hello.protocol_version}, this client speaks ${PROTOCOL_VERSION}`,
            );
        this.serverNameValue = hello.server_name;
        this.stateValue = 'awaiting_login';
        if (this.loginRequested) this.sendLogin();
    }

    /* Checks a login reply's (or EnteredSpace's) space numbers into `info`
     * and returns the stream settings, or what is wrong. */
    private readSpaceNumbers(
        reply: Pick<
            LoginReplyMessage,
            | 'entity_id'
            | 'position'
            | 'yaw'
            | 'view_radius'
            | 'view_hysteresis'
            | 'max_speed'
            | 'tick_hz'
            | 'space_name'
            | 'max_aliases'
            | 'position_precision'
            | 'world_min'
            | 'world_max'
            | 'yaw_steps'
            | 'detail_near_distance'
            | 'detail_medium_distance'
        >,
        info: LoginInfo,
    ): VolatileConfig | string {
        if (BigInt(reply.entity_id) === 0n) return 'login reply without an entity id';
        const position = readVector(reply.position);
        const nonNegative = [reply.view_radius, reply.view_hysteresis, reply.detail_near_distance, reply.detail_medium_distance];
        if (
            !position ||
            !Number.isFinite(reply.yaw) ||
            !Number.isFinite(reply.max_speed) ||
            !nonNegative.every((v) => Number.isFinite(v) && v >= 0)
        )
            return 'login reply with a non-finite or negative number';
        if (reply.max_aliases < 1 || reply.max_aliases > MAX_ALIASES) return 'login reply with max_aliases outside 1..65536';
        const min = readVector(reply.world_min);
        const max = readVector(reply.world_max);
        if (!min || !max) return 'login reply with a non-finite world bound';
        const config = createVolatileConfig(reply.position_precision, min, max, reply.yaw_steps);
        if (!config) return 'login reply with a position precision, world bounds or yaw steps the stream cannot use';
        info.entityId = BigInt(reply.entity_id);
        [info.x, info.y, info.z] = position;
        info.yaw = reply.yaw;
        info.viewRadius = reply.view_radius;
        info.viewHysteresis = reply.view_hysteresis;
        info.maxSpeed = reply.max_speed;
        info.tickHz = reply.tick_hz;
        info.spaceName = reply.space_name;
        info.maxAliases = reply.max_aliases;
        info.positionPrecision = reply.position_precision;
        info.worldMin = min;
        info.worldMax = max;
        info.yawSteps = reply.yaw_steps;
        info.detailNearDistance = reply.detail_near_distance;
        info.detailMediumDistance = reply.detail_medium_distance;
        return config;
    }

    private onLoginReply(reply: LoginReplyMessage): void {
        const expected = this.stateValue === 'login_sent' || (this.detached() && this.stateValue === 'awaiting_login');
        if (!expected) return this.protocolError('login reply out of order');
        const info = emptyLoginInfo();
        let config: VolatileConfig | null = null;
        if (reply.no_space) {
            if (BigInt(reply.entity_id) === 0n) return this.protocolError('login reply without an entity id');
        } else {
            const read = this.readSpaceNumbers(reply, info);
            if (typeof read === 'string') return this.protocolError(read);
            config = read;
        }
        info.entityId = BigInt(reply.entity_id);
        info.inSpace = !reply.no_space;
        info.entityType = reply.entity_type;
        /* The definitions let this client decode any game; their digest
         * must be theirs, or something in between mangled them. */
        if (!reply.definitions) return this.protocolError('login reply without entity definitions');
        let definitions: Definitions;
        try {
            definitions = parseDefinitions(reply.definitions, 'login reply');
        } catch (error) {
            if (!(error instanceof DefinitionsError)) throw error;
            return this.protocolError(`entity definitions do not load: ${error.message}`);
        }
        if (definitions.digest !== reply.definitions_digest)
            return this.protocolError('entity definitions do not match their digest');
        info.definitionsDigest = definitions.digest;
        if (reply.session_token.length <= SESSION_TOKEN_MAX) info.sessionToken = reply.session_token;
        info.detachedGraceMs = reply.detached_grace_ms;
        info.reconnected = reply.reconnected;
        info.baseapps = reply.baseapps.filter(isUsableAddress).slice(0, 16);
        info.maxFrameBytes = reply.max_frame_bytes;
        info.movesPerSecond = reply.moves_per_second;
        info.callsPerSecond = reply.calls_per_second;
        info.loginTimeoutMs = reply.login_timeout_ms;
        info.aliasCooldownMs = reply.alias_cooldown_ms;
        info.detailHysteresis = reply.detail_hysteresis;
        info.definitionClasses = definitions.classes.length;
        /* The login is answered: a reconnect's token has done its work. */
        this.sessionToken = '';
        this.freeWorld();
        this.definitionsValue = definitions;
        this.volatileConfig = config;
        this.aliasWidth = info.inSpace ? aliasBits(info.maxAliases) : 0;
        this.info = info;
        this.stateValue = 'in_world';
        if (!info.inSpace && !this.placePlayer())
            return this.protocolError('login reply for an entity type the definitions lack');
        this.callbacks.onLoggedIn?.(this.info);
    }

    /* ---- receiving: a redirect ---- */

    /* Every entity goes, as if each had left (onLeave for each, the own
     * included): the player leaves this view for good. */
    private forgetView(): void {
        this.aliases.forEach((entity, alias) => {
            if (entity) this.streamLeave(alias);
        });
        if (this.placeholder) {
            const own = this.placeholder;
            this.placeholder = null;
            if (this.own === own) this.own = null;
            this.entitiesById.delete(own.id);
            own.events |= EVENT_DEPARTED;
            this.frame.departed.push(own);
        }
        this.reportDepartures();
        this.pending = [];
        this.pendingBytes = 0;
        this.heldCalls = [];
    }

    /* LoginRedirect: close this connection, open host:port with the same
     * scheme and log in there with the one-time token, or (no token) send
     * the Reconnect there. */
    private onLoginRedirect(redirect: LoginRedirectMessage): void {
        const inWorld = this.stateValue === 'in_world';
        if ((this.stateValue !== 'login_sent' && !inWorld) || !this.socket)
            return this.protocolError('login redirect out of order');
        const host = redirect.host;
        const token = redirect.token;
        let reconnectOn =
            token.length === 0 && this.stateValue === 'login_sent' && this.loginSent === 'reconnect' && this.sessionToken !== '';
        const sessionMoved = token.length === 0 && inWorld && this.info.sessionToken !== '';
        if (sessionMoved) reconnectOn = true;
        if (
            !isIpLiteral(host) ||
            host.length >= 64 ||
            redirect.port < 1 ||
            redirect.port > 65535 ||
            (token.length < 1 && !reconnectOn) ||
            token.length > SESSION_TOKEN_MAX
        )
            return this.protocolError('login redirect to no usable address, or without a token');
        if (++this.redirects > MAX_REDIRECTS) return this.protocolError('redirected too often');
        if (inWorld) {
            this.forgetView();
            if (!this.isOpen()) return;
        }
        if (sessionMoved) this.sessionToken = this.info.sessionToken;
        const current = new URL(this.urlValue);
        const hostText = host.includes(':') ? `[${host}]` : host;
        this.redirectUrl = `${current.protocol}//${hostText}:${redirect.port}${current.pathname}`;
        this.loginToken = reconnectOn ? '' : token;
        this.loginRequested = true;
        this.redirecting = true;
        this.statsValue.redirects++;
        this.callbacks.onRedirected?.(redirect.reason);
        if (!this.isOpen()) return;
        this.socket.close(1000, 'redirected');
    }

    /* ---- receiving: giveClientTo ---- */

    /* The player's own entity while it is in no space: in the table with no
     * alias, with what BaseProperties said so far. False when the
     * definitions lack its type. */
    private placePlayer(): boolean {
        const cls = this.definitionsValue!.findClass(this.info.entityType);
        if (!cls || this.entitiesById.has(this.info.entityId)) return false;
        const entity = new EntityRecord(this.info.entityId, -1, true, cls);
        this.entitiesById.set(entity.id, entity);
        this.placeholder = entity;
        this.own = entity;
        if (this.pending.length > 0) this.applyPendingBase(entity);
        return true;
    }

    /* The placeholder leaves the table; its base properties wait for the
     * stream's own ENTER. False when too much would wait. */
    private unplacePlayer(): boolean {
        const entity = this.placeholder;
        if (!entity) return true;
        this.placeholder = null;
        if (this.own === entity) this.own = null;
        this.entitiesById.delete(entity.id);
        return this.pendOwnBase(entity);
    }

    /* Keeps the base properties of the player's entity, which leaves the
     * table, for when it comes back (the cell never sends them). */
    private pendOwnBase(entity: EntityRecord): boolean {
        const base = entity.definition.masks.baseToClient;
        if (base.size === 0) return true;
        const w = new BitWriter();
        encodeChangeList(w, entity.definition, entity.state.values, base);
        return this.pendBase(w.bytes());
    }

    private onPlayerDestroyed(message: PlayerDestroyedMessage): void {
        if (!this.inWorld() || BigInt(message.entity_id) !== this.info.entityId || this.info.entityId === 0n)
            return this.protocolError("player destroyed: not the player's entity, or out of order");
        this.forgetView();
        if (!this.isOpen()) return;
        this.info.entityId = 0n;
        this.info.inSpace = false;
    }

    private onPlayerCreated(message: PlayerCreatedMessage): void {
        const id = BigInt(message.entity_id);
        if (!this.inWorld() || this.info.entityId !== 0n || id === 0n)
            return this.protocolError('player created: out of order (no player destroyed first)');
        this.info.entityId = id;
        this.info.entityType = message.entity_type;
        if (message.session_token.length <= SESSION_TOKEN_MAX) this.info.sessionToken = message.session_token;
        this.info.inSpace = false;
        if (!this.placePlayer()) return this.protocolError('player created of an entity type the definitions lack');
        this.statsValue.playerChanges++;
        this.callbacks.onPlayerChanged?.(this.info);
    }

    private onEnteredSpace(space: EnteredSpaceMessage): void {
        const id = BigInt(space.entity_id);
        if (!this.inWorld() || this.info.inSpace || id === 0n || id !== this.info.entityId)
            return this.protocolError("entered space: not the player's entity, or already in a space");
        const info: LoginInfo = { ...this.info };
        const config = this.readSpaceNumbers(space, info);
        if (typeof config === 'string') return this.protocolError(config);
        if (!this.unplacePlayer()) return this.protocolError("too many base properties waiting for the player's entity");
        info.inSpace = true;
        info.aliasCooldownMs = space.alias_cooldown_ms;
        info.detailHysteresis = space.detail_hysteresis;
        this.info = info;
        this.volatileConfig = config;
        this.aliasWidth = aliasBits(info.maxAliases);
        this.callbacks.onEnteredSpace?.(this.info);
    }

    /* ---- receiving: the entity stream ---- */

    /* Marks the frame's stream broken for a reason the decoder cannot see:
     * decoding goes on and the frame is refused after it. First reason kept. */
    private breakStream(reason: string): void {
        if (!this.frame.broken) this.frame.broken = reason;
    }

    private pendBase(data: Uint8Array): boolean {
        if (this.pendingBytes + data.length > PENDING_BASE_MAX_BYTES) return false;
        this.pending.push(data.slice());
        this.pendingBytes += data.length;
        return true;
    }

    /* Applies one BaseProperties change list to the player's entity; returns
     * the ids that changed, or what is wrong (after trailing bits the values
     * are applied, but the client closes). */
    private applyBase(entity: EntityRecord, data: Uint8Array): number[] | string {
        const r = new BitReader(data);
        let changes;
        try {
            changes = decodeChangeList(r, entity.definition, entity.definition.masks.baseToClient);
        } catch (error) {
            if (error instanceof DecodeError) return error.message;
            throw error;
        }
        const changed = entity.state.apply(changes);
        /* Only the zero bits that pad the list to a byte may follow. */
        const left = r.remaining;
        if (left >= 8 || r.read(left) !== 0 || r.failed) return 'bytes after the change list';
        return changed;
    }

    /* The player's entity just entered: what BaseProperties said meanwhile
     * goes into it, in order. */
    private applyPendingBase(entity: EntityRecord): void {
        for (const data of this.pending) {
            const result = this.applyBase(entity, data);
            if (typeof result === 'string') {
                this.breakStream(`base properties of entity ${entity.id}: ${result}`);
                break;
            }
        }
        this.pending = [];
        this.pendingBytes = 0;
    }

    private streamEnter(alias: number, entityId: bigint, cls: ClassDefinition, isOwner: boolean): EntityState | null {
        if (this.frame.broken) return null; /* refused anyway: create nothing more */
        if (alias >= this.info.maxAliases) {
            this.breakStream(`ENTER for alias ${alias}, beyond max_aliases ${this.info.maxAliases}`);
            return null;
        }
        if (this.aliases[alias]) {
            this.breakStream(`ENTER for alias ${alias}, which is live`);
            return null;
        }
        if (this.entitiesById.has(entityId)) {
            this.breakStream(`ENTER for entity ${entityId}, which is in view already`);
            return null;
        }
        const entity = new EntityRecord(entityId, alias, isOwner, cls);
        entity.lastTick = this.frame.tick;
        this.entitiesById.set(entityId, entity);
        this.aliases[alias] = entity;
        if (entityId === this.info.entityId) this.own = entity;
        entity.events = EVENT_ENTERED;
        this.frame.entered.push(entity);
        this.statsValue.enters++;
        return entity.state;
    }

    private streamMove(alias: number, reader: BitReader): boolean {
        const entity = this.aliases[alias];
        const config = this.volatileConfig!;
        let position;
        try {
            if (!entity) {
                skipVolatile(reader, config);
                return false;
            }
            position = decodeVolatile(reader, entity.track, config);
        } catch (error) {
            if (error instanceof DecodeError)
                throw new DecodeError(error.code, `MOVE record for alias ${alias}: ${error.message}`);
            throw error;
        }
        entity.x = position.x;
        entity.y = position.y;
        entity.z = position.z;
        entity.yaw = position.yaw;
        entity.lastTick = this.frame.tick;
        entity.lastMoveStampUs = this.frame.stampUs;
        if (!(entity.events & (EVENT_ENTERED | EVENT_MOVED))) {
            entity.events |= EVENT_MOVED;
            this.frame.moved.push(entity);
        }
        return true;
    }

    private streamLeave(alias: number): void {
        const entity = this.aliases[alias];
        if (!entity) {
            this.statsValue.staleLeaves++;
            return;
        }
        this.aliases[alias] = undefined;
        this.entitiesById.delete(entity.id);
        if (this.own === entity) this.own = null;
        if (entity.id === this.info.entityId && !this.pendOwnBase(entity))
            this.breakStream("too many base properties waiting for the player's entity");
        entity.events |= EVENT_DEPARTED;
        this.frame.departed.push(entity);
        this.statsValue.leaves++;
    }

    private streamChanged(alias: number, state: EntityState, changedIds: number[]): void {
        const entity = this.aliases[alias];
        if (!entity || entity.state !== state) return; /* cannot be: the state came from enter or find */
        for (const id of changedIds) entity.changed.add(id);
        entity.lastTick = this.frame.tick;
        if (entity.events & EVENT_ENTERED) {
            /* This is the ENTER itself, just applied. */
            if (entity.id === this.info.entityId && this.pending.length > 0) this.applyPendingBase(entity);
            return;
        }
        if (changedIds.length === 0 || entity.events & EVENT_CHANGED) return;
        entity.events |= EVENT_CHANGED;
        this.frame.changed.push(entity);
    }

    /* Forgets the frame's events. Runs after every ViewUpdate, applied or not. */
    private endFrame(): void {
        for (const list of [this.frame.entered, this.frame.moved, this.frame.changed]) {
            for (const entity of list) {
                if (entity.events & EVENT_DEPARTED) continue;
                entity.changed.clear();
                entity.events = 0;
            }
            list.length = 0;
        }
        this.frame.departed.length = 0;
        this.frame.broken = '';
        this.frame.ticksRestart = false;
    }

    /* The whole view went: tells every departed entity, as a change of space. */
    private reportDepartures(): void {
        this.changingSpaceValue = true;
        for (const entity of this.frame.departed) {
            this.callbacks.onLeave?.(entity);
            if (!this.inWorld()) break;
        }
        this.changingSpaceValue = false;
        this.endFrame();
    }

    /* Whether `entityId` left in the frame being applied: a call queued for
     * it before it left is stale, not a protocol error. */
    private departed(entityId: bigint): boolean {
        return this.frame.departed.some((e) => e.id === entityId);
    }

    /* Checks every call of an update before any is delivered; returns the
     * decoded arguments (null for a stale call), or false with the client
     * closing. */
    private checkCalls(calls: readonly ClientCallMessage[]): ({ [name: string]: Value } | null)[] | false {
        const decoded: ({ [name: string]: Value } | null)[] = [];
        for (const call of calls) {
            const id = BigInt(call.entity_id);
            const entity = id !== 0n ? this.entitiesById.get(id) : undefined;
            if (!entity && this.departed(id)) {
                decoded.push(null); /* stale: dropped */
                continue;
            }
            if (!entity) {
                this.protocolError(`client call on entity ${id}, which is not in view`);
                return false;
            }
            const methods = entity.definition.methods.client;
            if (call.method_id >= methods.length) {
                this.protocolError(
                    `client call of method ${call.method_id} of ${entity.class}, which has ${methods.length} client methods`,
                );
                return false;
            }
            const method = methods[call.method_id];
            try {
                decoded.push(decodeArguments(method, call.args));
            } catch (error) {
                if (!(error instanceof DecodeError)) throw error;
                this.protocolError(`client call ${entity.class}.${method.name} with bad arguments: ${error.message}`);
                return false;
            }
        }
        return decoded;
    }

    private deliverCall(call: ClientCallMessage, args: { [name: string]: Value } | null): void {
        const entity = this.entitiesById.get(BigInt(call.entity_id));
        if (!entity || args === null) {
            this.statsValue.staleCalls++;
            return;
        }
        this.statsValue.clientCalls++;
        this.callbacks.onClientCall?.(entity, entity.definition.methods.client[call.method_id].name, args);
    }

    /* Checks game events before any is delivered; false with the client closing. */
    private checkEvents(events: readonly GameEventMessage[]): GameEvent[] | false {
        const decoded: GameEvent[] = [];
        const definitions = this.definitionsValue!;
        for (const event of events) {
            const definition = definitions.events[event.event_id];
            if (!definition) {
                this.protocolError(
                    `game event ${event.event_id}, which the definitions (${definitions.events.length} events) do not declare`,
                );
                return false;
            }
            try {
                const fields = decodeArguments(definition, event.args);
                decoded.push({ name: definition.name, source: BigInt(event.source_id), fields, definition });
            } catch (error) {
                if (!(error instanceof DecodeError)) throw error;
                this.protocolError(`game event ${definition.name} with fields that are not its declared types: ${error.message}`);
                return false;
            }
        }
        return decoded;
    }

    private deliverEvent(event: GameEvent): void {
        this.statsValue.gameEvents++;
        this.callbacks.onEvent?.(event);
    }

    /* A GameEvent outside any view update. */
    private onLoneEvent(event: GameEventMessage): void {
        if (!this.inWorld()) return this.protocolError('game event before login completed');
        const decoded = this.checkEvents([event]);
        if (decoded) this.deliverEvent(decoded[0]);
    }

    /* The player's own entity is in the table: the calls that waited go. */
    private releaseHeldCalls(): void {
        if (this.heldCalls.length === 0 || !this.entitiesById.has(this.info.entityId)) return;
        const held = this.heldCalls;
        this.heldCalls = [];
        for (const call of held) {
            if (!this.inWorld()) break;
            this.onLoneCall({ entity_id: this.info.entityId.toString(), method_id: call.methodId, args: call.args });
        }
    }

    /* A client call outside any view update (from the player's base). One
     * for the player's own entity before its ENTER waits for it. */
    private onLoneCall(call: ClientCallMessage): void {
        if (!this.inWorld()) return this.protocolError('client call before login completed');
        const id = BigInt(call.entity_id);
        if (id !== 0n && id === this.info.entityId && !this.entitiesById.has(id)) {
            if (this.heldCalls.length >= MAX_HELD_CALLS)
                return this.protocolError("too many client calls waiting for the player's entity");
            this.heldCalls.push({ methodId: call.method_id, args: call.args.slice() });
            return;
        }
        const decoded = this.checkCalls([call]);
        if (decoded) this.deliverCall(call, decoded[0]);
    }

    /* Fires an applied frame's callbacks; false once the client left the world. */
    private fireFrame(
        view: ViewUpdateMessage,
        calls: ({ [name: string]: Value } | null)[],
        events: GameEvent[],
    ): boolean {
        const cb = this.callbacks;
        for (const entity of this.frame.departed) {
            if (entity.events & EVENT_ENTERED) continue; /* never shown */
            cb.onLeave?.(entity);
            if (!this.inWorld()) return false;
        }
        for (const entity of this.frame.entered) {
            if (entity.events & EVENT_DEPARTED) continue;
            cb.onEnter?.(entity);
            if (!this.inWorld()) return false;
        }
        const stampUs = BigInt(view.stamp_us);
        for (const entity of this.frame.moved) {
            if (entity.events & EVENT_DEPARTED) continue;
            cb.onMove?.(entity, stampUs);
            if (!this.inWorld()) return false;
        }
        for (const entity of this.frame.changed) {
            if (entity.events & (EVENT_ENTERED | EVENT_DEPARTED)) continue;
            const names = [...entity.changed].sort((a, b) => a - b).map((id) => entity.definition.properties[id].name);
            cb.onPropertiesChanged?.(entity, names);
            if (!this.inWorld()) return false;
        }
        for (let i = 0; i < view.calls.length; i++) {
            this.deliverCall(view.calls[i], calls[i]);
            if (!this.inWorld()) return false;
        }
        for (const event of events) {
            this.deliverEvent(event);
            if (!this.inWorld()) return false;
        }
        return true;
    }

    /* Applies one ViewUpdate: the whole stream first, then the callbacks. */
    private onView(view: ViewUpdateMessage): void {
        if (!this.inWorld()) return this.protocolError('view update before login completed');
        if (!this.info.inSpace) return this.protocolError("view update while the player's entity is in no space");
        const tick = view.tick;
        this.statsValue.viewUpdates++;
        this.statsValue.streamBytes += view.stream.length;
        this.frame.ticksRestart = view.ticks_restart;
        this.callbacks.onFrameBegin?.(tick);
        if (!this.inWorld()) return;
        this.frame.tick = tick;
        this.frame.stampUs = BigInt(view.stamp_us);
        try {
            this.applyView(view, tick);
        } finally {
            this.endFrame();
        }
        if (this.inWorld()) this.releaseHeldCalls();
    }

    private applyView(view: ViewUpdateMessage, tick: number): void {
        /* An update may carry no stream at all (only calls). */
        if (view.stream.length > 0) {
            try {
                const decoded = decodeStream(new BitReader(view.stream), this.definitionsValue!, this.aliasWidth, this.streamHandler);
                this.statsValue.moves += decoded.moves;
                this.statsValue.propertyUpdates += decoded.updates;
                this.statsValue.discardedRecords += decoded.discarded;
            } catch (error) {
                if (!(error instanceof DecodeError)) throw error;
                this.protocolError(`entity stream: ${error.message}`);
                return;
            }
        }
        if (this.frame.broken) return this.protocolError(`entity stream: ${this.frame.broken}`);
        const calls = this.checkCalls(view.calls);
        if (!calls) return;
        const events = this.checkEvents(view.events);
        if (!events) return;
        if (!this.fireFrame(view, calls, events)) return;
        this.callbacks.onFrameEnd?.(tick);
    }

    /* ---- receiving: base properties, corrections, teleports, errors ---- */

    private onBaseProperties(message: BasePropertiesMessage): void {
        if (!this.inWorld()) return this.protocolError('base properties before login completed');
        const id = BigInt(message.entity_id);
        if (id !== this.info.entityId)
            return this.protocolError(`base properties of entity ${id}, not the player's ${this.info.entityId}`);
        this.statsValue.basePropertyUpdates++;
        const own = this.entitiesById.get(id);
        if (!own) {
            /* The first can come before the first ViewUpdate: their class is
             * known once the entity enters. */
            if (!this.pendBase(message.changes))
                this.protocolError("too many base properties waiting for the player's entity");
            return;
        }
        const result = this.applyBase(own, message.changes);
        if (typeof result === 'string') return this.protocolError(`base properties of entity ${own.id}: ${result}`);
        if (result.length === 0) return;
        this.callbacks.onPropertiesChanged?.(
            own,
            result.map((p) => own.definition.properties[p].name),
        );
    }

    private onCorrection(message: CorrectionMessage): void {
        if (!this.inWorld()) return this.protocolError('correction before login completed');
        const position = readVector(message.position);
        if (!position || !Number.isFinite(message.yaw)) return this.protocolError('correction with a non-finite number');
        const [x, y, z] = position;
        this.statsValue.corrections++;
        this.placeOwn(x, y, z, message.yaw);
        this.callbacks.onCorrection?.({ x, y, z, yaw: message.yaw, sequence: message.sequence, reason: message.reason });
    }

    /* Teleported: the own entity moves; into another space, the whole view
     * and every alias are forgotten and the stream settings change. */
    private onTeleported(message: TeleportedMessage): void {
        if (!this.inWorld()) return this.protocolError('teleport before login completed');
        const position = readVector(message.position);
        if (!position || !Number.isFinite(message.yaw)) return this.protocolError('teleport with a non-finite number');
        if (message.space_changed) {
            const min = readVector(message.world_min);
            const max = readVector(message.world_max);
            if (!min || !max) return this.protocolError('teleport into a space with non-finite bounds');
            const config = createVolatileConfig(message.position_precision, min, max, message.yaw_steps);
            if (!config) return this.protocolError('teleport into a space whose settings the stream cannot use');
            this.aliases.forEach((entity, alias) => {
                if (entity) this.streamLeave(alias);
            });
            this.reportDepartures();
            if (!this.inWorld()) return;
            this.info.spaceName = message.space_name;
            this.info.positionPrecision = message.position_precision;
            this.info.worldMin = min;
            this.info.worldMax = max;
            this.info.yawSteps = message.yaw_steps;
            this.volatileConfig = config;
        }
        this.statsValue.teleports++;
        const [x, y, z] = position;
        this.placeOwn(x, y, z, message.yaw);
        const spaceName = !message.space_changed && message.space_name ? message.space_name : this.info.spaceName;
        this.callbacks.onTeleport?.({ x, y, z, yaw: message.yaw, spaceChanged: message.space_changed, spaceName });
    }

    /* EntityRestored: the view starts again from nothing, same space. */
    private onRestored(message: EntityRestoredMessage): void {
        if (!this.inWorld()) return this.protocolError('restore before login completed');
        const position = readVector(message.position);
        if (!position || !Number.isFinite(message.yaw)) return this.protocolError('restore with a non-finite number');
        this.aliases.forEach((entity, alias) => {
            if (entity) this.streamLeave(alias);
        });
        this.reportDepartures();
        if (!this.inWorld()) return;
        this.statsValue.restores++;
        const [x, y, z] = position;
        this.placeOwn(x, y, z, message.yaw);
        this.callbacks.onRestored?.({
            x,
            y,
            z,
            yaw: message.yaw,
            stateAgeMs: message.state_age_ms,
            fromGhost: message.from_ghost,
        });
    }

    private onServerError(error: ErrorMessage): void {
        this.statsValue.errors++;
        this.retryAfterMs = error.retry_after_ms;
        const beforeWorld = this.stateValue !== 'in_world';
        const name = errorName(error.code);
        this.callbacks.onError?.({ code: error.code, name, message: error.message, retryAfterMs: error.retry_after_ms });
        if (!this.isOpen()) return;
        /* Without a login there is nothing left to do on this connection. */
        if (beforeWorld) this.closeWith('server_error', `server error ${name}: ${error.message}`);
    }

    /* Everything the login reply made. */
    private freeWorld(): void {
        this.entitiesById.clear();
        this.aliases = [];
        this.placeholder = null;
        this.own = null;
        this.heldCalls = [];
        this.pending = [];
        this.pendingBytes = 0;
    }
}
