// volatile.test.mjs -- MOVE record bodies (common/volatile_codec.c):
// absolute and delta records written by hand, every refusal, skipping, and
// the encoder and decoder in lockstep over a long walk.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Tessera, readerOf } from '../test-support/helpers.mjs';

const { BitWriter, BitReader, DecodeError, createVolatileConfig, decodeVolatile, skipVolatile, newTrack } = Tessera;

// A 1024 m x 64 m x 1024 m world from -512 at 1/64 m, 256 yaw steps:
// 65536 units on x and z (17 bits), 4096 on y (13 bits), 8-bit yaws.
const config = createVolatileConfig(1 / 64, [-512, -32, -512], [512, 32, 512], 256);

test('the config derives units and bit widths from the login reply', () => {
    assert.deepEqual(config.units, [65536, 4096, 65536]);
    assert.deepEqual(config.axisBits, [17, 13, 17]);
    assert.equal(config.yawBits, 8);
    assert.equal(createVolatileConfig(0, [0, 0, 0], [1, 1, 1], 256), null);
    assert.equal(createVolatileConfig(1, [0, 0, 0], [0, 1, 1], 256), null);
    assert.equal(createVolatileConfig(1, [0, 0, 0], [1, 1, 1], 1), null);
    assert.equal(createVolatileConfig(1, [0, 0, 0], [1, 1, 1], 65537), null);
    assert.equal(createVolatileConfig(1e-6, [0, 0, 0], [2000, 1, 1], 256), null, 'more than 2^30 units');
    assert.deepEqual(createVolatileConfig(1, [0, 0, 0], [0.5, 1, 1], 256).axisBits[0], 1, 'a thin world still takes a bit');
});

function absolute(w, x, y, z, yaw) {
    w.write(1, 1);
    w.write(x, 17);
    w.write(y, 13);
    w.write(z, 17);
    w.write(yaw, 8);
}

test('an absolute record: units from the min corner, a yaw step', () => {
    const track = newTrack();
    const r = readerOf((w) => absolute(w, 32768 + 64, 2048, 32768 - 128, 64));
    const position = decodeVolatile(r, track, config);
    assert.deepEqual(position, { x: 1, y: 0, z: -2, yaw: Math.fround(Math.PI / 2) });
    assert.equal(r.position, 1 + 17 + 13 + 17 + 8);
    assert.deepEqual(track, { x: 32832, y: 2048, z: 32640, yaw: 64, valid: true });
    // A yaw past half a turn folds into (-pi, pi].
    assert.equal(decodeVolatile(readerOf((w) => absolute(w, 0, 0, 0, 192)), newTrack(), config).yaw, Math.fround(-Math.PI / 2));
    assert.equal(decodeVolatile(readerOf((w) => absolute(w, 0, 0, 0, 128)), newTrack(), config).yaw, Math.fround(Math.PI));
});

test('a delta record: hclass widths, dy classes, small and absolute turns', () => {
    const track = { x: 1000, y: 2048, z: 1000, yaw: 10, valid: true };
    // hclass 2 (7 bits): dx = -3, dz = 63; y changed, class 0 (6 bits): dy = -32; small turn -8.
    const r = readerOf((w) => {
        w.write(0, 1);
        w.write(2, 2);
        w.write(128 - 3, 7);
        w.write(63, 7);
        w.write(1, 1);
        w.write(0, 1);
        w.write(64 - 32, 6);
        w.write(1, 1);
        w.write(1, 1);
        w.write(16 - 8, 4);
    });
    decodeVolatile(r, track, config);
    assert.deepEqual(track, { x: 997, y: 2016, z: 1063, yaw: 2, valid: true });
    assert.equal(r.remaining, 0);
    // hclass 0 (a turn in place) with an absolute yaw step.
    decodeVolatile(readerOf((w) => (w.write(0, 1), w.write(0, 2), w.write(0, 1), w.write(1, 1), w.write(0, 1), w.write(200, 8))), track, config);
    assert.deepEqual(track, { x: 997, y: 2016, z: 1063, yaw: 200, valid: true });
    // A small turn wraps modulo yaw_steps.
    const turning = { ...track, yaw: 250 };
    decodeVolatile(readerOf((w) => (w.write(0, 1), w.write(0, 2), w.write(0, 1), w.write(1, 1), w.write(1, 1), w.write(7, 4))), turning, config);
    assert.equal(turning.yaw, 1);
});

