"""Handing a stack's objects from konfig to a pull controller (docs/pull.md, Hand-off).

A stack moving from push to pull delivery keeps its objects: nothing is deleted and
nothing is left without an owner. The order:

1. the merge that sets ``delivery: pull`` publishes the stack's folder; the
   controller (Flux's kustomize-controller, Argo CD) server-side applies it with its
   own field manager, forcing: every field konfig set is now set by both managers;
2. :func:`release` checks that the controller's field manager holds every member of
   the stack's inventory, and only then gives konfig's part up: a server-side apply
   of each member's bare identity with konfig's field manager, which drops the fields
   only konfig owned (the ApplySet ``part-of`` label) and keeps every field the
   controller co-owns; then it deletes the inventory. From then on no ``konfig apply``
   or prune touches them, and ``konfig status`` no longer lists the stack as applied.

Until every member is held by the controller, :func:`release` changes nothing and
says which are waiting: releasing earlier would leave those fields with no manager,
and the objects with no owner at all.

Back from pull to push, the same in the other direction:

1. ``konfig apply`` with ``apply: {adoptUnmanaged: true}`` takes the objects over
   (they carry no konfig label since the release): konfig's field manager now co-owns
   every field, and the stack has an inventory again;
2. :func:`reclaim` checks that konfig's inventory holds every member, then applies
   each member's bare identity with the controller's field manager: the fields only
   the controller owned (Flux's ``kustomize.toolkit.fluxcd.io/name`` and
   ``/namespace`` owner labels) go, every field konfig co-owns stays;
3. only then the publish that removes the stack's folder: the controller's prune
   selects the objects by its owner labels, which they no longer carry, and skips
   them. Nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from konfig.engine.inventory_store import KubeApi, delete_inventory, read_inventory

# The field managers of the controllers konfig hands over to.
PULL_MANAGERS = ("kustomize-controller", "argocd-controller")


@dataclass(frozen=True)
class Handoff:
    """What :func:`release` did: ``released`` member ids (their inventory deleted), or
    nothing and the members still ``waiting`` for the controller."""

    stack: str
    had_inventory: bool
    released: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()  # members no longer in the cluster

    @property
    def done(self) -> bool:
        return not self.waiting


def managers_of(obj: dict[str, Any]) -> set[str]:
    """The field managers of ``obj`` (its ``metadata.managedFields``)."""
    fields = (obj.get("metadata") or {}).get("managedFields") or []
    return {str(f.get("manager")) for f in fields if isinstance(f, dict) and f.get("manager")}


def release(kube: KubeApi, stack_path: str, *, managers: Sequence[str] = PULL_MANAGERS) -> Handoff:
    """Give the stack's objects to the pull controller (see the module's doc)."""
    inventory = read_inventory(kube, stack_path)
    if inventory is None:
        return Handoff(stack_path, had_inventory=False)
    live: list[tuple[str, dict[str, Any]]] = []
    waiting: list[str] = []
    gone: list[str] = []
    for member in inventory.members:
        ref = member.ref
        obj = kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)
        if obj is None:
            gone.append(member.id)
            continue
        if not managers_of(obj) & set(managers):
            waiting.append(member.id)
        live.append((member.id, obj))
    if waiting:
        return Handoff(stack_path, True, waiting=tuple(waiting), gone=tuple(gone))
    for _id, obj in live:
        kube.apply(_bare(obj), dry_run=False, force=False)
    delete_inventory(kube, stack_path, uid=inventory.uid or None, name=inventory.name)
    return Handoff(stack_path, True, released=tuple(i for i, _ in live), gone=tuple(gone))


def reclaim(kube: KubeApi, stack_path: str, *, managers: Sequence[str] = PULL_MANAGERS) -> Handoff:
    """Take the stack's objects back from the pull controller (see the module's doc):
    nothing changes unless konfig's inventory holds every member (``waiting`` names
    those it does not: apply the stack first; with no inventory at all, the stack)."""
    inventory = read_inventory(kube, stack_path)
    if inventory is None:
        return Handoff(stack_path, had_inventory=False, waiting=(stack_path,))
    live: list[tuple[str, dict[str, Any]]] = []
    waiting: list[str] = []
    gone: list[str] = []
    for member in inventory.members:
        ref = member.ref
        obj = kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)
        if obj is None:
            gone.append(member.id)
        elif "konfig" not in managers_of(obj):
            waiting.append(member.id)
        else:
            live.append((member.id, obj))
    if waiting:
        return Handoff(stack_path, True, waiting=tuple(waiting), gone=tuple(gone))
    taken: list[str] = []
    for member_id, obj in live:
        held = sorted(managers_of(obj) & set(managers))
        for manager in held:
            kube.apply(_bare(obj), dry_run=False, force=False, field_manager=manager)
        if held:
            taken.append(member_id)
    return Handoff(stack_path, True, released=tuple(taken), gone=tuple(gone))


def _bare(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj``'s identity only: apiVersion, kind, name (and namespace)."""
    meta = obj.get("metadata") or {}
    bare: dict[str, Any] = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": meta["name"]},
    }
    if meta.get("namespace"):
        bare["metadata"]["namespace"] = meta["namespace"]
    return bare
