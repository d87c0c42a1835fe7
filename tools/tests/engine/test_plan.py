"""The three-way plan against the real local control plane (hack/cluster)."""

from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import replace
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from kubeutil import (
    apply_as_konfig,
    configmap,
    crd,
    deployment,
    inventory_of,
    job,
    make_stack,
    namespace,
    secret,
    service,
    set_id,
    snapshot,
    spec_of,
    unique,
    wait_for,
)

from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.kube import Kube, KubeTarget, connect
from konfig.engine.plan import PlanError, StackPlan
from konfig.engine.planner import plan_stack
from konfig.masking import MASK_AFTER, MASK_BEFORE

pytestmark = pytest.mark.cluster


@pytest.fixture
def ns(kube: Kube) -> str:
    name = unique("p6ns")
    kube.apply(namespace(name), dry_run=False)
    return name


def actions(plan: StackPlan) -> dict[str, str]:
    return {c.id: c.action for c in plan.changes}


def by_id(plan: StackPlan) -> dict[str, Any]:
    return {c.id: c for c in plan.changes}


# --- the rows of the three-way table --------------------------------------------------


def test_row_plan_only_is_create(kube: Kube, ns: str) -> None:
    stack = make_stack()
    plan = plan_stack(kube, stack, spec_of(configmap(ns)), None)
    (change,) = plan.changes
    assert (change.action, change.validated) == ("create", True)
    assert change.reason == "not in the cluster"
    assert {"path": "data.k", "before": None, "after": "v"} in [f.to_dict() for f in change.fields]
    # the manifest apply will send carries the ApplySet membership label
    assert change.desired["metadata"]["labels"][inv.LABEL_PART_OF] == set_id(stack)
    assert plan.counts() == {
        "create": 1, "update": 0, "replace": 0, "delete": 0, "unchanged": 0, "conflict": 0
    }  # fmt: skip
    assert plan.has_changes


def test_row_plan_and_live_unmanaged_is_a_conflict_unless_adopted(kube: Kube, ns: str) -> None:
    kube.apply(configmap(ns), dry_run=False, field_manager="someone-else")
    plan = plan_stack(kube, make_stack(), spec_of(configmap(ns)), None)
    (change,) = plan.changes
    assert (change.action, change.owner) == ("conflict", "unmanaged (someone-else)")
    assert "adoptUnmanaged: true" in change.reason and 'konfig.io/adopt: "true"' in change.reason
    assert plan.conflicts == (change,) and not plan.has_changes


@pytest.mark.parametrize("how", ["stack", "annotation"])
def test_row_plan_and_live_adopts_without_showing_the_live_content(
    kube: Kube, ns: str, how: str
) -> None:
    stack = make_stack()
    kube.apply(configmap(ns), dry_run=False, field_manager="someone-else")
    desired = configmap(ns)
    if how == "stack":
        stack = replace(stack, raw={"apply": {"adoptUnmanaged": True}})
    else:
        desired["metadata"]["annotations"] = {"konfig.io/adopt": "true"}
    plan = plan_stack(kube, stack, spec_of(desired), None)
    (change,) = plan.changes
    assert change.action == "update"
    assert "adopts" in change.reason and "field managers: someone-else" in change.reason
    # not the stack's until apply adopts it: nothing of the live object is shown
    assert (change.fields, change.diff) == ((), "")


def test_row_plan_and_live_identical_is_unchanged(kube: Kube, ns: str) -> None:
    stack = make_stack()
    apply_as_konfig(kube, stack, configmap(ns), deployment(ns))
    plan = plan_stack(kube, stack, spec_of(configmap(ns), deployment(ns)), None)
    assert set(actions(plan).values()) == {"unchanged"}
    assert all("adopts" in c.reason for c in plan.changes)
    assert not plan.has_changes


def test_object_owned_by_another_inventory_is_a_conflict_naming_it(kube: Kube, ns: str) -> None:
    other = make_stack()
    objs = apply_as_konfig(kube, other, configmap(ns))
    # no inventory of the owner in the cluster: named by its ApplySet id
    plan = plan_stack(kube, make_stack(), spec_of(configmap(ns)), None)
    (change,) = plan.changes
    assert change.action == "conflict"
    assert change.owner == f"ApplySet {set_id(other)} (no Konfig inventory here has it)"
    # with its inventory: named by its stack
    inventory_store.write_inventory(
        kube, other, inventory_of(other, objs).members, commit="", spec_digest=""
    )
    try:
        plan = plan_stack(kube, make_stack(), spec_of(configmap(ns)), None)
        (change,) = plan.changes
        assert (change.action, change.owner) == ("conflict", other.path)
        assert change.reason.startswith(f"owned by {other.path}: konfig will not take it over")
    finally:
        inventory_store.delete_inventory(kube, other)