test('refusals: no base, outside the world, yaw steps, small turns below 16 steps, truncation', () => {
    const refuses = (build, track, code, cfg = config) => {
        const before = { ...track };
        const r = readerOf(build);
        assert.throws(() => decodeVolatile(r, track, cfg), (e) => e instanceof DecodeError && e.code === code, code);
        assert.deepEqual(track, before, 'a refused record leaves the track alone');
        assert.equal(r.failed, true);
    };
    const delta = (dx) => (w) => (w.write(0, 1), w.write(1, 2), w.write(dx < 0 ? dx + 32 : dx, 5), w.write(0, 5), w.write(0, 1), w.write(0, 1));
    refuses(delta(1), newTrack(), 'move_no_base');
    refuses(delta(-1), { x: 0, y: 0, z: 0, yaw: 0, valid: true }, 'move_range');
    refuses((w) => absolute(w, 65537, 0, 0, 0), newTrack(), 'move_range');
    refuses((w) => absolute(w, 0, 4097, 0, 0), newTrack(), 'move_range');
    const coarse = createVolatileConfig(1 / 64, [-512, -32, -512], [512, 32, 512], 12); // 4-bit yaws
    refuses((w) => (w.write(1, 1), w.write(0, 17), w.write(0, 13), w.write(0, 17), w.write(12, 4)), newTrack(), 'move_range', coarse);
    refuses((w) => (w.write(0, 1), w.write(0, 2), w.write(0, 1), w.write(1, 1), w.write(1, 1), w.write(1, 4)), { x: 0, y: 0, z: 0, yaw: 0, valid: true }, 'move_range', coarse);
    refuses((w) => (w.write(1, 1), w.write(0, 17)), newTrack(), 'move_truncated');
    refuses(() => {}, newTrack(), 'move_truncated');
});

test('skipping reads exactly what decoding reads', () => {
    const records = [
        (w) => absolute(w, 1, 2, 3, 4),
        (w) => (w.write(0, 1), w.write(3, 2), w.write(5, 12), w.write(7, 12), w.write(1, 1), w.write(1, 1), w.write(9, 14), w.write(0, 1)),
        (w) => (w.write(0, 1), w.write(0, 2), w.write(0, 1), w.write(1, 1), w.write(0, 1), w.write(3, 8)),
    ];
    for (const record of records) {
        const decoded = readerOf(record);
        decodeVolatile(decoded, { x: 100, y: 100, z: 100, yaw: 0, valid: true }, config);
        const skipped = readerOf(record);
        skipVolatile(skipped, config);
        assert.equal(skipped.position, decoded.position);
    }
    assert.throws(() => skipVolatile(readerOf((w) => w.write(1, 1)), config), (e) => e.code === 'move_truncated');
});

test('encoder and decoder stay in lockstep over a walk, within half a step', () => {
    const server = newTrack();
    const client = newTrack();
    const w = new BitWriter();
    const path = [];
    let x = 0;
    let z = 0;
    let yaw = 0;
    for (let i = 0; i < 500; i++) {
        // Walks, strolls, turns in place, and now and then a teleport.
        const speed = [0.5, 0.25, 0, 3, 40][i % 5];
        yaw += [0.05, -0.3, 2, 0, 0.01][i % 5];
        x = Math.max(-500, Math.min(500, x + speed * Math.cos(yaw)));
        z = Math.max(-500, Math.min(500, z + speed * Math.sin(yaw)));
        const y = 10 * Math.sin(i / 20);
        assert.ok(Tessera.encodeVolatile(w, server, config, x, y, z, yaw) > 0);
        path.push([x, y, z, yaw]);
    }
    const r = new BitReader(w.bytes(), w.bitLength);
    for (const [x, y, z, yaw] of path) {
        const p = decodeVolatile(r, client, config);
        for (const [got, want] of [[p.x, x], [p.y, y], [p.z, z]]) assert.ok(Math.abs(got - want) <= 1 / 128 + 1e-4, `${got} vs ${want}`);
        const turn = Math.abs(Math.atan2(Math.sin(p.yaw - yaw), Math.cos(p.yaw - yaw)));
        assert.ok(turn <= Math.PI / 256 + 1e-4, `yaw ${p.yaw} vs ${yaw}`);
    }
    assert.deepEqual(client, server);
    assert.equal(r.remaining, 0);
    assert.equal(Tessera.encodeVolatile(w, server, config, 600, 0, 0, 0), -1, 'outside the world');
});
