"""The offline preview: what a pull request changes, as a render diff of two commits.

``konfig preview --offline`` needs no cluster and no credential. It compiles each
affected stack at the pull request's base commit and at the merge of its head into that
base (never the branch tip: what landed on the base since the branch point must not
show up reversed), and diffs the two Specs with the change model of the live preview
(:class:`~konfig.engine.plan.Change`: create, update, delete, unchanged, masked field
changes and a unified diff), so the report groups, masks and budgets it the same way.

- Both commits are read from git objects and written to temporary folders (the user's
  work tree, index and refs are untouched); both compile through the compile cache,
  keyed by the same blob ids as a work-tree compile, so a base already compiled on the
  default branch costs nothing. The base side may have a cache of its own
  (``base_state``): in CI the merge side's cache holds entries the pull request's own
  earlier run wrote, which must never stand for the base (docs/security.md, "The
  compile cache across pushes").
- A Secret's keys from encrypted files: "changed" when the ciphertext's digest (which
  compile records) differs, "new" when the key is new; nothing is ever decrypted.
- Terraform resources: the diff of their configuration; nothing is planned.
- The danger classes that need no cluster (:mod:`konfig.engine.danger`: destroy,
  replace from the known immutable fields, rollout, capacity, access, data, deprecated
  APIs for the declared Kubernetes version); a cascade's count of live objects needs
  the cluster and is not made.
- The ignore rules the merge adds, changes or drops against the base's
  (:func:`konfig.engine.ignore.proposed_rules`): listed, as a live preview lists them
  (``--rules-from``); an offline preview applies no ignore rule (there is no live object).
- What `check`, preview and apply refuse (:mod:`konfig.pipeline.refusals`) is the
  stack's error here too.
"""

from __future__ import annotations

import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from konfig.build.compiler import SETTINGS, CompileResult, CompileSettings, compile_input
from konfig.build.specfiles import read_listed
from konfig.detect import gitrepo, gitwrite
from konfig.detect.changeset import ChangeSet, changes_from
from konfig.detect.importgraph import KCL_SUFFIX, ImportCache, ImportGraph, module_of, scan_files
from konfig.detect.snapshot import Snapshot, find_layout
from konfig.engine.danger import assess
from konfig.engine.diff import FieldChange, compare, field_changes, unified_diff
from konfig.engine.ignore import proposed_rules, with_base_rules
from konfig.engine.plan import Action, Change, StackPlan
from konfig.errors import KonfigError
from konfig.pipeline.compiling import MeterFactory, compile_stacks
from konfig.pipeline.previewing import Commits, Mode, Preview, StackError, StackPreview
from konfig.pipeline.refusals import first_refusal
from konfig.pipeline.sharding import Slot
from konfig.repo.layout import (
    APPOPS,
    KCL_YAML,
    PROJECT_FILE,
    STACK_FILE,
    Repository,
    Stack,
    discover,
)
from konfig.repo.settings import CONFIG_FILE
from konfig.secrets.refs import KeyStatus, key_refs
from konfig.spec import Resource, Spec

# The diff's file labels: the Spec at the base commit and at the merge.
SIDES = ("base", "merge")


@dataclass(frozen=True)
class OfflinePreview:
    preview: Preview
    changes: ChangeSet  # the affected stacks, with why (``konfig changed``'s answer)


