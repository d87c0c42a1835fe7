"""Stacks whose applied state is behind a commit: what apply-on-merge must apply.

The merge pipeline does not diff ``HEAD^..HEAD``: runs can be skipped (GitHub keeps
one pending run per concurrency group) or fail. Instead every stack's inventory in
the cluster records the commit last applied successfully (the commit is written only
after apply and prune succeeded). A stack is pending when

- it has no inventory (never applied), or its inventory records no commit;
- its last apply came from uncommitted changes (``konfig apply --allow-dirty``): what
  runs matches no commit, whatever commit it was on top of;
- its recorded commit is not in this repository's history (force-push, another
  repository): applied again to be safe;
- the change from its recorded commit to ``head`` affects it (``konfig changed``'s
  rules, evaluated once per distinct recorded commit).

A **deleted** stack is an inventory found in a cluster the repository's stacks
target whose stack no longer exists at ``head`` (no ``stack.yaml`` there), and which
this repository provably applied: its recorded commit is in this repository's history
and has the stack's ``stack.yaml``. A stack whose ``stack.yaml`` is still at ``head``
but which a layout error makes unusable (a ``name`` that does not match, a missing
``project.yaml``) is listed as ``unusable``, never as deleted. Any other inventory
(another repository sharing the cluster, an apply that never finished) is left alone
and listed as ``foreign``: a destroy must never be inferred from a name alone.

Pure: the caller reads the inventories (engine/kube + inventory.py) and passes them in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from konfig.detect import gitrepo
from konfig.detect.changeset import ChangeSet, affected_stacks
from konfig.engine.inventory import Inventory
from konfig.errors import KonfigError


@dataclass(frozen=True)
class PendingStack:
    path: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Pending:
    head: str
    stacks: tuple[PendingStack, ...]
    deleted_stacks: tuple[str, ...]
    up_to_date: tuple[str, ...]
    foreign: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()  # inventories of stacks present at head but unusable

    @property
    def stack_paths(self) -> list[str]:
        return [s.path for s in self.stacks]

    @property
    def projects(self) -> list[str]:
        paths = [*self.stack_paths, *self.deleted_stacks]
        # Project paths, as `konfig changed` lists them (appops/<project>).
        return sorted({"/".join(p.split("/")[:2]) for p in paths if p.count("/") >= 2})

    def to_json(self) -> dict[str, object]:
        """The shape of ``konfig changed --json`` (so ``konfig report`` reads both)."""
        return {
            "base": "inventories",
            "head": self.head,
            "stacks": [{"path": s.path, "reasons": list(s.reasons)} for s in self.stacks],
            "deleted_stacks": list(self.deleted_stacks),
            "projects": self.projects,
            "up_to_date": list(self.up_to_date),
            "foreign": list(self.foreign),
            "unusable": list(self.unusable),
        }


Affected = Callable[[str, str], ChangeSet]


def pending_stacks(
    root: Path,
    head: str,
    stack_paths: Iterable[str],
    inventories: Mapping[str, Inventory | None],
    found: Iterable[Inventory] = (),
    *,
    affected: Affected | None = None,
) -> Pending:
    """Which of ``stack_paths`` (the stacks at ``head``) need applying; which are gone.

    ``inventories`` maps each stack path to its inventory (None: none in the cluster);
    ``found`` are all inventories listed in the clusters, for deleted stacks.
    """
    head_sha = gitrepo.rev_parse(root, head)
    paths = sorted(set(stack_paths))
    reasons: dict[str, list[str]] = {}
    by_commit: dict[str, list[str]] = {}
    up_to_date: list[str] = []
    for path in paths:
        inv = inventories.get(path)
        if inv is None:
            reasons[path] = ["never applied (no inventory in the cluster)"]
        elif inv.dirty:
            reasons[path] = [dirty_reason(inv)]
        elif not inv.commit:
            reasons[path] = ["the inventory records no applied commit (an apply did not finish)"]
        elif inv.commit == head_sha:
            up_to_date.append(path)
        else:
            try:
                commit = gitrepo.rev_parse(root, inv.commit)
            except KonfigError:
                reasons[path] = [
                    f"applied commit {inv.commit[:12]} is not in this repository's history"
                ]
                continue
            by_commit.setdefault(commit, []).append(path)

    compute = affected or (lambda base, tip: affected_stacks(root, base, tip))
    for commit, group in sorted(by_commit.items()):
        changes = compute(commit, head_sha)
        why = {s.path: s.reasons for s in changes.stacks}
        for path in group:
            if path in why:
                reasons[path] = [f"since applied commit {commit[:12]}: {r}" for r in why[path]]
            else:
                up_to_date.append(path)

    current = set(paths)
    deleted: set[str] = set()
    foreign: set[str] = set()
    others = [inv for inv in found if inv.stack_path not in current]
    still_there = _stack_files_at(root, head_sha, [inv.stack_path for inv in others])
    for inv in others:
        if inv.stack_path in still_there:
            continue
        if _applied_from_here(root, inv):
            deleted.add(inv.stack_path)
        else:
            foreign.add(inv.stack_path)
    return Pending(
        head=head_sha,
        stacks=tuple(PendingStack(p, tuple(reasons[p])) for p in paths if p in reasons),
        deleted_stacks=tuple(sorted(deleted)),
        up_to_date=tuple(sorted(up_to_date)),
        foreign=tuple(sorted(foreign - deleted)),
        unusable=tuple(sorted(still_there)),
    )


def _stack_files_at(root: Path, commit: str, stack_paths: Iterable[str]) -> set[str]:
    """Which of ``stack_paths`` still have their ``stack.yaml`` at ``commit``."""
    wanted = {f"{p}/stack.yaml": p for p in stack_paths if p}
    if not wanted:
        return set()
    present = gitrepo.list_tree(root, commit, sorted(wanted))
    return {wanted[f] for f in present if f in wanted}


def dirty_reason(inv: Inventory) -> str:
    """Why a stack last applied from uncommitted changes is pending (pending, status and
    preview say it the same way)."""
    base = f"on top of {inv.commit[:12]}" if inv.commit else "outside any commit"
    return f"applied from uncommitted changes ({base}, --allow-dirty): it matches no commit"


def _applied_from_here(root: Path, inv: Inventory) -> bool:
    """The inventory's commit is ours and holds the stack (so its deletion is ours too)."""
    if not inv.commit:
        return False
    try:
        commit = gitrepo.rev_parse(root, inv.commit)
        stack_file = f"{inv.stack_path}/stack.yaml"
        return stack_file in gitrepo.list_tree(root, commit, [stack_file])
    except KonfigError:
        return False
