"""What change detection knows about one commit, kept between runs and updated from a diff.

Finding the stacks a change affects needs the whole head commit: its files, its projects
and stacks, every stack's entry files and the import graph of every KCL file. Building
that for 5,000 stacks is two thirds of ``konfig changed``; a new push to a pull request
changes a few files of it. So the index of a commit is kept in the cache
(``<cache>/tree-index.json``, with the commit it describes), and for another
commit it is updated from ``git diff-tree`` between the two: a changed, added or deleted
KCL file replaces the import edges of the modules it belongs to and of the stacks that
list it as an entry file.

A change that moves more than edges is never patched: ``kcl.mod`` anywhere (where imports
resolve from), ``konfig.yaml`` (the render entry), a ``stack.yaml`` or ``project.yaml``
added or deleted (the layout), any ``kcl.yaml`` (a stack's entry files), a ``.k`` file
added to or deleted from a project's ``base/`` (the entry files of its stacks), or more
than :data:`PATCH_LIMIT` files: the index is built again from the commit's tree and kept
in place of the old one. The tests hold the patched index equal to one built from
scratch, commit after commit.

The pieces are built here as well (:func:`read_config`, :func:`entry_files`,
:func:`build_graph`): for an index, and for the work tree's snapshot in changeset.py.
"""

from __future__ import annotations

import json
import posixpath
from collections import defaultdict
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from konfig import __version__
from konfig.detect import gitcmd, gitrepo
from konfig.detect.importgraph import (
    KCL_MOD,
    KCL_SUFFIX,
    TEST_SUFFIX,
    ImportCache,
    ImportGraph,
    Node,
    is_kcl_source,
    module_of,
    scan_files,
    scan_imports,
)
from konfig.detect.snapshot import Layout, Snapshot, find_layout, tree_snapshot
from konfig.errors import ConfigError
from konfig.fingerprint import package_digest
from konfig.repo.files import WriteError, WriteScope, atomic_write_text
from konfig.repo.layout import APPOPS, KCL_MOD_VAR, KCL_YAML, MAIN, PROJECT_FILE, STACK_FILE
from konfig.repo.settings import (
    CONFIG_FILE,
    RepoConfig,
    config_fields,
    config_from_fields,
    contracts_memo,
    repo_config_from_data,
)

INDEX_FILE = "tree-index.json"
# a diff of more files than this is not patched in: the index is built again
PATCH_LIMIT = 400
# a patch scans up to this many KCL files itself rather than load the import-scan cache
DIRECT_SCAN = 64
_STACK = "\0"  # a stack node in the file (module nodes are paths, never start with NUL)


@dataclass
class TreeIndex:
    """A commit's files, layout, settings, stacks' entry files and import graph."""

    commit: str
    snapshot: Snapshot
    layout: Layout
    config: RepoConfig
    graph: ImportGraph
    entries: dict[str, list[str]]  # stack -> its entry files
    # directory -> the KCL source files directly in it (where a module's edges start)
    kdirs: dict[str, list[str]] | None = None

    def sources_in(self) -> dict[str, list[str]]:
        if self.kdirs is None:
            self.kdirs = defaultdict(list)
            for path in self.snapshot.files:
                if is_kcl_source(path):
                    self.kdirs[module_of(path)].append(path)
        return self.kdirs


def index_commit(
    root: Path,
    commit: str,
    *,
    cache: Path | None,
    imports: Callable[[], ImportCache],
) -> TreeIndex:
    """The index of ``commit``: the kept one when it describes that commit, the kept one
    patched with the diff between the two when that is safe, else built from the tree
    (and kept; ``cache`` None: built, not kept). ``imports`` gives the import-scan
    cache, loaded only when many files are to be scanned."""
    kept = _load(root, cache) if cache is not None else None
    if kept is not None and kept.commit != commit:
        try:
            diff = gitrepo.diff_trees(root, kept.commit, commit)
        except gitcmd.GitError:
            diff = None  # the kept commit is gone (a gc, another clone): build again
        if diff is None or not _patch(kept, commit, diff, imports):
            kept = None
    if kept is not None:
        return kept
    snapshot = tree_snapshot(root, commit)
    layout = find_layout(snapshot.files)
    config = read_config(snapshot, root if cache is not None else None)
    graph, entries = build_graph(snapshot, layout, config, imports())
    index = TreeIndex(commit, snapshot, layout, config, graph, entries)
    if cache is not None:
        _save(cache, index)
    return index


# --------------------------------------------------------------------------- building


def lazy_yaml() -> Any:
    """PyYAML, imported when a file is parsed (a warm push parses none)."""
    import yaml

    return yaml


