// differential.test.mjs -- the golden recordings with bits flipped (in entity
// streams, base property change lists, call arguments) or streams cut short,
// decoded by this SDK and by the C SDK (tessera-stream-replay): both must
// end with the same view, events and calls, or both refuse the same frame
// for the same reason. Skipped unless TESSERA_STREAM_REPLAY names the C tool:
//
//   TESSERA_STREAM_REPLAY=../../build-dev/client/tessera-stream-replay npm test
//
// TESSERA_MUTANTS sets how many (default 60); the mutations follow a fixed seed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { REPOSITORY, Tessera, firstDifference } from '../test-support/helpers.mjs';

const TOOL = process.env.TESSERA_STREAM_REPLAY;
const STREAMS = path.join(REPOSITORY, 'tests/golden/streams');
const MUTANTS = Number(process.env.TESSERA_MUTANTS ?? 60);

function pack(frames) {
    const out = new Uint8Array(frames.reduce((n, f) => n + 4 + f.length, 0));
    const view = new DataView(out.buffer);
    let offset = 0;
    for (const frame of frames) {
        view.setUint32(offset, frame.length);
        out.set(frame, offset + 4);
        offset += 4 + frame.length;
    }
    return out;
}

// A deterministic generator (a linear congruential one: enough to pick bits).
function generator(seed) {
    let state = seed;
    return () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
}

// The frame index and the reason of a refusal, from either side's message.
function refusal(message) {
    const frame = /frame (\d+)/.exec(message)?.[1];
    const reason = message.trim().split('closed the client: ').at(-1);
    return { frame, reason };
}

const recordings = fs.existsSync(STREAMS) ? fs.readdirSync(STREAMS).filter((n) => n.endsWith('.frames')).sort() : [];
const skip = !TOOL
    ? 'set TESSERA_STREAM_REPLAY to tessera-stream-replay (a build of client/stream_replay.c) to compare with the C SDK'
    : recordings.length === 0
      ? `no recordings in ${STREAMS}`
      : false;

test('mutated recordings: the same outcome as the C SDK', { skip, timeout: 600000 }, () => {
    const random = generator(20261207);
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-mutants-'));
    const counts = { same: 0, refusedAlike: 0 };
    try {
        for (let trial = 0; trial < MUTANTS; trial++) {
            const name = recordings[trial % recordings.length];
            const frames = Tessera.splitFrames(new Uint8Array(fs.readFileSync(path.join(STREAMS, name)))).map((f) => f.slice());
            const targets = [];
            frames.forEach((frame, index) => {
                const message = Tessera.decodeServerToClient(frame);
                if (message.body === 'view' && message.view.stream.length > 0) targets.push([index, message, message.view.stream]);
                if (message.body === 'view') for (const call of message.view.calls) targets.push([index, message, call.args]);
                if (message.body === 'base_properties') targets.push([index, message, message.base_properties.changes]);
            });
            const [index, message, bytes] = targets[Math.floor(random() * targets.length)];
            if (bytes.length === 0) continue;
            for (let flips = 1 + Math.floor(random() * 3); flips > 0; flips--) {
                const bit = Math.floor(random() * bytes.length * 8);
                bytes[bit >> 3] ^= 1 << (bit & 7);
            }
            if (message.body === 'view' && random() < 0.2)
                message.view.stream = message.view.stream.subarray(0, Math.floor(random() * message.view.stream.length));
            frames[index] = Tessera.encodeServerToClient(message);
            const file = path.join(directory, `mutant-${trial}.frames`);
            fs.writeFileSync(file, pack(frames));

            let fromC = null;
            let refusedByC = null;
            try {
                fromC = JSON.parse(execFileSync(TOOL, [file], { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' }));
            } catch (error) {
                if (error.status !== 1) throw error;
                refusedByC = refusal(String(error.stderr));
            }
            let fromJs = null;
            let refusedByJs = null;
            try {
                fromJs = Tessera.replayFrames(new Uint8Array(fs.readFileSync(file)));
            } catch (error) {
                refusedByJs = refusal(error.message);
            }
            const where = `${name} mutant ${trial} (frame ${index}, kept in ${file})`;
            assert.deepEqual(refusedByJs, refusedByC, `${where}: refusals differ`);
            if (refusedByC) {
                counts.refusedAlike++;
            } else {
                assert.equal(firstDifference(fromC, fromJs), null, `${where}: ${firstDifference(fromC, fromJs)}`);
                counts.same++;
            }
            fs.rmSync(file);
        }
    } finally {
        if (fs.readdirSync(directory).length === 0) fs.rmdirSync(directory);
    }
    console.log(`# differential: ${counts.same} mutants decoded alike, ${counts.refusedAlike} refused alike`);
    assert.ok(counts.same > 0 && counts.refusedAlike > 0, 'the mutants reach both outcomes');
});
