// client.test.mjs -- TesseraClient over a scripted WebSocket: the hello and
// login exchange, the frame's callbacks in the C SDK's order, base
// properties, moves, errors with retry hints, redirects, reconnects, and
// protocol errors closing the client.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
    FakeSocket,
    Tessera,
    absoluteAt,
    argumentBytes,
    changes,
    demoDefinitions,
    loggedInClient,
    loginReply,
    tick,
    viewUpdate,
} from '../test-support/helpers.mjs';

const definitions = demoDefinitions();
const avatar = definitions.findClass('Avatar');
const npc = definitions.findClass('Npc');
const names = (events) => events.map((e) => e[0]);

// The first view: the player's own Avatar (alias 0), two Npcs (1, 2) with positions.
function firstView() {
    return viewUpdate(1, (b) =>
        b
            .enter(0, 77n, 'Avatar', true, changes({ name: 'alice', health: 90 }))
            .move(0, absoluteAt(0, 0, 10))
            .enter(1, 1001n, 'Npc', false, changes({ name: 'Guard' }))
            .move(1, absoluteAt(5, 0, 5, 64))
            .enter(2, 1002n, 'Npc', false, changes({ name: 'Rat' }))
            .move(2, absoluteAt(-5, 0, -5)),
    );
}

test('hello, then the login asked for before the connection was up, then the reply', async () => {
    const { client, socket, events } = loggedInClient();
    assert.equal(socket.url, 'ws://127.0.0.1:7000/');
    assert.equal(socket.binaryType, 'arraybuffer');
    assert.deepEqual(socket.bodies(), ['hello', 'login']);
    assert.deepEqual(socket.sent[0].hello, { protocol_version: 3, client_name: 'tessera-js' });
    assert.equal(socket.sent[1].login.account, 'alice');
    assert.equal(socket.sent[1].login.password, 'secret');
    assert.equal(client.state, 'in_world');
    assert.equal(client.serverName, 'baseapp-1');
    assert.deepEqual(names(events), ['onLoggedIn']);
    const info = events[0][1];
    assert.equal(info.entityId, 77n);
    assert.equal(info.entityType, 'Avatar');
    assert.equal(info.sessionToken, 'session-1');
    assert.equal(info.maxAliases, 1024);
    assert.equal(info.definitionClasses, 7);
    assert.deepEqual(info.baseapps, ['127.0.0.1:7001', '[::1]:7002'], 'only dialable IP addresses are kept');
    assert.equal(client.definitions.digest, demoDefinitions().digest);
    assert.equal(client.stats.passwordLogins, 1);
    client.close();
    client.close();
    await tick();
    assert.deepEqual(events.at(-1), ['onClosed', 'closed_by_caller', 'closed by the client']);
    assert.equal(events.filter((e) => e[0] === 'onClosed').length, 1, 'onClosed fires once');
    assert.equal(client.state, 'closed');
    assert.equal(client.entities.size, 0);
});

test('a frame fires leave, enter, move, properties, calls, events in that order', () => {
    const { client, socket, events } = loggedInClient();
    socket.deliver(firstView());
    assert.deepEqual(names(events.slice(1)), ['onFrameBegin', 'onEnter', 'onEnter', 'onEnter', 'onFrameEnd']);
    assert.equal(client.player.id, 77n);
    assert.deepEqual([client.entity(1001).x, client.entity(1001).z], [5, 5]);
    assert.equal(client.entity(1001).yaw, Math.fround(Math.PI / 2));
    events.length = 0;
    const onDamage = npc.methods.client.find((m) => m.name === 'onDamage');
    const doorChanged = definitions.findEvent('door_changed');
    socket.deliver(
        viewUpdate(
            2,
            (b) =>
                b
                    .leave(1)
                    .enter(3, 2001n, 'Door', false, changes({ open: true }))
                    .move(2, absoluteAt(-4, 0, -5))
                    .update(2, 'Npc', changes({ health: 40 }))
                    .enter(4, 3001n, 'Npc', false, changes({}))
                    .leave(4),
            {
                calls: [
                    { entity_id: '1002', method_id: onDamage.id, args: argumentBytes(onDamage, { amount: 5 }) },
                    { entity_id: '1001', method_id: onDamage.id, args: argumentBytes(onDamage, { amount: 1 }) },
                ],
                events: [{ event_id: doorChanged.id, source_id: '2001', args: argumentBytes(doorChanged, { door: 2001n, open: true }) }],
            },
        ),
    );
    assert.deepEqual(names(events), [
        'onFrameBegin',
        'onLeave',
        'onEnter',
        'onMove',
        'onPropertiesChanged',
        'onClientCall',
        'onEvent',
        'onFrameEnd',
    ]);
    assert.equal(events[1][1].id, 1001n);
    assert.equal(events[2][1].id, 2001n);
    assert.equal(events[3][1].id, 1002n);
    assert.equal(events[3][2], 2000n, 'the update\'s stamp');
    assert.deepEqual(events[4][2], ['health']);
    assert.deepEqual(events[5].slice(2), ['onDamage', { amount: 5 }]);
    assert.equal(events[6][1].name, 'door_changed');
    assert.equal(events[6][1].source, 2001n);
    assert.deepEqual(events[6][1].fields, { door: 2001n, open: true });
    assert.equal(client.stats.staleCalls, 1, 'a call for an entity that left in the same update is dropped');
    assert.equal(client.entity(3001), undefined, 'entered and left in one update: no callback, not in the table');
    assert.deepEqual([...client.entities.keys()].sort((a, b) => (a < b ? -1 : 1)), [77n, 1002n, 2001n]);
    assert.equal(client.entity(1002).properties.health, 40);
    assert.equal(client.entityByAlias(3).class, 'Door');
});

