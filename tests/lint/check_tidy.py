#!/usr/bin/env python3
"""check_tidy.py -- clang-tidy over every C and C++ file the build compiles.

The checks are the tree's .clang-tidy (bugprone-*, cert-*, clang-analyzer-*;
what is off, and why, is written there); every finding is an error. The
files are those of BUILD_DIR/compile_commands.json, each with its own
compile command, less the generated ones under the build directory (the
generated protobuf-c headers are left out by .clang-tidy's
HeaderFilterRegex). Each finding is printed once (a header's shows in every
file that includes it) as path:line:col: message [check], then a summary
line. Exit 1 on any finding or on a file clang-tidy could not analyse, 2 if
clang-tidy is missing or the build has no compile_commands.json.

clang-tidy takes about 3 s a file, so the files run in parallel (as many at
once as there are CPUs; TESSERA_TIDY_JOBS overrides), and what a file gave
is kept in BUILD_DIR/lint-cache/tidy under a key made of everything its
result depends on: the clang-tidy version, .clang-tidy, the compile
command, and the contents of the file and of every header it includes (as
ninja recorded them when it last compiled it). A file whose key is unchanged
is not analysed again; a file ninja has no up-to-date record of always is.
TESSERA_TIDY_CACHE=0 turns the cache off.

Usage: check_tidy.py SOURCE_ROOT BUILD_DIR [FILE...]  (FILEs: only those).
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

FINDING = re.compile(r"^(?P<path>[^ :][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<kind>warning|error): (?P<text>.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def compile_entries(root, build):
    """{absolute source path: compile_commands entry} for the tree's own
    files, in the database's order."""
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    found = {}
    for entry in entries:
        path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
        if not path.startswith(root + os.sep) or path.startswith(build + os.sep):
            continue  # outside the tree, or generated (protobuf-c, embedded pages)
        found.setdefault(path, entry)
    return found


