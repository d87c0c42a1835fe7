"""Which stacks a command looks at.

:func:`select_stacks` (stack addresses or ``--all``), :func:`stacks_affected_since`
(``--changed-from``, with deleted stacks), :func:`gone_stack` (a stack whose directory is
gone), and :func:`select_for_command`: the stacks (and KCL unit-test packages) that
`konfig test` and `konfig check` look at:

- no arguments or ``--all``: every stack, every unit-test package;
- stack addresses: those stacks, and the unit tests inside them and their project's
  shared ``base/``;
- ``--changed-from REF``: the stacks ``konfig changed`` finds affected by the changes
  from the merge base of REF to the work tree (exact, through the KCL import graph),
  and the unit-test packages of those stacks, plus every package under ``base/`` when a
  file under ``base/`` changed;
- ``--files``: the arguments are changed file paths (what pre-commit passes: the
  staged files, or every file with ``--all-files``), analysed like ``--changed-from``
  as changes against HEAD; outside git (or before the first commit) a simple mapping
  over-approximates: a file inside a stack, a project-level file (all stacks of the
  project), anything under ``base/`` or matching a repo-wide trigger (every stack).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

from konfig.errors import KonfigError, UsageError
from konfig.repo.layout import (
    APPOPS,
    STACK_FILE,
    Repository,
    Stack,
    deleted_stack,
    is_within,
    parse_stack_address,
    resolve_stacks,
    unusable_error,
)


@dataclass(frozen=True)
class Selection:
    stacks: tuple[Stack, ...]
    # directories whose unit-test packages to run; None: every package
    test_scope: tuple[str, ...] | None
    everything: bool = False
    changed_paths: tuple[str, ...] | None = None  # with --files / --changed-from


def select_for_command(
    repo: Repository,
    args: Sequence[str],
    *,
    all_stacks: bool,
    from_files: bool,
    changed_from: str | None = None,
    cache: Path | None = None,
) -> Selection:
    """``cache``: konfig's cache folder for the change analysis (None: none)."""
    if all_stacks and args:
        raise UsageError("give stacks or --all, not both")
    if changed_from is not None:
        if args or all_stacks or from_files:
            raise UsageError("give stacks, --all, --files or --changed-from, not several")
        return stacks_changed_from_ref(repo, changed_from, cache=cache)
    if from_files:
        return stacks_for_files(repo, args, cache=cache)
    if all_stacks or not args:
        return Selection(repo.stacks, None, everything=True)
    stacks = _resolve(repo, args)
    return Selection(tuple(stacks), _scope(stacks))


def _resolve(repo: Repository, addresses: Sequence[str]) -> list[Stack]:
    """The named stacks; when every one is unusable (a layout error), that error."""
    stacks = resolve_stacks(repo, addresses)
    if addresses and not stacks:
        raise unusable_error(repo, addresses)
    return stacks


def _scope(stacks: Sequence[Stack]) -> tuple[str, ...]:
    scope: list[str] = []
    for stack in stacks:
        for path in (stack.path, f"{stack.project_path}/base"):
            if path not in scope:
                scope.append(path)
    return tuple(scope)


def _relative(repo: Repository, raw: str) -> str | None:
    path = Path(raw)
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        return path.resolve().relative_to(repo.root.resolve()).as_posix()
    except ValueError:
        return None


def _is_trigger(repo: Repository, rel: str) -> bool:
    for pattern in repo.config.triggers:
        if fnmatch(rel, pattern) or (pattern.endswith("/**") and is_within(rel, pattern[:-3])):
            return True
    return False


def stacks_for_files(
    repo: Repository, files: Sequence[str], *, cache: Path | None = None
) -> Selection:
    """The stacks and unit-test packages that changed ``files`` affect.

    Inside a git repository with a commit this is ``konfig changed``'s exact analysis
    (import graph) of the files as changes against HEAD; otherwise the simple mapping.
    """
    rels = [r for r in (_relative(repo, f) for f in files) if r is not None]
    if git_is_usable(repo.root):
        return _exact(repo, rels, cache)
    return simple_mapping(repo, rels)


def git_is_usable(root: Path) -> bool:
    from konfig.detect import gitrepo

    if not gitrepo.is_repo(root):
        return False
    try:
        gitrepo.rev_parse(root, "HEAD")
    except KonfigError:
        return False  # a repository without commits yet
    return True


def _exact(repo: Repository, rels: Sequence[str], state: Path | None) -> Selection:
    from konfig.detect import gitrepo
    from konfig.detect.changeset import changes_from
    from konfig.detect.snapshot import worktree_snapshot

    head = gitrepo.rev_parse(repo.root, "HEAD")
    changes = [gitrepo.FileChange("M", rel) for rel in rels]
    change_set = changes_from(
        repo.root, head, None, head, changes, worktree_snapshot(repo.root, state), cache=state
    )
    return _selection_of(repo, change_set.stack_paths, rels)


def _selection_of(repo: Repository, stack_paths: Sequence[str], paths: Sequence[str]) -> Selection:
    wanted = set(stack_paths)
    stacks = tuple(s for s in repo.stacks if s.path in wanted)
    scope = list(_scope(stacks))
    if any(is_within(p, "base") for p in paths):
        scope.append("base")
    # changed files of stacks discovery rejected (e.g. a broken stack.yaml) still get
    # their structure findings
    for path in paths:
        if is_within(path, APPOPS) and not any(is_within(path, s.path) for s in stacks):
            scope.append(Path(path).parent.as_posix())
    return Selection(stacks, tuple(dict.fromkeys(scope)), changed_paths=tuple(paths))