test('base properties before the own ENTER wait for it; later ones report a change', () => {
    const { client, socket, events } = loggedInClient();
    const gold = (value) => {
        const w = new Tessera.BitWriter();
        const values = avatar.properties.map((p) => Tessera.valueFromDefault(p.type, p.defaultValue));
        values[4] = value;
        Tessera.encodeChangeList(w, avatar, values, [4]);
        return w.bytes();
    };
    socket.deliver({ base_properties: { entity_id: '77', changes: gold(500) } });
    assert.equal(client.player, null);
    socket.deliver(firstView());
    assert.equal(client.player.properties.gold, 500);
    events.length = 0;
    socket.deliver({ base_properties: { entity_id: '77', changes: gold(600) } });
    assert.deepEqual(events, [['onPropertiesChanged', client.player, ['gold']]]);
    // A change list with a property BaseProperties may not carry closes the client.
    const w = new Tessera.BitWriter();
    Tessera.encodeChangeList(w, avatar, avatar.properties.map((p) => Tessera.valueFromDefault(p.type, p.defaultValue)), [2]);
    socket.deliver({ base_properties: { entity_id: '77', changes: w.bytes() } });
    assert.equal(client.state, 'closing');
    assert.match(client.closingReason, /base properties of entity 77: unknown or unexpected property/);
});

test('a lone client call for the player before its ENTER is delivered after it', () => {
    const { socket, events } = loggedInClient();
    const onEcho = avatar.methods.client.find((m) => m.name === 'onEcho');
    socket.deliver({ call: { entity_id: '77', method_id: onEcho.id, args: argumentBytes(onEcho, { n: 9 }) } });
    assert.equal(events.filter((e) => e[0] === 'onClientCall').length, 0);
    socket.deliver(firstView());
    const call = events.find((e) => e[0] === 'onClientCall');
    assert.deepEqual(call.slice(2), ['onEcho', { n: 9 }]);
    assert.equal(events.indexOf(call), events.length - 1, 'after the frame that entered the player');
});

test('moves carry increasing sequence numbers and place the player', () => {
    const { client, socket } = loggedInClient();
    assert.equal(client.move(1, 2, 3, 0.5), true);
    socket.deliver(firstView());
    assert.equal(client.move(1.5, 0, 10.25, 0.25), true);
    assert.equal(client.move(NaN, 0, 0, 0), false);
    const moves = socket.sent.filter((m) => m.body === 'move').map((m) => m.move);
    assert.deepEqual(moves.map((m) => m.sequence), [1, 2]);
    assert.deepEqual(moves[1].position, { x: 1.5, y: 0, z: 10.25 });
    assert.deepEqual([client.player.x, client.player.z, client.player.yaw], [1.5, 10.25, 0.25]);
    assert.equal(client.lastSequence, 2);
    socket.deliver({ correction: { position: { x: 0, y: 0, z: 9 }, yaw: 0, sequence: 2, reason: 'too fast' } });
    assert.equal(client.player.z, 9);
});

test('an Error before login: onError with the retry hint, then closed as a server error', async () => {
    const { client, socket, events } = loggedInClient({ reply: null });
    socket.deliver({ error: { code: 7, message: 'login queue full', retry_after_ms: 1500 } });
    assert.deepEqual(events[0], ['onError', { code: 7, name: 'unavailable', message: 'login queue full', retryAfterMs: 1500 }]);
    assert.equal(client.errorRetryAfterMs, 1500);
    assert.equal(socket.closedWith.code, 1000);
    await tick();
    assert.deepEqual(events.at(-1), ['onClosed', 'server_error', 'server error unavailable: login queue full']);
});