def offline_preview(
    root: Path,
    base: str,
    head: str,
    *,
    state: Path | None,
    jobs: int | None = None,
    settings: CompileSettings | None = None,
    meter: MeterFactory | None = None,
    shard: Slot | None = None,
    base_specs: Path | None = None,
    base_state: Path | None = None,
    separate_base: bool = False,
) -> OfflinePreview:
    """The render diff of ``head`` merged into ``base`` against ``base`` (refs or
    commit ids of the repository at ``root``), for every stack the merge affects; with
    ``shard``, for that shard's part of them (one job of a fanned-out run: the partition
    of ``konfig matrix --shards``, the deleted stacks in shard 0). ``base_specs``: a
    folder of the base commit's Specs (``konfig compile --out``, a cache a trusted run
    of the default branch wrote): the stacks it holds are read from it, as hostile data
    (:func:`konfig.build.specfiles.read_listed`), not compiled at the base.

    ``state`` is the cache of the change set and of the merge side's compile;
    ``separate_base``: the base side compiles with ``base_state`` instead (its compile
    and import caches; None: no cache), so no entry of ``state`` ever stands for a base
    Spec."""
    if not separate_base:
        base_state = state
    base_sha, head_sha = gitrepo.rev_parse_all(root, [base, head])
    merge = gitwrite.merge_tree(root, base_sha, head_sha)
    changed = [_file_change(c) for c in gitrepo.diff_trees(root, base_sha, merge)]
    merge_files = gitrepo.list_tree(root, merge)
    change_set = changes_from(
        root, base_sha, head_sha, base_sha, changed, Snapshot(root, merge, merge_files), cache=state
    )
    mode = Mode("offline", base=base_sha, head=head_sha, merge=merge)
    commits = Commits(base_sha, head_sha)
    affected = change_set.stack_paths
    gone = list(change_set.deleted_stacks)
    if shard is not None:
        affected, gone = shard.pick(affected, gone)
    if not affected and not gone:
        return OfflinePreview(Preview.of([], commits, mode=mode), change_set)
    cached = read_listed(base_specs, affected + gone) if base_specs is not None else {}
    to_compile = [p for p in affected + gone if p not in cached]
    with tempfile.TemporaryDirectory(prefix="konfig-offline-") as tmp:
        base_files = gitrepo.list_tree(root, base_sha)
        wanted = set(affected) | set(gone)
        merge_tree = _write_tree(root, merge_files, wanted, state, Path(tmp) / "merge")
        # each affected stack's stack.yaml at the base, for the ignore rules the merge
        # adds, changes or drops (listed: engine.ignore.proposed_rules)
        stack_files = {f"{p}/{STACK_FILE}" for p in affected}
        base_tree = _write_tree(
            root, base_files, set(to_compile), base_state, Path(tmp) / "base", also=stack_files
        )
        merge_repo = merge_tree.discovered()
        base_repo = base_tree.discovered()
        after = _compile(
            merge_repo, affected, merge_files, state, jobs, settings, meter, merge_tree
        )
        before = _compile(
            base_repo, to_compile, base_files, base_state, jobs, settings, meter, base_tree
        )
        before.update({p: CompileResult(p, spec, None, 0.0) for p, spec in cached.items()})
        stacks = {s.path: s for s in merge_repo.stacks}
        results = [
            _stack_preview(merge_repo, stacks[p], before.get(p), after[p], base_sha, merge_tree)
            for p in affected
            if p in stacks and p in after
        ]
        results += [_deleted_preview(base_repo, p, before.get(p), base_sha) for p in gone]
        proposed = tuple(
            (p, rule)
            for p in affected
            if p in stacks
            for rule in proposed_rules(stacks[p], with_base_rules(stacks[p], base_repo))
        )
    preview = replace(Preview.of(results, commits, mode=mode), proposed_rules=proposed)
    return OfflinePreview(preview, change_set)


def _file_change(change: gitrepo.TreeChange) -> gitrepo.FileChange:
    status = "A" if change.old is None else "D" if change.new is None else "M"
    return gitrepo.FileChange(status, change.path)


