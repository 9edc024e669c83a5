// golden.test.mjs -- every recorded session in tests/golden/streams/
// (NAME.frames, from tessera-bots --record-file) replayed through the SDK
// and compared with NAME.json, what the C SDK ended up knowing
// (tessera-stream-replay). Numbers agree within 1e-4 * max(1, |value|);
// everything else exactly. With no recordings there is nothing to compare.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { REPOSITORY, Tessera, firstDifference } from '../test-support/helpers.mjs';

const STREAMS = path.join(REPOSITORY, 'tests/golden/streams');

const recordings = fs.existsSync(STREAMS)
    ? fs.readdirSync(STREAMS).filter((name) => name.endsWith('.frames')).sort()
    : [];

if (recordings.length === 0) {
    test('golden streams', { skip: `no recordings in ${STREAMS}` }, () => {});
}

for (const name of recordings) {
    test(`golden stream ${name}: the same view, events and calls as the C SDK`, () => {
        const base = name.slice(0, -'.frames'.length);
        const goldenPath = path.join(STREAMS, `${base}.json`);
        assert.ok(fs.existsSync(goldenPath), `${base}.json is missing (tests/golden/check_streams.py --update writes it)`);
        const expected = JSON.parse(fs.readFileSync(goldenPath, 'utf8'));
        const got = Tessera.replayFrames(new Uint8Array(fs.readFileSync(path.join(STREAMS, name))));
        const difference = firstDifference(expected, got);
        assert.equal(difference, null, `${name}: ${difference}`);
    });
}

test('the comparison sees a difference in any value, and forgives float noise', () => {
    const sample = { player: 5, entities: [{ id: 5, x: 100.5, properties: { name: 'a', gold: 3, v: [1, 2] } }] };
    const copy = () => structuredClone(sample);
    assert.equal(firstDifference(sample, copy()), null);
    const noisy = copy();
    noisy.entities[0].x = 100.5 + 100.5 * 5e-5;
    assert.equal(firstDifference(sample, noisy), null);
    for (const change of [
        (v) => (v.entities[0].x = 100.52),
        (v) => (v.entities[0].properties.gold = 4),
        (v) => (v.entities[0].properties.name = 'b'),
        (v) => (v.entities[0].properties.v.push(3)),
        (v) => (v.entities[0].properties.extra = 1),
        (v) => (v.entities[0].properties.gold = '3'),
        (v) => v.entities.push({}),
    ]) {
        const changed = copy();
        change(changed);
        assert.notEqual(firstDifference(sample, changed), null, change.toString());
    }
});

test('a recording cut inside a frame, or with a broken frame, is refused', () => {
    const recording = recordings[0];
    if (!recording) return;
    const bytes = new Uint8Array(fs.readFileSync(path.join(STREAMS, recording)));
    assert.throws(() => Tessera.replayFrames(bytes.subarray(0, bytes.length - 1)), /says \d+ bytes, \d+ are left/);
    // The second frame (the login reply) with its first byte changed to a field
    // number no ServerToClient has: it still decodes, but carries no body.
    const frames = Tessera.splitFrames(bytes);
    const broken = bytes.slice();
    const second = 4 + frames[0].length + 4;
    broken[second] = 0x7a; // field 15, length-delimited
    assert.throws(() => Tessera.replayFrames(broken), /frame 1 of \d+ closed the client: protocol error/);
});
