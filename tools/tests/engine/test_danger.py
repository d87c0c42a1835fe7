"""Danger classes on plain data: each class from a change as the planner makes it, the
deprecation data file, renames and the counts (the real control plane:
test_danger_cluster.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from konfig.engine import danger as dg
from konfig.engine.diff import compare
from konfig.engine.guards import DangerGuard, DangerPolicy, mark_unconfirmed, unconfirmed
from konfig.engine.plan import DANGER_CLASSES, Change, StackPlan
from konfig.errors import KonfigError
from konfig.ids import resource_id


def deployment(name: str = "web", image: str = "nginx:1.27", replicas: int = 2) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": name,
                            "image": image,
                            "envFrom": [{"configMapRef": {"name": "settings"}}],
                            "env": [
                                {
                                    "name": "PW",
                                    "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}},
                                }
                            ],
                        }
                    ],
                    "volumes": [{"name": "certs", "secret": {"secretName": "tls"}}],
                },
            },
        },
    }


def obj(api_version: str, kind: str, name: str, ns: str | None = "shop", **rest: Any) -> dict:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **rest}


def change(
    action: str,
    live: dict[str, Any] | None,
    desired: dict[str, Any] | None,
    *,
    reason: str = "",
    runtime: str = "Kubernetes",
) -> Change:
    some = desired if desired is not None else live
    assert some is not None
    meta = some["metadata"]
    rid = resource_id(some)
    comparison = compare(live, desired, name=rid)
    return Change(
        id=rid,
        api_version=some["apiVersion"],
        kind=some["kind"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        action=action,  # type: ignore[arg-type]
        reason=reason,
        validated=action != "delete",
        desired=desired,
        live=live,
        fields=comparison.fields,
        diff=comparison.diff,
        runtime=runtime,
    )


def plan_of(*changes: Change, deleted: bool = False) -> StackPlan:
    return StackPlan("appops/shop/prod", "prod", deleted, None, None, None, changes)


def classes(c: Change, **ctx: Any) -> list[str]:
    return [d.name for d in dg.classify(c, dg.Context(**ctx))]


def one(plan: StackPlan, rid_part: str) -> Change:
    (found,) = [c for c in plan.changes if rid_part in c.id]
    return found


# --- destroy --------------------------------------------------------------------------


def test_destroy_says_why_removed_deleted_or_renamed() -> None:
    cm = obj("v1", "ConfigMap", "old", data={"a": "1"})
    removed = dg.assess(plan_of(change("delete", cm, None)))
    (d,) = removed.changes[0].dangers
    assert (d.name, d.reason) == ("destroy", "ConfigMap old: removed from the stack")
    gone = dg.assess(plan_of(change("delete", cm, None), deleted=True))
    assert gone.changes[0].dangers[0].reason == "ConfigMap old: the stack was deleted"
    renamed_to = obj("v1", "ConfigMap", "new", data={"a": "1"})
    renamed_to["metadata"]["annotations"] = {dg.PREVIOUS_NAME_ANNOTATION: "old"}
    plan = dg.assess(plan_of(change("delete", cm, None), change("create", None, renamed_to)))
    assert one(plan, ":old").dangers[0].reason.startswith("ConfigMap old: renamed to new")
    assert one(plan, ":new").dangers == ()  # a create is no danger of itself


def test_a_rename_by_likeness_needs_90_percent_and_the_same_kind() -> None:
    old = deployment("web")
    new = deployment("web2")
    new["metadata"]["labels"] = old["metadata"]["labels"]
    new["spec"] = copy.deepcopy(old["spec"])
    assert dg.renames([change("delete", old, None), change("create", None, new)]) == {
        "apps/v1:Deployment:shop:web": "apps/v1:Deployment:shop:web2"
    }
    other = deployment("api", image="busybox:1", replicas=7)
    assert dg.similarity(old, other) < dg.RENAME_SIMILARITY
    assert dg.renames([change("delete", old, None), change("create", None, other)]) == {}
    # a ConfigMap with the same data is no rename of a Deployment
    cm = obj("v1", "ConfigMap", "web2", data={"a": "1"})
    assert dg.renames([change("delete", old, None), change("create", None, cm)]) == {}


def test_terraform_destroy_is_destroy_and_data() -> None:
    db = {"apiVersion": "cyrilgdn/postgresql", "kind": "postgresql_database",
          "metadata": {"name": "orders", "namespace": "shop"}}  # fmt: skip
    c = change("delete", db, None, runtime="Terraform")
    assert classes(c) == ["destroy", "data"]
    replaced = change("replace", db, db, runtime="Terraform")
    assert classes(replaced) == ["replace", "data"]


# --- replace --------------------------------------------------------------------------


def test_replace_from_the_dry_run_answer() -> None:
    job = obj("batch/v1", "Job", "migrate", spec={"template": {"spec": {}}})
    c = change("replace", job, job, reason="immutable field changed: spec.template")
    (d,) = dg.classify(c, dg.Context())
    assert d.reason == "Job migrate: immutable field changed: spec.template"


@pytest.mark.parametrize(
    ("live", "desired", "field"),
    [
        (deployment(), None, "spec.selector"),
        (
            obj("v1", "Service", "web", spec={"clusterIP": "10.0.0.1"}),
            obj("v1", "Service", "web", spec={"clusterIP": "10.0.0.2"}),
            "spec.clusterIP",
        ),
        (
            obj("v1", "PersistentVolumeClaim", "data", spec={"storageClassName": "fast"}),
            obj("v1", "PersistentVolumeClaim", "data", spec={"storageClassName": "slow"}),
            "spec.storageClassName",
        ),
        (
            obj("batch/v1", "Job", "m", spec={"template": {"spec": {"x": 1}}}),
            obj("batch/v1", "Job", "m", spec={"template": {"spec": {"x": 2}}}),
            "spec.template",
        ),
    ],
)
def test_replace_from_the_table_of_immutable_fields(
    live: dict[str, Any], desired: dict[str, Any] | None, field: str
) -> None:
    if desired is None:  # the Deployment: its selector changes
        desired = copy.deepcopy(live)
        desired["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "front"}}
    c = change("update", live, desired)
    found = [d for d in dg.classify(c, dg.Context()) if d.name == "replace"]
    assert len(found) == 1 and field in found[0].reason
    assert "replace" not in classes(change("update", live, live))


# --- rollout --------------------------------------------------------------------------


def test_rollout_on_a_pod_template_change() -> None:
    c = change("update", deployment(), deployment(image="nginx:1.28"))
    assert classes(c) == ["rollout"]
    scaled = change("update", deployment(), deployment(replicas=3))
    assert classes(scaled) == []


@pytest.mark.parametrize(("kind", "name"), [("ConfigMap", "settings"), ("Secret", "db"),
                                            ("Secret", "tls")])  # fmt: skip
def test_rollout_on_a_configmap_or_secret_a_workload_uses(kind: str, name: str) -> None:
    before = obj("v1", kind, name, data={"k": "1"})
    after = obj("v1", kind, name, data={"k": "2"})
    users = dg.workload_users([change("unchanged", deployment(), deployment())])
    c = change("update", before, after)
    (d,) = dg.classify(c, dg.Context(users=users))
    assert d.name == "rollout" and "Deployment/web" in d.reason
    unused = change("update", obj("v1", kind, "other", data={"k": "1"}),
                    obj("v1", kind, "other", data={"k": "2"}))  # fmt: skip
    assert classes(unused, users=users) == []


# --- capacity -------------------------------------------------------------------------


def test_capacity_replicas_to_zero_pdb_all_down_hpa_max_lowered() -> None:
    assert classes(change("update", deployment(), deployment(replicas=0))) == ["capacity"]
    pdb = obj("policy/v1", "PodDisruptionBudget", "web", spec={"maxUnavailable": "100%"})
    assert classes(change("create", None, pdb)) == ["capacity"]
    pdb0 = obj("policy/v1", "PodDisruptionBudget", "web", spec={"minAvailable": 0})
    assert classes(change("create", None, pdb0)) == ["capacity"]
    safe = obj("policy/v1", "PodDisruptionBudget", "web", spec={"minAvailable": 1})
    assert classes(change("create", None, safe)) == []
    hpa = obj("autoscaling/v2", "HorizontalPodAutoscaler", "web", spec={"maxReplicas": 10})
    lower = obj("autoscaling/v2", "HorizontalPodAutoscaler", "web", spec={"maxReplicas": 4})
    (d,) = dg.classify(change("update", hpa, lower), dg.Context())
    assert d.reason == "HorizontalPodAutoscaler web: maxReplicas lowered 10 → 4"
    assert classes(change("update", lower, hpa)) == []


# --- access ---------------------------------------------------------------------------


def test_access_rbac_widened_removed_and_cluster_admin() -> None:
    rbac = "rbac.authorization.k8s.io/v1"
    narrow = obj(rbac, "Role", "r", rules=[{"apiGroups": [""], "resources": ["pods"],
                                            "verbs": ["get"]}])  # fmt: skip
    wide = obj(rbac, "Role", "r", rules=[{"apiGroups": [""], "resources": ["*"], "verbs": ["*"]}])
    assert classes(change("update", narrow, wide)) == ["access"]
    assert classes(change("delete", narrow, None)) == ["destroy", "access"]
    binding = obj(rbac, "ClusterRoleBinding", "ops", ns=None,
                  roleRef={"kind": "ClusterRole", "name": "cluster-admin"},
                  subjects=[{"kind": "Group", "name": "ops"}])  # fmt: skip
    (d,) = dg.classify(change("create", None, binding), dg.Context())
    assert d.reason == "ClusterRoleBinding ops: binds cluster-admin"
    view = copy.deepcopy(binding)
    view["roleRef"]["name"] = "view"
    more = copy.deepcopy(view)
    more["subjects"].append({"kind": "Group", "name": "everyone"})
    (d,) = dg.classify(change("update", view, more), dg.Context())
    assert d.reason == "ClusterRoleBinding ops: subjects widened (1 → 2)"
    assert classes(change("create", None, view)) == []


# --- cascade and data -----------------------------------------------------------------


def test_cascade_counts_what_a_namespace_or_crd_holds() -> None:
    ns = obj("v1", "Namespace", "shop", ns=None)
    c = change("delete", ns, None)
    (destroy, cascade) = dg.classify(c, dg.Context(held={c.id: 12}))
    assert destroy.name == "destroy"
    assert (cascade.name, cascade.objects) == ("cascade", 12)
    assert cascade.reason == "Namespace shop: deleting it deletes it and the 12 objects it holds"
    assert cascade.to_dict() == {"class": "cascade", "reason": cascade.reason, "objects": 12}


def test_data_pvc_and_statefulset_claims() -> None:
    pvc = obj("v1", "PersistentVolumeClaim", "data", spec={"storageClassName": "fast"})
    assert classes(change("delete", pvc, None)) == ["destroy", "data"]
    sts = obj("apps/v1", "StatefulSet", "db",
              spec={"volumeClaimTemplates": [{"metadata": {"name": "data"}}]})  # fmt: skip
    assert classes(change("delete", sts, None)) == ["destroy", "data"]
    no_claims = obj("apps/v1", "StatefulSet", "db", spec={})
    assert classes(change("delete", no_claims, None)) == ["destroy"]


# --- deprecated -----------------------------------------------------------------------


def test_deprecated_removed_in_the_declared_version_or_the_next_minor() -> None:
    fs = obj("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", "x", ns=None)
    assert dg.deprecation(fs["apiVersion"], "FlowSchema", "1.32") == (
        "flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema is not served since Kubernetes 1.32; "
        "use flowcontrol.apiserver.k8s.io/v1"
    )
    assert "is removed in Kubernetes 1.32" in str(
        dg.deprecation(fs["apiVersion"], "FlowSchema", "1.31")
    )
    assert "deprecated since Kubernetes 1.29" in str(
        dg.deprecation(fs["apiVersion"], "FlowSchema", "1.28")
    )
    assert dg.deprecation(fs["apiVersion"], "FlowSchema", "1.27") is None
    assert dg.deprecation("apps/v1", "Deployment", "1.33") is None
    assert classes(change("create", None, fs), version="1.31") == ["deprecated"]
    assert classes(change("create", None, fs)) == []  # no declared version: not judged
    ep = obj("v1", "Endpoints", "legacy")
    assert classes(change("unchanged", ep, ep), version="1.32") == ["deprecated"]
    assert classes(change("unchanged", ep, ep), version="1.31") == []


def test_the_bundled_deprecation_data_is_well_formed() -> None:
    data = dg.bundled_deprecations()
    assert data.checked_through == "1.33"
    seen = set()
    for api in data.apis:
        assert (api.api_version, api.kind) not in seen
        seen.add((api.api_version, api.kind))
        assert api.removed is None or dg.version_tuple(api.removed) > dg.version_tuple(
            api.deprecated
        )
    removed_in = {api.removed for api in data.apis}
    assert {"1.16", "1.22", "1.25", "1.26", "1.27", "1.29", "1.32"} <= removed_in


def test_a_malformed_deprecation_file_is_an_error() -> None:
    with pytest.raises(KonfigError, match=r"apis\[0\] needs apiVersion and kind"):
        dg.parse_deprecations({"apis": [{"kind": "X"}]})
    with pytest.raises(KonfigError, match="removed before deprecated"):
        dg.parse_deprecations(
            {"apis": [{"apiVersion": "a/v1", "kind": "X", "deprecated": "1.20", "removed": "1.2"}]}
        )
    root = Path(dg.__file__).parent.parent / "data" / "kubernetes" / "deprecated-apis.yaml"
    assert yaml.safe_load(root.read_text())["checkedThrough"] == "1.33"


# --- counts and JSON ------------------------------------------------------------------


def test_counts_and_json() -> None:
    ns = obj("v1", "Namespace", "shop", ns=None)
    plan = dg.assess(
        plan_of(
            change("delete", ns, None),
            change("update", deployment(), deployment(image="nginx:2", replicas=0)),
        )
    )
    counts = plan.danger_counts()
    assert list(counts) == list(DANGER_CLASSES)
    assert {k: v for k, v in counts.items() if v} == {
        "destroy": 1, "rollout": 1, "capacity": 1, "cascade": 1
    }  # fmt: skip
    rollout = one(plan, "Deployment").to_dict()["dangers"]
    assert [d["class"] for d in rollout] == ["rollout", "capacity"]
    # no reader: the cascade is not counted, and says so by leaving objects out
    assert "objects" not in one(plan, "Namespace").to_dict()["dangers"][1]


# --- danger/confirm: the policy and the count guard -----------------------------------


def guard(confirmed: dict[str, str] | None = None, **policy: Any) -> DangerGuard:
    given = {path: frozenset({digest}) for path, digest in (confirmed or {}).items()}
    return DangerGuard(DangerPolicy.of(policy), given)


def test_confirm_classes_marks_the_changes_and_binds_to_a_digest() -> None:
    ns = obj("v1", "Namespace", "shop", ns=None)
    plan = dg.assess(
        plan_of(change("delete", ns, None), change("update", deployment(), deployment(image="x")))
    )
    assert unconfirmed(plan, guard()) is None  # no policy: nothing needs one
    found = unconfirmed(plan, guard(confirm=["cascade"]))
    assert found is not None
    assert dict(found.why) == {"v1:Namespace:shop": "cascade needs a confirmation"}
    marked = mark_unconfirmed(plan, guard(confirm=["cascade"]))
    assert [c.refused for c in marked.changes if c.refused] == [
        f"danger/confirm: cascade needs a confirmation "
        f"(`konfig apply --confirm appops/shop/prod={found.digest}`)"
    ]
    # the digest confirms it; another digest, or another stack's, does not
    assert unconfirmed(plan, guard({"appops/shop/prod": found.digest}, confirm=["cascade"])) is None
    assert unconfirmed(plan, guard({"appops/shop/prod": "0" * 16}, confirm=["cascade"]))
    assert unconfirmed(plan, guard({"appops/shop/dev": found.digest}, confirm=["cascade"]))
    # several digests for the stack (a pull request confirmed at each push): one is this one
    several = DangerGuard(
        DangerPolicy.of({"confirm": ["cascade"]}),
        {"appops/shop/prod": frozenset({"0" * 16, found.digest})},
    )
    assert unconfirmed(plan, several) is None
    # what is dangerous changes (a second Namespace deleted): the confirmation drops
    more = dg.assess(
        plan_of(
            change("delete", ns, None),
            change("delete", obj("v1", "Namespace", "shop2", ns=None), None),
        )
    )
    again = unconfirmed(more, guard({"appops/shop/prod": found.digest}, confirm=["cascade"]))
    assert again is not None and again.digest != found.digest


def test_count_guard_objects_and_percent() -> None:
    cms = [obj("v1", "ConfigMap", f"c{i}", data={"a": str(i)}) for i in range(10)]
    deletes = [change("delete", c, None) for c in cms[:3]]
    kept = [change("unchanged", c, c) for c in cms[3:]]
    plan = dg.assess(plan_of(*deletes, *kept))
    assert unconfirmed(plan, guard(maxDeletes=3)) is None
    found = unconfirmed(plan, guard(maxDeletes=2))
    assert found is not None and set(found.why) == {c.id for c in deletes}
    assert found.summary == "deletes 3 objects (more than 2)"
    assert unconfirmed(plan, guard(maxDeletePercent=30)) is None  # 3 of 10: 30%
    by_share = unconfirmed(plan, guard(maxDeletePercent=25))
    assert by_share is not None
    assert by_share.summary == "deletes 30% of its 10 objects (more than 25%)"


def test_a_danger_that_only_drift_causes_says_so() -> None:
    from dataclasses import replace

    c = change("update", deployment(replicas=4), deployment(replicas=0))
    drifted = replace(c, fields=tuple(replace(f, drift=True) for f in c.fields))
    (d,) = dg.classify(drifted, dg.Context())
    assert (
        d.reason
        == "Deployment web: replicas 4 → 0 (drift: the cluster already differs; apply sets it back)"
    )
    (d,) = dg.classify(c, dg.Context())
    assert d.reason == "Deployment web: replicas 4 → 0"


def test_a_confirmation_is_bound_to_the_change_digest() -> None:
    from konfig.engine.digest import change_digest

    ns = obj("v1", "Namespace", "shop", ns=None)
    plan = dg.assess(plan_of(change("delete", ns, None)))
    found = unconfirmed(plan, guard(confirm=["cascade"]))
    assert found is not None and found.digest == change_digest(plan).digest[:16]
    # any other change to the stack's change set (not only to its dangers) drops it
    more = dg.assess(
        plan_of(change("delete", ns, None), change("update", deployment(), deployment(image="x")))
    )
    other = unconfirmed(more, guard({"appops/shop/prod": found.digest}, confirm=["cascade"]))
    assert other is not None and other.digest != found.digest
