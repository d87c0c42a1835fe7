"""The inventories in the clusters: per stack of the repository, and every one found."""

from __future__ import annotations

from dataclasses import dataclass, field

from konfig.engine.inventory import Inventory
from konfig.engine.inventory_store import scan_inventories
from konfig.engine.kube import KubeTarget
from konfig.errors import KonfigError
from konfig.pipeline.concurrency import run_concurrently
from konfig.pipeline.connections import Connections
from konfig.pipeline.selection import stacks_gone_in_history
from konfig.repo.layout import Repository


@dataclass(frozen=True)
class Inventories:
    by_stack: dict[str, Inventory | None]  # each stack of the repository: its inventory
    found: dict[str, Inventory]  # every Konfig inventory in those clusters, by stack path
    # the context each found inventory is in (a deleted stack's cluster)
    contexts: dict[str, str] = field(default_factory=dict)
    # clusters only deleted stacks used that could not be read, with why
    skipped: tuple[str, ...] = ()
    # ConfigMaps with Konfig's label that are not readable inventories (hand-edited):
    # what is wrong with each and how to repair it
    problems: tuple[str, ...] = ()


def read_inventories(repo: Repository, conns: Connections) -> Inventories:
    """Each stack's inventory, and every inventory in the clusters the stacks use (so
    that stacks deleted since their last apply are found too): one LIST per cluster,
    the clusters read at once.

    The clusters of stacks the history deleted are read too (a cluster whose last
    stack was removed still holds its inventory); one of those that cannot be read
    (decommissioned) is skipped, and listed in ``skipped``.
    """
    groups = conns.groups(repo.stacks)
    gone = stacks_gone_in_history(repo)
    extra = {t: g for t, g in conns.groups(gone).items() if t not in groups}
    targets = [*groups, *extra]

    def read(target: KubeTarget) -> tuple[str, list[Inventory], list[str]] | KonfigError:
        try:
            kube = conns.kube((groups.get(target) or extra[target])[0])
            found, problems = scan_inventories(kube)
        except KonfigError as exc:
            if target in groups:
                raise
            return exc
        return kube.context, found, problems

    by_stack: dict[str, Inventory | None] = {}
    found: dict[str, Inventory] = {}
    contexts: dict[str, str] = {}
    skipped: list[str] = []
    problems: list[str] = []
    for target, got in zip(targets, run_concurrently(targets, read, 8), strict=True):
        if isinstance(got, KonfigError):
            skipped.append(f"{target.context or '(current context)'}: {got.message}")
            continue
        context, inventories, bad = got
        problems.extend(bad)
        in_cluster = {inv.stack_path: inv for inv in inventories}
        for stack in groups.get(target, ()):
            by_stack[stack.path] = in_cluster.get(stack.path)
        for path, inv in in_cluster.items():
            found.setdefault(path, inv)
            contexts.setdefault(path, context)
    return Inventories(by_stack, found, contexts, tuple(skipped), tuple(problems))