def load_yaml(text: str | bytes) -> Any:
    yaml = lazy_yaml()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def read_config(snapshot: Snapshot, root: Path | None = None) -> RepoConfig:
    """``konfig.yaml`` of the snapshot; defaults when it is missing or unreadable.

    With ``root`` (the repository, whose cache may be written) a text found valid
    before is not validated again (:func:`konfig.contracts.validate`'s memo): keeps
    jsonschema's import out of a warm ``konfig changed``."""
    text = snapshot.text(CONFIG_FILE)
    if text is None:
        return RepoConfig()
    memo = contracts_memo(root) if root is not None else None
    try:
        return repo_config_from_data(load_yaml(text), text=text, memo=memo)
    except (lazy_yaml().YAMLError, ConfigError):
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
            data = lazy_yaml().safe_load(text)
            cli = data.get("kcl_cli_configs") if isinstance(data, dict) else None
            listed = cli.get("file") if isinstance(cli, dict) else None
        except lazy_yaml().YAMLError:
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


# --------------------------------------------------------------------------- patching


def _structural(change: gitrepo.TreeChange) -> bool:
    """Whether a changed file moves more than import edges (see the module's doc)."""
    path = change.path
    name = path.rpartition("/")[2]
    if name in (KCL_MOD, KCL_YAML) or path == CONFIG_FILE:
        return True
    added_or_deleted = change.old is None or change.new is None
    if name in (STACK_FILE, PROJECT_FILE):
        return added_or_deleted
    parts = path.split("/")
    in_project_base = len(parts) == 4 and parts[0] == APPOPS and parts[2] == "base"
    return in_project_base and path.endswith(KCL_SUFFIX) and added_or_deleted


def _patch(
    index: TreeIndex,
    commit: str,
    diff: list[gitrepo.TreeChange],
    imports: Callable[[], ImportCache],
) -> bool:
    """Turn ``index`` into the index of ``commit`` (``diff`` leads there); False when
    the diff is not one to patch (the index is then to be built again)."""
    if len(diff) > PATCH_LIMIT or any(_structural(c) for c in diff):
        return False
    files = index.snapshot.files
    kdirs = index.sources_in()
    for change in diff:
        path = change.path
        if change.new is None:
            files.pop(path, None)
        else:
            files[path] = change.new
        if is_kcl_source(path) and (change.old is None) != (change.new is None):
            listed = kdirs.setdefault(module_of(path), [])
            if change.new is None:
                if path in listed:
                    listed.remove(path)
            elif path not in listed:
                listed.append(path)
    index.commit = commit
    index.snapshot = Snapshot(index.snapshot.root, commit, files)
    kcl = [c.path for c in diff if c.path.endswith(KCL_SUFFIX)]
    if not kcl:
        return True
    graph = index.graph
    sources = [p for p in kcl if is_kcl_source(p)]
    nodes = {m for p in sources for m in (module_of(p), p[: -len(KCL_SUFFIX)])}
    # the files whose imports are a module's edges: those in its directory, and <node>.k
    members = {node: [*kdirs.get(node, ()), *_single(node, files)] for node in nodes}
    changed = set(kcl)
    stacks = {s: listed for s, listed in index.entries.items() if not changed.isdisjoint(listed)}
    # the import statements of every file whose targets are asked for below
    wanted = {f for found in members.values() for f in found}
    wanted.update(f for listed in stacks.values() for f in listed)
    present = {p: files[p] for p in wanted if p in files and p.endswith(KCL_SUFFIX)}
    if len(present) <= DIRECT_SCAN:  # a few files: read and scanned, no cache to load
        texts = index.snapshot.read(list(present))
        for path in present:
            graph.imports[path] = scan_imports(texts[path].decode("utf-8", errors="replace"))
    else:
        graph.imports.update(scan_files(present, index.snapshot.read, imports()))
    for path in changed | wanted:
        graph._targets.pop(path, None)
        if path not in present:
            graph.imports.pop(path, None)  # deleted (or never there): imports nothing
    for node in nodes:
        found = {t for f in members.get(node, ()) for t in graph.targets(f) if t != node}
        _set_edges(graph, node, found)
    for stack, listed in stacks.items():
        _set_edges(graph, ("stack", stack), {t for e in listed for t in graph.targets(e)})
    return True


def _single(node: str, files: dict[str, str]) -> list[str]:
    single = node + KCL_SUFFIX
    return [single] if single in files and is_kcl_source(single) else []


def _set_edges(graph: ImportGraph, node: Node, targets: AbstractSet[Node]) -> None:
    """Make ``targets`` the successors of ``node``, predecessors kept in step."""
    old = graph._succ.get(node, set())
    for gone in old - targets:
        into = graph._pred.get(gone)
        if into is not None:
            into.discard(node)
    for new in targets - old:
        graph._pred.setdefault(new, set()).add(node)
    if targets or isinstance(node, tuple):
        graph._succ[node] = set(targets)
    else:
        graph._succ.pop(node, None)


