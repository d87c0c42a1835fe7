"""Arrows run one way: no import cycle between konfig's modules, and no import from a
lower layer of the package to a higher one; and no module is longer than
:data:`MAX_LINES` lines.

The layer order is the fenced ``layers`` block of ``tools/konfig/README.md``: one layer a
line, the highest first; a line may name several folders or top-level modules, peers
that do not import each other. Every import counts: module level, inside a function
(deferred for start-up time) and under ``TYPE_CHECKING``. An import of a package's
submodule counts as an arrow to that submodule (not to the packages above it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import konfig

PACKAGE = Path(konfig.__file__).resolve().parent
README = PACKAGE / "README.md"
INIT = "konfig"  # the package's own __init__ (its version)
# a module longer than this holds more than one subject: split it by concept (issue 25)
MAX_LINES = 700


def layers() -> list[list[str]]:
    """The README's layers, highest first."""
    found = re.search(r"^```layers\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)
    assert found, f"{README} has no ```layers block"
    out = []
    for line in found.group(1).splitlines():
        names = line.split("#", 1)[0].split()
        if names:
            out.append(names)
    return out


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["konfig", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The konfig modules ``name`` imports, with the line of each import."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import konfig.x.y` of a non-module
                target = target.rpartition(".")[0]
            if target.startswith(INIT) and target != name:
                yield target, node.lineno


def graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {name: dict(imports(name, path, known)) for name, path in known.items()}


def room(module: str) -> str:
    """The folder or top-level module a module belongs to (``konfig`` for the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else INIT


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_layers_name_every_folder_and_top_level_module_once() -> None:
    named = [name for layer in layers() for name in layer]
    rooms = {room(m) for m in modules()}
    assert len(named) == len(set(named)), (
        f"named twice: {sorted(n for n in named if named.count(n) > 1)}"
    )
    assert set(named) == rooms, (
        f"the README's layers miss {sorted(rooms - set(named))} "
        f"and name what is not there: {sorted(set(named) - rooms)}"
    )


def test_no_import_cycle_between_modules() -> None:
    edges = graph()
    found = cycles(edges)
    described = [
        " <-> ".join(c)
        + ": "
        + ", ".join(f"{a} imports {b} (line {edges[a][b]})" for a in c for b in c if b in edges[a])
        for c in found
    ]
    assert not found, "import cycles:\n" + "\n".join(described)


def test_no_import_from_a_lower_layer_to_a_higher_one() -> None:
    rank = {name: i for i, layer in enumerate(layers()) for name in layer}
    wrong = []
    for module, targets in sorted(graph().items()):
        here = room(module)
        for target, line in sorted(targets.items()):
            there = room(target)
            if there != here and rank[there] <= rank[here]:
                way = "a peer" if rank[there] == rank[here] else "a higher layer"
                wrong.append(f"{module} (line {line}) imports {target}: {there} is {way}")
    assert not wrong, "arrows against the layers (tools/konfig/README.md):\n" + "\n".join(wrong)


def test_the_checks_see_a_cycle_and_an_upward_arrow() -> None:
    """The rules catch what they are for (a cycle of three, a deferred import counts)."""
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    edges = graph()
    assert "konfig.engine.kube.client" in edges["konfig.engine.kube"]  # a package's imports
    deferred = edges["konfig.__main__"]  # imports the CLI inside main(): deferred
    assert "konfig.cli" in deferred


def line_counts() -> dict[str, int]:
    """The number of lines of every module of the package."""
    return {
        name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()
    }


def test_no_module_is_longer_than_the_limit() -> None:
    counts = line_counts()
    assert len(counts) > 100  # every module of the package is counted
    over = sorted((n, name) for name, n in counts.items() if n > MAX_LINES)
    assert not over, (
        f"modules over {MAX_LINES} lines (split each by concept, one home per concept; "
        "tools/konfig/README.md's map names the new modules):\n"
        + "\n".join(f"{modules()[name].relative_to(PACKAGE.parent)}: {n} lines" for n, name in over)
    )
