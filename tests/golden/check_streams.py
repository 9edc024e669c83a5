#!/usr/bin/env python3
"""check_streams -- the golden entity streams (tests/golden/streams/): each
NAME.frames is a session one client received (tessera-bots --record-file:
frames as on the wire, from the server's hello on), and NAME.json is what
the C SDK knows at its end (tessera-stream-replay: the view table sorted by
id, the game events and the client calls in order). This check decodes every
NAME.frames again with the C SDK and compares with NAME.json, so a change of
the SDK or of the wire that changes what a client ends up knowing shows
here; the TypeScript SDK's tests (client/js/test/) compare their own
decoding with the same files.

    check_streams.py BUILD_DIR            compare (exit 1 on any difference)
    check_streams.py BUILD_DIR --update   rewrite every NAME.json

The .frames files are recordings, not generated: record a new one with
tessera-bots --record-file PATH against a cluster (scripts/cluster up), then
--update writes its .json.
"""
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STREAMS = os.path.join(HERE, "streams")


def decode(build_dir, frames):
    program = os.path.join(build_dir, "client", "tessera-stream-replay")
    done = subprocess.run([program, frames], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit("%s: tessera-stream-replay failed (exit %d): %s" % (frames, done.returncode, done.stderr))
    return json.loads(done.stdout)


def first_difference(expected, got, path="$"):
    """Where two JSON values first differ, as a path and both values."""
    if type(expected) is not type(got):
        return "%s: expected %r, got %r" % (path, expected, got)
    if isinstance(expected, dict):
        for key in sorted(set(expected) | set(got)):
            if key not in expected or key not in got:
                return "%s.%s: present on one side only" % (path, key)
            found = first_difference(expected[key], got[key], "%s.%s" % (path, key))
            if found:
                return found
        return None
    if isinstance(expected, list):
        if len(expected) != len(got):
            return "%s: %d items expected, %d got" % (path, len(expected), len(got))
        for i, (a, b) in enumerate(zip(expected, got)):
            found = first_difference(a, b, "%s[%d]" % (path, i))
            if found:
                return found
        return None
    return None if expected == got else "%s: expected %r, got %r" % (path, expected, got)


def main():
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] != "--update"):
        print(__doc__, file=sys.stderr)
        return 2
    build_dir, update = sys.argv[1], len(sys.argv) == 3
    names = sorted(glob.glob(os.path.join(STREAMS, "*.frames")))
    if not names:
        print("check_streams: no *.frames in %s" % STREAMS, file=sys.stderr)
        return 1
    failures = 0
    for frames in names:
        golden = frames[:-len(".frames")] + ".json"
        got = decode(build_dir, frames)
        if update:
            with open(golden, "w") as f:
                json.dump(got, f, indent=1)
                f.write("\n")
            print("%s: written (%d entities, %d events, %d calls)" % (
                os.path.basename(golden), len(got["entities"]), len(got["events"]), len(got["calls"])))
            continue
        if not os.path.exists(golden):
            print("%s: no %s (run with --update)" % (os.path.basename(frames), os.path.basename(golden)))
            failures += 1
            continue
        with open(golden) as f:
            expected = json.load(f)
        difference = first_difference(expected, got)
        if difference:
            print("%s: the C SDK's decoding differs from %s: %s" % (
                os.path.basename(frames), os.path.basename(golden), difference))
            failures += 1
        else:
            print("%s: %d entities, %d events, %d calls as recorded" % (
                os.path.basename(frames), len(got["entities"]), len(got["events"]), len(got["calls"])))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
