"""The apply engine: pure checks, then end to end against the real control plane."""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any

import pytest
from fixtures.cluster import Cluster
from kubeutil import configmap, deployment, make_stack, namespace, service, spec_of, unique

from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.applier import ApplyError, apply_stack, check_plan
from konfig.engine.destroyer import destroy_stack
from konfig.engine.diff import FieldChange
from konfig.engine.kube import Kube
from konfig.engine.plan import Change, StackPlan, plan_differences
from konfig.engine.planner import plan_stack
from konfig.engine.stackrun import ApplyOptions, Event
from konfig.repo.layout import Stack
from konfig.spec import Spec, spec_from_items

FAST = ApplyOptions(timeout=60, poll=0.2, commit="c1")


# --- pure ------------------------------------------------------------------------------


def _change(
    rid: str, action: str, *, desired: dict[str, Any] | None = None, reason: str = ""
) -> Change:
    api_version, kind, *rest = rid.split(":")
    ns, name = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
    return Change(
        id=rid,
        api_version=api_version,
        kind=kind,
        namespace=ns,
        name=name,
        action=action,  # type: ignore[arg-type]
        reason=reason,
        validated=True,
        desired=desired
        or {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": ns}},
        live=None,
        fields=(FieldChange("data.k", None, "v"),) if action != "unchanged" else (),
        diff="",
    )


def _plan(*changes: Change, digest: str = "d1") -> StackPlan:
    return StackPlan("appops/p/dev", "admin", False, digest, None, None, tuple(changes))


def test_check_plan_levels_follow_depends_on() -> None:
    spec = spec_from_items(
        [
            {"attributes": namespace("n1")},
            {"attributes": configmap("n1", "a")},
            {"attributes": configmap("n1", "b"), "dependsOn": ["v1:ConfigMap:n1:a"]},
        ]
    )
    plan = _plan(*(_change(r.id, "create", desired=r.attributes) for r in spec.resources))
    levels, graph = check_plan(plan, spec, ApplyOptions())
    assert levels == [["v1:Namespace:n1"], ["v1:ConfigMap:n1:a"], ["v1:ConfigMap:n1:b"]]
    assert graph.has_edge("v1:ConfigMap:n1:a", "v1:ConfigMap:n1:b")


def test_check_plan_rejects_cycles_before_any_write() -> None:
    spec = spec_from_items(
        [
            {"attributes": configmap("n1", "a"), "dependsOn": ["v1:ConfigMap:n1:b"]},
            {"attributes": configmap("n1", "b"), "dependsOn": ["v1:ConfigMap:n1:a"]},
        ]
    )
    plan = _plan(*(_change(r.id, "create", desired=r.attributes) for r in spec.resources))
    with pytest.raises(ApplyError, match="dependency cycle"):
        check_plan(plan, spec, ApplyOptions())


def test_replace_needs_an_opt_in_and_names_the_field() -> None:
    spec = spec_of(deployment("n1"))
    reason = "immutable field changed (spec.selector): apply must delete and re-create it"
    rid = spec.resources[0].id
    plan = _plan(_change(rid, "replace", desired=spec.resources[0].attributes, reason=reason))
    with pytest.raises(ApplyError, match=r"spec\.selector") as err:
        check_plan(plan, spec, ApplyOptions())
    assert "replaceOnImmutable" in str(err.value)
    check_plan(plan, spec, ApplyOptions(replace_on_immutable=True))
    annotated = dict(spec.resources[0].attributes)
    annotated["metadata"] = {
        **annotated["metadata"],
        "annotations": {"konfig.io/replace-on-immutable": "true"},
    }
    check_plan(
        _plan(_change(rid, "replace", desired=annotated, reason=reason)), spec, ApplyOptions()
    )


def test_plan_differences() -> None:
    plan = _plan(_change("v1:ConfigMap:n:a", "create"), _change("v1:ConfigMap:n:b", "unchanged"))
    saved = {"status": "ok", "specDigest": "d1", "changes": [c.to_dict() for c in plan.changes]}
    assert plan_differences(saved, plan) == []
    # round trip through JSON keeps it equal
    import json

    assert plan_differences(json.loads(json.dumps(saved)), plan) == []
    changed = _plan(
        _change("v1:ConfigMap:n:a", "update"), _change("v1:ConfigMap:n:c", "create"), digest="d2"
    )
    problems = plan_differences(saved, changed)
    assert any("spec digest" in p for p in problems)
    assert "v1:ConfigMap:n:a: previewed as create, now update" in problems
    assert "v1:ConfigMap:n:b: previewed as unchanged, no longer in the plan" in problems
    assert "v1:ConfigMap:n:c: now create, not in the preview" in problems
    assert plan_differences({"status": "error"}, plan) == [
        "the saved preview of appops/p/dev has status 'error'"
    ]


# --- against the control plane ------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self.lock:
            self.events.append(event)


def run_apply(kube: Kube, stack: Stack, spec: Spec, options: ApplyOptions = FAST, emit: Any = None):  # type: ignore[no-untyped-def]
    prior = inventory_store.read_inventory(kube, stack)
    plan = plan_stack(kube, stack, spec, prior)
    return apply_stack(kube, plan, spec, prior, options, emit or Recorder())


def run_destroy(kube: Kube, stack: Stack, options: ApplyOptions = FAST):  # type: ignore[no-untyped-def]
    prior = inventory_store.read_inventory(kube, stack)
    plan = plan_stack(kube, stack, None, prior, deleted=True)
    return destroy_stack(kube, plan, prior, options, Recorder())


def outcomes(result: Any) -> dict[str, str]:
    return {o.id: o.outcome for o in result.objects}


@pytest.mark.cluster
def test_end_to_end_apply_change_prune_destroy(kube: Kube, cluster: Cluster) -> None:
    stack = make_stack()
    ns = unique("p7e2e")
    ids = {
        "ns": f"v1:Namespace:{ns}",
        "deploy": f"apps/v1:Deployment:{ns}:web",
        "svc": f"v1:Service:{ns}:web",
        "cm": f"v1:ConfigMap:{ns}:cfg",
        "cm2": f"v1:ConfigMap:{ns}:extra",
    }
    spec1 = spec_of(namespace(ns), deployment(ns), service(ns), configmap(ns, "cfg", k="v1"))
    first = run_apply(kube, stack, spec1)
    assert first.ok, first.error
    assert outcomes(first) == {i: "created" for k, i in ids.items() if k != "cm2"}
    live = kube.get("apps/v1", "Deployment", "web", ns)
    assert live is not None
    assert live["status"].get("availableReplicas") == 1  # waited for health (kwok nodes)
    stored = inventory_store.read_inventory(kube, stack)
    assert stored is not None
    assert stored.ids() == {ids["ns"], ids["deploy"], ids["svc"], ids["cm"]}
    assert all(m.uid for m in stored.members)
    assert (stored.commit, stored.spec_digest) == ("c1", spec1.digest())
    set_id = inv.applyset_id(inv.inventory_name(stack))
    assert live["metadata"]["labels"][inv.LABEL_PART_OF] == set_id

    # kubectl sees the members through the ApplySet label, and the parent's id label
    listed = cluster.kubectl(
        "get",
        "deployments,services,configmaps",
        "-A",
        "-l",
        f"{inv.LABEL_PART_OF}={set_id}",
        "-o",
        "jsonpath={range .items[*]}{.kind}/{.metadata.name} {end}",
    ).stdout.split()
    assert sorted(listed) == ["ConfigMap/cfg", "Deployment/web", "Service/web"]
    parent = cluster.kubectl(
        "get", "configmap", "-n", "konfig-system", "-l", f"{inv.LABEL_ID}={set_id}", "-o", "name"
    ).stdout.split()
    assert parent == [f"configmap/{inv.inventory_name(stack)}"]

    # someone else's ConfigMap in the same namespace
    kube.apply(configmap(ns, "theirs"), dry_run=False, field_manager="someone-else")

    # update cfg, add extra, remove the Service
    spec2 = spec_of(
        namespace(ns), deployment(ns), configmap(ns, "cfg", k="v2"), configmap(ns, "extra")
    )
    second = run_apply(kube, stack, spec2, ApplyOptions(timeout=60, poll=0.2, commit="c2"))
    assert second.ok, second.error
    got = outcomes(second)
    assert got[ids["cm"]] == "updated"
    assert got[ids["cm2"]] == "created"
    assert got[ids["svc"]] == "deleted"
    assert got[ids["deploy"]] == "unchanged"
    assert kube.get("v1", "Service", "web", ns) is None
    assert (kube.get("v1", "ConfigMap", "cfg", ns) or {})["data"] == {"k": "v2"}
    theirs = kube.get("v1", "ConfigMap", "theirs", ns)
    assert theirs is not None and inv.LABEL_PART_OF not in (theirs["metadata"].get("labels") or {})
    stored = inventory_store.read_inventory(kube, stack)
    assert stored is not None
    assert stored.ids() == {ids["ns"], ids["deploy"], ids["cm"], ids["cm2"]}
    assert stored.commit == "c2"

    # destroy: the namespace still holds someone else's object, so it stays (and its inventory)
    blocked = run_destroy(kube, stack)
    assert not blocked.ok
    kept = {o.id: o for o in blocked.objects}[ids["ns"]]
    assert kept.outcome == "kept" and "ConfigMap/theirs" in kept.message
    assert kube.get("apps/v1", "Deployment", "web", ns) is None
    left = inventory_store.read_inventory(kube, stack)
    assert left is not None and left.ids() == {ids["ns"]}

    kube.delete("v1", "ConfigMap", "theirs", ns, uid=None)
    done = run_destroy(kube, stack)
    assert done.ok, done.error
    assert outcomes(done) == {ids["ns"]: "deleted"}
    assert kube.get("v1", "Namespace", ns, None) is None
    assert inventory_store.read_inventory(kube, stack) is None


@pytest.mark.cluster
def test_immutable_field_replaced_only_with_opt_in(kube: Kube) -> None:
    stack = make_stack()
    ns = unique("p7imm")
    kube.apply(namespace(ns), dry_run=False)
    assert run_apply(kube, stack, spec_of(deployment(ns, "api"))).ok
    before = kube.get("apps/v1", "Deployment", "api", ns)
    assert before is not None
    # spec.selector of a Deployment is immutable
    moved = deployment(ns, "api")
    labels = {"app": "api", "track": "stable"}
    moved["spec"]["selector"]["matchLabels"] = labels
    moved["spec"]["template"]["metadata"]["labels"] = labels
    with pytest.raises(ApplyError, match=r"spec\.selector"):
        run_apply(kube, stack, spec_of(moved))
    still = kube.get("apps/v1", "Deployment", "api", ns)
    assert still is not None and still["metadata"]["uid"] == before["metadata"]["uid"]

    options = ApplyOptions(timeout=60, poll=0.2, replace_on_immutable=True)
    result = run_apply(kube, stack, spec_of(moved), options)
    assert result.ok, result.error
    assert outcomes(result) == {f"apps/v1:Deployment:{ns}:api": "replaced"}
    after = kube.get("apps/v1", "Deployment", "api", ns)
    assert after is not None and after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["spec"]["selector"]["matchLabels"] == labels
    stored = inventory_store.read_inventory(kube, stack)
    assert stored is not None and stored.members[0].uid == after["metadata"]["uid"]
    assert run_destroy(kube, stack).ok
    kube.delete("v1", "Namespace", ns, None, uid=None)


VAP = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["configmaps"]
  validations:
    - expression: "object.metadata.name != 'denied'"
      message: "configmaps named denied are not allowed here"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {name}}}
