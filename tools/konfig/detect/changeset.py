"""Which stacks a change affects, and why (the rules of ARCHITECTURE.md "Change detection").

The changed files are ``git diff merge-base(base, head) head`` with renames split into a
deletion and an addition. A changed file affects a stack when:

1. it lies inside the stack directory (any file: data files a stack reads with
   ``file.read`` live there, so they are covered);
2. it is a project-level file of the stack's project: ``appops/<p>/project.yaml`` or
   anything under ``appops/<p>/base/``;
3. it is an entry file of the stack (``kcl.yaml`` may list files outside the stack), or
   it belongs to a KCL module the stack's entry files import, directly or transitively
   (package = directory; any file directly inside an imported package directory counts,
   ``*_test.k`` excepted). The render entry is an entry file of every stack, so what it
   imports affects every stack;
4. it matches a repo-wide trigger (``konfig.yaml`` ``triggers``, default ``kcl.mod``,
   ``kcl.mod.lock``, ``konfig.yaml``, ``base/render/**``): then every stack.

Not seen: a file outside the stack, its project and its imported packages that KCL reads
at run time by path (``file.read("../../elsewhere.json")``); list such files as triggers.

Stacks and projects are found from the file listing of a git tree (or the work tree), not
by parsing ``stack.yaml``: a directory with ``stack.yaml`` inside ``appops/<project>/``
(which has ``project.yaml``), not nested in another stack. A stack present at the merge
base but not at head is a *deleted stack*. Paths match component by component.

Layout problems (one severity everywhere: the same errors every other command reports)
are looked for where the change is: the ``project.yaml`` and ``stack.yaml`` of every
affected stack (``name`` must be the directory's name) and a changed stack directory
whose project has no ``project.yaml`` (or whose ``project.yaml`` the change deleted).
Such a stack is listed in ``problems``, never among the affected nor the deleted stacks.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from konfig import __version__
from konfig.detect import gitrepo
from konfig.detect.importgraph import (
    ImportCache,
    ImportGraph,
    modules_of_change,
)
from konfig.detect.snapshot import (
    Layout,
    Snapshot,
    find_layout,
    tree_snapshot,
    worktree_snapshot,
)
from konfig.detect.treeindex import (
    TreeIndex,
    build_graph,
    index_commit,
    lazy_yaml,
    load_yaml,
    read_config,
)
from konfig.errors import ConfigError
from konfig.fingerprint import package_digest
from konfig.repo.files import WriteError, WriteScope, atomic_write_text, remove
from konfig.repo.layout import (
    APPOPS,
    PROJECT_FILE,
    STACK_FILE,
    Problem,
    check_named,
    outside_project_hint,
)
from konfig.repo.settings import (
    RepoConfig,
    is_production,
    path_matches,
)


def within(path: str, parent: str) -> bool:
    """Component-wise containment of normalised POSIX paths (``a/b`` is not within ``a/bc``).

    Same answer as :func:`konfig.repo.layout.is_within`, without building path objects (this
    runs for every stack of a monorepo).
    """
    return path == parent or path.startswith(parent + "/")


# --------------------------------------------------------------------------- triggers

# A repo-wide trigger is a settings path pattern (kept under this name for callers).
matches_trigger = path_matches


# --------------------------------------------------------------------------- change set


@dataclass(frozen=True)
class AffectedStack:
    path: str
    project: str
    reasons: tuple[str, ...]
    production: bool = False  # production-like (stack.yaml `production`, productionStacks)


@dataclass(frozen=True)
class ChangeSet:
    """What a change between two commits (or a commit and the work tree) affects."""

    base: str
    head: str | None  # None: the work tree
    merge_base: str
    files: tuple[gitrepo.FileChange, ...]
    stacks: tuple[AffectedStack, ...]
    deleted_stacks: tuple[str, ...]
    projects: tuple[str, ...]
    problems: tuple[Problem, ...] = ()  # layout errors of the changed stacks

    @property
    def stack_paths(self) -> list[str]:
        return [s.path for s in self.stacks]

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "head": self.head if self.head is not None else "worktree",
            "merge_base": self.merge_base,
            "stacks": [
                {"path": s.path, "reasons": list(s.reasons), "production": s.production}
                for s in self.stacks
            ],
            "deleted_stacks": list(self.deleted_stacks),
            "projects": list(self.projects),
            "problems": [
                {
                    "rule": p.rule,
                    "message": p.message,
                    "file": p.file,
                    "line": p.line,
                    "hint": p.hint,
                }
                for p in self.problems
            ],
        }


@dataclass
class _Reasons:
    by_stack: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, stack: str, reason: str) -> None:
        if reason not in self.by_stack[stack]:
            self.by_stack[stack].append(reason)


def affected_stacks(
    root: Path,
    base: str,
    head: str | None = "HEAD",
    *,
    cache: Path | None = None,
) -> ChangeSet:
    """The stacks a change affects: ``base...head`` (``head=None``: base vs the work tree).

    ``cache`` is the directory for the import-scan cache (None: no cache).
    This is the function ``compile``/``test``/``check``/``preview`` call with
    ``--changed-from``.
    """
    # both names resolved by one git process (the work tree: compared from HEAD's history)
    base_sha, tip = gitrepo.rev_parse_all(root, [base, head if head is not None else "HEAD"])
    head_sha = tip if head is not None else None
    merge = gitrepo.merge_base(root, base_sha, tip)
    # Commits never change, so the answer for two commits is remembered: compile, test,
    # check and preview in one workflow each ask the same question.
    memo = _Memo(cache, base_sha, head_sha, merge) if head_sha is not None and cache else None
    if memo is not None:
        known = memo.load()
        if known is not None:
            return known
    changes = gitrepo.diff(root, merge, head_sha)
    if head_sha is not None and not changes:
        result = changes_from(
            root, base_sha, head_sha, merge, changes, tree_snapshot(root, head_sha), cache=cache
        )
    elif head_sha is None:
        result = changes_from(
            root, base_sha, None, merge, changes, worktree_snapshot(root, cache), cache=cache
        )
    else:
        # the head commit's layout and import graph: kept between runs, patched for a push
        loaded: list[ImportCache] = []

        def imports() -> ImportCache:
            if not loaded:
                loaded.append(ImportCache.load(cache / "imports.json" if cache else None))
            return loaded[0]

        index = index_commit(root, head_sha, cache=cache, imports=imports)
        for import_cache in loaded:
            import_cache.save(keep=index.snapshot.files.values())
        result = changes_from(
            root, base_sha, head_sha, merge, changes, index.snapshot, cache=cache, index=index
        )
    if memo is not None:
        memo.save(result)
    return result


_MEMO_KEEP = 200


# relative to the package root (konfig/)
class _Memo:
    """The change set of two commits, kept under ``<cache>/changed/<key>.json``."""

    def __init__(self, cache: Path, base: str, head: str, merge: str) -> None:
        seed = f"{__version__}\0{base}\0{head}\0{merge}"
        self.dir = cache / "changed"
        self.key = package_digest(seed, cache)  # every module of konfig, not a chosen few
        self.path = self.dir / f"{self.key}.json"

    def load(self) -> ChangeSet | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("key") != self.key:
                return None
            out = data["changes"]
            return ChangeSet(
                base=out["base"],
                head=out["head"],
                merge_base=out["merge_base"],
                files=tuple(gitrepo.FileChange(s, p) for s, p in data["files"]),
                stacks=tuple(
                    AffectedStack(
                        s["path"],
                        "/".join(s["path"].split("/")[:2]),
                        tuple(s["reasons"]),
                        bool(s["production"]),
                    )
                    for s in out["stacks"]
                ),
                deleted_stacks=tuple(out["deleted_stacks"]),
                projects=tuple(out["projects"]),
                problems=tuple(
                    Problem(p["rule"], p["message"], p["file"], p["line"], p["hint"])
                    for p in out["problems"]
                ),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # missing or corrupt: computed again and rewritten

    def save(self, changes: ChangeSet) -> None:
        payload = {
            "key": self.key,
            "changes": changes.to_json(),
            "files": [[c.status, c.path] for c in changes.files],
        }
        scope = WriteScope.cache(self.dir.parent)
        try:
            atomic_write_text(self.path, json.dumps(payload, separators=(",", ":")), scope=scope)
            entries = sorted(self.dir.glob("*.json"), key=lambda p: p.stat().st_mtime)
            remove(entries[:-_MEMO_KEEP], scope=scope)
        except (OSError, WriteError):
            pass  # a read-only cache only costs the next run the analysis


def changes_from(
    root: Path,
    base_sha: str,
    head_sha: str | None,
    merge: str,
    changes: list[gitrepo.FileChange],
    snapshot: Snapshot,
    *,
    cache: Path | None = None,
    index: TreeIndex | None = None,
) -> ChangeSet:
    """The change set of ``changes`` in ``snapshot`` (``index``: the snapshot's layout,
    settings and import graph, when already known)."""
    reasons = _Reasons()
    paths = sorted({c.path for c in changes})
    if index is not None:
        layout, config = index.layout, index.config
        graph, entries = index.graph, index.entries
    else:
        layout = find_layout(snapshot.files)
        config = read_config(snapshot, root if cache is not None else None)
        if paths:
            import_cache = ImportCache.load(cache / "imports.json" if cache else None)
            graph, entries = build_graph(snapshot, layout, config, import_cache)
            import_cache.save(keep=snapshot.files.values())
        else:
            graph, entries = ImportGraph.build((), {}), {}

    # rule 4: repo-wide triggers
    for path in paths:
        pattern = next((t for t in config.triggers if matches_trigger(path, t)), None)
        if pattern is not None:
            for stack in layout.stacks:
                reasons.add(stack, f"{path} changed (repo-wide trigger {pattern})")

    by_project: dict[str, list[str]] = defaultdict(list)
    for stack, project in layout.stacks.items():
        by_project[project].append(stack)
    # the stacks listing a changed file among their entry files (outside the stack)
    changed = set(paths)
    entry_index: dict[str, list[str]] = defaultdict(list)
    for stack, files in entries.items():
        for f in files:
            if f in changed and not within(f, stack):
                entry_index[f].append(stack)

    changed_modules: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        # rule 1: inside the stack
        owner = layout.stack_of(path)
        if owner is not None:
            reasons.add(owner, f"{path} changed")
        # rule 2: project-level files
        parts = path.split("/")
        if len(parts) >= 3 and parts[0] == APPOPS:
            project = f"{APPOPS}/{parts[1]}"
            if path == f"{project}/{PROJECT_FILE}" or within(path, f"{project}/base"):
                for s in by_project.get(project, ()):
                    reasons.add(s, f"{path} changed")
        # rule 3a: entry files outside the stack and its project's base
        for s in entry_index.get(path, ()):
            if not within(path, layout.stacks[s]):
                reasons.add(s, f"{path} changed (entry file)")
        for module in modules_of_change(path):
            changed_modules[module].append(path)

    # rule 3b: imported modules, transitively
    for module in sorted(changed_modules):
        listed = ", ".join(changed_modules[module])
        for s in sorted(graph.importing_stacks(module)):
            reasons.add(s, f"imports {module} which changed: {listed}")

    readings = _Readings(cache)
    deleted, added = _stack_diff(root, merge, changes, layout, readings)
    for s in added:
        if s in reasons.by_stack:
            reasons.by_stack[s].insert(0, f"new stack (not present at {merge[:12]})")

    problems = layout_problems(snapshot, layout, sorted(reasons.by_stack), paths, readings)
    broken = {p.directory for p in problems}
    affected = [
        s for s in sorted(reasons.by_stack) if s not in broken and layout.stacks[s] not in broken
    ]
    production = _production(snapshot, affected, config, readings)
    readings.save()
    stacks = tuple(
        AffectedStack(s, layout.stacks[s], tuple(reasons.by_stack[s]), s in production)
        for s in affected
    )
    projects = sorted({s.project for s in stacks} | {"/".join(d.split("/")[:2]) for d in deleted})
    return ChangeSet(
        base=base_sha,
        head=head_sha,
        merge_base=merge,
        files=tuple(changes),
        stacks=stacks,
        deleted_stacks=tuple(deleted),
        projects=tuple(projects),
        problems=tuple(problems),
    )


class _Readings:
    """What change detection read from ``stack.yaml`` and ``project.yaml`` files, by path
    and blob id (a pure function of both), kept in ``<cache>/readings.json``:
    a push re-reads the settings of every affected stack otherwise."""

    def __init__(self, cache: Path | None) -> None:
        self.path = cache / "readings.json" if cache is not None else None
        self.seed = package_digest("readings 1", cache) if cache is not None else ""
        self.entries: dict[str, Any] = {}
        self.dirty = False
        if self.path is None:
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("seed") == self.seed:
                self.entries = dict(data["entries"])
        except (OSError, ValueError, KeyError, TypeError):
            self.entries = {}

    def get(self, what: str, rel: str, blob: str) -> Any:
        return self.entries.get(f"{what}\0{rel}\0{blob}", _UNKNOWN)

    def put(self, what: str, rel: str, blob: str, value: Any) -> None:
        if self.path is not None:
            self.entries[f"{what}\0{rel}\0{blob}"] = value
            self.dirty = True

    def save(self, keep: int = 50_000) -> None:
        if self.path is None or not self.dirty:
            return
        entries = self.entries
        if len(entries) > keep:  # grown past any repository: start again
            entries = {}
        payload = json.dumps({"seed": self.seed, "entries": entries}, separators=(",", ":"))
        try:
            atomic_write_text(self.path, payload, scope=WriteScope.cache(self.path.parent))
        except WriteError:
            pass  # a cache that cannot be written only costs the next run the reading


_UNKNOWN: Any = object()


def _production(
    snapshot: Snapshot, stacks: list[str], config: RepoConfig, readings: _Readings | None = None
) -> set[str]:
    """The production-like ones among ``stacks`` (one batch read of their stack.yaml)."""
    readings = readings or _Readings(None)
    files = [f"{s}/{STACK_FILE}" for s in stacks if f"{s}/{STACK_FILE}" in snapshot.files]
    # what a stack.yaml declares depends on its content alone
    known = {f: readings.get("production", "", snapshot.files[f]) for f in files}
    texts = snapshot.read([f for f in files if known[f] is _UNKNOWN])
    found = set()
    for stack in stacks:
        rel = f"{stack}/{STACK_FILE}"
        declared = known.get(rel)
        if declared is _UNKNOWN:
            raw = texts.get(rel, b"")
            declared = None
            if b"production" in raw:  # parse only the few stack.yaml files that say so
                try:
                    data = load_yaml(raw)
                except lazy_yaml().YAMLError:
                    data = None  # reported by `konfig check`; here the patterns decide
                declared = data.get("production") if isinstance(data, dict) else None
            if not isinstance(declared, bool):
                declared = None  # only a boolean decides (is_production)
            readings.put("production", "", snapshot.files[rel], declared)
        if is_production(stack, declared, config.production_stacks):
            found.add(stack)
    return found


def layout_problems(
    snapshot: Snapshot,
    layout: Layout,
    stacks: Sequence[str],
    paths: Sequence[str],
    readings: _Readings | None = None,
) -> list[Problem]:
    """The layout errors of the ``stacks`` (and their projects) a change affects, and of
    the changed stack directories whose project has no ``project.yaml`` (``readings``:
    what earlier runs found in the same files)."""
    readings = readings or _Readings(None)
    problems: list[Problem] = []
    for orphan in sorted(layout.orphans):
        lost = "/".join(orphan.split("/")[:2]) + "/" + PROJECT_FILE  # its project's file
        if any(within(p, orphan) or p == lost for p in paths):
            rel = f"{orphan}/{STACK_FILE}"
            problems.append(
                Problem(
                    "stack-outside-project",
                    f"stack is not inside a project (no {PROJECT_FILE} in a parent directory "
                    f"under {APPOPS}/)",
                    rel,
                    hint=outside_project_hint(orphan),
                )
            )
    named = {f"{s}/{STACK_FILE}": "stack" for s in stacks}
    named |= {f"{layout.stacks[s]}/{PROJECT_FILE}": "project" for s in stacks}
    present = sorted(p for p in named if p in snapshot.files)
    known = {rel: _known_problem(readings, rel, named[rel], snapshot.files[rel]) for rel in present}
    texts = snapshot.read([rel for rel in present if known[rel] is _UNKNOWN])
    for rel in present:
        found = known[rel]
        if found is _UNKNOWN:
            blob = snapshot.files[rel]
            problem = _named_problem(rel, named[rel], texts[rel])
            if problem is None:  # right wherever the directory has this name
                readings.put("right", _named_as(rel, named[rel]), blob, True)
                found = None
            else:
                found = list(astuple(problem))
                readings.put("named", rel, blob, found)
        if found is not None:
            problems.append(Problem(*found))
    return problems


def _named_as(rel: str, kind: str) -> str:
    """What a ``stack.yaml``/``project.yaml`` is checked against: its kind and the name
    of its directory (the ``stack.yaml`` of every ``dev`` stack is often the same blob)."""
    return f"{kind}\0{PurePosixPath(rel).parent.name}"


def _known_problem(readings: _Readings, rel: str, kind: str, blob: str) -> Any:
    """The problem (fields) or None found before for this file, else _UNKNOWN."""
    if readings.get("right", _named_as(rel, kind), blob) is True:
        return None
    return readings.get("named", rel, blob)


def _named_problem(rel: str, kind: str, raw: bytes) -> Problem | None:
    from konfig.repo.yamlio import load_yaml_text  # PyYAML: only when a file is read

    text = raw.decode("utf-8", errors="replace")
    try:
        data = load_yaml_text(text, file=rel)
    except ConfigError as exc:
        return Problem(f"{kind}-yaml", exc.message.split(": ", 1)[-1], rel, exc.line)
    expected = PurePosixPath(rel).parent.name
    _, problem = check_named(data, rel, expected, kind, partial(_name_line, text))
    return problem


def _name_line(text: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("name:"):
            return number
    return None


def _stack_diff(
    root: Path,
    merge: str,
    changes: list[gitrepo.FileChange],
    head: Layout,
    readings: _Readings | None = None,
) -> tuple[list[str], list[str]]:
    """Stacks present at ``merge`` but not at head (deleted), and the reverse (added).

    Only projects where a ``stack.yaml`` or ``project.yaml`` was added or deleted can
    gain or lose stacks, so only those are listed from the base commit's tree (and kept
    in ``readings``: every push to a pull request has the same merge base).
    """
    touched: set[str] = set()
    for change in changes:
        parts = change.path.split("/")
        if parts[0] == APPOPS and len(parts) >= 3 and parts[-1] in (STACK_FILE, PROJECT_FILE):
            touched.add(f"{APPOPS}/{parts[1]}")
    if not touched:
        return [], []
    readings = readings or _Readings(None)
    projects = "\0".join(sorted(touched))
    known = readings.get("stacks-at", projects, merge)  # a commit's tree never changes
    if isinstance(known, list):
        at_base = set(known)
    else:
        at_base = set(find_layout(gitrepo.list_tree(root, merge, tuple(sorted(touched)))).stacks)
        readings.put("stacks-at", projects, merge, sorted(at_base))
    # a stack whose project.yaml is gone is broken, not deleted: never destroy it
    deleted = sorted(s for s in at_base if s not in head.stacks and s not in head.orphans)
    added = sorted(s for s, p in head.stacks.items() if p in touched and s not in at_base)
    return deleted, added
