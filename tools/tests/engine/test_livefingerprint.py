"""A stack's live fingerprint against the real control plane: one metadata-only list per
kind and namespace, and every write to an object it covers moves it."""

from __future__ import annotations

from typing import Any

import pytest
from kubeutil import configmap, namespace, spec_of, unique

from konfig.engine.inventory import NAMESPACE, Inventory, Member, inventory_name
from konfig.engine.kube import Kube
from konfig.engine.livefingerprint import (
    ABSENT,
    UNSERVED,
    Lists,
    fingerprint_digest,
    live_fingerprint,
    objects_of,
)
from konfig.ids import ObjectRef

pytestmark = pytest.mark.cluster


class Counting:
    """The real client, with the lists it is asked for written down."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.lists: list[tuple[str, str, str | None, bool]] = []

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        metadata_only: bool = False,
    ) -> list[dict[str, Any]]:
        self.lists.append((api_version, kind, namespace, metadata_only))
        return self.kube.list(
            api_version, kind, namespace, label_selector, metadata_only=metadata_only
        )

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        return self.kube.is_namespaced(api_version, kind)


def test_one_metadata_list_per_kind_and_namespace_and_an_edit_moves_it(kube: Kube) -> None:
    ns, other = unique("lfp"), unique("lfp")
    for name in (ns, other):
        kube.apply(namespace(name), dry_run=False)
    manifests = [configmap(ns, f"cm{i}") for i in range(5)] + [configmap(other, "x")]
    for m in manifests[:-1]:
        kube.apply(m, dry_run=False)  # the one in `other` is not there yet
    stack = f"appops/{unique('proj')}/dev"
    spec = spec_of(*manifests, {"apiVersion": "v1", "kind": "Gadget", "metadata": {"name": "g"}})
    prior = Inventory(stack, (Member(f"v1:ConfigMap:{ns}:old"),), "c" * 40, "d", "set")
    refs = objects_of(stack, spec, prior, kube)
    assert ObjectRef("v1", "ConfigMap", NAMESPACE, inventory_name(stack)) in refs
    assert ObjectRef("v1", "ConfigMap", ns, "old") in refs  # what the inventory owns
    assert {ObjectRef("v1", "Namespace", None, n) for n in (ns, other, NAMESPACE)} <= refs

    counting = Counting(kube)
    versions = live_fingerprint(counting, refs)
    # 8 objects in 3 namespaces, 2 Namespaces, an unserved kind: 5 lists, all metadata-only
    assert sorted(counting.lists) == sorted(
        [
            ("v1", "ConfigMap", ns, True),
            ("v1", "ConfigMap", other, True),
            ("v1", "ConfigMap", NAMESPACE, True),
            ("v1", "Namespace", None, True),
            ("v1", "Gadget", None, True),
        ]
    )
    live = kube.get("v1", "ConfigMap", "cm0", ns)
    assert live is not None
    meta = live["metadata"]
    assert versions[f"v1:ConfigMap:{ns}:cm0"] == f"{meta['uid']}/{meta['resourceVersion']}"
    assert versions[f"v1:ConfigMap:{other}:x"] == ABSENT
    assert versions[f"v1:ConfigMap:{ns}:old"] == ABSENT
    assert versions["v1:Gadget:g"] == UNSERVED
    assert live_fingerprint(kube, refs) == versions  # nothing written: the same

    # an edit of one object (another field manager), then a create of an absent one
    kube.apply(configmap(ns, "cm3", k="edited"), dry_run=False, field_manager="kubectl-edit")
    edited = live_fingerprint(kube, refs)
    assert {k for k in versions if edited[k] != versions[k]} == {f"v1:ConfigMap:{ns}:cm3"}
    assert fingerprint_digest(edited) != fingerprint_digest(versions)
    kube.apply(manifests[-1], dry_run=False)
    created = live_fingerprint(kube, refs)
    assert {k for k in edited if created[k] != edited[k]} == {f"v1:ConfigMap:{other}:x"}

    # within one run the lists are kept for the next stacks: no second list of a kind
    # and namespace, the same versions
    counting = Counting(kube)
    lists: Lists = {}
    assert live_fingerprint(counting, refs, lists) == created
    listed = len(counting.lists)
    other = {ObjectRef("v1", "ConfigMap", ns, "cm1"), ObjectRef("v1", "Namespace", None, ns)}
    assert live_fingerprint(counting, other, lists) == {k.id: created[k.id] for k in other}
    assert len(counting.lists) == listed == 5