test('protocol errors close the client: out of order, broken streams, unknown events', async () => {
    // A view update before the login reply.
    {
        const { client, socket, events } = loggedInClient({ reply: null });
        socket.deliver(firstView());
        assert.equal(client.state, 'closing');
        await tick();
        assert.deepEqual(events.at(-1), ['onClosed', 'protocol', 'protocol error: view update before login completed']);
    }
    // A stream with bits after END; nothing of the frame is told.
    {
        const { client, socket, events } = loggedInClient();
        const view = firstView();
        view.view.stream = Uint8Array.from([...view.view.stream, 0]);
        socket.deliver(view);
        assert.equal(client.state, 'closing');
        assert.match(client.closingReason, /entity stream: malformed record/);
        assert.deepEqual(names(events), ['onLoggedIn', 'onFrameBegin']);
    }
    // An ENTER for an alias that is live.
    {
        const { client, socket } = loggedInClient();
        socket.deliver(firstView());
        socket.deliver(viewUpdate(2, (b) => b.enter(1, 5000n, 'Door', false, changes({}))));
        assert.match(client.closingReason, /ENTER for alias 1, which is live/);
    }
    // A delta MOVE for an entity with no position yet, and a MOVE cut short for an unknown alias.
    {
        const { client, socket } = loggedInClient();
        socket.deliver(
            viewUpdate(1, (b) =>
                b.enter(1, 5000n, 'Door', false, changes({})).move(1, (w) => {
                    w.write(0, 1);
                    w.write(0, 2);
                    w.write(0, 1);
                    w.write(0, 1);
                }),
            ),
        );
        assert.equal(client.closingReason, 'protocol error: entity stream: MOVE record for alias 1: a delta before any absolute position');
        const cut = loggedInClient();
        const view = viewUpdate(1, (b) => b.move(9, (w) => w.write(1, 1)));
        view.view.stream = view.view.stream.subarray(0, 2);
        cut.socket.deliver(view);
        assert.equal(cut.client.closingReason, 'protocol error: entity stream: MOVE record for alias 9: truncated');
    }
    // An event the definitions do not declare.
    {
        const { client, socket } = loggedInClient();
        socket.deliver({ event: { event_id: 99, source_id: '0', args: new Uint8Array() } });
        assert.match(client.closingReason, /game event 99, which the definitions \(4 events\) do not declare/);
    }
    // Definitions that are not their digest.
    {
        const { client } = loggedInClient({ reply: loginReply({ definitions_digest: '00'.repeat(32) }) });
        assert.match(client.closingReason, /do not match their digest/);
    }
    // A frame that is not a ServerToClient.
    {
        const { client, socket } = loggedInClient();
        socket.onmessage({ data: Uint8Array.from([0xff, 0xff, 0xff]).buffer });
        assert.match(client.closingReason, /does not decode as ServerToClient/);
    }
});

test('a LoginRedirect: the client dials the named baseapp and logs in with the one-time token', async () => {
    const { client, socket, events } = loggedInClient({ reply: null });
    socket.deliver({ login_redirect: { host: '127.0.0.2', port: 9001, token: 'once', reason: 'least loaded' } });
    assert.deepEqual(events.at(-1), ['onRedirected', 'least loaded']);
    assert.equal(socket.closedWith.reason, 'redirected');
    await tick();
    const next = FakeSocket.last();
    assert.notEqual(next, socket);
    assert.equal(next.url, 'ws://127.0.0.2:9001/');
    assert.equal(client.url, 'ws://127.0.0.2:9001/');
    next.open();
    next.deliver({ hello: { protocol_version: 3, server_name: 'baseapp-2' } });
    assert.deepEqual(next.sent.map((m) => m.body), ['hello', 'token_login']);
    assert.deepEqual(next.sent[1].token_login, { account: 'alice', token: 'once', known_definitions_digest: '' });
    next.deliver(loginReply());
    assert.equal(client.state, 'in_world');
    assert.equal(client.stats.redirects, 1);
    // A redirect to no IP address is refused.
    const other = loggedInClient({ reply: null });
    other.socket.deliver({ login_redirect: { host: 'example.com', port: 9001, token: 'once', reason: '' } });
    assert.match(other.client.closingReason, /no usable address/);
});

