#!/usr/bin/env python3
"""Checks the shape of the crates' source trees (`make lint` runs it):

- sibling modules (files or folders at the same level of a crate) must not import each other,
  directly or around a longer circle; a child using its parent (`super::`, `crate::` items of an
  ancestor) is fine;
- no controller folder of the manager imports another (`crate::cloneset::` outside `cloneset/`);
- every controller folder of the manager (a folder of controller/src holding a `controller.rs`)
  has the common shape: `mod.rs` (module list and docs only), `controller.rs` (wiring, and the
  registry entry `pub const CONTROLLER`), `context.rs`, `reconcile.rs`, `error.rs`, and no
  subfolder (a module's out-of-line tests are `<module>_tests.rs` beside it); and the registry
  (`CONTROLLERS` in controller/src/app.rs) lists exactly those folders;
- no non-test file over MAX_FILE lines, no non-test function in the manager over MAX_FN lines;
- the documents stay true to the tree: every repository path that CONTRIBUTING.md or README.md
  names in backticks exists, and every relative link in README.md, CONTRIBUTING.md and docs/
  resolves (the file, and the heading a `#fragment` names).

Test code is left out: files named `tests.rs` or `*_tests.rs`, files under a `tests/` folder, and
`#[cfg(test)] mod` blocks. It reads the text, not the compiler's view, so a `use`
inside a macro or a `#[path]` module is not seen; what it finds, it names with file and line.

Usage: hack/layout-check.py [ROOT]   (ROOT: the workspace, default: this checkout)
"""
import os
import re
import sys

MAX_FILE = 600
MAX_FN = 120
CRATES = ["api", "runtime", "controller", "webhook", "daemon", "cli", "e2e"]
# Where the file and function limits apply (the function limit everywhere; bins under src/bin are not read).
FILE_LIMIT = {"controller", "webhook", "daemon", "cli", "runtime"}
FN_LIMIT = {"api", "runtime", "controller", "webhook", "daemon", "cli", "e2e"}
# The files every controller folder of the manager holds (see `controller_shape`).
CONTROLLER_FILES = ["mod.rs", "controller.rs", "context.rs", "reconcile.rs", "error.rs"]
# Where the manager lists its controllers, one `<folder>::controller::CONTROLLER` each.
REGISTRY = os.path.join("controller", "src", "app.rs")

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def is_test_file(rel):
    parts = rel.split(os.sep)
    name = parts[-1]
    return "tests" in parts[:-1] or name == "tests.rs" or name.endswith("_tests.rs")


def module_path(rel):
    """src-relative file path -> module path (list), None for bins' own roots handled apart."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def strip_code(text):
    """Text without comments, string/char literals and `#[cfg(test)]` modules (same line count),
    and how many lines those modules took."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        m = re.match(r'(b?r)(#*)"', text[i:i + 40])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(2)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    code = "".join(out)
    # Inline test modules go (their lines stay, empty, so line numbers still match).
    pattern = re.compile(r"^#\[cfg\(test\)\]\s*\n\s*(pub(\([a-z]+\))? )?mod \w+\s*\{", re.M)
    removed = 0
    while (m := pattern.search(code)):
        depth, k = 0, m.end() - 1
        while k < len(code):
            depth += {"{": 1, "}": -1}.get(code[k], 0)
            if depth == 0:
                break
            k += 1
        gone = code.count("\n", m.start(), k + 1)
        removed += gone + 1
        code = code[:m.start()] + "\n" * gone + code[k + 1:]
    return code, removed


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]] (renames and globs kept as names)."""
    tree = tree.strip()
    if not tree:
        return []
    depth, top = 0, []
    start = 0
    for k, ch in enumerate(tree):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            top.append(tree[start:k])
            start = k + 1
    top.append(tree[start:])
    if len(top) > 1:
        return [p for part in top for p in expand_use(part)]
    brace = tree.find("{")
    if brace < 0:
        path = tree.split(" as ")[0].strip()
        return [[p for p in path.split("::") if p]]
    prefix = [p for p in tree[:brace].split("::") if p]
    inner = tree[brace + 1:tree.rfind("}")]
    return [prefix + p for p in expand_use(inner)] or [prefix]


def references(code):
    """(line, path) for every `crate::`/`super::`/`self::` path in `use` trees and in code."""
    refs = []
    for m in re.finditer(r"\buse\s+([^;]*);", code):
        line = code.count("\n", 0, m.start()) + 1
        for path in expand_use(m.group(1)):
            if path and path[0] in ("crate", "super", "self"):
                refs.append((line, path))
    spans = [(m.start(), m.end()) for m in re.finditer(r"\buse\s+[^;]*;", code)]
    for m in re.finditer(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::" + IDENT + r")+)", code):
        if any(a <= m.start() < b for a, b in spans):
            continue
        line = code.count("\n", 0, m.start()) + 1
        refs.append((line, m.group(1).split("::")))
    return refs


def resolve(mod, is_dir_mod, path):
    """Absolute module path of a reference made from module `mod`."""
    if path[0] == "crate":
        return path[1:]
    base = list(mod)
    rest = list(path)
    if rest[0] == "self":
        rest = rest[1:]
    while rest and rest[0] == "super":
        base = base[:-1]
        rest = rest[1:]
    return base + rest


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def long_functions(code, rel):
    found = []
    lines = code.split("\n")
    for m in re.finditer(r"\bfn\s+(" + IDENT + r")", code):
        open_at = code.find("{", m.end())
        semi = code.find(";", m.end())
        if open_at < 0 or (0 <= semi < open_at):
            continue  # a declaration without a body
        depth, k = 0, open_at
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, k) + 1
        if last - first + 1 > MAX_FN:
            found.append((rel, first, m.group(1), last - first + 1))
    del lines
    return found


def controller_folders(root):
    """The manager's controllers: the folders of controller/src that hold a `controller.rs`."""
    src = os.path.join(root, "controller", "src")
    if not os.path.isdir(src):
        return []
    return sorted(d for d in os.listdir(src)
                  if os.path.isfile(os.path.join(src, d, "controller.rs")))


