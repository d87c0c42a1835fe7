"""Ignore rules against the real control plane: what preview shows (listed, not
counted) and what apply does (Flux's semantics: left out when another field manager
owns the field, kept live when only Konfig does), and the automatic HPA rule."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from kubeutil import deployment, make_stack, namespace, spec_of, unique

from konfig.engine import inventory_store
from konfig.engine.applier import apply_stack
from konfig.engine.kube import Kube
from konfig.engine.planner import plan_stack
from konfig.engine.stackrun import ApplyOptions
from konfig.repo.layout import Stack
from konfig.spec import Spec

pytestmark = pytest.mark.cluster

FAST = ApplyOptions(timeout=60, poll=0.2, commit="c1")
REPLICAS = {"paths": ["/spec/replicas"], "reason": "the team scales by hand",
            "selector": {"group": "apps", "kind": "Deployment"}}  # fmt: skip


@pytest.fixture
def ns(kube: Kube) -> str:
    name = unique("igns")
    kube.apply(namespace(name), dry_run=False)
    return name


def with_rules(stack: Stack, *rules: dict[str, Any]) -> Stack:
    return replace(stack, raw={**stack.raw, "ignore": list(rules)})


def apply(kube: Kube, stack: Stack, spec: Spec) -> None:
    prior = inventory_store.read_inventory(kube, stack)
    plan = plan_stack(kube, stack, spec, prior)
    result = apply_stack(kube, plan, spec, prior, FAST)
    assert result.ok, result.message


def replicas_of(kube: Kube, ns: str) -> int:
    live = kube.get("apps/v1", "Deployment", "web", ns)
    assert live is not None
    return int(live["spec"]["replicas"])


def managers_of_replicas(kube: Kube, ns: str) -> set[str]:
    live = kube.get("apps/v1", "Deployment", "web", ns)
    assert live is not None
    return {
        m["manager"]
        for m in live["metadata"]["managedFields"]
        if "f:replicas" in (m.get("fieldsV1") or {}).get("f:spec", {})
    }


def test_another_managers_field_is_listed_not_counted_and_left_out_by_apply(
    kube: Kube, ns: str
) -> None:
    stack = make_stack()
    apply(kube, stack, spec_of(deployment(ns)))
    # someone else scales it (their field manager takes spec.replicas)
    scale = {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "web", "namespace": ns}, "spec": {"replicas": 4}}  # fmt: skip
    kube.apply(scale, dry_run=False, field_manager="ops-team")
    assert managers_of_replicas(kube, ns) == {"ops-team"}

    plain = plan_stack(
        kube, stack, spec_of(deployment(ns)), inventory_store.read_inventory(kube, stack)
    )
    (change,) = plain.changes
    assert change.action == "update" and change.ignored == ()  # without a rule: 4 → 1

    ruled = with_rules(stack, REPLICAS)
    plan = plan_stack(
        kube, ruled, spec_of(deployment(ns)), inventory_store.read_inventory(kube, ruled)
    )
    (change,) = plan.changes
    assert change.action == "unchanged" and change.fields == ()
    (field,) = change.ignored
    assert field.to_dict() == {
        "path": "/spec/replicas", "live": 4, "declared": 1,
        "rule": f"{stack.path}/stack.yaml ignore[0]", "reason": "the team scales by hand",
        "applied": "left out",
    }  # fmt: skip
    assert not plan.has_changes
    apply(kube, ruled, spec_of(deployment(ns)))
    assert replicas_of(kube, ns) == 4
    assert managers_of_replicas(kube, ns) == {"ops-team"}


def test_a_field_only_konfig_owns_is_kept_live(kube: Kube, ns: str) -> None:
    stack = make_stack()
    three = deployment(ns)
    three["spec"]["replicas"] = 3
    apply(kube, stack, spec_of(three))
    ruled = with_rules(stack, REPLICAS)
    plan = plan_stack(
        kube, ruled, spec_of(deployment(ns)), inventory_store.read_inventory(kube, ruled)
    )
    (change,) = plan.changes
    assert change.action == "unchanged"
    assert [(f.live, f.declared, f.applied) for f in change.ignored] == [(3, 1, "kept live")]
    apply(kube, ruled, spec_of(deployment(ns)))
    assert replicas_of(kube, ns) == 3
    assert managers_of_replicas(kube, ns) == {"konfig"}


def test_an_hpa_in_the_stack_ignores_its_targets_replicas(kube: Kube, ns: str) -> None:
    stack = make_stack()
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "web-hpa", "namespace": ns},
           "spec": {"minReplicas": 1, "maxReplicas": 5,
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": "web"}}}  # fmt: skip
    apply(kube, stack, spec_of(deployment(ns), hpa))
    # the autoscaler's own manager scales the Deployment (as the HPA controller does)
    scale = {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "web", "namespace": ns}, "spec": {"replicas": 5}}  # fmt: skip
    kube.apply(scale, dry_run=False, field_manager="kube-controller-manager")
    plan = plan_stack(
        kube, stack, spec_of(deployment(ns), hpa), inventory_store.read_inventory(kube, stack)
    )
    change = next(c for c in plan.changes if c.kind == "Deployment")
    assert change.action == "unchanged"
    (field,) = change.ignored
    assert (field.rule, field.reason) == ("automatic", "scaled by HorizontalPodAutoscaler web-hpa")
    apply(kube, stack, spec_of(deployment(ns), hpa))
    assert replicas_of(kube, ns) == 5
    # without the HPA the stack sets its replicas again
    apply(kube, stack, spec_of(deployment(ns)))
    assert replicas_of(kube, ns) == 1


def test_a_sidecar_by_merge_key(kube: Kube, ns: str) -> None:
    stack = make_stack()
    with_sidecar = deployment(ns)
    containers = with_sidecar["spec"]["template"]["spec"]["containers"]
    containers.append({"name": "istio-proxy", "image": "busybox:1.36"})
    apply(kube, stack, spec_of(with_sidecar))  # as a mutating webhook leaves it: Konfig's
    rule = {"paths": ["/spec/template/spec/containers[name=istio-proxy]"],
            "reason": "injected by the mesh"}  # fmt: skip
    ruled = with_rules(stack, rule)
    plan = plan_stack(
        kube, ruled, spec_of(deployment(ns)), inventory_store.read_inventory(kube, ruled)
    )
    (change,) = plan.changes
    assert change.action == "unchanged", change.fields
    assert [(f.path, f.applied) for f in change.ignored] == [
        ("/spec/template/spec/containers[name=istio-proxy]", "kept live")
    ]
    apply(kube, ruled, spec_of(deployment(ns)))
    live = kube.get("apps/v1", "Deployment", "web", ns)
    assert live is not None
    names = [c["name"] for c in live["spec"]["template"]["spec"]["containers"]]
    assert names == ["web", "istio-proxy"]
