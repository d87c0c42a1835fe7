"""A stack's live fingerprint: the versions of the live objects its preview reads.

A preview of a stack depends on the live objects it plans (its Spec's objects), on its
inventory (which objects it owns: the deletes) and on the objects that inventory
lists, and on the namespaces they live in. Their versions, uid and resourceVersion
(or that the object is absent, or that its kind is not served), make the stack's
live fingerprint: while it is unchanged, so is what the cluster side of a preview
reads. :func:`live_fingerprint` reads it with one metadata-only list per kind and
namespace (``PartialObjectMetadataList``: names, uids, resourceVersions, no content),
never a get per object and never a dry-run.

A kube-apiserver gives every write a new resourceVersion, so any edit of one of these
objects (``kubectl edit``, a controller, another stack's apply) changes the
fingerprint. Plain data out; which stacks may re-use a preview is decided elsewhere
(:mod:`konfig.pipeline.reusing`).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from konfig.engine.inventory import NAMESPACE, Inventory, inventory_name, legacy_inventory_name
from konfig.engine.kube.errors import UnknownKindError
from konfig.ids import ObjectRef, ResourceIdError, parse_id
from konfig.spec import Spec

VERSION = "konfig-live-fingerprint-v1"
ABSENT = "absent"
UNSERVED = "kind not served"


class Lister(Protocol):
    """The part of :class:`konfig.engine.kube.Kube` a fingerprint needs."""

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        metadata_only: bool = False,
    ) -> list[dict[str, Any]]: ...

    def is_namespaced(self, api_version: str, kind: str) -> bool: ...


def objects_of(
    stack_path: str, spec: Spec | None, prior: Inventory | None, kube: Lister
) -> set[ObjectRef]:
    """What a preview of ``stack_path`` reads live: the Spec's Kubernetes objects, its
    inventory (under its name and the name konfig gave it before), the objects that
    inventory owns, and every namespace among them."""
    refs: set[ObjectRef] = set()
    for r in spec.kubernetes() if spec is not None else ():
        refs.add(ObjectRef(r.api_version, r.kind, r.namespace, r.name))
    for name in (inventory_name(stack_path), legacy_inventory_name(stack_path)):
        if name:
            refs.add(ObjectRef("v1", "ConfigMap", NAMESPACE, name))

    def scope(api_version: str, kind: str) -> bool | None:
        try:
            return kube.is_namespaced(api_version, kind)
        except UnknownKindError:
            return None

    for member in prior.members if prior is not None else ():
        try:
            refs.add(parse_id(member.id, scope=scope))
        except ResourceIdError:
            continue  # the inventory's own uid/resourceVersion covers what it records
    refs |= {ObjectRef("v1", "Namespace", None, r.namespace) for r in refs if r.namespace}
    return refs


# (apiVersion, kind, namespace) -> name -> "uid/resourceVersion", None: kind not served
Lists = dict[tuple[str, str, str | None], dict[str, str] | None]


def live_fingerprint(
    kube: Lister, refs: Iterable[ObjectRef], lists: Lists | None = None
) -> dict[str, str]:
    """Object id -> ``uid/resourceVersion`` (``absent``; ``kind not served``) for each
    of ``refs``: one metadata-only list per (apiVersion, kind, namespace). ``lists``
    keeps the lists read for the next stacks of the same run and cluster (a preview
    writes nothing: a list read before a stack's plan is as good as one read just
    before it, and an object written since has another version at the next read)."""
    groups: dict[tuple[str, str, str | None], set[str]] = defaultdict(set)
    for ref in refs:
        groups[(ref.api_version, ref.kind, ref.namespace)].add(ref.name)
    out: dict[str, str] = {}
    memo: Lists = {} if lists is None else lists
    for (api_version, kind, namespace), names in sorted(
        groups.items(), key=lambda item: (item[0][0], item[0][1], item[0][2] or "")
    ):
        key = (api_version, kind, namespace)
        if key not in memo:
            memo[key] = _versions(kube, api_version, kind, namespace)
        seen = memo[key]
        for name in names:
            rid = ObjectRef(api_version, kind, namespace, name).id
            out[rid] = UNSERVED if seen is None else seen.get(name, ABSENT)
    return out


def _versions(
    kube: Lister, api_version: str, kind: str, namespace: str | None
) -> dict[str, str] | None:
    try:
        items = kube.list(api_version, kind, namespace, metadata_only=True)
    except UnknownKindError:
        return None
    found: dict[str, str] = {}
    for item in items:
        meta = item.get("metadata") or {}
        found[str(meta.get("name") or "")] = (
            f"{meta.get('uid') or ''}/{meta.get('resourceVersion') or ''}"
        )
    return found


def fingerprint_digest(versions: Mapping[str, str]) -> str:
    """The sha256 of a fingerprint (its ids and versions, in a fixed order)."""
    text = json.dumps([VERSION, sorted(versions.items())], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
