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
for (const path of process.argv.slice(4)) {
    const file = new Uint8Array(readFileSync(path));
    const frames = sdk.splitFrames(file).length;
    for (let i = 0; i < 20; i++) sdk.replayFrames(file);
    const started = process.hrtime.bigint();
    for (let i = 0; i < repeat; i++) sdk.replayFrames(file);
    const elapsedUs = Number(process.hrtime.bigint() - started) / 1000;
    out[path] = { frames, us_per_frame: elapsedUs / (repeat * frames) };
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
    """Microseconds a frame for the C SDK (tessera-stream-replay's own clock)."""
    program = os.path.join(build, "client", "tessera-stream-replay")
    done = subprocess.run([program, path, "--repeat", str(repeat)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=True)
    match = re.search(r"([0-9.]+) us a frame", done.stderr)
    if not match:
        sys.exit("bench_decode: tessera-stream-replay said: " + done.stderr)
    return float(match.group(1))


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
    print("%-14s %7s %8s %14s %14s %8s" % ("recording", "frames", "bytes", "C us/frame", "TS us/frame", "TS / C"))
    ratios = []
    for path in recordings:
        c = c_decode(args.build, path, args.repeat)
        ts = typescript[path]
        ratios.append(ts["us_per_frame"] / c)
        print("%-14s %7d %8d %14.2f %14.2f %7.2fx" % (os.path.basename(path), ts["frames"], os.path.getsize(path), c,
                                                    ts["us_per_frame"], ratios[-1]))
    print("TypeScript / C over the recordings: %.2fx (geometric mean), %d decodings each" % (
        math.prod(ratios) ** (1.0 / len(ratios)), args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
