#!/usr/bin/env python3
"""check_editorconfig.py -- every tracked file keeps the tree's .editorconfig.

For each file `git ls-files` lists (binary files, those with a NUL byte, are
left out) it works out the properties the root .editorconfig gives it, as
an editor would (later sections win; a glob without '/' matches the name
in any directory, one with '/' matches the path from the root; *, **, ?,
[...], {a,b} and {1..9}), and checks those that can be checked on the text:

  end_of_line = lf               no carriage return
  charset = utf-8                the bytes decode as UTF-8
  insert_final_newline = true    a non-empty file ends with a newline
  trim_trailing_whitespace       no line ends in a space or a tab
  indent_style = space | tab     the indentation holds no tab | no space run
                                 of indent_size (a continuation line's
                                 alignment spaces after tabs are allowed)
  max_line_length = N            no line longer than N characters

Prints each problem as path:line: what, then a summary line; exits 1 on any
problem, 2 on a usage error. Usage: check_editorconfig.py SOURCE_ROOT.
Nothing is packaged for this on Debian 12 (the editorconfig package only
prints a file's properties), hence this script.
"""
import configparser
import os
import re
import subprocess
import sys


def glob_to_regex(glob):
    """An EditorConfig glob as a regular expression over '/'-separated
    paths relative to the .editorconfig's directory."""
    out, i, depth = [], 0, 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = glob[i + 1:end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
                continue
        elif c == "{":
            end = glob.find("}", i + 1)
            inner = glob[i + 1:end] if end > 0 else ""
            numbers = re.fullmatch(r"(-?\d+)\.\.(-?\d+)", inner)
            if end > 0 and numbers:
                lo, hi = sorted(int(n) for n in numbers.groups())
                out.append("(?:" + "|".join(str(n) for n in range(lo, hi + 1)) + ")")
                i = end + 1
                continue
            if end > 0 and "," in inner:
                out.append("(?:")
                depth += 1
            else:
                out.append(re.escape(c))
        elif c == "," and depth:
            out.append("|")
        elif c == "}" and depth:
            out.append(")")
            depth -= 1
        elif c == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def load_sections(path):
    """[(compiled pattern, {key: value})] in file order."""
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",), comment_prefixes=("#", ";"),
                                       inline_comment_prefixes=None, strict=False, default_section="\0")
    parser.optionxform = str.lower
    with open(path, encoding="utf-8") as f:
        # Properties before the first section (root = true) belong to none.
        parser.read_string("[\0preamble]\n" + f.read())
    sections = []
    for name in parser.sections():
        if name == "\0preamble":
            continue
        glob = name
        if "/" in glob:
            glob = glob.lstrip("/")
        else:
            glob = "**/" + glob if not glob.startswith("**") else glob
        regex = glob_to_regex(glob)
        # "**/x" also matches "x" at the root.
        if regex.startswith(".*/"):
            regex = "(?:.*/)?" + regex[3:]
        sections.append((re.compile(regex + r"\Z"), {k: v.strip().lower() for k, v in parser[name].items()}))
    return sections


def properties(sections, relpath):
    found = {}
    for pattern, values in sections:
        if pattern.match(relpath):
            found.update(values)
    return found


def check_file(root, relpath, props):
    with open(os.path.join(root, relpath), "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        return []  # binary
    problems = []
    if props.get("end_of_line") == "lf" and b"\r" in data:
        line = data[:data.index(b"\r")].count(b"\n") + 1
        problems.append((line, "carriage return (end_of_line = lf)"))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if props.get("charset") == "utf-8":
            line = data[:e.start].count(b"\n") + 1
            problems.append((line, "not UTF-8 (charset = utf-8)"))
        text = data.decode("utf-8", errors="replace")
    if props.get("insert_final_newline") == "true" and text and not text.endswith("\n"):
        problems.append((text.count("\n") + 1, "no newline at the end of the file (insert_final_newline)"))
    if props.get("insert_final_newline") == "false" and text.endswith("\n"):
        problems.append((text.count("\n"), "a newline at the end of the file (insert_final_newline = false)"))
    style = props.get("indent_style")
    size = props.get("indent_size", "")
    size = int(size) if size.isdigit() else int(props.get("tab_width", "8") or 8) if size == "tab" else None
    limit = props.get("max_line_length", "")
    limit = int(limit) if limit.isdigit() else None
    trim = props.get("trim_trailing_whitespace") == "true"
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if trim and line != line.rstrip(" \t"):
            problems.append((number, "trailing whitespace (trim_trailing_whitespace)"))
        indent = line[:len(line) - len(line.lstrip(" \t"))]
        if style == "space" and "\t" in indent:
            problems.append((number, "a tab in the indentation (indent_style = space)"))
        elif style == "tab" and size and " " * size in indent.split("\t")[0]:
            problems.append((number, "spaces for indentation (indent_style = tab)"))
        if limit is not None and len(line) > limit:
            problems.append((number, f"{len(line)} characters, more than {limit} (max_line_length)"))
    return problems


def main():
    if len(sys.argv) != 2:
        print("usage: check_editorconfig.py SOURCE_ROOT", file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    config = os.path.join(root, ".editorconfig")
    if not os.path.isfile(config):
        print(f"check_editorconfig: {config} not found", file=sys.stderr)
        return 2
    sections = load_sections(config)
    files = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = [f for f in files.decode("utf-8", errors="replace").split("\0") if f]
    bad_files = problems = 0
    for relpath in files:
        if not os.path.isfile(os.path.join(root, relpath)):
            continue  # deleted in the work tree, or a submodule
        found = check_file(root, relpath, properties(sections, relpath))
        if found:
            bad_files += 1
            problems += len(found)
            for number, what in found[:10]:
                print(f"{relpath}:{number}: {what}")
            if len(found) > 10:
                print(f"{relpath}: ... and {len(found) - 10} more")
    print(f"check_editorconfig: {len(files)} files, {bad_files} with {problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