test('reconnect: a Reconnect with the session token, carried through a token-less redirect', async () => {
    const events = [];
    const client = new Tessera.TesseraClient({ WebSocket: FakeSocket, callbacks: { onLoggedIn: (info) => events.push(info) } });
    client.connect('ws://[::1]:7000/');
    client.reconnect('alice', 'session-1');
    const socket = FakeSocket.last();
    socket.open();
    socket.deliver({ hello: { protocol_version: 3, server_name: 'b1' } });
    assert.deepEqual(socket.sent[1].reconnect, { account: 'alice', session_token: 'session-1', known_definitions_digest: '' });
    socket.deliver({ login_redirect: { host: '::2', port: 7100, token: '', reason: 'the session is there' } });
    await tick();
    const next = FakeSocket.last();
    assert.equal(next.url, 'ws://[::2]:7100/');
    next.open();
    next.deliver({ hello: { protocol_version: 3, server_name: 'b2' } });
    assert.deepEqual(next.sent[1].reconnect, { account: 'alice', session_token: 'session-1', known_definitions_digest: '' });
    next.deliver(loginReply({ reconnected: true, session_token: 'session-2' }));
    assert.equal(events[0].reconnected, true);
    assert.equal(events[0].sessionToken, 'session-2');
    assert.equal(client.stats.reconnectRequests, 2);
    assert.throws(() => client.login('alice', 'x'), /already requested/);
});

test('a connection that never opens closes as connect_failed; one that drops as disconnected', async () => {
    const closed = [];
    const client = new Tessera.TesseraClient({ WebSocket: FakeSocket, callbacks: { onClosed: (cause) => closed.push(cause) } });
    client.connect('ws://127.0.0.1:1/');
    FakeSocket.last().drop();
    const { socket, events } = loggedInClient();
    socket.drop();
    await tick();
    assert.deepEqual(closed, ['connect_failed']);
    assert.equal(events.at(-1)[1], 'disconnected');
    assert.throws(() => new Tessera.TesseraClient({ WebSocket: FakeSocket }).connect('http://x/'), /not a ws/);
    assert.throws(() => new Tessera.TesseraClient({ WebSocket: FakeSocket }).login('bad name!', 'x'), RangeError);
});

test('giveClientTo: the old player goes, the new one waits in no space, then enters a space', () => {
    const { client, socket, events } = loggedInClient({ reply: loginReply({ entity_type: 'Account', no_space: true, entity_id: '50' }) });
    assert.equal(client.player.class, 'Account');
    assert.equal(client.player.alias, -1);
    socket.deliver({ player_destroyed: { entity_id: '50' } });
    assert.equal(client.player, null);
    socket.deliver({ player_created: { entity_id: '77', entity_type: 'Avatar', session_token: 's2' } });
    assert.equal(client.player.class, 'Avatar');
    assert.equal(client.loginInfo.sessionToken, 's2');
    const space = loginReply().login_reply;
    socket.deliver({ entered_space: { ...space, entity_id: '77', definitions: undefined, definitions_digest: undefined, baseapps: undefined, entity_type: undefined, session_token: undefined, max_frame_bytes: undefined, moves_per_second: undefined, calls_per_second: undefined, detached_grace_ms: undefined } });
    assert.equal(client.loginInfo.inSpace, true);
    socket.deliver(firstView());
    assert.equal(client.player.alias, 0);
    assert.deepEqual(
        names(events).filter((n) => n !== 'onFrameBegin' && n !== 'onFrameEnd'),
        ['onLoggedIn', 'onLeave', 'onPlayerChanged', 'onEnteredSpace', 'onEnter', 'onEnter', 'onEnter'],
    );
});

test('a teleport into another space empties the view and uses the new quantization', () => {
    const { client, socket, events } = loggedInClient();
    socket.deliver(firstView());
    events.length = 0;
    socket.deliver({
        teleported: {
            position: { x: 1, y: 0, z: 1 },
            yaw: 0,
            space_changed: true,
            space_name: 'dungeon',
            position_precision: 0.5,
            world_min: { x: 0, y: 0, z: 0 },
            world_max: { x: 100, y: 10, z: 100 },
            yaw_steps: 16,
        },
    });
    assert.deepEqual(names(events), ['onLeave', 'onLeave', 'onLeave', 'onTeleport']);
    assert.equal(client.entities.size, 0);
    assert.equal(client.loginInfo.spaceName, 'dungeon');
    // The new space's MOVE records: 200 units on x and z (8 bits), 20 on y (5 bits), 4-bit yaws.
    socket.deliver(
        viewUpdate(1, (b) =>
            b.enter(7, 77n, 'Avatar', true, changes({})).enter(8, 9n, 'Door', false, changes({})).move(8, (w) => {
                w.write(1, 1);
                w.write(20, 8);
                w.write(4, 5);
                w.write(200, 8);
                w.write(8, 4);
            }),
        ),
    );
    const door = client.entity(9);
    assert.deepEqual([door.x, door.y, door.z, door.yaw], [10, 2, 100, Math.fround(Math.PI)]);
});
