#!/usr/bin/env bash
# check_format.sh -- every C and C++ file of the tree passes clang-format
# with the tree's .clang-format (reports the first differences of each file
# that does not). Run from meson test (suite lint) with the source root as
# its argument; `clang-format -i` on a named file fixes it.
set -uo pipefail
root=${1:?usage: check_format.sh SOURCE_ROOT}
cd "$root" || exit 2
command -v clang-format >/dev/null || { echo "check_format: clang-format is not installed" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' 2>/dev/null || find . -path './build*' -prune -o \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) -print)
bad=0
for f in "${files[@]}"; do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f" >&2
        clang-format "$f" | diff -u "$f" - | head -20 >&2
        bad=$((bad + 1))
    fi
done
echo "check_format: ${#files[@]} files, $bad not formatted"
((bad == 0))
