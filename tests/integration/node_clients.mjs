// node_clients.mjs -- N players on the TypeScript SDK over WebSocket, for
// test_node_clients.py: they log in, walk random waypoints, stand still for
// the last SETTLE_SECONDS, and then check one another's views as
// tessera-bots --verify-aoi checks its bots' (each knows where the others
// truly are, in this process). Then one JSON report on stdout.
//
//   node node_clients.mjs WS_URL COUNT SECONDS AREA ACCOUNT_PREFIX
//
// Needs TESSERA_JS_MODULE (the SDK's ES module, as meson bundles it) and
// TESSERA_JS_DIR (client/js, whose node_modules has ws). The report:
//   logged_in, in_world_at_end, errors, error_messages, moves_sent,
//   login_retries (logins refused with a retry hint and tried again),
//   aoi_checked, aoi_mismatches (a client in range missing from a view, or
//   one well out of range still in it), mismatch_examples, seen_ids (every
//   entity id any of them saw), own_ids (theirs), view_radius.
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, countText, secondsText, areaText, prefix] = process.argv.slice(2);
const count = Number(countText), seconds = Number(secondsText), area = Number(areaText);
const Tessera = await import(pathToFileURL(process.env.TESSERA_JS_MODULE).href);
const { WebSocket } = createRequire(path.join(process.env.TESSERA_JS_DIR, 'package.json'))('ws');

const SPEED = 4; // metres a second, under the demo's limit
// The last seconds are spent standing still, so every view has settled
// when it is checked (as tessera-bots --verify-aoi does).
const SETTLE_SECONDS = 2;
// A view is a square of the view radius around its player, decided on
// quantized positions: a pair within this of an edge is right either way
// (and beyond radius + hysteresis the other must be gone).
const MARGIN = 0.5;

const report = {
    logged_in: 0, in_world_at_end: 0, errors: 0, error_messages: [], moves_sent: 0, login_retries: 0,
    aoi_checked: 0, aoi_mismatches: 0, mismatch_examples: [], seen_ids: [], own_ids: [], view_radius: 0,
};
const seen = new Set();
const players = [];

function fail(text) {
    report.errors++;
    if (report.error_messages.length < 10) report.error_messages.push(text);
}

// A player's client; a login refused with a retry hint (too many logins
// being checked for this address: the bots log in from it too) is tried
// again after the hint, as tessera-bots does.
function start(player) {
    const i = player.index;
    let retryAfterMs = 0;
    player.client = new Tessera.TesseraClient({
        WebSocket,
        name: `node-client/${i}`,
        callbacks: {
            onLoggedIn(info) {
                player.info = info;
                report.logged_in++;
                if (!info.inSpace) player.client.call(info.entityId, 'base', 'enterWorld');
                else enter(player, info);
            },
            onEnteredSpace(info) { player.info = info; enter(player, info); },
            onPlayerChanged(info) { player.info = info; },
            onEnter(entity) { seen.add(entity.id.toString()); },
            onCorrection(correction) { player.x = correction.x; player.z = correction.z; },
            onError(error) {
                if (!player.info && error.retryAfterMs > 0) retryAfterMs = error.retryAfterMs;
                else fail(`client ${i}: server error ${error.name}: ${error.message}`);
            },
            onClosed(cause, reason) {
                player.inWorld = false;
                if (retryAfterMs > 0 && !player.info && !finished) {
                    report.login_retries++;
                    setTimeout(() => start(player), retryAfterMs);
                } else if (cause !== 'closed_by_caller') {
                    fail(`client ${i}: closed (${cause}): ${reason}`);
                }
            },
        },
    });
    player.client.connect(url);
    player.client.login(`${prefix}${i}`, 'secret');
}

let finished = false;
for (let i = 0; i < count; i++) {
    const player = { index: i, client: null, info: null, x: 0, z: 0, target: null, inWorld: false };
    players.push(player);
    setTimeout(() => start(player), i * 100);
}

function enter(player, info) {
    player.inWorld = true;
    player.x = info.x;
    player.z = info.z;
    report.view_radius = info.viewRadius;
}

// Walking: every 100 ms a step toward the waypoint, and its move, until
// the settling.
const started = Date.now();
const step = setInterval(() => {
    if (Date.now() - started > (seconds - SETTLE_SECONDS) * 1000) return;
    for (const p of players) {
        if (!p.inWorld || !p.client.player) continue;
        if (!p.target || Math.hypot(p.target.x - p.x, p.target.z - p.z) < 1)
            p.target = { x: (Math.random() * 2 - 1) * area, z: (Math.random() * 2 - 1) * area };
        const dx = p.target.x - p.x, dz = p.target.z - p.z, d = Math.hypot(dx, dz);
        const walk = Math.min(d, SPEED * 0.1);
        p.x += dx / d * walk;
        p.z += dz / d * walk;
        if (p.client.move(p.x, p.client.player.y, p.z, Math.atan2(dx, dz))) report.moves_sent++;
    }
}, 100);

// Checking, once everyone stood still: each player's view against where
// the others truly are.
function check() {
    const inWorld = players.filter((p) => p.inWorld && p.info && p.client.player);
    for (const a of inWorld) {
        const r = a.info.viewRadius, h = a.info.viewHysteresis;
        if (!a.client.entities.has(a.client.player.id)) {
            report.aoi_mismatches++;
            report.mismatch_examples.push({ observer: a.index, wrong: 'does not see itself' });
        }
        for (const b of inWorld) {
            if (a === b) continue;
            const distance = Math.max(Math.abs(a.x - b.x), Math.abs(a.z - b.z));
            const inView = a.client.entities.has(b.client.player.id);
            let wrong = null;
            if (distance < r - MARGIN && !inView) wrong = 'missing';
            else if (distance > r + h + MARGIN && inView) wrong = 'stale';
            else if (distance >= r - MARGIN && distance <= r + h + MARGIN) continue; // the edge: either is right
            report.aoi_checked++;
            if (wrong) {
                report.aoi_mismatches++;
                if (report.mismatch_examples.length < 10)
                    report.mismatch_examples.push({ observer: a.index, other: b.index, distance, wrong });
            }
        }
    }
}

setTimeout(() => {
    finished = true;
    clearInterval(step);
    check();
    for (const p of players) {
        if (p.inWorld && p.client.player) {
            report.in_world_at_end++;
            report.own_ids.push(p.client.player.id.toString());
        }
    }
    report.seen_ids = [...seen];
    for (const p of players) p.client.close();
    setTimeout(() => {
        console.log(JSON.stringify(report));
        process.exit(0);
    }, 300);
}, seconds * 1000);