def test_row_prior_and_plan_but_deleted_out_of_band_is_create(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, configmap(ns))
    kube.delete("v1", "ConfigMap", "cm", ns, uid=None, propagation="Background")
    plan = plan_stack(kube, stack, spec_of(configmap(ns)), inventory_of(stack, objs))
    (change,) = plan.changes
    assert change.action == "create"
    assert "drift" in change.reason


def test_row_all_three_unchanged_then_update_after_out_of_band_edit(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, configmap(ns), deployment(ns), service(ns))
    prior = inventory_of(stack, objs)
    spec = spec_of(configmap(ns), deployment(ns), service(ns))
    plan = plan_stack(kube, stack, spec, prior)
    assert set(actions(plan).values()) == {"unchanged"}
    assert all(c.reason == "matches the cluster" for c in plan.changes)

    # someone scales the Deployment by hand: the plan brings it back
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
    }
    patch["spec"] = {"replicas": 3}
    kube.apply(patch, dry_run=False, field_manager="kubectl-edit", force=True)
    plan = plan_stack(kube, stack, spec, prior)
    change = by_id(plan)[f"apps/v1:Deployment:{ns}:web"]
    assert change.action == "update"
    assert [(f.path, f.before, f.after) for f in change.fields] == [("spec.replicas", 3, 1)]
    assert "-  replicas: 3" in change.diff and "+  replicas: 1" in change.diff
    assert plan.counts()["update"] == 1 and plan.counts()["unchanged"] == 2


def test_row_prior_and_live_not_planned_is_delete(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, configmap(ns), configmap(ns, "old"))
    plan = plan_stack(kube, stack, spec_of(configmap(ns)), inventory_of(stack, objs))
    assert actions(plan) == {
        f"v1:ConfigMap:{ns}:cm": "unchanged",
        f"v1:ConfigMap:{ns}:old": "delete",
    }
    delete = by_id(plan)[f"v1:ConfigMap:{ns}:old"]
    assert delete.live is not None and delete.desired is None
    assert delete.diff.startswith(f"--- live/v1:ConfigMap:{ns}:old")


def test_row_prior_only_already_gone_is_dropped(kube: Kube, ns: str) -> None:
    stack = make_stack()
    gone = f"v1:ConfigMap:{ns}:vanished"
    plan = plan_stack(kube, stack, spec_of(), inventory_of(stack, [], ids=[gone]))
    (change,) = plan.changes
    assert change.action == "unchanged"
    assert "dropped from the inventory" in change.reason
    assert not plan.has_changes


def test_prior_member_no_longer_owned_is_not_deleted(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, configmap(ns, "mine"))
    # the object was re-created by someone else (other UID, no membership label)
    kube.delete("v1", "ConfigMap", "mine", ns, uid=None, propagation="Background")
    kube.apply(configmap(ns, "mine"), dry_run=False, field_manager="other")
    plan = plan_stack(kube, stack, spec_of(), inventory_of(stack, objs))
    (change,) = plan.changes
    assert change.action == "unchanged" and "left alone" in change.reason


def test_deleted_stack_is_all_deletes(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, configmap(ns), deployment(ns))
    plan = plan_stack(kube, stack, None, inventory_of(stack, objs), deleted=True)
    assert set(actions(plan).values()) == {"delete"}
    assert all("stack was deleted" in c.reason for c in plan.changes)
    assert plan.deleted and plan.spec_digest is None and plan.prior_commit == "c0ffee"


# --- deferred validation, replace ---------------------------------------------------------


def test_crd_and_its_custom_resources_in_one_plan(kube: Kube, ns: str) -> None:
    group = f"{unique('g')}.konfig.test"
    widget = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": ns},
        "spec": {"size": 3},
    }
    spec = spec_of(crd(group, "Widget", "widgets"), widget)
    plan = plan_stack(kube, make_stack(), spec, None)
    changes = by_id(plan)
    crd_change = changes[f"apiextensions.k8s.io/v1:CustomResourceDefinition:widgets.{group}"]
    cr_change = changes[f"{group}/v1:Widget:{ns}:w1"]
    assert (crd_change.action, crd_change.validated) == ("create", True)
    assert (cr_change.action, cr_change.validated) == ("create", False)
    assert "validated at apply" in cr_change.reason and f"widgets.{group}" in cr_change.reason


def test_unknown_kind_without_its_crd_is_a_clear_error(kube: Kube, ns: str) -> None:
    thing = {
        "apiVersion": "nope.konfig.test/v1",
        "kind": "Thing",
        "metadata": {"name": "t", "namespace": ns},
    }
    with pytest.raises(PlanError, match=r"no resource of kind Thing in nope.konfig.test/v1"):
        plan_stack(kube, make_stack(), spec_of(thing), None)


