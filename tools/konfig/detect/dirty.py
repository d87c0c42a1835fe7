"""Whether the work tree holds uncommitted changes a stack's Spec depends on.

``konfig apply`` and ``konfig destroy`` act on a commit: a stack is **dirty** when the
change from ``HEAD`` to the work tree affects it by ``konfig changed``'s rules (any
file inside the stack, its project's ``project.yaml`` and ``base/``, the KCL modules it
imports, transitively, its entry files, a repo-wide trigger; untracked files count),
or when its directory is gone from the work tree but not from ``HEAD`` (an uncommitted
deletion). Outside git, or before the first commit, there is no commit at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from konfig.detect import gitrepo
from konfig.errors import KonfigError


@dataclass(frozen=True)
class TreeState:
    """The commit the work tree is on and what of it is not committed."""

    commit: str  # HEAD; "" when there is no commit (see ``no_commit``)
    no_commit: str | None = None  # why there is no commit to apply
    dirty: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # stack -> why

    def is_dirty(self, stack_path: str) -> bool:
        return self.no_commit is not None or stack_path in self.dirty


def tree_state(root: Path, stack_paths: Iterable[str], *, cache: Path | None) -> TreeState:
    """``HEAD`` and, of ``stack_paths``, those the uncommitted changes affect."""
    if not gitrepo.is_repo(root):
        return TreeState("", "the repository is not a git repository, so there is no commit")
    try:
        head = gitrepo.rev_parse(root, "HEAD")
    except KonfigError:
        return TreeState("", "the git repository has no commit yet")
    wanted = set(stack_paths)
    if not gitrepo.diff(root, head, None):
        return TreeState(head)  # clean: no need for the import graph
    from konfig.detect.changeset import affected_stacks  # the import graph: only when dirty

    changes = affected_stacks(root, head, None, cache=cache)
    dirty: dict[str, tuple[str, ...]] = {
        s.path: s.reasons for s in changes.stacks if s.path in wanted
    }
    for path in changes.deleted_stacks:
        if path in wanted:
            dirty[path] = ("its directory is deleted in the work tree, not in a commit",)
    for problem in changes.problems:  # a broken stack.yaml is a change to it all the same
        if problem.directory in wanted:
            dirty.setdefault(problem.directory, (f"{problem.file} changed",))
    return TreeState(head, None, dirty)