spec:
  policyName: {name}
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {{kubernetes.io/metadata.name: {ns}}}
"""


@pytest.mark.cluster
def test_admission_denial_fails_object_and_dependents_only(kube: Kube, cluster: Cluster) -> None:
    stack = make_stack()
    ns = unique("p7vap")
    denied = configmap(ns, "denied")
    dependent = configmap(ns, "needs-denied")
    grandchild = configmap(ns, "needs-needs-denied")
    independent = configmap(ns, "free")
    # the Namespace exists before the stack: the stack opts in to adopting it
    adopt = {"konfig.io/adopt": "true"}
    spec = spec_from_items(
        [
            {"attributes": {**namespace(ns), "metadata": {"name": ns, "annotations": adopt}}},
            {"attributes": denied},
            {"attributes": dependent, "dependsOn": [f"v1:ConfigMap:{ns}:denied"]},
            {"attributes": grandchild, "dependsOn": [f"v1:ConfigMap:{ns}:needs-denied"]},
            {"attributes": independent},
        ]
    )
    kube.apply(namespace(ns), dry_run=False)
    prior = inventory_store.read_inventory(kube, stack)
    plan = plan_stack(kube, stack, spec, prior)  # planned before the policy exists
    name = unique("p7deny")
    cluster.kubectl("apply", "-f", "-", input=VAP.format(name=name, ns=ns))
    try:
        # wait until the policy is in force
        deadline = time.monotonic() + 30
        while True:
            try:
                kube.apply(denied, dry_run=True)
            except Exception as exc:
                assert "not allowed" in str(exc)
                break
            assert time.monotonic() < deadline, "the admission policy never took effect"
            time.sleep(0.5)
        result = apply_stack(kube, plan, spec, prior, FAST, Recorder())
    finally:
        cluster.kubectl(
            "delete",
            "validatingadmissionpolicybinding,validatingadmissionpolicy",
            name,
            check=False,
        )
    assert not result.ok
    got = {o.id: o for o in result.objects}
    assert got[f"v1:ConfigMap:{ns}:denied"].outcome == "failed"
    assert (
        "configmaps named denied are not allowed here" in got[f"v1:ConfigMap:{ns}:denied"].message
    )
    assert got[f"v1:ConfigMap:{ns}:needs-denied"].outcome == "skipped"
    assert got[f"v1:ConfigMap:{ns}:needs-needs-denied"].outcome == "skipped"
    assert "depends on v1:ConfigMap" in got[f"v1:ConfigMap:{ns}:needs-denied"].message
    assert got[f"v1:ConfigMap:{ns}:free"].outcome == "created"
    assert got[f"v1:Namespace:{ns}"].outcome == "updated"  # adopted: our label added
    # the inventory lists exactly what exists; the commit is not recorded for a failed apply
    stored = inventory_store.read_inventory(kube, stack)
    assert stored is not None
    assert stored.ids() == {f"v1:Namespace:{ns}", f"v1:ConfigMap:{ns}:free"}
    assert stored.commit == ""
    assert kube.get("v1", "ConfigMap", "denied", ns) is None
    # with the policy gone (once the API server has noticed) a re-run converges
    deadline = time.monotonic() + 30
    while True:
        try:
            kube.apply(denied, dry_run=True)
            break
        except Exception:
            assert time.monotonic() < deadline, "the admission policy never went away"
            time.sleep(0.5)
    again = run_apply(kube, stack, spec)
    assert again.ok, again.error
    stored = inventory_store.read_inventory(kube, stack)
    assert stored is not None and len(stored.members) == 5 and stored.commit == "c1"
    assert run_destroy(kube, stack).ok


@pytest.mark.cluster
def test_health_timeout_names_object_and_condition(kube: Kube) -> None:
    stack = make_stack()
    ns = unique("p7lb")
    lb = service(ns, "edge")
    lb["spec"]["type"] = "LoadBalancer"
    after = configmap(ns, "after")
    spec = spec_from_items(
        [
            {"attributes": namespace(ns)},
            {"attributes": lb},
            {"attributes": after, "dependsOn": [f"v1:Service:{ns}:edge"]},
        ]
    )
    events = Recorder()
    result = run_apply(kube, stack, spec, ApplyOptions(timeout=2, poll=0.2), events)
    assert not result.ok
    # said while it waits, not only at the timeout
    waits = [e.message for e in events.events if e.kind == "wait"]
    assert any("load balancer controller" in m for m in waits), waits
    got = {o.id: o for o in result.objects}
    message = got[f"v1:Service:{ns}:edge"].message
    assert "timed out after 2s waiting for Service edge in namespace " + ns in message
    assert "status.loadBalancer.ingress" in message
    # why it may wait forever: this cluster has no load balancer controller
    assert "a cluster without one never does" in message
    assert got[f"v1:ConfigMap:{ns}:after"].outcome == "skipped"
    stored = inventory_store.read_inventory(kube, stack)
    assert stored is not None and f"v1:Service:{ns}:edge" in stored.ids()
    assert run_destroy(kube, stack).ok
    assert kube.get("v1", "Namespace", ns, None) is None


@pytest.mark.cluster
def test_api_server_stopped_mid_apply_then_rerun_converges(kube: Kube, cluster: Cluster) -> None:
    stack = make_stack()
    ns = unique("p7down")
    lb = service(ns, "edge")
    lb["spec"]["type"] = "LoadBalancer"  # never healthy here: the apply is waiting on it
    spec1 = spec_of(namespace(ns), configmap(ns, "a"), lb)
    stopped = threading.Event()
    recorder = Recorder()

    def emit(event: Event) -> None:
        recorder(event)
        if event.kind == "wait" and not stopped.is_set():
            stopped.set()
            cluster.stop_apiserver()

    try:
        result = run_apply(kube, stack, spec1, ApplyOptions(timeout=120, poll=0.2), emit)
    finally:
        if stopped.is_set():
            cluster.start_apiserver()
    assert stopped.is_set()
    assert not result.ok
    assert result.error is not None and "cannot reach the Kubernetes API server" in result.error
    assert "re-run" in result.error
    # the inventory written before applying holds every object that may exist
    stored = inventory_store.read_inventory(kube, stack)
    assert stored is not None
    assert stored.ids() == {f"v1:Namespace:{ns}", f"v1:ConfigMap:{ns}:a", f"v1:Service:{ns}:edge"}
    assert stored.commit == ""

    # the stack drops the load balancer; the re-run prunes it: no orphan
    spec2 = spec_of(namespace(ns), configmap(ns, "a"))
    again = run_apply(kube, stack, spec2)
    assert again.ok, again.error
    assert outcomes(again)[f"v1:Service:{ns}:edge"] == "deleted"
    assert kube.get("v1", "Service", "edge", ns) is None
    stored = inventory_store.read_inventory(kube, stack)
    assert stored is not None and stored.ids() == {f"v1:Namespace:{ns}", f"v1:ConfigMap:{ns}:a"}
    assert stored.commit == "c1"
    set_id = inv.applyset_id(inv.inventory_name(stack))
    orphans = subprocess.run(
        [
            "kubectl",
            f"--kubeconfig={cluster.kubeconfig}",
            "get",
            "all,configmaps",
            "-n",
            ns,
            "-l",
            f"{inv.LABEL_PART_OF}={set_id}",
            "-o",
            "name",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(orphans) == ["configmap/a"]
    assert run_destroy(kube, stack).ok


@pytest.mark.cluster
def test_custom_resource_after_its_crd_in_one_apply(kube: Kube) -> None:
    from kubeutil import crd

    stack = make_stack()
    ns = unique("p7crd")
    group = f"{unique('g')}.konfig.test"
    definition = crd(group, "Gadget", "gadgets")
    gadget = {
        "apiVersion": f"{group}/v1",
        "kind": "Gadget",
        "metadata": {"name": "g1", "namespace": ns},
        "spec": {"size": 3},
    }
    spec = spec_of(definition, namespace(ns), gadget)
    rec = Recorder()
    result = run_apply(kube, stack, spec, emit=rec)
    assert result.ok, result.error
    assert set(outcomes(result).values()) == {"created"}
    live = kube.get(f"{group}/v1", "Gadget", "g1", ns)
    assert live is not None and live["spec"] == {"size": 3}
    # level 1: the CRD and the Namespace (waited for: Established); level 2: the Gadget
    seen = [(e.kind, e.result.id if e.result else e.message) for e in rec.events]
    crd_id = f"apiextensions.k8s.io/v1:CustomResourceDefinition:gadgets.{group}"
    gadget_id = f"{group}/v1:Gadget:{ns}:g1"
    assert seen.index(("level", "level 2/2: 1 object")) > seen.index(("object", crd_id))
    assert seen.index(("object", gadget_id)) > seen.index(("level", "level 2/2: 1 object"))

    # someone else's Gadget elsewhere: deleting the CRD would delete it too, so it is kept
    other_ns = unique("p7other")
    kube.apply(namespace(other_ns), dry_run=False)
    theirs = {**gadget, "metadata": {"name": "theirs", "namespace": other_ns}}
    kube.apply(theirs, dry_run=False, field_manager="someone-else")
    blocked = run_destroy(kube, stack)
    assert not blocked.ok
    kept = {o.id: o for o in blocked.objects}[crd_id]
    assert kept.outcome == "kept" and f"Gadget/theirs in {other_ns}" in kept.message
    assert kube.get(f"{group}/v1", "Gadget", "theirs", other_ns) is not None
    kube.delete("v1", "Namespace", other_ns, None, uid=None)
    deadline = time.monotonic() + 60
    while kube.get(f"{group}/v1", "Gadget", "theirs", other_ns) is not None:
        assert time.monotonic() < deadline, "the other namespace was never cleaned up"
        time.sleep(0.5)
    assert run_destroy(kube, stack).ok
    assert (
        kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"gadgets.{group}", None)
        is None
    )


@pytest.mark.cluster
def test_job_is_waited_for_until_complete(kube: Kube) -> None:
    from kubeutil import job

    stack = make_stack()
    ns = unique("p7job")
    after = configmap(ns, "after-migration")
    spec = spec_from_items(
        [
            {"attributes": namespace(ns)},
            {"attributes": job(ns, "migrate")},
            {"attributes": after, "dependsOn": [f"batch/v1:Job:{ns}:migrate"]},
        ]
    )
    rec = Recorder()
    result = run_apply(kube, stack, spec, emit=rec)
    assert result.ok, result.error
    live = kube.get("batch/v1", "Job", "migrate", ns)
    assert live is not None
    conditions = {c["type"]: c["status"] for c in live["status"].get("conditions", [])}
    assert conditions.get("Complete") == "True"
    seen = [(e.kind, e.result.id if e.result else e.message) for e in rec.events]
    # the dependent ConfigMap is applied only after the Job completed
    assert seen.index(("object", f"v1:ConfigMap:{ns}:after-migration")) > seen.index(
        ("object", f"batch/v1:Job:{ns}:migrate")
    )
    assert any(kind == "wait" and f"batch/v1:Job:{ns}:migrate" in msg for kind, msg in seen)
    assert run_destroy(kube, stack).ok


@pytest.mark.cluster
def test_namespace_with_another_owners_custom_resource_is_kept(kube: Kube) -> None:
    from kubeutil import crd

    group = f"{unique('g')}.konfig.test"
    definition = crd(group, "Widget", "widgets")
    kube.apply(definition, dry_run=False, field_manager="platform-team")
    ns = unique("p7keep")

    def widget(name: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": ns}
        return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": meta, "spec": {}}

    deadline = time.monotonic() + 30
    while not kube.has_kind(f"{group}/v1", "Widget"):
        assert time.monotonic() < deadline, "the CRD never became served"
        time.sleep(0.5)
    stack = make_stack()
    assert run_apply(kube, stack, spec_of(namespace(ns), widget("ours"))).ok
    kube.apply(widget("theirs"), dry_run=False, field_manager="someone-else")
    blocked = run_destroy(kube, stack)
    assert not blocked.ok
    got = {o.id: o for o in blocked.objects}
    assert got[f"{group}/v1:Widget:{ns}:ours"].outcome == "deleted"
    assert got[f"v1:Namespace:{ns}"].outcome == "kept"
    assert "Widget/theirs" in got[f"v1:Namespace:{ns}"].message
    assert kube.get("v1", "Namespace", ns, None) is not None
    kube.delete(f"{group}/v1", "Widget", "theirs", ns, uid=None)
    assert run_destroy(kube, stack).ok
    assert inventory_store.read_inventory(kube, stack) is None
    kube.delete(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", f"widgets.{group}", None, uid=None
    )
