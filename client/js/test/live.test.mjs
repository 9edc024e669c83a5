// live.test.mjs -- the SDK against a running cluster over WebSocket: log in
// (following the Account's enterWorld when the game starts there), see the
// view's entities enter, walk, drop the connection and take the entity back
// with the session token (where the walk left it), call base:chat (the demo
// pays a gold coin for it), and close cleanly. Skipped unless TESSERA_WS_URL
// names a baseapp's WebSocket port:
//
//   scripts/cluster up --dir /tmp/tessera-live --build build-dev   # prints websockets=ws://...
//   TESSERA_WS_URL=ws://127.0.0.1:PORT/ npm test
//   scripts/cluster down --dir /tmp/tessera-live
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Tessera } from '../test-support/helpers.mjs';

const URL_TO_TEST = process.env.TESSERA_WS_URL;

// Polls `condition` every 20 ms until it holds; fails after `seconds`.
async function waitFor(what, condition, seconds = 15) {
    const deadline = Date.now() + seconds * 1000;
    while (!condition()) {
        if (Date.now() > deadline) throw new Error(`timed out after ${seconds} s waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
}

// A client with every callback counted, logged in (by password, or with a
// session token), following retry hints a few times.
async function connect(WebSocket, account, credential) {
    for (let attempt = 1; ; attempt++) {
        const seen = { enters: [], leaves: 0, events: [], changed: [], corrections: [], errors: [], closed: null, info: null };
        const client = new Tessera.TesseraClient({
            WebSocket,
            name: 'tessera-js live test',
            callbacks: {
                onLoggedIn: (info) => (seen.info = info),
                onPlayerChanged: (info) => (seen.info = info),
                onEnter: (entity) => seen.enters.push(entity),
                onLeave: () => seen.leaves++,
                onEvent: (event) => seen.events.push(event),
                onPropertiesChanged: (entity, names) => seen.changed.push([entity.id, names]),
                onCorrection: (correction) => seen.corrections.push(correction),
                onError: (error) => seen.errors.push(error),
                onClosed: (cause, reason) => (seen.closed = { cause, reason }),
            },
        });
        client.connect(URL_TO_TEST);
        if (credential.password) client.login(account, credential.password);
        else client.reconnect(account, credential.sessionToken);
        await waitFor('the login reply', () => seen.info || seen.closed);
        if (seen.info) return { client, seen };
        const hint = seen.errors.at(-1);
        if (!hint || hint.retryAfterMs === 0 || attempt === 5) throw new Error(`login failed: ${JSON.stringify(seen.closed)} ${JSON.stringify(hint)}`);
        await new Promise((resolve) => setTimeout(resolve, hint.retryAfterMs));
    }
}

test(
    'live: login, enters, a walk, a reconnect, base:chat, a clean close',
    { skip: URL_TO_TEST ? false : 'set TESSERA_WS_URL=ws://HOST:PORT/ (scripts/cluster up prints websockets=...) to run against a cluster', timeout: 120000 },
    async () => {
        const { WebSocket } = await import('ws');
        const account = process.env.TESSERA_ACCOUNT ?? `jslive${Date.now() % 1000000000}`;
        const first = await connect(WebSocket, account, { password: process.env.TESSERA_PASSWORD ?? 'secret' });
        let { client, seen } = first;
        assert.equal(client.state, 'in_world');
        assert.match(client.definitions.digest, /^[0-9a-f]{64}$/);
        if (!seen.info.inSpace) {
            // The classic flow: an Account hands the client to its Avatar.
            client.call(seen.info.entityId, 'base', 'enterWorld');
            await waitFor('the Avatar to enter', () => client.player?.alias >= 0);
        }
        await waitFor('the player to enter the view', () => client.player !== null && client.player.alias >= 0);
        const player = client.player;
        assert.equal(player.owner, true);
        assert.equal(player.class, 'Avatar');
        assert.ok(seen.enters.some((e) => e.id === player.id), 'onEnter told of the player\'s own entity');
        await waitFor('another entity to enter the view', () => seen.enters.some((e) => e.id !== player.id));
        console.log(`# live: ${account} is ${player.class} ${player.id} at (${player.x}, ${player.z}); ${client.entities.size} entities in view`);

        // A walk well under max_speed and moves_per_second: 0.2 m every 100 ms.
        const info = client.loginInfo;
        const step = Math.min(0.2, info.maxSpeed / 20);
        const start = { x: player.x, y: player.y, z: player.z };
        const direction = start.x > 0 ? -1 : 1; // towards the middle, to stay in the world
        for (let i = 1; i <= 20; i++) {
            assert.equal(client.move(start.x + direction * step * i, start.y, start.z, 0), true);
            await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const walkedTo = start.x + direction * step * 20;
        assert.equal(client.lastSequence, 20);
        assert.equal(client.player.x, Math.fround(walkedTo));
        assert.deepEqual(seen.corrections, [], 'no move was refused');
        const sessionToken = client.loginInfo.sessionToken;
        assert.ok(sessionToken.length > 0);

        // The connection goes; the session token takes the entity back, where the walk left it.
        client.close();
        await waitFor('the first client to close', () => seen.closed !== null);
        assert.deepEqual(seen.closed, { cause: 'closed_by_caller', reason: 'closed by the client' });
        ({ client, seen } = await connect(WebSocket, account, { sessionToken }));
        assert.equal(seen.info.reconnected, true);
        await waitFor('the player to enter again', () => client.player !== null && client.player.alias >= 0);
        const back = client.player;
        assert.ok(Math.abs(back.x - walkedTo) <= 0.05, `back at x ${back.x}, walked to ${walkedTo}`);
        assert.ok(Math.abs(back.z - start.z) <= 0.05, `back at z ${back.z}, started at ${start.z}`);

        // base:chat pays a gold coin, which comes back in BaseProperties.
        const gold = back.properties.gold;
        client.call(back.id, 'base', 'chat', { text: 'hello from the TypeScript SDK' });
        await waitFor('the gold coin', () => client.player?.properties.gold === gold + 1);
        assert.ok(seen.changed.some(([id, names]) => id === back.id && names.includes('gold')));
        // A call the definitions refuse is never sent.
        assert.throws(() => client.call(back.id, 'base', 'poked', { from: 1n }), (e) => e.code === 'not_exposed');
        assert.equal(seen.errors.length, 0, `no Error from the server: ${JSON.stringify(seen.errors)}`);

        client.close();
        await waitFor('the second client to close', () => seen.closed !== null);
        assert.deepEqual(seen.closed, { cause: 'closed_by_caller', reason: 'closed by the client' });
        assert.equal(client.state, 'closed');
        console.log(
            `# live: walked ${step * 20} m, came back at (${back.x}, ${back.z}), gold ${gold} -> ${gold + 1}; ` +
                `${client.stats.viewUpdates} view updates, ${client.stats.moves} moves decoded, ` +
                `${first.client.stats.redirects + client.stats.redirects} redirects followed`,
        );
    },
);
