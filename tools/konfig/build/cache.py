"""The compile cache: a stack's Spec is reused while nothing it depends on changed.

A stack's cache key is a sha256 over:

* the tool: konfig's version, a digest of every file of the installed konfig package,
  and kcl-lib's version;
* its options (``kcl.yaml`` / ``ci-test/settings.yaml`` ``kcl_options``) and its entry
  files in order (the render entry included);
* the git blob id of every file it may read: the entry files, every file inside the
  stack directory (data files read with ``file.read`` live there), the project's
  ``base/**``, every file directly inside each package it imports, transitively, and
  each imported ``.k`` module file, and ``kcl.mod`` / ``kcl.mod.lock``.

Entries live in ``.cache/konfig/compile/<key[:2]>/<key>.json`` (the Spec as JSON and
its canonical YAML), written atomically. An entry that cannot be read or parsed is
ignored (and rewritten after the stack compiles again). Only successful compiles are
stored.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from konfig import __version__
from konfig.detect.importgraph import KCL_SUFFIX, ImportCache, ImportGraph, module_of, scan_files
from konfig.detect.snapshot import Snapshot, find_layout, worktree_snapshot
from konfig.fingerprint import package_digest
from konfig.repo.files import WriteError, WriteScope, atomic_write_text, remove
from konfig.spec import Spec, spec_from_dict

COMPILE_DIR = "compile"
ALWAYS = ("kcl.mod", "kcl.mod.lock")


@cache
def tool_fingerprint(state: Path | None = None) -> str:
    """konfig's version and a digest of every file of the installed konfig package
    (``state``: the cache folder, where each file's digest is remembered by its stat).

    Any module can change what a Spec looks like or how it is stored (the compiler, the
    batch, the YAML writer, the cache itself, ...), so the digest covers the whole
    package; kcl-lib's version goes into each key next to it.
    """
    return package_digest(__version__, state)


@dataclass(frozen=True)
class StackDeps:
    """What one stack's compile depends on, and the resulting cache key."""

    stack_path: str
    key: str
    files: tuple[str, ...]  # files whose blob ids went into the key
    modules: tuple[str, ...]  # imported modules whose files' blob ids went into the key


class DependencyIndex:
    """The work tree's files, import graph and layout, to compute cache keys quickly."""

    def __init__(self, snapshot: Snapshot, graph: ImportGraph, state: Path | None = None) -> None:
        self.snapshot = snapshot
        self.state = state
        self.graph = graph
        self.by_dir: dict[str, list[str]] = defaultdict(list)
        self.by_stack: dict[str, list[str]] = defaultdict(list)
        self.by_project_base: dict[str, list[str]] = defaultdict(list)
        self._closure: dict[str, frozenset[str]] = {}
        self._digests: dict[str, str] = {}
        given = str(snapshot.root)
        resolved = str(snapshot.root.resolve())
        self._prefixes = tuple(dict.fromkeys(p.rstrip("/") + "/" for p in (given, resolved)))
        layout = find_layout(snapshot.files)
        self.layout = layout
        for path in snapshot.files:
            self.by_dir[module_of(path)].append(path)
            owner = layout.stack_of(path)
            if owner is not None:
                self.by_stack[owner].append(path)
            parts = path.split("/", 3)
            if len(parts) == 4 and parts[0] == "appops" and parts[2] == "base":
                self.by_project_base[f"appops/{parts[1]}"].append(path)

    def _descendants(self, module: str) -> frozenset[str]:
        found = self._closure.get(module)
        if found is None:
            found = frozenset(self.graph.descendants(module))
            self._closure[module] = found
        return found

    @classmethod
    def build(
        cls, root: Path, state: Path | None, snapshot: Snapshot | None = None
    ) -> DependencyIndex:
        """The index of the work tree at ``root``, or of ``snapshot`` (files whose blob
        ids are known already: a commit's tree written out to ``root``)."""
        if snapshot is None:
            snapshot = worktree_snapshot(root, state)
        import_cache = ImportCache.load(state / "imports.json" if state else None)
        imports = scan_files(snapshot.files, snapshot.read, import_cache)
        import_cache.save(keep=snapshot.files.values())
        return cls(snapshot, ImportGraph.build(snapshot.files, imports), state)

    def entry_key(self, entry: str, kcl_version: str) -> str:
        """The key of what a KCL entry that is no stack reads (``entry``: relative to the
        root; the policies): as a stack's key, with its directory's files (KCL's work
        directory there, what ``file`` functions reach) for the stack's."""
        module = module_of(entry)
        deps = self.deps(module, module, [str(self.snapshot.root / entry)], (), kcl_version)
        return hashlib.sha256(f"{deps.key}\0{self._module_digest(module)}".encode()).hexdigest()

    def _relative(self, file: str) -> str | None:
        for prefix in self._prefixes:
            if file.startswith(prefix):
                return posixpath.normpath(file[len(prefix) :])
        try:
            return Path(file).resolve().relative_to(self.snapshot.root.resolve()).as_posix()
        except ValueError:
            return None

    def _module_digest(self, module: str) -> str:
        """Digest of a module's files: its package directory's files and ``<module>.k``."""
        found = self._digests.get(module)
        if found is None:
            blobs = self.snapshot.files
            h = hashlib.sha256()
            for path in sorted(self.by_dir.get(module, ())):
                h.update(f"\0{path}\0{blobs[path]}".encode())
            single = module + KCL_SUFFIX
            h.update(f"\0{single}\0{blobs.get(single, '-')}".encode())
            found = h.hexdigest()
            self._digests[module] = found
        return found

    def deps(
        self,
        stack_path: str,
        project_path: str,
        entry_files: Sequence[str],
        options: Iterable[tuple[str, Any]],
        kcl_version: str,
    ) -> StackDeps:
        entries: list[str] = []
        outside: list[str] = []
        for f in entry_files:
            rel = self._relative(f)
            if rel is None:
                outside.append(f)
            else:
                entries.append(rel)
        modules: set[str] = set()
        for entry in entries:
            for target in self.graph.targets(entry):
                modules.add(target)
                modules.update(self._descendants(target))
        files: set[str] = set(entries)
        files.update(self.by_stack.get(stack_path, ()))
        files.update(self.by_project_base.get(project_path, ()))
        files.update(ALWAYS)
        h = hashlib.sha256()
        header = {
            "tool": tool_fingerprint(self.state),
            "kcl": kcl_version,
            "stack": stack_path,
            "entries": entries + outside,
            "options": [[k, v] for k, v in options],
        }
        h.update(json.dumps(header, sort_keys=True, default=str).encode())
        blobs = self.snapshot.files
        for path in sorted(files):
            h.update(f"\0{path}\0{blobs.get(path, '-')}".encode())
        for module in sorted(modules):
            h.update(f"\0{module}\0{self._module_digest(module)}".encode())
        for f in outside:  # entry files outside the repository: hash their content
            try:
                h.update(hashlib.sha256(Path(f).read_bytes()).digest())
            except OSError:
                h.update(b"missing")
        return StackDeps(stack_path, h.hexdigest(), tuple(sorted(files)), tuple(sorted(modules)))


class CompileCache:
    """Specs by cache key under ``<state>/compile``."""

    def __init__(self, state: Path) -> None:
        self.dir = state / COMPILE_DIR

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> tuple[Spec, str] | None:
        """The Spec and its canonical YAML, or None when missing or unreadable."""
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("key") != key:
                return None
            text = data["yaml"]
            if not isinstance(text, str):
                return None
            return spec_from_dict(data["spec"]), text
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing or corrupt: compile again, the put() rewrites it

    def prune(self, keep: Iterable[str], limit: int) -> int:
        """Delete the oldest entries not in ``keep`` while more than ``limit`` exist."""
        try:
            entries = list(self.dir.glob("*/*.json"))
        except OSError:
            return 0
        if len(entries) <= limit:
            return 0
        wanted = set(keep)
        stale = [p for p in entries if p.stem not in wanted]

        def age(path: Path) -> float:
            try:
                return path.stat().st_mtime
            except OSError:
                return 0.0

        doomed = sorted(stale, key=age)[: len(entries) - limit]
        try:
            remove(doomed, scope=WriteScope.cache(self.dir))
        except WriteError:
            return 0  # a read-only cache only grows
        return len(doomed)

    def put(self, key: str, stack_path: str, spec: Spec, text: str) -> None:
        """Store a Spec with its canonical YAML (rendering YAML costs more than compiling
        from cache, so it is kept too)."""
        payload = {"key": key, "stack": stack_path, "spec": spec.to_dict(), "yaml": text}
        try:
            atomic_write_text(
                self._path(key),
                json.dumps(payload, separators=(",", ":")),
                scope=WriteScope.cache(self.dir),
            )
        except WriteError:
            pass  # a cache that cannot be written only costs the next run a compile
