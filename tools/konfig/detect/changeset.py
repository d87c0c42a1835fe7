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
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import posixpath
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from konfig import __version__
from konfig.detect import gitrepo
from konfig.detect.importgraph import (
    KCL_SUFFIX,
    TEST_SUFFIX,
    ImportCache,
    ImportGraph,
    module_of,
    modules_of_change,
    scan_files,
)
from konfig.errors import ConfigError
from konfig.repo.files import atomic_write_text
from konfig.repo.layout import APPOPS, PROJECT_FILE, STACK_FILE, Repository, Stack
from konfig.repo.settings import CONFIG_FILE, RepoConfig, repo_config_from_data

CACHE_DIR = ".cache/konfig"
KCL_YAML = "kcl.yaml"
MAIN = "main.k"
KCL_MOD_VAR = "${KCL_MOD}"


def cache_dir(root: Path) -> Path:
    """Where konfig keeps its caches: ``.cache/konfig`` in the repository root (gitignored)."""
    return root / CACHE_DIR


def within(path: str, parent: str) -> bool:
    """Component-wise containment of normalised POSIX paths (``a/b`` is not within ``a/bc``).

    Same answer as :func:`konfig.repo.layout.is_within`, without building path objects (this
    runs for every stack of a monorepo).
    """
    return path == parent or path.startswith(parent + "/")


# --------------------------------------------------------------------------- snapshots


@dataclass
class Snapshot:
    """The files of one state of the repository: a commit, or the work tree (commit None)."""

    root: Path
    commit: str | None
    files: dict[str, str]  # path relative to the root -> git blob id
    _by_dir: dict[str, list[str]] | None = field(default=None, repr=False, compare=False)

    def files_in(self, directory: str) -> list[str]:
        """The files directly inside ``directory`` (relative, no trailing slash)."""
        if self._by_dir is None:
            self._by_dir = defaultdict(list)
            for p in self.files:
                self._by_dir[module_of(p)].append(p)
        return self._by_dir.get(directory, [])

    def read(self, paths: Iterable[str]) -> dict[str, bytes]:
        wanted = list(paths)
        if self.commit is None:
            return {p: (self.root / p).read_bytes() for p in wanted}
        blobs = gitrepo.read_blobs(self.root, (self.files[p] for p in wanted))
        return {p: blobs[self.files[p]] for p in wanted}

    def text(self, path: str) -> str | None:
        if path not in self.files:
            return None
        return self.read([path])[path].decode("utf-8", errors="replace")


def tree_snapshot(root: Path, commit: str, paths: tuple[str, ...] = ()) -> Snapshot:
    return Snapshot(root, commit, gitrepo.list_tree(root, commit, paths))


_IGNORED_DIRS = {".git", ".cache", ".venv", "node_modules", "__pycache__"}


def _walk(root: Path) -> list[str]:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _IGNORED_DIRS and not d.startswith(".")]
        rel = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        found.extend(prefix + f for f in filenames)
    return found


