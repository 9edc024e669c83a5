#!/usr/bin/env python3
"""check_headers.py -- every header of the tree compiles on its own.

For each tracked .h file it compiles a translation unit holding only
`#include "that header"`, with the flags and include directories meson uses
for a .c file of the same directory (read from the build's
compile_commands.json), so a header that leans on its includer's earlier
includes fails here. Usage: check_headers.py SOURCE_ROOT BUILD_DIR.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile


def flags_by_directory(source_root, build_dir):
    """The compile flags of one .c file per source directory (the last seen
    wins), without the input, output and dependency-file arguments."""
    with open(os.path.join(build_dir, "compile_commands.json"), encoding="utf-8") as f:
        commands = json.load(f)
    found = {}
    for entry in commands:
        path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
        rel = os.path.relpath(path, source_root)
        if rel.startswith("..") or not rel.endswith(".c"):
            continue
        args = shlex.split(entry["command"])
        kept, skip = [], False
        for arg in args[1:]:
            if skip:
                skip = False
                continue
            if arg in ("-o", "-MF", "-MQ", "-c"):
                skip = arg != "-c"
                continue
            if arg == "-MD" or arg.endswith(".c"):
                continue
            kept.append(arg)
        found[os.path.dirname(rel)] = (args[0], entry["directory"], kept)
    return found


def main():
    if len(sys.argv) != 3:
        print("usage: check_headers.py SOURCE_ROOT BUILD_DIR", file=sys.stderr)
        return 2
    source_root, build_dir = (os.path.abspath(p) for p in sys.argv[1:])
    headers = subprocess.run(["git", "ls-files", "*.h"], cwd=source_root, capture_output=True, text=True,
                             check=True).stdout.split()
    flags = flags_by_directory(source_root, build_dir)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        unit = os.path.join(tmp, "alone.c")
        for header in headers:
            directory = os.path.dirname(header)
            chosen = flags.get(directory)
            if chosen is None:
                # A directory with no .c of its own (include/tessera): the
                # flags of common/, plus the header's own directory.
                chosen = flags.get("common")
            compiler, cwd, args = chosen
            with open(unit, "w", encoding="utf-8") as f:
                f.write('#include "%s"\n' % os.path.join(source_root, header))
            result = subprocess.run([compiler, *args, "-I", os.path.join(source_root, directory), "-fsyntax-only",
                                     unit], cwd=cwd, capture_output=True, text=True)
            if result.returncode != 0:
                bad += 1
                print("does not compile alone: %s\n%s" % (header, "\n".join(result.stderr.splitlines()[:6])))
    print("check_headers: %d headers, %d do not compile alone" % (len(headers), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
