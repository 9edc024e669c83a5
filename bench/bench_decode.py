#!/usr/bin/env python3
"""bench_decode -- the TypeScript SDK's decoding against the C SDK's, on the
same recorded sessions (tests/golden/streams/*.frames: every frame a client
received, its login reply and definitions first).

    bench/bench_decode.py [--build DIR] [--repeat N]

For each recording, both SDKs decode the whole session N times (default
200; a fresh client each time, as a new player would): the C SDK through
tessera-stream-replay --repeat N (DIR, default build/, must have it), the
TypeScript SDK through replayFrames in node (client/js, bundled with its
esbuild first; 20 decodings to warm the JIT are not counted). The table:
frames and bytes of the recording, microseconds a frame for each, and the
ratio TypeScript / C. Both decode everything: the view table with every
property, positions, events and client calls (the golden tests check they
end with the same state).
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JS = os.path.join(ROOT, "client", "js")

NODE_BENCH = r"""
import { readFileSync } from 'node:fs';
const sdk = await import(process.argv[2]);
const repeat = Number(process.argv[3]);
const out = {};
// One decoding of the session by a fresh client, as replayFrames makes it;
// the time of the frames after the login reply is added to `world`.
function decode(frames, world) {
    let loggedIn = false;
    const client = new sdk.TesseraClient({ callbacks: { onLoggedIn() { loggedIn = true; } } });
    for (const frame of frames) {
        const inWorld = loggedIn;
        const started = inWorld ? process.hrtime.bigint() : 0n;
        if (!client.processFrame(frame)) throw new Error('a frame closed the client: ' + client.closingReason);
        if (inWorld) {
            world.us += Number(process.hrtime.bigint() - started) / 1000;
            world.frames++;
        }
    }
}
for (const path of process.argv.slice(4)) {
    const file = new Uint8Array(readFileSync(path));
    const frames = sdk.splitFrames(file);
    for (let i = 0; i < 20; i++) { sdk.replayFrames(file); decode(frames, { us: 0, frames: 0 }); }
    const started = process.hrtime.bigint();
    for (let i = 0; i < repeat; i++) sdk.replayFrames(file);
    const elapsedUs = Number(process.hrtime.bigint() - started) / 1000;
    const world = { us: 0, frames: 0 };
    for (let i = 0; i < repeat; i++) decode(frames, world);
    out[path] = { frames: frames.length, us_per_frame: elapsedUs / (repeat * frames.length),
                  world_us_per_frame: world.us / world.frames };
}
console.log(JSON.stringify(out));
"""


def bundle(directory):
    """The SDK as one ES module (esbuild from client/js/node_modules)."""
    esbuild = os.path.join(JS, "node_modules", ".bin", "esbuild")
    if not os.access(esbuild, os.X_OK):
        sys.exit("bench_decode: no esbuild in client/js/node_modules (run scripts/deps)")
    out = os.path.join(directory, "tessera.mjs")
    subprocess.run([esbuild, os.path.join(JS, "src", "index.ts"), "--bundle", "--format=esm", "--platform=neutral",
                    "--main-fields=module,main", "--target=es2022", "--loader:.proto=text", "--log-level=warning",
                    "--log-override:direct-eval=silent", "--outfile=" + out], check=True)
    return out


def c_decode(build, path, repeat):
    """Microseconds a frame for the C SDK (tessera-stream-replay's own
    clock): over the whole session, and over the frames after the login
    reply."""
    program = os.path.join(build, "client", "tessera-stream-replay")
    done = subprocess.run([program, path, "--repeat", str(repeat)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=True)
    match = re.search(r"([0-9.]+) us a frame; ([0-9.]+) us a frame after", done.stderr)
    if not match:
        sys.exit("bench_decode: tessera-stream-replay said: " + done.stderr)
    return float(match.group(1)), float(match.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    recordings = sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "streams", "*.frames")))
    with tempfile.TemporaryDirectory(prefix="tessera-bench-decode-") as tmp:
        module = bundle(tmp)
        script = os.path.join(tmp, "bench.mjs")
        with open(script, "w") as f:
            f.write(NODE_BENCH)
        done = subprocess.run(["node", script, "file://" + module, str(args.repeat)] + recordings,
                              stdout=subprocess.PIPE, check=True, text=True)
        typescript = json.loads(done.stdout)
    print("microseconds a frame: over the whole session (login reply and definitions included), and over the")
    print("frames after the login reply (the world's stream)")
    print("%-14s %6s %6s | %8s %8s %7s | %8s %8s %7s" % ("recording", "frames", "KiB", "C", "TS", "TS / C",
                                                         "C world", "TS world", "TS / C"))
    ratios, world_ratios = [], []
    for path in recordings:
        c, c_world = c_decode(args.build, path, args.repeat)
        ts = typescript[path]
        ratios.append(ts["us_per_frame"] / c)
        world_ratios.append(ts["world_us_per_frame"] / c_world)
        print("%-14s %6d %6.1f | %8.2f %8.2f %6.1fx | %8.2f %8.2f %6.1fx" % (
            os.path.basename(path), ts["frames"], os.path.getsize(path) / 1024, c, ts["us_per_frame"], ratios[-1],
            c_world, ts["world_us_per_frame"], world_ratios[-1]))
    print("TypeScript / C (geometric mean over the recordings, %d decodings each): %.1fx a session, "
          "%.1fx the world's stream" % (args.repeat, math.prod(ratios) ** (1.0 / len(ratios)),
                                         math.prod(world_ratios) ** (1.0 / len(world_ratios))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
