"""The per-stack inventory kept in the cluster: reading it (with a former name's),
listing every one, writing it by server-side apply, deleting it. The record and its
ConfigMap form are :mod:`konfig.engine.inventory`.

The protocol that loses nothing on partial failure (cli-utils, kubectl ApplySet):
write the union of old and new members before applying (:func:`write_union`), apply,
prune, then shrink the inventory to what exists. ``commit`` and ``specDigest`` change
only when an apply completed, so "changed since the last applied commit" stays true
after a failed apply. ``dirty`` changes together with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from konfig.engine.inventory import (
    DATA_STACK,
    NAMESPACE,
    PARENT_API_VERSION,
    PARENT_KIND,
    Audit,
    FieldSets,
    Inventory,
    InventoryError,
    Member,
    former_name_of,
    inventory_manifest,
    inventory_name,
    now,
    parse_inventory,
    stack_path_of,
    union_members,
)


class KubeApi(Protocol):
    """The part of ``konfig.engine.kube.Kube`` the inventory needs (see engine/kube/client.py)."""

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None
    ) -> dict[str, Any] | None: ...

    def apply(
        self,
        manifest: dict[str, Any],
        *,
        dry_run: bool,
        force: bool = True,
        field_manager: str = "konfig",
    ) -> dict[str, Any]: ...

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        *,
        uid: str | None,
        propagation: str = "Foreground",
    ) -> None: ...

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]: ...


class KubeLister(Protocol):
    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]: ...


MANAGED_BY = "app.kubernetes.io/managed-by=konfig"


def list_inventories(kube: KubeLister) -> list[Inventory]:
    """Every Konfig inventory in the cluster (malformed ones left out: each is reported
    when its stack is addressed)."""
    return scan_inventories(kube)[0]


def read_inventory(kube: KubeApi, stack: str | Any) -> Inventory | None:
    """The stack's inventory in the cluster, or None when it has none.

    A stack whose name changed when names became injective also reads its old name:
    an inventory there that records exactly this stack path is this stack's (read as
    it is when the new name has none yet, else its ApplySet id accepted alongside);
    one that records another stack is not looked at."""
    path = stack_path_of(stack)
    obj = kube.get(PARENT_API_VERSION, PARENT_KIND, inventory_name(path), NAMESPACE)
    current = None if obj is None else parse_inventory(obj, stack=path)
    old = former_name_of(path)
    if old is None:
        return current
    old_obj = kube.get(PARENT_API_VERSION, PARENT_KIND, old, NAMESPACE)
    if old_obj is None or str((old_obj.get("data") or {}).get(DATA_STACK) or "") != path:
        return current  # none, or another stack's: never this one's
    legacy = parse_inventory(old_obj, stack=path)
    base = legacy if current is None else current
    return replace(
        base,
        former_ids=frozenset({legacy.applyset_id}) - {base.applyset_id},
        former_name=old,
        former_uid=legacy.uid,
    )


def scan_inventories(kube: KubeLister) -> tuple[list[Inventory], list[str]]:
    """Every Konfig inventory in the cluster, with one LIST; and the problems of
    ConfigMaps that carry Konfig's label but are not readable inventories."""
    listed = kube.list(PARENT_API_VERSION, PARENT_KIND, NAMESPACE, label_selector=MANAGED_BY)
    found: list[Inventory] = []
    problems: list[str] = []
    for obj in listed:
        try:
            inv = parse_inventory(obj)
        except InventoryError as exc:
            problems.append(str(exc))
            continue
        if inv.stack_path:
            found.append(inv)
    # A stack whose inventory is moving to its new name has two for a moment: the one
    # under its name now is its inventory.
    by_stack: dict[str, Inventory] = {}
    for inv in found:
        prior = by_stack.get(inv.stack_path)
        if prior is None or _current(inv):
            by_stack[inv.stack_path] = inv
    return [i for i in found if by_stack[i.stack_path] is i], problems


def _current(inv: Inventory) -> bool:
    try:
        return inv.name == inventory_name(inv.stack_path)
    except InventoryError:
        return False


def ensure_namespace(kube: KubeApi) -> None:
    """Create ``konfig-system`` if it is missing (idempotent; checked once per connection)."""
    if getattr(kube, "_konfig_namespace_ready", False):
        return
    if kube.get("v1", "Namespace", NAMESPACE, None) is not None:
        _mark_ready(kube)
        return
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "konfig"}},
        },
        dry_run=False,
    )
    _mark_ready(kube)


def _mark_ready(kube: KubeApi) -> None:
    try:
        setattr(kube, "_konfig_namespace_ready", True)  # noqa: B010
    except AttributeError:
        pass


def write_inventory(
    kube: KubeApi,
    stack: str | Any,
    members: Iterable[Member],
    *,
    commit: str,
    spec_digest: str,
    applied_at: str | None = None,
    dirty: bool = False,
    applied_fields: FieldSets | None = None,
    review: Mapping[str, Any] | None = None,
    audit: Audit | None = None,
) -> Inventory:
    """Record ``members`` (server-side apply of the parent ConfigMap) and return it."""
    ensure_namespace(kube)
    manifest = inventory_manifest(
        stack_path_of(stack),
        members,
        commit=commit,
        spec_digest=spec_digest,
        applied_at=applied_at or now(),
        dirty=dirty,
        applied_fields=applied_fields,
        review=review,
        audit=audit,
    )
    return parse_inventory(kube.apply(manifest, dry_run=False))


def write_union(
    kube: KubeApi, stack: str | Any, prior: Inventory | None, planned: Iterable[Member]
) -> Inventory:
    """Step 1 of the protocol: old ∪ new members, keeping the prior commit and digest
    (and the ApplySet id of a former name, still proof of ownership until the apply
    completed)."""
    old = prior.members if prior else ()
    written = write_inventory(
        kube,
        stack,
        union_members(old, planned),
        commit=prior.commit if prior else "",
        spec_digest=prior.spec_digest if prior else "",
        applied_at=prior.applied_at if prior else "",
        dirty=prior.dirty if prior else False,
        applied_fields=prior.applied_fields if prior else None,
        review=prior.review if prior else None,
        audit=prior.audit if prior else None,
    )
    if prior is None or not prior.former_name:
        return written
    return replace(
        written,
        former_ids=prior.accepted_ids - {written.applyset_id},
        former_name=prior.former_name,
        former_uid=prior.former_uid,
    )


def delete_inventory(
    kube: KubeApi, stack: str | Any, *, uid: str | None = None, name: str | None = None
) -> None:
    """Delete the stack's inventory (``name``: the one it was read from, when that is
    its former name)."""
    kube.delete(
        PARENT_API_VERSION,
        PARENT_KIND,
        name or inventory_name(stack),
        NAMESPACE,
        uid=uid,
        propagation="Background",
    )


def retire_former(kube: KubeApi, prior: Inventory | None) -> str | None:
    """Delete the inventory under the stack's former name, once an apply or destroy
    completed under the new one (every object it applied carries the new id); its name,
    or None when there was none."""
    if prior is None or not prior.former_name:
        return None
    kube.delete(
        PARENT_API_VERSION,
        PARENT_KIND,
        prior.former_name,
        NAMESPACE,
        uid=prior.former_uid or None,
        propagation="Background",
    )
    return prior.former_name