def worktree_snapshot(root: Path, state: Path | None = None) -> Snapshot:
    """The files on disk (what git sees, or every file outside a git repository).

    Blob ids are computed like git does, remembered by (size, mtime, inode) in
    ``state/worktree.json`` so a warm run hashes only files that changed.
    """
    paths = gitrepo.list_worktree(root) if gitrepo.is_repo(root) else _walk(root)
    known: dict[str, list[Any]] = {}
    cache_file = state / "worktree.json" if state is not None else None
    if cache_file is not None and cache_file.is_file():
        try:
            loaded = json.loads(cache_file.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                known = loaded
        except (OSError, ValueError):
            known = {}
    files: dict[str, str] = {}
    fresh: dict[str, list[Any]] = {}
    changed = False
    # Like git's "racily clean" rule: a file modified in the last seconds may change
    # again within the same mtime tick, so its hash is not remembered.
    recent = time.time_ns() - 2_000_000_000
    base = str(root)
    for path in paths:
        if path.startswith((CACHE_DIR + "/", ".git/")):
            continue
        try:
            # os.stat on a string: building 20,000 Path objects costs more than the stats
            st = os.stat(f"{base}/{path}")  # noqa: PTH116
        except OSError:
            continue  # tracked but deleted in the work tree
        key = [st.st_size, st.st_mtime_ns, st.st_ino]
        entry = known.get(path)
        if entry is not None and entry[:3] == key:
            blob = str(entry[3])
        else:
            try:
                blob = gitrepo.blob_id((root / path).read_bytes())
            except OSError:
                continue
            changed = True
        files[path] = blob
        if st.st_mtime_ns < recent:
            fresh[path] = [*key, blob]
        else:
            changed = True
    if cache_file is not None and (changed or len(fresh) != len(known)):
        atomic_write_text(cache_file, json.dumps(fresh, separators=(",", ":")))
    return Snapshot(root, None, files)


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Layout:
    """Projects and stacks of a snapshot, found from its file listing."""

    projects: frozenset[str]
    stacks: dict[str, str]  # stack path -> project path

    def stack_of(self, path: str) -> str | None:
        """The stack directory holding ``path`` (component-wise), if any."""
        parent = module_of(path)
        while parent:
            if parent in self.stacks:
                return parent
            parent = module_of(parent)
        return None

    def project_stacks(self, project: str) -> list[str]:
        return sorted(s for s, p in self.stacks.items() if p == project)


_STACK_SUFFIX = "/" + STACK_FILE
_PROJECT_SUFFIX = "/" + PROJECT_FILE


def find_layout(paths: Iterable[str]) -> Layout:
    projects: set[str] = set()
    stack_dirs: list[str] = []
    for path in paths:
        if not path.endswith((_STACK_SUFFIX, _PROJECT_SUFFIX)):
            continue
        parts = path.split("/")
        if parts[0] != APPOPS or any(p.startswith(".") for p in parts[1:-1]):
            continue
        if len(parts) == 3 and parts[2] == PROJECT_FILE:
            projects.add(f"{APPOPS}/{parts[1]}")
        elif len(parts) >= 4 and parts[-1] == STACK_FILE:
            stack_dirs.append("/".join(parts[:-1]))
    stacks: dict[str, str] = {}
    taken: set[str] = set()
    for directory in sorted(stack_dirs, key=lambda d: d.count("/")):
        project = "/".join(directory.split("/")[:2])
        if project not in projects:
            continue
        parent = module_of(directory)
        while parent and parent not in taken:
            parent = module_of(parent)
        if parent:
            continue  # nested in another stack
        taken.add(directory)
        stacks[directory] = project
    return Layout(frozenset(projects), stacks)


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_config(snapshot: Snapshot) -> RepoConfig:
    """``konfig.yaml`` of the snapshot; defaults when it is missing or unreadable."""
    text = snapshot.text(CONFIG_FILE)
    if text is None:
        return RepoConfig()
    try:
        return repo_config_from_data(yaml.load(text, Loader=_Loader))
    except (yaml.YAMLError, ConfigError):
        # an invalid konfig.yaml is reported by every other command; for change
        # detection the defaults still give the right answer, since konfig.yaml is
        # itself a trigger by default.
        return RepoConfig()


def entry_files(
    snapshot: Snapshot,
    layout: Layout,
    stack: str,
    config: RepoConfig,
    kcl_yaml_text: str | None = None,
) -> list[str]:
    """A stack's KCL entry files (relative paths), as ``konfig compile`` chooses them.

    ``kcl_yaml_text`` is the stack's ``kcl.yaml`` when the caller already read it.
    """
    kcl_yaml = f"{stack}/{KCL_YAML}"
    text = kcl_yaml_text
    if text is None and kcl_yaml in snapshot.files:
        text = snapshot.text(kcl_yaml)
    if text is not None:
        listed: Any = None
        try:
            data = yaml.safe_load(text)
            cli = data.get("kcl_cli_configs") if isinstance(data, dict) else None
            listed = cli.get("file") if isinstance(cli, dict) else None
        except yaml.YAMLError:
            listed = None
        if isinstance(listed, list) and listed:
            out: list[str] = []
            for item in listed:
                value = str(item)
                if KCL_MOD_VAR in value:
                    rel = posixpath.normpath(value.replace(KCL_MOD_VAR, "").lstrip("/"))
                elif value.startswith("/"):
                    continue  # outside the repository: nothing git can see change
                else:
                    rel = posixpath.normpath(f"{stack}/{value}")
                if not rel.startswith("../"):
                    out.append(rel)
            return out
    project = layout.stacks[stack]
    shared = sorted(
        p
        for p in snapshot.files_in(f"{project}/base")
        if p.endswith(KCL_SUFFIX) and not p.endswith(TEST_SUFFIX)
    )
    return [*shared, f"{stack}/{MAIN}", config.render_entry]


def build_graph(
    snapshot: Snapshot, layout: Layout, config: RepoConfig, cache: ImportCache
) -> tuple[ImportGraph, dict[str, list[str]]]:
    """The import graph of a snapshot with every stack's node; also the entry files."""
    imports = scan_files(snapshot.files, snapshot.read, cache)
    graph = ImportGraph.build(snapshot.files, imports)
    # read every stack's kcl.yaml at once (one git process, not one per stack)
    listed = [f"{s}/{KCL_YAML}" for s in layout.stacks if f"{s}/{KCL_YAML}" in snapshot.files]
    texts = {p: b.decode("utf-8", errors="replace") for p, b in snapshot.read(listed).items()}
    entries: dict[str, list[str]] = {}
    for stack in layout.stacks:
        text = texts.get(f"{stack}/{KCL_YAML}")
        entries[stack] = entry_files(snapshot, layout, stack, config, text)
    graph.add_stacks(entries)
    return graph, entries


# --------------------------------------------------------------------------- triggers


def matches_trigger(path: str, pattern: str) -> bool:
    """Component-wise glob match; ``**`` spans any number of directories.

    A pattern without glob characters also matches everything inside that directory.
    """
    pat = PurePosixPath(pattern.strip("/")).parts
    parts = PurePosixPath(path).parts
    if not any(ch in pattern for ch in "*?["):
        return within(path, pattern.strip("/"))
    return _match(parts, pat)


def _match(parts: tuple[str, ...], pat: tuple[str, ...]) -> bool:
    if not pat:
        return not parts
    if pat[0] == "**":
        return any(_match(parts[i:], pat[1:]) for i in range(len(parts) + 1))
    if not parts or not fnmatch.fnmatchcase(parts[0], pat[0]):
        return False
    return _match(parts[1:], pat[1:])


# --------------------------------------------------------------------------- change set


@dataclass(frozen=True)
class AffectedStack:
    path: str
    project: str
    reasons: tuple[str, ...]


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

    @property
    def stack_paths(self) -> list[str]:
        return [s.path for s in self.stacks]

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "head": self.head if self.head is not None else "worktree",
            "merge_base": self.merge_base,
            "stacks": [{"path": s.path, "reasons": list(s.reasons)} for s in self.stacks],
            "deleted_stacks": list(self.deleted_stacks),
            "projects": list(self.projects),
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
    base_sha = gitrepo.rev_parse(root, base)
    head_sha = gitrepo.rev_parse(root, head) if head is not None else None
    merge = gitrepo.merge_base(root, base_sha, head_sha or gitrepo.rev_parse(root, "HEAD"))
    # Commits never change, so the answer for two commits is remembered: compile, test,
    # check and preview in one workflow each ask the same question.
    memo = _Memo(cache, base_sha, head_sha, merge) if head_sha is not None and cache else None
    if memo is not None:
        known = memo.load()
        if known is not None:
            return known
    changes = gitrepo.diff(root, merge, head_sha)
    snapshot = (
        tree_snapshot(root, head_sha) if head_sha is not None else worktree_snapshot(root, cache)
    )
    result = changes_from(root, base_sha, head_sha, merge, changes, snapshot, cache=cache)
    if memo is not None:
        memo.save(result)
    return result


_MEMO_KEEP = 200
# relative to the package root (konfig/)
_FINGERPRINT_MODULES = (
    "detect/changeset.py",
    "detect/importgraph.py",
    "detect/gitrepo.py",
    "repo/settings.py",
)


class _Memo:
    """The change set of two commits, kept under ``<cache>/changed/<key>.json``."""

    def __init__(self, cache: Path, base: str, head: str, merge: str) -> None:
        h = hashlib.sha256(f"{__version__}\0{base}\0{head}\0{merge}".encode())
        here = Path(__file__).resolve().parent.parent
        for name in _FINGERPRINT_MODULES:
            try:
                h.update((here / name).read_bytes())
            except OSError:
                h.update(name.encode())
        self.dir = cache / "changed"
        self.key = h.hexdigest()
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
                        s["path"], "/".join(s["path"].split("/")[:2]), tuple(s["reasons"])
                    )
                    for s in out["stacks"]
                ),
                deleted_stacks=tuple(out["deleted_stacks"]),
                projects=tuple(out["projects"]),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # missing or corrupt: computed again and rewritten

    def save(self, changes: ChangeSet) -> None:
        payload = {
            "key": self.key,
            "changes": changes.to_json(),
            "files": [[c.status, c.path] for c in changes.files],
        }
        try:
            atomic_write_text(self.path, json.dumps(payload, separators=(",", ":")))
            entries = sorted(self.dir.glob("*.json"), key=lambda p: p.stat().st_mtime)
            for old in entries[:-_MEMO_KEEP]:
                old.unlink(missing_ok=True)
        except OSError:
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
) -> ChangeSet:
    layout = find_layout(snapshot.files)
    config = read_config(snapshot)
    reasons = _Reasons()
    paths = sorted({c.path for c in changes})

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
    entry_index: dict[str, list[str]] = defaultdict(list)
    for stack, files in entries.items():
        for f in files:
            if not within(f, stack):
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

    deleted, added = _stack_diff(root, merge, changes, layout)
    for s in added:
        if s in reasons.by_stack:
            reasons.by_stack[s].insert(0, f"new stack (not present at {merge[:12]})")

    stacks = tuple(
        AffectedStack(s, layout.stacks[s], tuple(reasons.by_stack[s]))
        for s in sorted(reasons.by_stack)
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
    )


