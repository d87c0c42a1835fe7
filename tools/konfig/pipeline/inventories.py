"""The inventories in the clusters: per stack of the repository, and every one found."""

from __future__ import annotations

from dataclasses import dataclass

from konfig.engine.inventory import (
    NAMESPACE,
    Inventory,
    InventoryError,
    parse_inventory,
    read_inventory,
)
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
        listed = kube.list(
            "v1", "ConfigMap", namespace=NAMESPACE,
            label_selector="app.kubernetes.io/managed-by=konfig",
        )  # fmt: skip
        for obj in listed:
            try:
                inv = parse_inventory(obj)
            except InventoryError:
                continue  # not ours after all; apply/destroy report it when addressed
            if inv.stack_path:
                found[inv.stack_path] = inv
    return Inventories(by_stack, found)