def _write_tree(
    root: Path,
    files: Mapping[str, str],
    stacks: set[str],
    state: Path | None,
    dest: Path,
    *,
    also: Collection[str] = (),
) -> _Tree:
    """Write below ``dest``, from git's objects, the files of a tree (path -> blob id)
    that compiling ``stacks`` may read, and ``also`` (where the tree has them).

    What a compile reads is the compile cache's contract (konfig.build.cache): the
    stack's files, its project's, the modules its entry files import (transitively),
    ``kcl.mod``. Written here: the top-level files (konfig.yaml, kcl.mod, ...), every
    project's ``project.yaml``, the stacks' projects but the other stacks of them, every
    module a ``.k`` file of those imports, transitively, and the ``kcl.mod`` of the
    folders above what is written; then,
    once the stacks are found there, each entry file (a ``kcl.yaml`` may list one
    anywhere in the repository, the render entry lives in base/) with its package and
    what it imports. Not the rest: a one-stack pull request in a repository of a
    thousand files writes a few dozen of them, not the whole tree twice (the files
    and their folders' removal were most of a small offline preview's time). Of
    those, what discovery and the compile cache's keys read is written at once, the
    rest when something reads it (:class:`_Tree`)."""
    layout = find_layout(files)
    projects = {layout.stacks[s] for s in stacks if s in layout.stacks}
    graph = _import_graph(root, files, state) if files else None
    keep: set[str] = {p for p in also if p in files}
    for path in files:
        parts = path.split("/")
        if len(parts) == 1 or (len(parts) == 3 and parts[0] == APPOPS and parts[2] == PROJECT_FILE):
            keep.add(path)
            continue
        owner = layout.stack_of(path)
        if owner is not None:
            if owner in stacks:
                keep.add(path)
        elif "/".join(path.split("/", 2)[:2]) in projects:
            keep.add(path)
    by_module: dict[str, list[str]] = {}
    for path in files:
        by_module.setdefault(module_of(path), []).append(path)

    def with_imports(sources: set[str]) -> set[str]:
        """``sources`` and the files of every module their ``.k`` files import."""
        assert graph is not None
        modules: set[str] = set()
        for path in sources:
            if path.endswith(KCL_SUFFIX):
                for target in graph.targets(path):
                    modules.add(target)
                    modules.update(graph.descendants(target))
        out = set(sources)
        for module in modules:
            out.update(by_module.get(module, ()))
            if (single := module + KCL_SUFFIX) in files:
                out.add(single)
        return out

    if graph is not None:
        keep = with_imports(keep)
    keep |= _module_files(keep, files)
    tree = _Tree(root, dest)
    tree.add({p: files[p] for p in keep})
    if graph is None or not stacks:
        return tree
    # the entry files, as the compile will find them (a bad kcl.yaml is the compile's
    # error to report, with its file and line)
    entries: set[str] = set()
    repo = tree.discovered()
    prefixes = tuple({f"{dest}/", f"{dest.resolve()}/"})
    for stack in repo.stacks:
        if stack.path not in stacks:
            continue
        try:
            listed = compile_input(repo, stack).files
        except KonfigError:
            continue
        for file in listed:
            prefix = next((p for p in prefixes if file.startswith(p)), None)
            rel = file[len(prefix) :] if prefix is not None else None
            if rel is not None and rel in files:
                entries.add(rel)
                entries.update(by_module.get(module_of(rel), ()))
    more = with_imports(entries) - keep
    more |= _module_files(more, files) - keep
    tree.add({p: files[p] for p in more})  # (forgets `repo` if it writes what that read)
    return tree


def _module_files(paths: Collection[str], files: Mapping[str, str]) -> set[str]:
    """The ``kcl.mod`` and ``kcl.mod.lock`` of every folder that holds one of ``paths``,
    or holds a folder that does (where KCL finds a module's root)."""
    folders: set[str] = set()
    for path in paths:
        folder = path
        while "/" in folder:
            folder = folder.rpartition("/")[0]
            if folder in folders:
                break
            folders.add(folder)
    return {
        f"{folder}/{name}"
        for folder in folders
        for name in ("kcl.mod", "kcl.mod.lock")
        if f"{folder}/{name}" in files
    }


def _import_graph(root: Path, files: Mapping[str, str], state: Path | None) -> ImportGraph:
    cache = ImportCache.load(state / "imports.json" if state else None)
    snapshot = Snapshot(root, None, dict(files), blobs_from=root)
    graph = ImportGraph.build(files, scan_files(files, snapshot.read, cache))
    if state is not None:
        cache.save(keep=files.values())
    return graph


def _write_files(root: Path, files: Mapping[str, str], dest: Path) -> None:
    """The files (path -> blob id) written below ``dest`` from git's objects."""
    if not files:
        dest.mkdir(parents=True, exist_ok=True)
        return
    blobs = gitrepo.read_blobs(root, files.values())
    made: set[Path] = set()
    for path, blob in files.items():  # (git never lists a path with `..` or a leading /)
        target = dest / path
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        target.write_bytes(blobs[blob])


# What discovering a repository reads (konfig.repo.layout.discover): the same files in the
# same folders are the same Repository.
_DISCOVERED_FILES = frozenset({CONFIG_FILE, PROJECT_FILE, STACK_FILE})

# What discovering a written tree and working out its stacks' compile inputs read: the
# settings files, kcl.mod and each project's base/ files (their names).
_SETTINGS_FILES = frozenset({CONFIG_FILE, "kcl.mod", "kcl.mod.lock", PROJECT_FILE, STACK_FILE})