def _stack_diff(
    root: Path, merge: str, changes: list[gitrepo.FileChange], head: Layout
) -> tuple[list[str], list[str]]:
    """Stacks present at ``merge`` but not at head (deleted), and the reverse (added).

    Only projects where a ``stack.yaml`` or ``project.yaml`` was added or deleted can
    gain or lose stacks, so only those are listed from the base commit's tree.
    """
    touched: set[str] = set()
    for change in changes:
        parts = change.path.split("/")
        if parts[0] == APPOPS and len(parts) >= 3 and parts[-1] in (STACK_FILE, PROJECT_FILE):
            touched.add(f"{APPOPS}/{parts[1]}")
    if not touched:
        return [], []
    base_files = gitrepo.list_tree(root, merge, tuple(sorted(touched)))
    base = find_layout(base_files)
    deleted = sorted(s for s in base.stacks if s not in head.stacks)
    added = sorted(s for s, p in head.stacks.items() if p in touched and s not in base.stacks)
    return deleted, added


def stacks_changed_from(repo: Repository, ref: str, *, cache: Path | None = None) -> list[Stack]:
    """The repository's stacks affected by the changes from ``merge-base(ref, HEAD)`` to the
    work tree: what ``compile``/``test``/``check``/``preview --changed-from REF`` select.

    Deleted stacks are not in the list (they have nothing to compile); see
    :func:`affected_stacks` for them.
    """
    changes = affected_stacks(repo.root, ref, None, cache=cache)
    wanted = set(changes.stack_paths)
    return [s for s in repo.stacks if s.path in wanted]
