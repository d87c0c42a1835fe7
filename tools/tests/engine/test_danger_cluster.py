"""Danger classes on plans made against the real local control plane (hack/cluster):
the planner's real answers (dry-run, live objects) classified by engine.danger, the
cascade counts read from the cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubeutil import (
    apply_as_konfig,
    configmap,
    crd,
    deployment,
    inventory_of,
    make_stack,
    namespace,
    spec_of,
    unique,
    wait_for,
)

from konfig.engine.danger import assess
from konfig.engine.kube import Kube, KubeError
from konfig.engine.plan import Change, StackPlan
from konfig.engine.planner import plan_stack

pytestmark = pytest.mark.cluster


@pytest.fixture
def ns(kube: Kube) -> str:
    name = unique("dgns")
    kube.apply(namespace(name), dry_run=False)
    return name


def dangers(plan: StackPlan) -> dict[str, list[tuple[str, str]]]:
    return {c.id: [(d.name, d.reason) for d in c.dangers] for c in plan.changes if c.dangers}


def by_kind(plan: StackPlan, kind: str) -> Change:
    (found,) = [c for c in plan.changes if c.kind == kind]
    return found


def test_deleting_a_namespace_stack_is_destroy_and_cascade_with_the_live_count(
    kube: Kube,
) -> None:
    stack = make_stack()
    name = unique("dgcas")
    objs = apply_as_konfig(kube, stack, namespace(name))
    # three objects in it, one of them nobody's (all go with the Namespace)
    objs += apply_as_konfig(kube, stack, configmap(name, "a"), configmap(name, "b"))
    kube.apply(configmap(name, "someone-elses"), dry_run=False)
    plan = plan_stack(kube, stack, None, inventory_of(stack, objs), deleted=True)
    plan = assess(plan, version="1.33", reader=kube)
    change = by_kind(plan, "Namespace")
    assert [d.name for d in change.dangers] == ["destroy", "cascade"]
    assert change.dangers[0].reason == f"Namespace {name}: the stack was deleted"
    assert change.dangers[1].objects == 3
    assert "the 3 objects it holds" in change.dangers[1].reason
    assert plan.danger_counts()["destroy"] == 3 and plan.danger_counts()["cascade"] == 1


def test_deleting_a_crd_counts_its_custom_resources(kube: Kube, ns: str) -> None:
    stack = make_stack()
    group = f"{unique('dg')}.example.com"
    (definition,) = apply_as_konfig(kube, stack, crd(group, "Widget", "widgets"))
    wait_for(lambda: kube.namespaced_kinds() and ("Widget" in {k for _, k in
             kube.namespaced_kinds()}), "the CRD served")  # fmt: skip
    for i in range(2):
        widget = {"apiVersion": f"{group}/v1", "kind": "Widget",
                  "metadata": {"name": f"w{i}", "namespace": ns}, "spec": {}}  # fmt: skip
        wait_for(lambda w=widget: _applied(kube, w), "a Widget created")
    plan = plan_stack(kube, stack, spec_of(), inventory_of(stack, [definition]))
    plan = assess(plan, version="1.33", reader=kube)
    change = by_kind(plan, "CustomResourceDefinition")
    assert [(d.name, d.objects) for d in change.dangers] == [("destroy", None), ("cascade", 2)]
    assert "removed from the stack" in change.dangers[0].reason


def _applied(kube: Kube, obj: dict[str, Any]) -> bool:
    try:
        kube.apply(obj, dry_run=False)
    except KubeError:  # the kind may not be served yet: try again
        return False
    return True


def test_a_selector_change_is_replace_from_the_dry_run(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, deployment(ns))
    changed = deployment(ns)
    changed["spec"]["selector"]["matchLabels"]["tier"] = "front"
    changed["spec"]["template"]["metadata"]["labels"]["tier"] = "front"
    plan = assess(plan_stack(kube, stack, spec_of(changed), inventory_of(stack, objs)))
    change = by_kind(plan, "Deployment")
    assert change.action == "replace"
    names = [d.name for d in change.dangers]
    assert names == ["replace", "rollout"]
    assert "spec.selector" in change.dangers[0].reason


def test_rollout_capacity_and_a_mounted_configmap(kube: Kube, ns: str) -> None:
    stack = make_stack()
    web = deployment(ns)
    web["spec"]["template"]["spec"]["volumes"] = [{"name": "c", "configMap": {"name": "cm"}}]
    objs = apply_as_konfig(kube, stack, configmap(ns, "cm", k="1"), web)
    # the image changes and the replicas go to 0; the ConfigMap it mounts changes
    changed = copy.deepcopy(web)
    changed["spec"]["replicas"] = 0
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28.0"
    plan = assess(
        plan_stack(
            kube, stack, spec_of(configmap(ns, "cm", k="2"), changed), inventory_of(stack, objs)
        )
    )
    found = dangers(plan)
    assert [n for n, _ in found[f"apps/v1:Deployment:{ns}:web"]] == ["rollout", "capacity"]
    assert found[f"v1:ConfigMap:{ns}:cm"] == [
        ("rollout", "ConfigMap cm changed: mounted or referenced by Deployment/web")
    ]


def test_access_binding_to_cluster_admin_and_data_pvc_deleted(kube: Kube, ns: str) -> None:
    stack = make_stack()
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "data", "namespace": ns},
           "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}  # fmt: skip
    objs = apply_as_konfig(kube, stack, pvc)
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "ops", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "cluster-admin"},
               "subjects": [{"kind": "Group", "name": "ops",
                             "apiGroup": "rbac.authorization.k8s.io"}]}  # fmt: skip
    plan = assess(plan_stack(kube, stack, spec_of(binding), inventory_of(stack, objs)))
    found = dangers(plan)
    assert found[f"rbac.authorization.k8s.io/v1:RoleBinding:{ns}:ops"] == [
        ("access", "RoleBinding ops: binds cluster-admin")
    ]
    assert [n for n, _ in found[f"v1:PersistentVolumeClaim:{ns}:data"]] == ["destroy", "data"]


def test_deprecated_api_in_the_declared_version(kube: Kube, ns: str) -> None:
    endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                 "metadata": {"name": "legacy", "namespace": ns}, "subsets": []}  # fmt: skip
    plan = plan_stack(kube, make_stack(), spec_of(endpoints), None)
    assert by_kind(plan, "Endpoints").action == "create"
    assert assess(plan, version="1.31").changes[0].dangers == ()
    (d,) = assess(plan, version="1.33").changes[0].dangers
    assert d.name == "deprecated"
    assert d.reason == (
        "Endpoints legacy: v1 Endpoints is deprecated since Kubernetes 1.33; "
        "use discovery.k8s.io/v1 EndpointSlice"
    )


def test_a_rename_is_shown_as_a_rename(kube: Kube, ns: str) -> None:
    stack = make_stack()
    objs = apply_as_konfig(kube, stack, deployment(ns, "web"))
    renamed = deployment(ns, "frontend")
    renamed["metadata"]["annotations"] = {"konfig.io/previous-name": "web"}
    container = renamed["spec"]["template"]["spec"]["containers"][0]
    container.update(name="web", image="nginx:1.28.0")
    plan = assess(plan_stack(kube, stack, spec_of(renamed), inventory_of(stack, objs)))
    old = next(c for c in plan.changes if c.name == "web")
    new = next(c for c in plan.changes if c.name == "frontend")
    assert (old.action, new.action) == ("delete", "create")  # still a delete + create
    assert old.renamed_to == new.id and new.renamed_from == old.id
    for c in (old, new):
        assert (c.to_dict()["rename"]["from"], c.to_dict()["rename"]["to"]) == (old.id, new.id)
    # the new object compared with the old one: what the repository changed, no defaults
    assert {f.path: (f.before, f.after) for f in new.rename_fields} == {
        'metadata.annotations["konfig.io/previous-name"]': (None, "web"),
        "metadata.labels.app": ("web", "frontend"),
        "metadata.name": ("web", "frontend"),
        "spec.selector.matchLabels.app": ("web", "frontend"),
        "spec.template.metadata.labels.app": ("web", "frontend"),
        "spec.template.spec.containers[name=web].image": ("nginx:1.27.3", "nginx:1.28.0"),
    }  # fmt: skip
    assert old.dangers[0].reason.startswith("Deployment web: renamed to frontend")
