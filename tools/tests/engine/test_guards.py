"""The apply and prune guards (konfig.engine.guards), on plain dicts.

The cluster tests in test_applier.py exercise the same guards against the real API
server; these pin down each rule on its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from konfig.engine.guards import (
    Candidate,
    CrdHasInstances,
    DangerPolicy,
    NamespaceHoldsOthers,
    OwnershipProven,
    ProtectedNamespace,
    first_objection,
    foreign_owner,
    prune_guards,
    replace_allowed,
)
from konfig.engine.inventory import LABEL_PART_OF, Inventory, Member
from konfig.engine.kube import ApiFailure, KubeApiError, KubeError
from konfig.ids import ObjectRef, parse_id

SET_ID = "applyset-ours-v1"
OTHER = "applyset-theirs-v1"


def obj(
    api_version: str,
    kind: str,
    name: str,
    namespace: str | None = None,
    *,
    owner: str | None = None,
    uid: str = "",
    **extra: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if owner:
        meta["labels"] = {LABEL_PART_OF: owner}
    if uid:
        meta["uid"] = uid
    meta.update(extra.pop("metadata", {}))
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **extra}


def candidate(resource_id: str, live: dict[str, Any]) -> Candidate:
    return Candidate(resource_id, parse_id(resource_id), live)


def inventory(*members: Member) -> Inventory:
    return Inventory("appops/p/dev", tuple(sorted(members)), "c1", "d1", SET_ID)


class Listing:
    """The cluster as plain dicts: (apiVersion, kind) -> objects; some kinds refuse."""

    def __init__(
        self,
        objects: list[dict[str, Any]],
        *,
        forbidden: tuple[str, ...] = (),
        unserved: tuple[str, ...] = (),
    ) -> None:
        self.objects = objects
        self.forbidden = forbidden
        self.unserved = unserved
        self.listed: list[tuple[str, str, str | None]] = []

    def namespaced_kinds(self) -> list[tuple[str, str]]:
        kinds = {
            (o["apiVersion"], o["kind"]) for o in self.objects if o["metadata"].get("namespace")
        }
        return [*kinds, *(("v1", k) for k in self.forbidden)]

    def list(
        self, api_version: str, kind: str, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        self.listed.append((api_version, kind, namespace))
        if kind in self.forbidden:
            raise KubeApiError("forbidden", ApiFailure(403, "Forbidden", "no"))
        if kind in self.unserved:
            raise KubeError(f"the server does not serve {kind}")
        return [
            o
            for o in self.objects
            if o["apiVersion"] == api_version
            and o["kind"] == kind
            and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]


# --- ownership -----------------------------------------------------------------------


def test_ownership_needs_the_label_and_membership_and_the_recorded_uid() -> None:
    guard = OwnershipProven(inventory(Member("v1:ConfigMap:web:cfg", "u1")))
    rid = "v1:ConfigMap:web:cfg"
    assert (
        guard.objection(
            candidate(rid, obj("v1", "ConfigMap", "cfg", "web", owner=SET_ID, uid="u1"))
        )
        is None
    )
    for live in (
        obj("v1", "ConfigMap", "cfg", "web", owner=OTHER, uid="u1"),  # someone else's label
        obj("v1", "ConfigMap", "cfg", "web", uid="u1"),  # no label
        obj("v1", "ConfigMap", "cfg", "web", owner=SET_ID, uid="u2"),  # re-created by others
    ):
        found = guard.objection(candidate(rid, live))
        assert found is not None and found.guard == "ownership"
        assert not found.keep_member  # not ours: it leaves the inventory
        assert found.reason.startswith(
            "kept ConfigMap cfg in namespace web (v1): not provably owned"
        )
    other = "v1:ConfigMap:web:other"  # labelled ours but not a member
    assert guard.objection(candidate(other, obj("v1", "ConfigMap", "other", "web", owner=SET_ID)))


# --- protected namespaces ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public", "kube-node-lease"])
def test_default_and_kube_namespaces_are_never_deleted(name: str) -> None:
    found = ProtectedNamespace().objection(
        candidate(f"v1:Namespace:{name}", obj("v1", "Namespace", name))
    )
    assert found is not None and found.guard == "protected-namespace"
    assert found.reason == f"kept Namespace {name}: konfig never deletes it"
    assert not found.keep_member


@pytest.mark.parametrize(
    "rid",
    [
        "v1:Namespace:web",
        "v1:Namespace:kubeflow",
        "v1:ServiceAccount:web:default",
        "v1:ConfigMap:web:kube-x",
    ],
)
def test_other_objects_are_not_protected(rid: str) -> None:
    ref = parse_id(rid)
    live = obj(ref.api_version, ref.kind, ref.name, ref.namespace)
    assert ProtectedNamespace().objection(candidate(rid, live)) is None


# --- a Namespace that still holds others' objects --------------------------------------


def test_namespace_with_only_our_and_cluster_made_objects_may_go() -> None:
    listing = Listing(
        [
            obj("v1", "ConfigMap", "cfg", "web", owner=SET_ID),
            obj("v1", "ConfigMap", "kube-root-ca.crt", "web"),
            obj("v1", "ServiceAccount", "default", "web"),
            obj("v1", "Event", "cfg.123", "web"),
            obj("v1", "Secret", "tok", "web", type="kubernetes.io/service-account-token"),
            obj("apps/v1", "ReplicaSet", "web-1", "web", metadata={"ownerReferences": [{}]}),
            obj("v1", "ConfigMap", "leaving", "web", metadata={"deletionTimestamp": "now"}),
            obj("v1", "ConfigMap", "elsewhere", "other"),
        ],
        forbidden=("Lease",),
    )
    guard = NamespaceHoldsOthers(listing, frozenset({"v1:ConfigMap:web:cfg"}), SET_ID)
    assert guard.objection(candidate("v1:Namespace:web", obj("v1", "Namespace", "web"))) is None
    assert ("v1", "Event", "web") not in listing.listed  # the cluster's own kinds are not listed
    assert ("v1", "Lease", "web") in listing.listed  # a kind we may not list is passed over


def test_namespace_holding_others_objects_stays_in_the_inventory() -> None:
    others = [obj("v1", "ConfigMap", f"theirs-{i}", "web") for i in range(6)]
    listing = Listing(
        [
            obj("v1", "ConfigMap", "cfg", "web", owner=OTHER),  # a member id, not our label
            *others,
        ]
    )
    guard = NamespaceHoldsOthers(listing, frozenset({"v1:ConfigMap:web:cfg"}), SET_ID)
    found = guard.objection(candidate("v1:Namespace:web", obj("v1", "Namespace", "web")))
    assert found is not None and found.guard == "namespace-in-use" and found.keep_member
    assert found.reason.startswith(
        "kept Namespace web: it still holds objects of other owners (ConfigMap/cfg, "
    )
    assert found.reason.endswith(
        " ...); it stays in the inventory and is pruned once they are gone,"
        " or with them once its cascade is confirmed (konfig.yaml dangers.confirm: [cascade], "
        "then --confirm STACK=DIGEST as the preview names it: docs/danger.md)"
    )
    # the guard judges Namespaces only
    cm = candidate("v1:ConfigMap:web:x", obj("v1", "ConfigMap", "x", "web"))
    assert guard.objection(cm) is None


# --- a CRD whose custom resources others hold ------------------------------------------------

CRD = obj(
    "apiextensions.k8s.io/v1",
    "CustomResourceDefinition",
    "widgets.example.com",
    spec={
        "group": "example.com",
        "names": {"kind": "Widget"},
        "versions": [{"name": "v1alpha1", "served": False}, {"name": "v1", "served": True}],
    },
)
CRD_ID = "apiextensions.k8s.io/v1:CustomResourceDefinition:widgets.example.com"


def test_crd_with_others_custom_resources_is_kept() -> None:
    listing = Listing(
        [
            obj("example.com/v1", "Widget", "ours", "web", owner=SET_ID),
            obj("example.com/v1", "Widget", "theirs", "web"),
            obj("example.com/v1", "Widget", "going", "web", metadata={"deletionTimestamp": "x"}),
        ]
    )
    guard = CrdHasInstances(listing, frozenset({"example.com/v1:Widget:web:ours"}), SET_ID)
    found = guard.objection(candidate(CRD_ID, CRD))
    assert found is not None and found.guard == "crd-in-use" and found.keep_member
    assert found.reason == (
        "kept CustomResourceDefinition widgets.example.com: deleting it would delete custom "
        "resources of other owners (Widget/theirs in web); it stays in the inventory and is "
        "pruned once they are gone,"
        " or with them once its cascade is confirmed (konfig.yaml dangers.confirm: [cascade], "
        "then --confirm STACK=DIGEST as the preview names it: docs/danger.md)"
    )
    assert listing.listed == [("example.com/v1", "Widget", None)]  # all namespaces


def test_crd_of_a_confirmed_cascade_goes_with_what_it_counted() -> None:
    listing = Listing([obj("example.com/v1", "Widget", n, "web") for n in ("a", "b")])
    members = frozenset[str]()
    counted = CrdHasInstances(listing, members, SET_ID, {CRD_ID: 2})
    assert counted.objection(candidate(CRD_ID, CRD)) is None
    assert counted.taken == {CRD_ID: ["Widget/a in web", "Widget/b in web"]}
    # one more than the confirmation counted: kept, and says so
    fewer = CrdHasInstances(listing, members, SET_ID, {CRD_ID: 1})
    found = fewer.objection(candidate(CRD_ID, CRD))
    assert found is not None and found.keep_member and fewer.taken == {}
    assert "(2, more than the 1 the confirmed cascade counted: preview it again" in found.reason


def test_crd_without_others_instances_or_not_served_may_go() -> None:
    members = frozenset({"example.com/v1:Widget:web:ours"})
    ours = Listing([obj("example.com/v1", "Widget", "ours", "web", owner=SET_ID)])
    assert CrdHasInstances(ours, members, SET_ID).objection(candidate(CRD_ID, CRD)) is None
    gone = Listing([], unserved=("Widget",))
    assert CrdHasInstances(gone, members, SET_ID).objection(candidate(CRD_ID, CRD)) is None
    unserved = {**CRD, "spec": {**CRD["spec"], "versions": [{"name": "v1", "served": False}]}}
    theirs = Listing([obj("example.com/v1", "Widget", "theirs", "web")])
    assert CrdHasInstances(theirs, members, SET_ID).objection(candidate(CRD_ID, unserved)) is None


# --- order and apply guards ---------------------------------------------------------------


def test_prune_guards_ask_ownership_first() -> None:
    listing = Listing([obj("v1", "ConfigMap", "theirs", "kube-system")])
    guards = prune_guards(inventory(Member("v1:Namespace:kube-system")), listing, SET_ID)
    assert [g.name for g in guards] == [
        "ownership",
        "protected-namespace",
        "namespace-in-use",
        "crd-in-use",
    ]
    ns = obj("v1", "Namespace", "kube-system", owner=SET_ID)
    found = first_objection(guards, candidate("v1:Namespace:kube-system", ns))
    assert found is not None and found.guard == "protected-namespace"
    assert listing.listed == []  # decided before anything was listed
    not_ours = obj("v1", "Namespace", "kube-system")
    found = first_objection(guards, candidate("v1:Namespace:kube-system", not_ours))
    assert found is not None and found.guard == "ownership"
    web = obj("v1", "Namespace", "web", owner=SET_ID)
    no_member = prune_guards(inventory(Member("v1:Namespace:web")), Listing([]), SET_ID)
    assert first_objection(no_member, candidate("v1:Namespace:web", web)) is None


def test_replace_needs_the_stack_or_the_object_to_opt_in() -> None:
    plain = obj("v1", "Service", "web", "web")
    annotated = obj(
        "v1", "Service", "web", "web",
        metadata={"annotations": {"konfig.io/replace-on-immutable": "True"}},
    )  # fmt: skip
    assert not replace_allowed(plain, stack_opts_in=False)
    assert replace_allowed(plain, stack_opts_in=True)
    assert replace_allowed(annotated, stack_opts_in=False)
    assert not replace_allowed(None, stack_opts_in=False)


def test_foreign_owner_names_the_other_inventory() -> None:
    assert foreign_owner(obj("v1", "ConfigMap", "a", "n", owner=OTHER), SET_ID) == OTHER
    assert foreign_owner(obj("v1", "ConfigMap", "a", "n", owner=SET_ID), SET_ID) is None
    assert foreign_owner(obj("v1", "ConfigMap", "a", "n"), SET_ID) is None


def test_candidate_ref_is_parsed_from_the_id() -> None:
    assert candidate("v1:Namespace:web", {}).ref == ObjectRef("v1", "Namespace", None, "web")


def test_the_stricter_of_two_danger_policies() -> None:
    before = DangerPolicy(("cascade", "data"), max_deletes=20)
    merged = DangerPolicy(("data", "capacity"), max_deletes=50, max_delete_percent=40.0)
    both = merged.stricter(before)
    assert both == DangerPolicy(("data", "capacity", "cascade"), 20, 40.0)
    assert DangerPolicy().stricter(DangerPolicy()) == DangerPolicy()
    assert not DangerPolicy().stricter(DangerPolicy()).active


def test_a_confirmed_cascade_lets_the_namespace_go_with_what_it_counted() -> None:
    listing = Listing([obj("v1", "ConfigMap", f"theirs-{i}", "web") for i in range(2)])
    ns = candidate("v1:Namespace:web", obj("v1", "Namespace", "web"))
    confirmed = NamespaceHoldsOthers(listing, frozenset(), SET_ID, {"v1:Namespace:web": 2})
    assert confirmed.objection(ns) is None
    assert confirmed.taken == {"v1:Namespace:web": ["ConfigMap/theirs-0", "ConfigMap/theirs-1"]}
    # more than the confirmation counted: kept, and it says why
    fewer = NamespaceHoldsOthers(listing, frozenset(), SET_ID, {"v1:Namespace:web": 1})
    found = fewer.objection(ns)
    assert found is not None and found.keep_member and fewer.taken == {}
    assert "(2, more than the 1 the confirmed cascade counted: preview it again" in found.reason
    # another Namespace's confirmation is none of this one
    other = NamespaceHoldsOthers(listing, frozenset(), SET_ID, {"v1:Namespace:shop": 5})
    assert other.objection(ns) is not None
