"""docs/architecture.md against the code: the layout tree names every folder of lab/ that
holds code and every module at the top of lab/, and nothing that does not exist; the import
direction it states holds for every import in lab/ (those inside functions and under
TYPE_CHECKING included); lab/ has no import circle; no module of lab/ is over its size."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
MAX_LINES = 650  # a module longer than this is split along a seam a reader would name
CONTINUED = 12  # the layout tree's names are indented less; a description's next line more


def _section(title: str) -> str:
    """The first fenced block under the `## title` heading of docs/architecture.md."""
    text = DOC.read_text()
    start = text.index(f"\n## {title}\n")
    block = re.search(r"```[a-z]*\n(.*?)```", text[start:], re.S)
    assert block is not None, f"docs/architecture.md: no fenced block under '## {title}'"
    return block.group(1)


def layout() -> list[str]:
    """The paths the layout tree names, each from the repository root (folders end in '/').
    A line is `<indent><name>[, <name>...]  <what it is>`; two spaces indent one level, and a
    line indented more than CONTINUED carries the description above on."""
    paths: list[str] = []
    stack: list[tuple[int, str]] = []  # (indent, folder path)
    for line in _section("Layout").splitlines():
        m = re.match(r"^( *)(\S+(?:, \S+)*)(?:\s{2,}.*)?$", line)
        indent = len(line) - len(line.lstrip(" "))
        if indent > CONTINUED or not line.strip():
            continue
        assert m and re.match(r"^[\w.-]+(/[\w.-]+)*/?$", m.group(2).split(", ")[0]), \
            f"docs/architecture.md's layout: not `name  description`: {line!r}"
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        for name in m.group(2).split(", "):
            paths.append(parent + name)
            if name.endswith("/"):
                stack.append((indent, parent + name))
    return paths


def code_folders() -> set[str]:
    """Every folder of lab/ that holds Python or the web UI's own scripts (vendored files
    and caches aside), as 'lab/.../'."""
    found = set()
    for path in (REPO / "lab").rglob("*"):
        if path.suffix not in (".py", ".js") or "__pycache__" in path.parts \
                or "vendor" in path.parts:
            continue
        found.add(path.parent.relative_to(REPO).as_posix() + "/")
    return found


def test_every_path_the_layout_names_exists() -> None:
    named = layout()
    assert "lab/" in named and len(named) > 40, "the layout tree was not read"
    missing = [p for p in named if not (REPO / p).exists()
               or (REPO / p).is_dir() != p.endswith("/")]
    assert not missing, f"docs/architecture.md's layout names what does not exist: {missing}"


def test_the_layout_names_every_folder_of_lab_and_every_top_module() -> None:
    named = set(layout())
    folders = code_folders()
    assert "lab/backends/local/pipelines/" in folders  # the walk found the tree
    unnamed = sorted(folders - named)
    assert not unnamed, ("docs/architecture.md's layout tree does not name these folders of "
                         f"lab/: {unnamed}")
    top = {f"lab/{p.name}" for p in (REPO / "lab").glob("*.py") if p.name != "__init__.py"}
    assert not sorted(top - named), ("docs/architecture.md's layout tree does not name these "
                                     f"modules: {sorted(top - named)}")


# --- the import graph ------------------------------------------------------------------------

def modules() -> dict[str, Path]:
    """lab's modules by dotted name (a package by its own name)."""
    out = {}
    for path in (REPO / "lab").rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(mods: dict[str, Path]) -> Iterator[tuple[str, str, int]]:
    """(importer, imported, line) for every import of a lab module anywhere in lab/: at the
    top, inside functions, under TYPE_CHECKING. `from a.b import c` names the module a.b.c
    when there is one, else a.b."""
    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else known(base)
                           for a in node.names]
            else:
                continue
            for target in targets:
                if target is not None and target != name:
                    yield name, target, node.lineno


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_circles_are_found() -> None:
    """The detector itself, on a graph with one circle of three and a tail."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert circles(edges) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_lab_has_no_import_circle() -> None:
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for a, b, _ in imports(mods):
        edges[a].add(b)
    assert len([b for targets in edges.values() for b in targets]) > 300  # imports were read
    found = circles(edges)
    assert not found, f"import circles in lab/: {found}"


def bands() -> list[list[str]]:
    """The rows of the dependency direction, top first: each a list of lab's top-level
    packages and modules (without .py)."""
    rows = []
    for line in _section("Dependency direction").splitlines():
        m = re.match(r"^([a-z_]+(?:, [a-z_]+)*)(?:\s{2,}.*)?$", line)
        if m:
            rows.append(m.group(1).split(", "))
    return rows


def test_imports_go_down_the_stated_direction() -> None:
    rows = bands()
    row_of = {unit: i for i, row in enumerate(rows) for unit in row}
    units = {p.stem for p in (REPO / "lab").iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}
    assert units - set(row_of) == set(), (
        f"docs/architecture.md's dependency direction leaves out {sorted(units - set(row_of))}")
    assert set(row_of) - units == set(), f"it names what is not in lab/: {set(row_of) - units}"
    mods = modules()
    upward = []
    for a, b, line in imports(mods):
        ua, ub = a.split(".")[1:2], b.split(".")[1:2]
        if not ua or not ub or ua == ub:
            continue  # `lab` itself (its version), or inside one package
        if row_of[ua[0]] > row_of[ub[0]]:
            upward.append(f"{mods[a].relative_to(REPO)}:{line} imports {b}")
    assert not upward, "imports against docs/architecture.md's direction:\n" + "\n".join(upward)


def test_the_layout_lists_the_top_of_lab_as_the_imports_go() -> None:
    """Each entry directly under lab/ in the layout tree imports only entries below it."""
    order = [p.removeprefix("lab/").removesuffix("/").removesuffix(".py")
             for p in layout() if p.startswith("lab/") and p.count("/") - p.endswith("/") == 1]
    place = {unit: i for i, unit in enumerate(order)}
    mods = modules()
    upward = []
    for a, b, line in imports(mods):
        ua, ub = a.split(".")[1:2], b.split(".")[1:2]
        if ua and ub and ua != ub and place[ua[0]] > place[ub[0]]:
            upward.append(f"{mods[a].relative_to(REPO)}:{line} imports {b}")
    assert not upward, "imports up the layout tree's order:\n" + "\n".join(upward)


@pytest.mark.parametrize(("importer", "never"), [
    ("lab.backends", ("lab.cli", "lab.providers", "lab.provision", "lab.scenarios",
                      "lab.teaching", "lab.term", "lab.webui")),
    ("lab.kube", ("lab.backends",)),
    ("lab.scenarios", ("lab.cli", "lab.term", "lab.webui")),
    ("lab.backends.local", ("lab.backends.cluster",)),
    ("lab.backends.cluster", ("lab.backends.local",)),
])
def test_the_rules_the_docs_state(importer: str, never: tuple[str, ...]) -> None:
    """Backends never import the command line, the providers or the scenario engine (checks
    read only the status shape); the Kubernetes layer imports no backend; the two backends
    never import each other."""
    bad = [f"{a} imports {b}" for a, b, _ in imports(modules())
           if (a == importer or a.startswith(importer + "."))
           and any(b == n or b.startswith(n + ".") for n in never)]
    assert not bad, bad


def test_no_module_of_lab_is_over_its_size() -> None:
    sizes = {p.relative_to(REPO).as_posix(): len(p.read_text().splitlines())
             for p in (REPO / "lab").rglob("*")
             if p.suffix in (".py", ".js") and "vendor" not in p.parts
             and "__pycache__" not in p.parts}
    assert len(sizes) > 100
    over = {p: n for p, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split along a seam): {over}"
