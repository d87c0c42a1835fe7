"""The privilege rules (:mod:`konfig.check.privilege`) on plain Specs, and through
`konfig check`: a binding to cluster-admin, a catch-all failing webhook, the API
server's own RBAC objects. Preview and apply refuse by the same rules:
``commands/test_privileges.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fixtures.rawstacks import raw_stack, resource
from fixtures.repos import KonfigRunner, RepoBuilder

from konfig.check import privilege as p
from konfig.repo.layout import Stack
from konfig.spec import Resource, Spec

RBAC = "rbac.authorization.k8s.io/v1"
ADMISSION = "admissionregistration.k8s.io/v1"


def binding(kind: str, name: str, role: str, *, group: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if kind == "RoleBinding":
        meta["namespace"] = "shop-dev"
    subject = {"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"}
    return {
        "apiVersion": RBAC,
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject if group else {"kind": "User", "name": "alice"}],
    }


def webhook(**hook: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "check.example.com",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {"service": {"name": "hook", "namespace": "shop-dev"}},
        "rules": [
            {"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}
        ],
    }
    base.update(hook)
    return {
        "apiVersion": ADMISSION,
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "check"},
        "webhooks": [{k: v for k, v in base.items() if v is not None}],
    }


def stack(raw: dict[str, Any] | None = None) -> Stack:
    return Stack("shop", "dev", "appops/shop/dev", "appops/shop", raw or {"name": "dev"})


def found(manifests: list[dict[str, Any]], raw: dict[str, Any] | None = None) -> list[str]:
    spec = Spec(tuple(Resource(resource(m)["id"], m) for m in manifests))
    return [f.rule for f in p.privilege_findings(Path("/nonexistent"), stack(raw), spec)]


def test_a_binding_to_cluster_admin_is_a_finding_cluster_wide_and_in_a_namespace() -> None:
    assert found([binding("ClusterRoleBinding", "ops", "cluster-admin")]) == [p.CLUSTER_ADMIN_RULE]
    assert found([binding("RoleBinding", "ops", "cluster-admin")]) == [p.CLUSTER_ADMIN_RULE]
    assert found([binding("ClusterRoleBinding", "ops", "view")]) == []
    assert found([binding("RoleBinding", "ops", "edit")]) == []


def test_a_binding_with_the_group_system_masters_is_a_finding() -> None:
    assert found([binding("ClusterRoleBinding", "m", "view", group="system:masters")]) == [
        p.CLUSTER_ADMIN_RULE
    ]
    assert found([binding("ClusterRoleBinding", "m", "view", group="devs")]) == []


def test_the_cluster_admin_rule_is_switched_off_with_a_reason_only_for_what_it_names() -> None:
    ops = binding("ClusterRoleBinding", "ops", "cluster-admin")
    other = binding("ClusterRoleBinding", "other", "cluster-admin")
    entry = {"rule": p.CLUSTER_ADMIN_RULE, "reason": "break-glass group of the platform team"}
    scoped = {**entry, "resources": [resource(ops)["id"]]}
    assert found([ops, other], {"policies": {"disable": [entry]}}) == []
    assert found([ops, other], {"policies": {"disable": [scoped]}}) == [p.CLUSTER_ADMIN_RULE]
    # without a reason the switch does not count (and check reports it)
    no_reason = {"policies": {"disable": [{"rule": p.CLUSTER_ADMIN_RULE}]}}
    assert found([ops], no_reason) == [p.CLUSTER_ADMIN_RULE]


def test_a_webhook_failing_closed_for_everything_everywhere_is_a_finding() -> None:
    assert found([webhook()]) == [p.CATCH_ALL_WEBHOOK_RULE]  # v1's default: Fail
    assert found([webhook(failurePolicy="Fail")]) == [p.CATCH_ALL_WEBHOOK_RULE]
    mutating = {**webhook(), "kind": "MutatingWebhookConfiguration"}
    assert found([mutating]) == [p.CATCH_ALL_WEBHOOK_RULE]
    star_star = [{"apiGroups": ["*"], "resources": ["*/*"], "operations": ["CREATE"]}]
    assert found([webhook(rules=star_star)]) == [p.CATCH_ALL_WEBHOOK_RULE]


def test_a_webhook_that_ignores_failures_or_is_limited_is_not() -> None:
    assert found([webhook(failurePolicy="Ignore")]) == []
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": ["kube-system"]}]}  # fmt: skip
    assert found([webhook(namespaceSelector=selector)]) == []
    assert found([webhook(objectSelector={"matchLabels": {"checked": "yes"}})]) == []
    pods = [{"apiGroups": [""], "resources": ["pods"], "operations": ["CREATE"]}]
    assert found([webhook(rules=pods)]) == []
    entry = {"rule": p.CATCH_ALL_WEBHOOK_RULE, "reason": "the policy engine must see everything"}
    assert found([webhook()], {"policies": {"disable": [entry]}}) == []


def test_the_api_servers_own_rbac_objects_are_always_refused() -> None:
    role = {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "cluster-admin"}}
    assert found([role]) == [p.SYSTEM_RBAC_RULE]
    node = {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "system:node"}}
    assert found([node]) == [p.SYSTEM_RBAC_RULE]
    crb = binding("ClusterRoleBinding", "system:basic-user", "system:basic-user")
    assert found([crb]) == [p.SYSTEM_RBAC_RULE]
    admin_binding = binding("ClusterRoleBinding", "cluster-admin", "cluster-admin")
    assert sorted(found([admin_binding])) == sorted([p.SYSTEM_RBAC_RULE, p.CLUSTER_ADMIN_RULE])
    # no opt-out: switching it off changes nothing
    entry = {"rule": p.SYSTEM_RBAC_RULE, "reason": "we know"}
    assert found([node], {"policies": {"disable": [entry]}}) == [p.SYSTEM_RBAC_RULE]
    mine = {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "shop-reader"}}
    assert found([mine]) == []


def test_check_reports_each_at_its_line_and_knows_the_switchable_rules(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    manifests = [
        binding("ClusterRoleBinding", "ops", "cluster-admin"),
        webhook(),
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "system:node"}},
    ]
    path = raw_stack(repo_builder, "shop", "dev", [resource(m) for m in manifests])
    res = konfig("check", "shop/dev", "--format", "json", cwd=repo_builder.root)
    assert res.code == 1, res.err
    data = json.loads(res.out)
    ours = {f["rule"]: f for f in data if f["rule"] in (*p.SWITCHABLE, p.SYSTEM_RBAC_RULE)}
    assert sorted(ours) == sorted([*p.SWITCHABLE, p.SYSTEM_RBAC_RULE])
    assert all(f["file"] == f"{path}/main.k" and f["line"] for f in ours.values())
    assert (
        "ClusterRoleBinding:ops binds the ClusterRole cluster-admin"
        in (ours[p.CLUSTER_ADMIN_RULE]["message"])
    )
    yaml_text = (
        "name: dev\npolicies:\n  disable:\n"
        f"    - rule: {p.CLUSTER_ADMIN_RULE}\n      reason: break-glass group\n"
        f"    - rule: {p.CATCH_ALL_WEBHOOK_RULE}\n      reason: the policy engine\n"
    )
    raw_stack(repo_builder, "shop", "dev", [resource(m) for m in manifests], stack_yaml=yaml_text)
    res = konfig("check", "shop/dev", "--format", "json", cwd=repo_builder.root)
    rules = [f["rule"] for f in json.loads(res.out)]
    assert p.SYSTEM_RBAC_RULE in rules  # never switched off
    assert not set(rules) & {*p.SWITCHABLE, "policy/unknown-rule"}, rules
