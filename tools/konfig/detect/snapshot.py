"""The files of one state of the repository, and the projects and stacks in it.

A :class:`Snapshot` lists the files of a commit (from git) or of the work tree (hashed
like git, remembered between runs), each with its blob id; :func:`find_layout` finds
the projects and stacks from such a listing alone, without parsing ``stack.yaml``: a
directory with ``stack.yaml`` inside ``appops/<project>/`` (which has ``project.yaml``),
not nested in another stack.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from konfig.detect import gitrepo
from konfig.detect.importgraph import module_of
from konfig.repo import statmemo
from konfig.repo.files import WriteError, WriteScope, atomic_write_text
from konfig.repo.layout import APPOPS, PROJECT_FILE, STACK_FILE
from konfig.repo.settings import CACHE_DIR
from konfig.repo.statmemo import settled, stat_key


@dataclass
class Snapshot:
    """The files of one state of the repository: a commit, or the work tree (commit None)."""

    root: Path
    commit: str | None
    files: dict[str, str]  # path relative to the root -> git blob id
    # A commit's tree written out to ``root`` only in part (``konfig preview --offline``):
    # every file is read by its blob id from the git repository here, never from disk.
    blobs_from: Path | None = None
    _by_dir: dict[str, list[str]] | None = field(default=None, repr=False, compare=False)
    _blobs: dict[str, bytes] | None = field(default=None, repr=False, compare=False)

    def files_in(self, directory: str) -> list[str]:
        """The files directly inside ``directory`` (relative, no trailing slash)."""
        if self._by_dir is None:
            self._by_dir = defaultdict(list)
            for p in self.files:
                self._by_dir[module_of(p)].append(p)
        return self._by_dir.get(directory, [])

    def read(self, paths: Iterable[str]) -> dict[str, bytes]:
        """The content of each of ``paths``; a commit's blobs are read by one git process
        per call and remembered, so a blob asked for again costs none."""
        wanted = list(paths)
        if self.commit is None and self.blobs_from is None:
            return {p: (self.root / p).read_bytes() for p in wanted}
        if self._blobs is None:
            self._blobs = {}
        known = self._blobs
        missing = [self.files[p] for p in wanted if self.files[p] not in known]
        if missing:
            known.update(gitrepo.read_blobs(self.blobs_from or self.root, missing))
        return {p: known[self.files[p]] for p in wanted}

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

    Blob ids are computed like git does, remembered by the file's stat (size, times,
    inode: :func:`konfig.repo.statmemo.stat_key`) in ``state/worktree.json`` so a warm
    run hashes only files that changed.
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
    # Like git's "racily clean" rule, a file modified in the last seconds may change
    # again within the same clock tick, so its hash is not remembered.
    before = statmemo.settled_before()
    base = str(root)
    for path in paths:
        if path.startswith((CACHE_DIR + "/", ".git/")):
            continue
        try:
            # os.stat on a string: building 20,000 Path objects costs more than the stats
            st = os.stat(f"{base}/{path}")  # noqa: PTH116
        except OSError:
            continue  # tracked but deleted in the work tree
        key = stat_key(st)
        entry = known.get(path)
        if entry is not None and len(entry) == 5 and entry[:4] == key:
            blob = str(entry[4])
        else:
            try:
                blob = gitrepo.blob_id((root / path).read_bytes())
            except OSError:
                continue
            changed = True
        files[path] = blob
        if settled(st, before):
            fresh[path] = [*key, blob]
        else:
            changed = True
    if cache_file is not None and (changed or len(fresh) != len(known)):
        try:
            atomic_write_text(
                cache_file,
                json.dumps(fresh, separators=(",", ":")),
                scope=WriteScope.cache(cache_file.parent),
            )
        except WriteError:
            pass  # a cache that cannot be written only costs the next run the hashing
    return Snapshot(root, None, files)


@dataclass(frozen=True)
class Layout:
    """Projects and stacks of a snapshot, found from its file listing."""

    projects: frozenset[str]
    stacks: dict[str, str]  # stack path -> project path
    # stack directories under appops/<p>/ whose project has no project.yaml
    orphans: frozenset[str] = frozenset()

    def stack_of(self, path: str) -> str | None:
        """The stack directory holding ``path`` (component-wise), if any."""
        parent = module_of(path)
        while parent:
            if parent in self.stacks:
                return parent
            parent = module_of(parent)
        return None


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
    orphans: set[str] = set()
    for directory in sorted(stack_dirs, key=lambda d: d.count("/")):
        project = "/".join(directory.split("/")[:2])
        if project not in projects:
            orphans.add(directory)
            continue
        parent = module_of(directory)
        while parent and parent not in taken:
            parent = module_of(parent)
        if parent:
            continue  # nested in another stack
        taken.add(directory)
        stacks[directory] = project
    return Layout(frozenset(projects), stacks, frozenset(orphans))
