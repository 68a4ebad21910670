#!/usr/bin/env python3
"""Checks that the project's markdown renders as written (`make lint` runs it):

- every row of a table has as many cells as its header: a `|` inside a cell, even inside
  backticks, starts a new cell unless escaped as `\\|`, and GitHub drops the cells past the
  header's count, so such a row loses its end;
- headings: `#` followed by a space, one `#` title first, no level skipped on the way down;
- code fences are closed.

It needs nothing but Python, so a fresh machine runs it as CI does. What it finds, it names with
file and line.

Usage: hack/md-lint.py [FILE...]   (default: every *.md of the checkout but generated or vendored
ones: target/, .cluster/, .git/)
"""
import os
import re
import sys

SKIP_DIRS = {"target", ".cluster", ".git", "node_modules"}
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def cells(row):
    """The number of cells GitHub sees in a table row: unescaped pipes split, code spans too."""
    body = row.strip()
    body = re.sub(r"\\\\", "", body)
    body = re.sub(r"\\\|", "", body)
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return body.count("|") + 1


def lint(path, text):
    problems = []
    lines = text.split("\n")
    fence = None  # the opening fence's marker while inside a code block
    fence_line = 0
    h1_seen = 0
    last_level = 0
    table_cells = None
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip()[len(m.group(1)):].strip():
                fence = None
            continue
        if m:
            fence, fence_line = m.group(1), n
            table_cells = None
            continue
        # Tables: a header row, then the delimiter row, then body rows until a line without `|`.
        if table_cells is not None:
            if "|" in line and line.strip():
                got = cells(line)
                if got != table_cells:
                    problems.append(f"{path}:{n}: table row has {got} cells, its header "
                                    f"{table_cells} (escape a `|` inside a cell as `\\|`)")
                continue
            table_cells = None
        if DELIMITER.match(line) and "-" in line and n >= 2 and "|" in lines[n - 2]:
            table_cells = cells(lines[n - 2])
            if cells(line) != table_cells:
                problems.append(f"{path}:{n}: table delimiter has {cells(line)} cells, its "
                                f"header {table_cells}")
            continue
        h = re.match(r"^(#{1,6})(\S?)", line)
        if h and not line.startswith("#!"):
            if h.group(2) and h.group(2) != "#":
                problems.append(f"{path}:{n}: heading without a space after its #s")
                continue
            level = len(h.group(1))
            if level == 1:
                h1_seen += 1
                if h1_seen > 1:
                    problems.append(f"{path}:{n}: a second # title")
            elif last_level == 0:
                problems.append(f"{path}:{n}: the first heading is not a # title")
            elif level > last_level + 1:
                problems.append(f"{path}:{n}: heading level {level} after level {last_level} "
                                f"(a level skipped)")
            last_level = level
    if fence:
        problems.append(f"{path}:{fence_line}: code fence {fence} is never closed")
    return problems


def markdown_files(root):
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.relpath(os.path.join(dirpath, f), root)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sys.argv[1:] or list(markdown_files(root))
    problems = []
    for rel in files:
        path = rel if os.path.isabs(rel) else os.path.join(root, rel)
        with open(path, encoding="utf-8") as fh:
            problems += lint(rel, fh.read())
    for p in problems:
        print(p)
    print(f"md-lint: {len(files)} file(s), {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