def ninja_deps(build):
    """{object file (relative to build): [inputs]} from ninja's record of
    the last compile, only for records ninja marks VALID."""
    ninja = shutil.which("ninja") or shutil.which("ninja-build")
    if not ninja:
        return {}
    try:
        out = subprocess.run([ninja, "-C", build, "-t", "deps"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    deps, current = {}, None
    for line in out.splitlines():
        if line and not line.startswith(" "):
            target, _, status = line.partition(": ")
            current = target if status.endswith("(VALID)") else None
            if current is not None:
                deps[current] = []
        elif current is not None and line.strip():
            deps[current].append(line.strip())
    return deps


class Hasher:
    """File contents' digests, each file read once."""

    def __init__(self):
        self.known = {}

    def file(self, path):
        if path not in self.known:
            try:
                with open(path, "rb") as f:
                    self.known[path] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                self.known[path] = "missing"
        return self.known[path]


def cache_key(base, entry, inputs, build, hasher):
    h = hashlib.sha256(base)
    h.update(entry.get("command", " ".join(entry.get("arguments", []))).encode())
    h.update(entry["file"].encode())
    for name in sorted(set(inputs)):
        path = os.path.normpath(os.path.join(build, name))
        h.update(b"\0" + path.encode() + b"\0" + hasher.file(path).encode())
    return h.hexdigest()


def run_tidy(tidy, build, path):
    started = time.monotonic()
    proc = subprocess.run([tidy, "--quiet", "-p", build, path], capture_output=True, text=True)
    return {"rc": proc.returncode, "output": proc.stdout + proc.stderr, "seconds": time.monotonic() - started}


def findings_of(output, build, root):
    """The finding lines of one clang-tidy output, paths relative to root."""
    found = []
    for line in ANSI.sub("", output).splitlines():
        m = FINDING.match(line)
        if not m:
            continue
        path = m.group("path")
        if not os.path.isabs(path):
            path = os.path.join(build, path)  # named as the compile command names it
        path = os.path.relpath(os.path.normpath(path), root)
        check = m.group("text").replace(",-warnings-as-errors]", "]")
        found.append("%s:%s:%s: %s" % (path, m.group("line"), m.group("col"), check))
    return found


def main():
    if len(sys.argv) < 3:
        print("usage: check_tidy.py SOURCE_ROOT BUILD_DIR [FILE...]", file=sys.stderr)
        return 2
    root, build = (os.path.realpath(p) for p in sys.argv[1:3])
    tidy = os.environ.get("CLANG_TIDY", "clang-tidy")
    if not shutil.which(tidy):
        print("check_tidy: %s is not installed (Debian package clang-tidy)" % tidy, file=sys.stderr)
        return 2
    if not os.path.isfile(os.path.join(build, "compile_commands.json")):
        print("check_tidy: %s/compile_commands.json not found (configure the build with meson first)" % build,
              file=sys.stderr)
        return 2
    config = os.path.join(root, ".clang-tidy")
    if not os.path.isfile(config):
        print("check_tidy: %s not found" % config, file=sys.stderr)
        return 2

    entries = compile_entries(root, build)
    if len(sys.argv) > 3:
        wanted = {os.path.realpath(os.path.join(root, p)) for p in sys.argv[3:]}
        entries = {p: e for p, e in entries.items() if p in wanted}
    if not entries:
        print("check_tidy: no files to check in %s/compile_commands.json" % build, file=sys.stderr)
        return 2

    use_cache = os.environ.get("TESSERA_TIDY_CACHE", "1") != "0"
    cache_dir = os.path.join(build, "lint-cache", "tidy")
    keys = {}
    if use_cache:
        version = subprocess.run([tidy, "--version"], capture_output=True, text=True).stdout
        with open(config, "rb") as f:
            base = version.encode() + b"\0" + f.read()
        deps, hasher = ninja_deps(build), Hasher()
        for path, entry in entries.items():
            output = os.path.relpath(os.path.join(entry["directory"], entry["output"]), build) \
                if "output" in entry else None
            if output in deps:
                keys[path] = cache_key(base, entry, deps[output], build, hasher)
        os.makedirs(cache_dir, exist_ok=True)

    results, todo = {}, []
    for path in entries:
        cached = os.path.join(cache_dir, keys[path] + ".json") if path in keys else None
        if cached and os.path.isfile(cached):
            with open(cached, encoding="utf-8") as f:
                results[path] = json.load(f)
        else:
            todo.append(path)

    # Largest first, so that no long file starts last while the other
    # workers sit idle.
    todo.sort(key=lambda p: -os.path.getsize(p))
    jobs = int(os.environ.get("TESSERA_TIDY_JOBS", "0")) or os.cpu_count() or 2
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for path, result in zip(todo, pool.map(lambda p: run_tidy(tidy, build, p), todo)):
            results[path] = result
            # A run that failed without a finding (a crash, a kill) is not
            # kept: it says nothing about the file.
            if path in keys and (result["rc"] == 0 or findings_of(result["output"], build, root)):
                tmp = os.path.join(cache_dir, keys[path] + ".tmp")
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump(result, f)
                os.replace(tmp, os.path.join(cache_dir, keys[path] + ".json"))
    elapsed = time.monotonic() - started
    if use_cache and len(sys.argv) == 3:
        # Only the keys of this tree stay: the cache does not grow.
        live = {k + ".json" for k in keys.values()}
        for name in os.listdir(cache_dir):
            if name not in live:
                os.remove(os.path.join(cache_dir, name))

    findings, failed = set(), []
    for path, result in results.items():
        found = findings_of(result["output"], build, root)
        findings.update(found)
        if result["rc"] != 0 and not found:
            failed.append(path)
    for line in sorted(findings):
        print(line)
    for path in failed:
        print("check_tidy: clang-tidy failed on %s:" % os.path.relpath(path, root))
        print("\n".join(results[path]["output"].splitlines()[:20]))
    slowest = sorted(todo, key=lambda p: -results[p]["seconds"])[:3]
    print("check_tidy: %d files (%d analysed, %d unchanged since a cached run), %d findings, %d failed runs; "
          "%.0f s with %d jobs%s" % (len(entries), len(todo), len(entries) - len(todo), len(findings), len(failed),
                                     elapsed, jobs,
                                     "; slowest: " + ", ".join("%s %.0f s" % (os.path.relpath(p, root),
                                                                             results[p]["seconds"])
                                                               for p in slowest) if slowest else ""))
    if findings and any("clang-analyzer" in f for f in findings):
        print("check_tidy: for an analyzer finding's path, run: clang-tidy -p %s FILE" % os.path.relpath(build, root))
    return 1 if findings or failed else 0


if __name__ == "__main__":
    sys.exit(main())
