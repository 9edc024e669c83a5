#!/usr/bin/env python3
"""check_module_loops.py -- no call loop spans more than two files.

A file "calls" another when its object file uses a symbol the other's
defines (read with `nm` from the build's object files, so the graph is the
code's own, not its includes). Files that call each other, directly or
round a loop, form a strongly connected component; a component of three
files or more means none of them can be read, tested or changed without the
others. For each directory given (cellapp, baseapp, common) the check lists
every such component with the calls that close it, and fails if there is
one. A pair that calls each other (a module and its one helper) is allowed.

Usage: check_module_loops.py BUILD_DIR DIRECTORY...
"""
import collections
import glob
import os
import subprocess
import sys

LARGEST_ALLOWED = 2


def symbols(objects):
    """(defined: symbol -> file, used: file -> set of symbols) for object
    files named like path/to/name.c.o."""
    defined, used = {}, collections.defaultdict(set)
    for path in objects:
        name = os.path.basename(path).split(".")[0]
        out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = name
            elif len(parts) == 2 and parts[0] == "U":
                used[name].add(parts[1])
    return defined, used


def components(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def check_directory(build_dir, directory):
    objects = glob.glob(os.path.join(build_dir, directory, "*.p", "*.o"))
    if not objects:
        print("check_module_loops: no object files under %s/%s: build first" % (build_dir, directory))
        return 1
    defined, used = symbols(objects)
    edges = collections.defaultdict(set)
    calls = collections.defaultdict(list)
    for caller, names in used.items():
        for symbol in names:
            callee = defined.get(symbol)
            if callee and callee != caller:
                edges[caller].add(callee)
                calls[(caller, callee)].append(symbol)
    nodes = set(defined.values()) | set(used)
    bad = 0
    for component in components(nodes, edges):
        if len(component) <= LARGEST_ALLOWED:
            continue
        bad += 1
        print("%s/: %d files call each other in a loop: %s" % (directory, len(component), ", ".join(component)))
        members = set(component)
        for caller in component:
            for callee in sorted(edges[caller] & members):
                print("    %s -> %s: %s" % (caller, callee, ", ".join(sorted(calls[(caller, callee)]))))
    return bad


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    build_dir = sys.argv[1]
    bad = sum(check_directory(build_dir, d) for d in sys.argv[2:])
    if bad:
        print("check_module_loops: %d loop(s) of more than %d files" % (bad, LARGEST_ALLOWED))
    else:
        print("check_module_loops: no loop of more than %d files" % LARGEST_ALLOWED)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