def test_crd_created_mid_session_is_found_after_discovery_refresh(
    kube: Kube, ns: str, cluster: Cluster
) -> None:
    group = f"{unique('g')}.konfig.test"
    assert not kube.has_kind(f"{group}/v1", "Gadget")  # this client read the group: absent
    kube.apply(crd(group, "Gadget", "gadgets"), dry_run=False)

    def established() -> bool:
        live = kube.get(
            "apiextensions.k8s.io/v1", "CustomResourceDefinition", f"gadgets.{group}", None
        )
        conds = ((live or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conds)

    wait_for(established, "the CRD to be established")

    # The API server serves the new group version a moment after Established (its
    # discovery is updated asynchronously): wait for that with a client of its own, so
    # that the client under test has not seen it yet and must read its discovery again.
    def served() -> bool:
        with connect(KubeTarget(str(cluster.kubeconfig), cluster.admin_context)) as fresh:
            return fresh.has_kind(f"{group}/v1", "Gadget")

    wait_for(served, "the API server to serve the new kind")
    gadget = {
        "apiVersion": f"{group}/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": ns},
    }
    plan = plan_stack(kube, make_stack(), spec_of(gadget), None)
    (change,) = plan.changes
    assert (change.action, change.validated) == ("create", True)


def test_namespace_and_its_objects_in_one_plan(kube: Kube) -> None:
    fresh = unique("p6new")
    spec = spec_of(namespace(fresh), configmap(fresh), deployment(fresh))
    plan = plan_stack(kube, make_stack(), spec, None)
    changes = by_id(plan)
    assert (
        changes[f"v1:Namespace:{fresh}"].action,
        changes[f"v1:Namespace:{fresh}"].validated,
    ) == (
        "create",
        True,
    )
    for rid in (f"v1:ConfigMap:{fresh}:cm", f"apps/v1:Deployment:{fresh}:web"):
        assert (changes[rid].action, changes[rid].validated) == ("create", False)
        assert f"Namespace {fresh} is created by this plan" in changes[rid].reason


def test_missing_namespace_not_in_the_plan_is_an_error(kube: Kube) -> None:
    with pytest.raises(PlanError, match="not found"):
        plan_stack(kube, make_stack(), spec_of(configmap(unique("p6none"))), None)


def test_immutable_job_template_is_replace(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, job(ns))
    plan = plan_stack(
        kube, stack, spec_of(job(ns, image="busybox:1.37")), inventory_of(stack, objs)
    )
    (change,) = plan.changes
    assert change.action == "replace"
    assert "immutable" in change.reason and "spec.template" in change.reason
    assert any(f.after == "busybox:1.37" for f in change.fields)


def test_immutable_service_cluster_ip_is_replace(kube: Kube, ns: str) -> None:
    stack = make_stack()
    (live,) = apply_as_konfig(kube, stack, service(ns))
    current = live["spec"]["clusterIP"]
    other = current.rsplit(".", 1)[0] + "." + str((int(current.rsplit(".", 1)[1]) + 7) % 250 + 2)
    plan = plan_stack(
        kube, stack, spec_of(service(ns, cluster_ip=other)), inventory_of(stack, [live])
    )
    (change,) = plan.changes
    assert change.action == "replace" and "spec.clusterIP" in change.reason


# --- secrets, no writes ---------------------------------------------------------------


def test_secret_change_is_masked(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, secret(ns, password="old-canary-1"))
    plan = plan_stack(
        kube, stack, spec_of(secret(ns, password="new-canary-2")), inventory_of(stack, objs)
    )
    (change,) = plan.changes
    assert change.action == "update"
    assert [(f.path, f.before, f.after) for f in change.fields] == [
        ("data.password", MASK_BEFORE, MASK_AFTER)
    ]
    text = json.dumps(change.to_dict())
    for value in ("old-canary-1", "new-canary-2"):
        assert value not in text
        assert base64.b64encode(value.encode()).decode() not in text


