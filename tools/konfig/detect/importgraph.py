"""The KCL import graph of a whole repository, from a fast scanner of ``import`` lines.

KCL resolves ``import a.b.c`` from the directory holding ``kcl.mod`` (the module root):
to the package directory ``a/b/c`` (all its ``*.k`` files but ``*_test.k``) when that
directory exists, else to the file ``a/b/c.k``. A relative import ``.x`` starts at the
importing file's own package, each further dot goes one package up (``..x`` from
``a/b/f.k`` is ``a/x``). Names of KCL's system modules (``regex``, ``json``, ...) and
packages that are not in the repository (``kcl.mod`` dependencies) resolve to nothing
here; ``kcl.mod`` itself is a repo-wide trigger, so changing dependencies is seen anyway.

Graph nodes are *modules*: a path without extension that stands for both the package
directory and the ``.k`` file of that name, so a change to either is seen whichever KCL
picks. An edge ``a -> b`` means a file of module ``a`` imports ``b``. Stacks are nodes
``("stack", path)`` with edges to what their entry files import. The scanner is proven
equal to kcl-lib's own parser (``kcl.import_deps``) by the tests.

Scanning is cached on disk by git blob id (:class:`ImportCache`), so a warm run re-reads
only files whose content changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from konfig.repo.files import WriteError, WriteScope, atomic_write_text

KCL_SUFFIX = ".k"
TEST_SUFFIX = "_test.k"
KCL_MOD = "kcl.mod"
SCANNER_VERSION = 1

# KCL's system modules: `import regex` never refers to a repository directory.
SYSTEM_MODULES = frozenset(
    {
        "base64",
        "collection",
        "crypto",
        "datetime",
        "file",
        "json",
        "manifests",
        "math",
        "net",
        "regex",
        "runtime",
        "template",
        "units",
        "yaml",
    }
)

_IDENT = r"[A-Za-z_$][\w$]*"
_TOKENS = re.compile(
    r'(?P<str3>"""(?:\\.|[^\\])*?"""|\'\'\'(?:\\.|[^\\])*?\'\'\')'
    r'|(?P<str1>"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')'
    r"|(?P<comment>\#[^\n]*)"
    rf"|^[ \t]*import[ \t]+(?P<name>\.*{_IDENT}(?:\.{_IDENT})*|\.+)(?:[ \t]+as[ \t]+{_IDENT})?",
    re.M | re.S,
)

StackNode = tuple[str, str]


def is_kcl_source(path: str) -> bool:
    """A ``.k`` file KCL compiles as part of its package (tests are not)."""
    return path.endswith(KCL_SUFFIX) and not path.endswith(TEST_SUFFIX)


def scan_imports(text: str) -> list[tuple[str, int]]:
    """The import statements of a KCL file: ``(dotted name, line)``, strings/comments skipped."""
    if "import" not in text:
        return []
    found: list[tuple[str, int]] = []
    for match in _TOKENS.finditer(text):
        name = match.group("name")
        if name is not None:
            found.append((name, text.count("\n", 0, match.start()) + 1))
    return found


def module_of(path: str) -> str:
    """The module node a file belongs to as a package member: its directory."""
    cut = path.rfind("/")
    return path[:cut] if cut > 0 else ""


def resolve(name: str, file: str, module_root: str = "") -> str | None:
    """The module (repository path without extension) ``import name`` in ``file`` means.

    None for system modules and for relative imports that climb above the module root.
    """
    dots = len(name) - len(name.lstrip("."))
    rest = [p for p in name[dots:].split(".") if p]
    root_parts = module_root.split("/") if module_root else []
    if dots == 0:
        if len(rest) == 1 and rest[0] in SYSTEM_MODULES:
            return None
        parts = root_parts + rest
    else:
        directory = module_of(file)
        package = directory.split("/") if directory else []
        up = dots - 1
        if up > len(package) - len(root_parts):
            return None
        parts = package[: len(package) - up] + rest
    return "/".join(parts) if parts else None


@dataclass
class ImportCache:
    """Scanned imports per git blob id, kept in one JSON file; corrupt files are ignored."""

    path: Path | None
    entries: dict[str, list[list[Any]]] = field(default_factory=dict)
    dirty: bool = False

    @classmethod
    def load(cls, path: Path | None) -> ImportCache:
        if path is None or not path.is_file():
            return cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("scanner") != SCANNER_VERSION or not isinstance(data.get("blobs"), dict):
                return cls(path)
            return cls(path, data["blobs"])
        except (OSError, ValueError, AttributeError):
            return cls(path)

    def save(self, keep: Iterable[str] | None = None) -> None:
        if self.path is None or not self.dirty:
            return
        entries = self.entries
        if keep is not None:
            wanted = set(keep)
            # Drop what no current file uses once the cache grew well past the repository.
            if len(entries) > 2 * max(len(wanted), 1000):
                entries = {k: v for k, v in entries.items() if k in wanted}
        payload = json.dumps({"scanner": SCANNER_VERSION, "blobs": entries}, separators=(",", ":"))
        try:
            atomic_write_text(self.path, payload, scope=WriteScope.cache(self.path.parent))
        except WriteError:
            return  # a cache that cannot be written only costs the next run the scan
        self.dirty = False


Reader = Callable[[list[str]], Mapping[str, bytes]]


def scan_files(
    files: Mapping[str, str], read: Reader, cache: ImportCache
) -> dict[str, list[tuple[str, int]]]:
    """Imports of every ``.k`` file in ``files`` (path -> blob id); reads only cache misses.

    ``read`` takes paths and returns their content by path.
    """
    kcl_files = {p: b for p, b in files.items() if p.endswith(KCL_SUFFIX)}
    missing = [p for p, b in kcl_files.items() if b not in cache.entries]
    if missing:
        contents = read(missing)
        for path in missing:
            text = contents[path].decode("utf-8", errors="replace")
            cache.entries[kcl_files[path]] = [[n, line] for n, line in scan_imports(text)]
        cache.dirty = True
    return {p: [(str(n), int(line)) for n, line in cache.entries[b]] for p, b in kcl_files.items()}


Node = str | StackNode


@dataclass
class ImportGraph:
    """Modules and stacks of one snapshot and who imports whom.

    Edges are kept as plain successor and predecessor sets: the queries (what a module
    imports transitively, which stacks import it) are reachability, and a graph library
    would cost every command that compiles or detects changes its import time.
    """

    imports: dict[str, list[tuple[str, int]]]  # raw import statements per .k file
    kcl_mod_dirs: frozenset[str]
    paths: list[str]
    _targets: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _succ: dict[Node, set[Node]] = field(default_factory=dict, repr=False)
    _pred: dict[Node, set[Node]] = field(default_factory=dict, repr=False)

    def _add_edges(self, edges: Iterable[tuple[Node, Node]]) -> None:
        succ, pred = self._succ, self._pred
        for source, target in edges:
            out = succ.get(source)
            if out is None:
                out = succ[source] = set()
            out.add(target)
            into = pred.get(target)
            if into is None:
                into = pred[target] = set()
            into.add(source)

    def __contains__(self, node: Node) -> bool:
        return node in self._succ or node in self._pred

    @staticmethod
    def _reach(start: Node, edges: dict[Node, set[Node]]) -> set[Node]:
        seen: set[Node] = set()
        todo = list(edges.get(start, ()))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        seen.discard(start)
        return seen

    @classmethod
    def build(
        cls,
        paths: Iterable[str],
        imports: dict[str, list[tuple[str, int]]],
    ) -> ImportGraph:
        listed = list(paths)
        mods = {module_of(p) for p in listed if p == KCL_MOD or p.endswith("/" + KCL_MOD)}
        graph = cls(imports, frozenset(mods), listed)
        edges: list[tuple[str, str]] = []
        for path in imports:
            if not is_kcl_source(path):
                continue
            sources = {module_of(path), path[: -len(KCL_SUFFIX)]}
            for target in graph.targets(path):
                edges.extend((s, target) for s in sources if s != target)
        graph._add_edges(edges)
        return graph

    def module_root(self, path: str) -> str:
        """The directory of the nearest ``kcl.mod`` above ``path`` ("" for the repo root)."""
        if not self.kcl_mod_dirs or self.kcl_mod_dirs == {""}:
            return ""
        parent = module_of(path)
        while parent:
            if parent in self.kcl_mod_dirs:
                return parent
            parent = module_of(parent)
        return ""

    def targets(self, path: str) -> list[str]:
        """The modules a ``.k`` file imports (repository paths without extension)."""
        known = self._targets.get(path)
        if known is not None:
            return known
        root = self.module_root(path)
        found: list[str] = []
        for name, _line in self.imports.get(path, ()):
            target = resolve(name, path, root)
            if target is not None and target not in found:
                found.append(target)
        self._targets[path] = found
        return found

    def directories(self) -> set[str]:
        """Every directory holding a file (what KCL can see as a package directory)."""
        dirs: set[str] = set()
        for path in self.paths:
            parent = module_of(path)
            while parent and parent not in dirs:
                dirs.add(parent)
                parent = module_of(parent)
        return dirs

    def resolved_files(self, path: str, files: Iterable[str]) -> set[str]:
        """The files KCL loads for ``path``'s imports (what ``kcl.import_deps`` reports)."""
        by_dir: dict[str, list[str]] = {}
        present = set(files)
        dirs = self.directories()
        for f in present:
            if is_kcl_source(f):
                by_dir.setdefault(module_of(f), []).append(f)
        out: set[str] = set()
        for target in self.targets(path):
            if target in dirs:
                out.update(by_dir.get(target, ()))
            elif target + KCL_SUFFIX in present:
                out.add(target + KCL_SUFFIX)
        return out

    def add_stack(self, stack_path: str, entry_files: Iterable[str]) -> None:
        self.add_stacks({stack_path: entry_files})

    def add_stacks(self, entries: Mapping[str, Iterable[str]]) -> None:
        """Add stack nodes with edges to what their entry files import (in one batch)."""
        edges: list[tuple[Node, Node]] = []
        for stack_path, files in entries.items():
            node: StackNode = ("stack", stack_path)
            self._succ.setdefault(node, set())
            for entry in files:
                edges.extend((node, target) for target in self.targets(entry))
        self._add_edges(edges)

    def descendants(self, module: str) -> set[str]:
        """Every module ``module`` imports, directly or transitively."""
        return {n for n in self._reach(module, self._succ) if isinstance(n, str)}

    def importing_stacks(self, module: str) -> set[str]:
        """Stacks whose entry files import ``module``, directly or transitively."""
        return {
            n[1]
            for n in self._reach(module, self._pred)
            if isinstance(n, tuple) and n[0] == "stack"
        }


def modules_of_change(path: str) -> list[str]:
    """The modules a changed file belongs to: its directory, and itself for a ``.k`` file.

    Any file inside a package directory counts (a data file next to a library may be
    read by it), except ``*_test.k`` which never is compiled into a stack.
    """
    if path.endswith(TEST_SUFFIX):
        return []
    found = [module_of(path)]
    if path.endswith(KCL_SUFFIX):
        found.append(path[: -len(KCL_SUFFIX)])
    return [m for m in found if m]
