"""The inventories in the clusters: per stack of the repository, and every one found."""

from __future__ import annotations

from dataclasses import dataclass

from konfig.engine.inventory import Inventory, list_inventories, read_inventory
from konfig.engine.kube import KubeTarget
from konfig.pipeline.connections import Connections
from konfig.repo.layout import Repository


@dataclass(frozen=True)
class Inventories:
    by_stack: dict[str, Inventory | None]  # each stack of the repository: its inventory
    found: dict[str, Inventory]  # every Konfig inventory in those clusters, by stack path


def read_inventories(repo: Repository, conns: Connections) -> Inventories:
    """Each stack's inventory, and every inventory in the clusters the stacks use (so
    that stacks deleted since their last apply are found too)."""
    by_stack: dict[str, Inventory | None] = {}
    found: dict[str, Inventory] = {}
    seen_targets: set[KubeTarget] = set()
    for stack in repo.stacks:
        kube = conns.kube(stack)
        by_stack[stack.path] = read_inventory(kube, stack)
        target = conns.target(stack)
        if target in seen_targets:
            continue
        seen_targets.add(target)
        for inv in list_inventories(kube):
            if inv.stack_path:
                found[inv.stack_path] = inv
    return Inventories(by_stack, found)