def test_plan_never_writes(kube: Kube, ns: str) -> None:
    stack = make_stack()
    group = f"{unique('g')}.konfig.test"
    fresh = unique("p6new")
    objs = apply_as_konfig(
        kube, stack, configmap(ns), deployment(ns), job(ns), configmap(ns, "old")
    )
    kube.apply(
        {**configmap(ns), "data": {"k": "edited"}}, dry_run=False, field_manager="x", force=True
    )
    planned = [
        configmap(ns),  # update
        deployment(ns, image="nginx:1.28"),  # update
        job(ns, image="busybox:1.37"),  # replace
        secret(ns, password="pw"),  # create
        namespace(fresh),  # create
        configmap(fresh),  # create (validated at apply)
        crd(group, "Widget", "widgets"),  # create
        {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": ns}},
    ]  # and configmap "old": delete
    refs = [
        (m["apiVersion"], m["kind"], m["metadata"]["name"], m["metadata"].get("namespace"))
        for m in [*planned, configmap(ns, "old")]
    ] + [("v1", "ConfigMap", inv.inventory_name(stack.path), inv.NAMESPACE)]
    before = snapshot(kube, refs)
    plan = plan_stack(kube, stack, spec_of(*planned), inventory_of(stack, objs))
    assert plan.counts() == {
        "create": 5, "update": 2, "replace": 1, "delete": 1, "unchanged": 0, "conflict": 0
    }  # fmt: skip
    assert snapshot(kube, refs) == before
    assert not kube.has_kind(f"{group}/v1", "Widget")
    assert kube.get("v1", "Namespace", fresh, None) is None


# --- oracle: kubectl diff --server-side -------------------------------------------------


def _kubectl_diff_changed(cluster: Cluster, manifests: list[dict[str, Any]]) -> set[str]:
    """The objects `kubectl diff --server-side` reports, as Spec ids."""
    res = subprocess.run(
        [
            "kubectl",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--context={cluster.admin_context}",
            "diff",
            "--server-side",
            "--field-manager=konfig",
            "--force-conflicts",
            "-f",
            "-",
        ],
        input=yaml.safe_dump_all(manifests),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode in (0, 1), res.stderr
    changed: set[str] = set()
    for line in res.stdout.splitlines():
        if line.startswith("diff -u -N "):
            # .../LIVE-123/apps.v1.Deployment.ns.name  (core group: v1.ConfigMap.ns.name)
            live_path = line.split()[3]
            changed.add(live_path.rsplit("/", 1)[1])
    return changed


def _kubectl_name(change: Any) -> str:
    group, _, version = change.api_version.rpartition("/")
    parts = [group, version] if group else [version]
    return ".".join(
        [*parts, change.kind, *([change.namespace] if change.namespace else []), change.name]
    )


def test_oracle_changed_set_equals_kubectl_diff(cluster: Cluster, kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(
        kube,
        stack,
        configmap(ns, "same"),
        configmap(ns, "edited"),
        deployment(ns, "web"),
        deployment(ns, "api"),
        service(ns),
    )
    # out-of-band edit of one object, and a changed desired state for another
    kube.apply(
        {**configmap(ns, "edited"), "data": {"k": "by-hand"}},
        dry_run=False,
        field_manager="x",
        force=True,
    )
    planned = [
        configmap(ns, "same"),
        configmap(ns, "edited"),
        deployment(ns, "web"),
        deployment(ns, "api", image="nginx:1.28"),
        service(ns),
        configmap(ns, "brand-new"),
        secret(ns, password="pw"),
    ]
    plan = plan_stack(kube, stack, spec_of(*planned), inventory_of(stack, objs))
    ours = {_kubectl_name(c) for c in plan.changes if c.action in ("create", "update", "replace")}
    desired = [c.desired for c in plan.changes if c.desired is not None]
    theirs = _kubectl_diff_changed(cluster, desired)
    assert ours == theirs
    assert len(ours) == 4  # edited, api, brand-new, the Secret


def test_many_objects_of_one_kind_are_read_with_one_list(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, *(configmap(ns, f"c{i}") for i in range(4)))
    kube.apply({**configmap(ns, "c1"), "data": {"k": "by-hand"}}, dry_run=False, field_manager="x")
    kube.apply(configmap(ns, "foreign"), dry_run=False, field_manager="other")  # no label yet
    planned = [configmap(ns, f"c{i}") for i in range(4)] + [
        configmap(ns, "foreign"),
        configmap(ns, "new"),
    ]
    plan = plan_stack(kube, stack, spec_of(*planned), inventory_of(stack, objs))
    assert actions(plan) == {
        f"v1:ConfigMap:{ns}:c0": "unchanged",
        f"v1:ConfigMap:{ns}:c1": "update",
        f"v1:ConfigMap:{ns}:c2": "unchanged",
        f"v1:ConfigMap:{ns}:c3": "unchanged",
        f"v1:ConfigMap:{ns}:foreign": "conflict",  # nobody's: not adopted unasked
        f"v1:ConfigMap:{ns}:new": "create",
    }
    assert [f.path for f in by_id(plan)[f"v1:ConfigMap:{ns}:c1"].fields] == ["data.k"]