# --------------------------------------------------------------------------- the file
#
# Graph nodes are written as strings: a module as its path, a stack as "/" + its path (no
# module path starts with "/"); a node's neighbours as one string, each preceded by NUL
# (which no path holds). They are decoded when a query or a patch first asks for them:
# a push looks at a few nodes of tens of thousands.


def _seed() -> str:
    return f"tree-index 2\0{__version__}"


def _encode(node: Node) -> str:
    return node if isinstance(node, str) else "/" + node[1]


def _decode(name: str) -> Node:
    return ("stack", name[1:]) if name.startswith("/") else name


def _edges(edges: dict[Node, set[Node]]) -> dict[str, str]:
    return {
        _encode(n): "".join("\0" + _encode(t) for t in sorted(ts, key=_encode))
        for n, ts in edges.items()
    }


class _LazyEdges(dict[Node, set[Node]]):
    """Neighbour sets, decoded from the file's strings when first asked for."""

    def __init__(self, raw: dict[str, str]) -> None:
        super().__init__()
        self._raw = raw

    def _load(self, node: Node) -> set[Node] | None:
        text = self._raw.pop(_encode(node), None)
        if text is None:
            return None
        found = {_decode(t) for t in text.split("\0")[1:]}
        super().__setitem__(node, found)
        return found

    def _all(self) -> None:
        for name in list(self._raw):
            self._load(_decode(name))

    def get(self, node: Node, default: Any = None) -> Any:
        found = super().get(node)
        if found is None:
            found = self._load(node)
        return default if found is None else found

    def __getitem__(self, node: Node) -> set[Node]:
        found = self.get(node)
        if found is None:
            raise KeyError(node)
        return found  # type: ignore[no-any-return]

    def __contains__(self, node: object) -> bool:
        return super().__contains__(node) or (
            isinstance(node, str | tuple) and _encode(node) in self._raw
        )

    def setdefault(self, node: Node, default: Any = None) -> Any:
        found = self.get(node)
        if found is None:
            super().__setitem__(node, default)
            return default
        return found

    def pop(self, node: Node, *default: Any) -> Any:
        self.get(node)
        return super().pop(node, *default)

    def __iter__(self) -> Any:
        self._all()
        return super().__iter__()

    def __len__(self) -> int:
        self._all()
        return super().__len__()

    def keys(self) -> Any:
        self._all()
        return super().keys()

    def values(self) -> Any:
        self._all()
        return super().values()

    def items(self) -> Any:
        self._all()
        return super().items()


def _save(cache: Path, index: TreeIndex) -> None:
    graph = index.graph
    payload = {
        "seed": package_digest(_seed(), cache),
        "commit": index.commit,
        "files": index.snapshot.files,
        "projects": sorted(index.layout.projects),
        "stacks": index.layout.stacks,
        "orphans": sorted(index.layout.orphans),
        "config": config_fields(index.config),
        "entries": index.entries,
        "kdirs": index.sources_in(),
        "kcl_mod_dirs": sorted(graph.kcl_mod_dirs),
        "succ": _edges(graph._succ),
        "pred": _edges(graph._pred),
    }
    path = cache / INDEX_FILE
    try:
        atomic_write_text(
            path, json.dumps(payload, separators=(",", ":")), scope=WriteScope.cache(cache)
        )
    except WriteError:
        pass  # a cache that cannot be written only costs the next run the build


def _load(root: Path, cache: Path) -> TreeIndex | None:
    try:
        data = json.loads((cache / INDEX_FILE).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("seed") != package_digest(_seed(), cache):
            return None
        files: dict[str, str] = data["files"]
        layout = Layout(
            frozenset(data["projects"]), dict(data["stacks"]), frozenset(data["orphans"])
        )
        # the import statements are filled in for the files a patch asks about (from the
        # import-scan cache): nothing else reads them
        graph = ImportGraph({}, frozenset(data["kcl_mod_dirs"]), list(files))
        if not isinstance(data["succ"], dict) or not isinstance(data["pred"], dict):
            return None
        graph._succ = _LazyEdges(data["succ"])
        graph._pred = _LazyEdges(data["pred"])
        return TreeIndex(
            commit=str(data["commit"]),
            snapshot=Snapshot(root, str(data["commit"]), files),
            layout=layout,
            config=config_from_fields(data["config"]),
            graph=graph,
            entries=data["entries"],
            kdirs=data["kdirs"],
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing or corrupt: built again and rewritten