def _read_before_compiling(path: str) -> bool:
    name = path.rpartition("/")[2]
    if name in _SETTINGS_FILES or name == KCL_YAML or path.endswith(f"/{SETTINGS}"):
        return True
    parts = path.split("/")
    return len(parts) == 4 and parts[0] == APPOPS and parts[2] == "base"


class _Tree:
    """A side's files written out in two parts: at once, what discovering the repository
    and each stack's compile inputs and cache key need; the rest (the KCL sources and
    the files they read) only when something reads them: a stack the compile cache
    does not hold, or a refusal to locate in a stack's files. A shard whose Specs are
    all in the cache (the verify job compiled the merge side, the default branch the
    base) writes and removes a fraction of the files."""

    def __init__(self, root: Path, dest: Path) -> None:
        self.root = root
        self.dest = dest
        self._rest: dict[str, str] = {}
        # the tree's discovery, once made and still true of the files written
        self.repository: Repository | None = None
        dest.mkdir(parents=True, exist_ok=True)

    def discovered(self) -> Repository:
        if self.repository is None:
            self.repository = discover(self.dest)
        return self.repository

    def add(self, files: Mapping[str, str]) -> None:
        if any(p.rpartition("/")[2] in _DISCOVERED_FILES for p in files):
            self.repository = None
        now = {p: b for p, b in files.items() if _read_before_compiling(p)}
        _write_files(self.root, now, self.dest)
        self._rest.update((p, b) for p, b in files.items() if p not in now)

    def complete(self) -> None:
        """Write the rest (once)."""
        rest, self._rest = self._rest, {}
        if rest:
            _write_files(self.root, rest, self.dest)
            from konfig.check.locate import clear_cache

            clear_cache()  # what it found missing in these folders is there now


def _compile(
    repo: Repository,
    paths: Sequence[str],
    files: Mapping[str, str],
    state: Path | None,
    jobs: int | None,
    settings: CompileSettings | None,
    meter: MeterFactory | None,
    tree: _Tree,
) -> dict[str, CompileResult]:
    wanted = set(paths)
    stacks = [s for s in repo.stacks if s.path in wanted]
    done = compile_stacks(
        repo,
        stacks,
        jobs=jobs,
        state=state,
        meter=meter,
        settings=settings,
        # every file's blob id (the cache keys are those of a full tree), read from git
        snapshot=Snapshot(repo.root, None, dict(files), blobs_from=tree.root),
        materialize=tree.complete,
    )
    return {r.stack_path: r for r in done}


def _compile_error(result: CompileResult, where: str) -> StackError:
    assert result.error is not None
    e = result.error
    message = e.message + "".join(f"\n  {d}" for d in e.details)
    return StackError(f"compile failed{where}: {message}", e.file, e.line)


def _stack_preview(
    repo: Repository,
    stack: Stack,
    before: CompileResult | None,
    after: CompileResult,
    base: str,
    tree: _Tree,
) -> StackPreview:
    if after.spec is None:
        return StackPreview(stack.path, context=stack.kube_context, error=_compile_error(after, ""))
    refused = first_refusal(repo, stack, after.spec)
    if refused is not None:
        tree.complete()  # the refusal's place is in the stack's sources: look again
        refused = first_refusal(repo, stack, after.spec)
    if refused is not None:
        return StackPreview(
            stack.path,
            context=stack.kube_context,
            error=StackError(refused.preview, refused.file, refused.line),
            spec_digest=after.spec.digest(),
        )
    if before is not None and before.spec is None:
        # the base does not compile: what the merge changes cannot be told apart
        return StackPreview(
            stack.path,
            context=stack.kube_context,
            error=_compile_error(before, f" at the base {base[:12]}"),
            spec_digest=after.spec.digest(),
        )
    plan = StackPlan(
        path=stack.path,
        context=stack.kube_context,
        deleted=False,
        spec_digest=after.spec.digest(),
        prior_commit=None,
        prior_digest=None,
        changes=diff_specs(before.spec if before is not None else None, after.spec),
    )
    # the danger classes that need no cluster (no cascade counts without one)
    plan = assess(plan, version=repo.config.kubernetes_version)
    return StackPreview(stack.path, context=stack.kube_context, plan=plan)