def controller_shape(root):
    """Each controller folder has the common shape, and the registry lists exactly them."""
    src = os.path.join(root, "controller", "src")
    folders = controller_folders(root)
    problems = []
    for d in folders:
        base = os.path.join(src, d)
        for f in CONTROLLER_FILES:
            if not os.path.isfile(os.path.join(base, f)):
                problems.append(f"controller/src/{d}: no {f} (a controller folder holds "
                                f"{', '.join(CONTROLLER_FILES)})")
        for e in sorted(os.listdir(base)):
            if os.path.isdir(os.path.join(base, e)):
                problems.append(f"controller/src/{d}/{e}: a subfolder in a controller folder "
                                f"(tests of x.rs go in x_tests.rs beside it)")
        mod = os.path.join(base, "mod.rs")
        if os.path.isfile(mod):
            code, _ = strip_code(open(mod, encoding="utf-8").read())
            for n, line in enumerate(code.split("\n"), 1):
                t = line.strip()
                if t and not re.fullmatch(r"(pub(\([a-z]+\))? )?mod \w+;|#\[[^\]]*\]", t):
                    problems.append(f"controller/src/{d}/mod.rs:{n}: `{t}` (mod.rs holds the "
                                    f"module list and docs only)")
        ctl = os.path.join(base, "controller.rs")
        if "pub const CONTROLLER:" not in open(ctl, encoding="utf-8").read():
            problems.append(f"controller/src/{d}/controller.rs: no `pub const CONTROLLER` "
                            f"(the registry entry)")
    registry = os.path.join(root, REGISTRY)
    if os.path.isfile(registry):
        text = open(registry, encoding="utf-8").read()
        m = re.search(r"CONTROLLERS: &\[Controller\] = &\[(.*?)\];", text, re.S)
        listed = re.findall(r"(\w+)::controller::CONTROLLER\b", m.group(1)) if m else []
        if not m:
            problems.append(f"{REGISTRY}: no `CONTROLLERS` table")
        for d in sorted(set(folders) - set(listed)):
            problems.append(f"controller/src/{d}: a controller folder the registry "
                            f"(`CONTROLLERS` in {REGISTRY}) does not list")
        for d in sorted(set(listed) - set(folders)):
            problems.append(f"{REGISTRY}: the registry lists `{d}`, which is no controller "
                            f"folder (controller/src/{d}/controller.rs)")
        for d in sorted({d for d in listed if listed.count(d) > 1}):
            problems.append(f"{REGISTRY}: the registry lists `{d}` twice")
    return problems


