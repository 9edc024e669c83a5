#!/usr/bin/env bash
# check_cppcheck.sh -- cppcheck over every C and C++ file the build compiles
# (read from BUILD_DIR/compile_commands.json, with each file's own defines
# and include directories; generated files under the build directory are left
# out, and so are findings in generated headers). Checks: warning, style,
# performance and portability; the few findings the tree accepts are in
# tests/lint/cppcheck-suppressions.txt, each with its reason, or inline as
# `// cppcheck-suppress id` with a comment. Prints each finding as
# file:line:col: severity: message [id], then a summary line; exit 1 on any
# finding, 2 if cppcheck is missing or the build has no compile_commands.json.
#
# Run from meson test (suite lint) as check_cppcheck.sh SOURCE_ROOT BUILD_DIR.
set -uo pipefail
root=${1:?usage: check_cppcheck.sh SOURCE_ROOT BUILD_DIR}
build=${2:?usage: check_cppcheck.sh SOURCE_ROOT BUILD_DIR}
root=$(cd "$root" && pwd) || exit 2
build=$(cd "$build" && pwd) || exit 2
cppcheck=${CPPCHECK:-cppcheck}
if ! command -v "$cppcheck" >/dev/null; then
    echo "check_cppcheck: $cppcheck is not installed (Debian package cppcheck)" >&2
    exit 2
fi
if [[ ! -f "$build/compile_commands.json" ]]; then
    echo "check_cppcheck: $build/compile_commands.json not found (configure the build with meson first)" >&2
    exit 2
fi
suppressions=$root/tests/lint/cppcheck-suppressions.txt
if [[ ! -f "$suppressions" ]]; then
    echo "check_cppcheck: $suppressions not found" >&2
    exit 2
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The build's compile commands less the generated sources.
count=$(python3 - "$root" "$build" "$out/compile_commands.json" <<'PY'
import json, os, sys
root, build, target = sys.argv[1:]
with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
    entries = json.load(f)
kept, seen = [], set()
for e in entries:
    path = os.path.normpath(os.path.join(e["directory"], e["file"]))
    if not path.startswith(root + os.sep) or path.startswith(build + os.sep) or path in seen:
        continue
    seen.add(path)
    kept.append(dict(e, file=path))
with open(target, "w", encoding="utf-8") as f:
    json.dump(kept, f)
print(len(kept))
PY
) || exit 2
if [[ "$count" == 0 ]]; then
    echo "check_cppcheck: no files to check in $build/compile_commands.json" >&2
    exit 2
fi

# protobuf-c's generated headers refuse to compile (#error) unless they see
# the library's version macros; cppcheck does not read system headers, so
# it is given this one, or it would skip every file that includes them.
extra=()
protobuf_c=$(pkg-config --variable=includedir libprotobuf-c 2>/dev/null || echo /usr/include)/protobuf-c/protobuf-c.h
[[ -f "$protobuf_c" ]] && extra+=("--include=$protobuf_c")

jobs=${TESSERA_CPPCHECK_JOBS:-$(nproc 2>/dev/null || echo 2)}
start=$SECONDS
cd "$root" || exit 2
"$cppcheck" --quiet --std=c11 --enable=warning,style,performance,portability --inline-suppr \
    --suppressions-list="$suppressions" --suppress="*:$build/*" \
    "${extra[@]}" -j "$jobs" --project="$out/compile_commands.json" \
    --template='{file}:{line}:{column}: {severity}: {message} [{id}]' >"$out/report" 2>&1
rc=$?
elapsed=$((SECONDS - start))
findings=$(grep -E '^[^ ]+:[0-9]+:[0-9]+: [a-z]+: ' "$out/report" |
    while IFS= read -r line; do
        path=${line%%:*}
        [[ "$path" == /* ]] || path=$root/$path
        echo "$(realpath -m --relative-to="$root" "$path"):${line#*:}"
    done | grep -v "^$(realpath -m --relative-to="$root" "$build")/" | sort -u)
n=0
if [[ -n "$findings" ]]; then
    printf '%s\n' "$findings"
    n=$(printf '%s\n' "$findings" | wc -l)
fi
if ((rc != 0)) && ((n == 0)); then
    echo "check_cppcheck: cppcheck failed (exit $rc):" >&2
    head -20 "$out/report" >&2
fi
echo "check_cppcheck: $count files, $n findings (${elapsed}s, $jobs jobs)"
((n == 0 && rc == 0))