def simple_mapping(repo: Repository, rels: Sequence[str]) -> Selection:
    """Without git: a file inside a stack, a project-level file (all the project's
    stacks), anything under base/ or matching a repo-wide trigger (every stack)."""
    chosen: dict[str, Stack] = {}
    scope: list[str] = []
    for rel in rels:
        if rel.startswith("base/") or _is_trigger(repo, rel):
            return Selection(repo.stacks, None, everything=True)
        if not is_within(rel, APPOPS):
            continue
        hit = False
        for stack in repo.stacks:
            in_stack = is_within(rel, stack.path)
            in_project = is_within(rel, stack.project_path) and not any(
                is_within(rel, s.path) for s in repo.stacks if s.project_path == stack.project_path
            )
            if in_stack or in_project:
                chosen.setdefault(stack.path, stack)
                hit = True
        if not hit:
            # e.g. a file of a stack that discovery rejected (bad stack.yaml): check it by
            # its directory so its structure findings still show
            scope.append(str(Path(rel).parent.as_posix()))
    stacks = tuple(chosen[p] for p in sorted(chosen))
    return Selection(stacks, tuple(dict.fromkeys([*_scope(stacks), *scope])))


def stacks_changed_from_ref(repo: Repository, ref: str, *, cache: Path | None = None) -> Selection:
    """The stacks (and unit-test packages) the changes since ``ref`` affect."""
    from konfig.detect.changeset import affected_stacks  # git: only when asked for

    changes = affected_stacks(repo.root, ref, None, cache=cache)
    return _selection_of(repo, changes.stack_paths, [c.path for c in changes.files])


def select_stacks(repo: Repository, addresses: Sequence[str], *, all_stacks: bool) -> list[Stack]:
    """The stacks named by ``addresses``, or every stack with ``all_stacks``."""
    if all_stacks and addresses:
        raise UsageError("give stacks or --all, not both")
    if all_stacks:
        return list(repo.stacks)
    if not addresses:
        raise UsageError("no stacks given", hint="name stacks (e.g. guestbook/dev) or pass --all")
    return _resolve(repo, addresses)


def stacks_affected_since(
    repo: Repository, ref: str, *, cache: Path | None
) -> tuple[list[Stack], list[str]]:
    """The stacks the changes from ``merge-base(ref, HEAD)`` to the work tree affect, and
    the paths of the stacks deleted since (what ``preview --changed-from REF`` shows)."""
    from konfig.detect.changeset import affected_stacks  # git: only when asked for

    changes = affected_stacks(repo.root, ref, None, cache=cache)
    wanted = set(changes.stack_paths)
    return [s for s in repo.stacks if s.path in wanted], list(changes.deleted_stacks)


def gone_stack(repo: Repository, address: str, *, what: str, must_be_gone: str | None) -> Stack:
    """The :class:`Stack` of a stack whose directory is gone, addressed by its path.

    ``what`` starts the message for a path outside appops/; with ``must_be_gone`` (the
    hint) a stack whose ``stack.yaml`` still exists is refused (``--deleted``).
    """
    read = parse_stack_address(repo.root, address)  # outside the repository: a usage error
    paths = [
        c for c in read.candidates if is_within(c, APPOPS) and len(PurePosixPath(c).parts) >= 3
    ]
    if not paths:
        raise UsageError(f"{what}: not a stack path under appops/")
    stack = deleted_stack(paths[0])
    if must_be_gone is not None and (repo.root / stack.path / STACK_FILE).exists():
        raise UsageError(
            f"--deleted {address}: the stack still exists in the working tree", hint=must_be_gone
        )
    for old_stack in stacks_gone_in_history(repo):
        if old_stack.path == stack.path:
            return old_stack  # with its last stack.yaml: its cluster is known
    return stack


def stacks_gone_in_history(repo: Repository) -> list[Stack]:
    """Stacks HEAD's history deleted and the work tree does not have, each with the
    ``stack.yaml`` it had last (so its cluster is known). Empty outside git."""
    from konfig.detect import gitrepo  # git only when a deleted stack is asked about

    if not gitrepo.is_repo(repo.root):
        return []
    try:
        deleted = gitrepo.deleted_files(repo.root, STACK_FILE)
    except KonfigError:
        return []  # e.g. no commit yet
    present = {s.path for s in repo.stacks}
    found: dict[str, Stack] = {}
    for commit, path in deleted:  # newest first: the last stack.yaml a stack had wins
        stack_path = PurePosixPath(path).parent.as_posix()
        if stack_path in found or stack_path in present:
            continue
        if (repo.root / stack_path / STACK_FILE).exists():
            continue
        try:
            stack = deleted_stack(stack_path)
        except KonfigError:
            continue
        data = gitrepo.file_before(repo.root, commit, path)
        try:
            from konfig.repo.yamlio import load_yaml_text  # PyYAML: only for a deleted stack

            raw = load_yaml_text(data.decode("utf-8"), file=path) if data else None
        except (KonfigError, UnicodeDecodeError):
            raw = None
        found[stack_path] = replace(stack, raw=raw if isinstance(raw, dict) else {})
    return [found[p] for p in sorted(found)]