def check_crate(root, crate):
    src = os.path.join(root, crate, "src")
    workloads = set(controller_folders(root)) if crate == "controller" else set()
    if not os.path.isdir(src):
        return []
    problems = []
    modules = {}  # module path tuple -> (rel, code)
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, src)
            if rel.split(os.sep)[0] == "bin":
                continue  # bins are crates of their own; their modules are few
            with open(full, encoding="utf-8") as fh:
                text = fh.read()
            test = is_test_file(rel)
            code, test_lines = ("", 0) if test else strip_code(text)
            if not test and crate in FILE_LIMIT:
                n = text.count("\n") - test_lines
                if n > MAX_FILE:
                    problems.append(f"{crate}/src/{rel}: {n} lines of non-test code (limit {MAX_FILE})")
            if not test and crate in FN_LIMIT:
                for r, line, name, n in long_functions(code, rel):
                    problems.append(f"{crate}/src/{r}:{line}: fn {name} is {n} lines (limit {MAX_FN})")
            if not test:
                modules[tuple(module_path(rel))] = (rel, code)
    known = set(modules)
    for mod in list(known):
        for k in range(1, len(mod)):
            known.add(mod[:k])
    edges, why, crossed = {}, {}, set()
    for mod, (rel, code) in modules.items():
        is_dir = os.path.basename(rel) in ("mod.rs", "lib.rs", "main.rs")
        for line, path in references(code):
            target = resolve(list(mod), is_dir, path)
            k = 0
            while k < len(mod) and k < len(target) and mod[k] == target[k]:
                k += 1
            if k == len(mod) or k == len(target):
                continue  # parent or ancestor, or a child
            parent = mod[:k]
            a, b = parent + (mod[k],), parent + (target[k],)
            if b not in known:
                continue  # an item of the common parent: a child using its parent
            edges.setdefault(a, set()).add(b)
            why.setdefault((a, b), f"{crate}/src/{rel}:{line} uses {'::'.join(path)}")
            if not parent and a[0] in workloads and b[0] in workloads and (a, b) not in crossed:
                crossed.add((a, b))
                problems.append(f"controller {a[0]} imports controller {b[0]}: {why[(a, b)]}")
    nodes = set(edges) | {b for bs in edges.values() for b in bs}
    for comp in sccs(nodes, edges):
        if len(comp) < 2:
            continue
        names = sorted("::".join(c) for c in comp)
        detail = [why[(a, b)] for a in comp for b in edges.get(a, ()) if b in comp]
        problems.append(f"{crate}: sibling modules import each other: {', '.join(names)}\n    "
                        + "\n    ".join(sorted(detail)[:6]))
    return problems


# Documents whose named paths must exist, and documents whose relative links must resolve.
PATH_DOCS = ["CONTRIBUTING.md", "README.md"]
LINK_DOCS = ["README.md", "CONTRIBUTING.md", "docs"]
# Top-level entries that are not part of the repository (made by builds and the local cluster).
NOT_TRACKED = {"target", ".cluster", ".git"}


def prose(text):
    """Markdown without its fenced code blocks (same line count)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if fence:
            if m and m.group(1)[0] == fence[0]:
                fence = None
            out.append("")
        elif m:
            fence = m.group(1)
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def expand_braces(path):
    """`a/{b,c}.rs` -> [`a/b.rs`, `a/c.rs`] (one level, as the documents write it)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",")
            for p in expand_braces(path[:m.start()] + alt.strip() + path[m.end():])]


def named_paths(text, top):
    """(line, path) for each repository path in a code span: it starts with a top-level entry
    of the checkout and holds no placeholder (`<kind>`, `NAME`, `…`, a glob)."""
    body = prose(text)
    for m in re.finditer(r"`([^`\n]+)`", body):
        line = body.count("\n", 0, m.start()) + 1
        if m.group(1).startswith("kubectl "):
            continue  # `deploy/NAME` there is a resource, not a folder
        for word in m.group(1).split():
            word = re.sub(r"(:\d+)+$", "", word.rstrip(".,;:)"))
            head = word.split("/")[0]
            if head not in top or ("/" not in word and not os.path.splitext(word)[1]):
                continue
            if re.search(r"[<>*…$]|\.\.\.", word) \
                    or any(re.fullmatch(r"[A-Z][A-Z0-9_-]+", seg) for seg in word.split("/")):
                continue  # a placeholder: `<kind>`, `NAME`, a glob
            for path in expand_braces(word):
                yield line, path


def slug(heading):
    """GitHub's anchor for a heading."""
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def anchors(path):
    with open(path, encoding="utf-8") as fh:
        text = prose(fh.read())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, re.M)}


def check_docs(root):
    problems = []
    top = {e for e in os.listdir(root) if e not in NOT_TRACKED}
    for doc in PATH_DOCS:
        with open(os.path.join(root, doc), encoding="utf-8") as fh:
            text = fh.read()
        for line, path in named_paths(text, top):
            if not os.path.exists(os.path.join(root, path)):
                problems.append(f"{doc}:{line}: names {path}, which does not exist")
    files = []
    for entry in LINK_DOCS:
        full = os.path.join(root, entry)
        if os.path.isdir(full):
            for dirpath, _, names in os.walk(full):
                files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".md")]
        elif os.path.exists(full):
            files.append(full)
    for full in files:
        rel = os.path.relpath(full, root)
        with open(full, encoding="utf-8") as fh:
            text = fh.read()
        # Inline code is not a link; drop it before looking.
        body = re.sub(r"`[^`\n]*`", "", prose(text))
        for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)[^)]*\)", body):
            target = m.group(1)
            line = body.count("\n", 0, m.start()) + 1
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # a URL
            file_part, _, fragment = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(full), file_part)) if file_part else full
            if not os.path.exists(dest):
                problems.append(f"{rel}:{line}: link {target}: {file_part} does not exist")
            elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
                problems.append(f"{rel}:{line}: link {target}: no heading #{fragment} there")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = []
    for crate in CRATES:
        problems += check_crate(root, crate)
    problems += controller_shape(root)
    problems += check_docs(root)
    for p in problems:
        print(p)
    print(f"layout-check: {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