def _deleted_preview(
    repo: Repository, path: str, before: CompileResult | None, base: str
) -> StackPreview:
    if before is None:
        return StackPreview(
            path,
            deleted=True,
            error=StackError(f"not found at the base {base[:12]}: nothing to compare"),
        )
    if before.spec is None:
        return StackPreview(
            path, deleted=True, error=_compile_error(before, f" at the base {base[:12]}")
        )
    plan = StackPlan(
        path=path,
        context=None,
        deleted=True,
        spec_digest=None,
        prior_commit=None,
        prior_digest=None,
        changes=diff_specs(before.spec, None),
    )
    plan = assess(plan, version=repo.config.kubernetes_version)
    return StackPreview(path, deleted=True, plan=plan)


# --- the diff of two Specs -----------------------------------------------------------


def diff_specs(before: Spec | None, after: Spec | None) -> tuple[Change, ...]:
    """One change per resource id of either Spec, in id order."""
    old = before.by_id() if before is not None else {}
    new = after.by_id() if after is not None else {}
    return tuple(_change(old.get(rid), new.get(rid)) for rid in sorted(set(old) | set(new)))


def _change(before: Resource | None, after: Resource | None) -> Change:
    one = after if after is not None else before
    assert one is not None
    if one.is_terraform:
        return _terraform_change(before, after)
    b = _with_key_digests(before)
    a = _with_key_digests(after)
    comparison = compare(b, a, name=one.id, sides=SIDES)
    fields = comparison.fields
    diff = comparison.diff
    action = _action(before, after, changed=comparison.changed)
    statuses = _key_statuses(before, after)
    return Change(
        id=one.id,
        api_version=one.api_version,
        kind=one.kind,
        namespace=one.namespace,
        name=one.name,
        action=action,
        reason=_REASON[action],
        validated=False,
        # in memory only (never in the JSON): the values masking and scrubbing look for
        desired=after.attributes if after is not None else None,
        live=before.attributes if before is not None else None,
        fields=fields,
        diff=diff,
        secrets=statuses,
    )


def _terraform_change(before: Resource | None, after: Resource | None) -> Change:
    one = after if after is not None else before
    assert one is not None
    address = one.terraform
    b = before.attributes if before is not None else None
    a = after.attributes if after is not None else None
    fields: tuple[FieldChange, ...] = field_changes(b, a) if b != a else ()
    action = _action(before, after, changed=bool(fields))
    return Change(
        id=one.id,
        api_version=f"{address.namespace}/{address.provider}",
        kind=address.type,
        namespace=None,
        name=address.name,
        action=action,
        reason=_REASON[action] + " (configuration; nothing planned)",
        validated=False,
        desired=None,
        live=None,
        fields=fields,
        diff=unified_diff(b, a, name=one.id, sides=SIDES) if fields else "",
        runtime="Terraform",
    )


_REASON: dict[Action, str] = {
    "create": "new at the merge",
    "delete": "gone at the merge",
    "update": "changed between the base and the merge",
    "unchanged": "the same at the base and the merge",
    "replace": "",
    "conflict": "",
}


def _action(before: Resource | None, after: Resource | None, *, changed: bool) -> Action:
    if before is None:
        return "create"
    if after is None:
        return "delete"
    return "update" if changed else "unchanged"


def _with_key_digests(resource: Resource | None) -> dict[str, Any] | None:
    """A Secret's manifest with each key from an encrypted file set to its ciphertext's
    digest: two sides differ there exactly when the ciphertext changed. (Masked like
    every Secret value before anything is diffed or shown.)"""
    if resource is None:
        return None
    refs = key_refs(resource.id, resource.extensions)
    if not refs:
        return resource.attributes
    data = dict(resource.attributes.get("data") or {})
    for ref in refs:
        data[ref.key] = ref.ref.digest or "(no digest)"
    return {**resource.attributes, "data": data}


def _key_statuses(before: Resource | None, after: Resource | None) -> tuple[KeyStatus, ...]:
    if after is None:
        return ()
    was = {r.key: r.ref.digest for r in key_refs(before.id, before.extensions)} if before else {}
    out = []
    for ref in key_refs(after.id, after.extensions):
        if ref.key not in was:
            status = "new"
        else:
            status = "unchanged" if was[ref.key] == ref.ref.digest else "changed"
        out.append(KeyStatus(ref.key, status))
    return tuple(out)
