"""A binding to cluster-admin, a catch-all failing webhook and the API server's own RBAC
objects: `konfig check` reports them (``check/test_privilege.py``), and preview and apply
refuse the stack by the same rules (:mod:`konfig.check.privilege`), with the file and
line, before anything is written; a reasoned opt-out in stack.yaml lifts the rules that
have one for all three. Against the real control plane."""

from __future__ import annotations

import json

import pytest
from fixtures.cluster import Cluster
from fixtures.rawstacks import raw_stack, resource
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.check import privilege as p
from konfig.engine import inventory as inv
from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

RBAC = "rbac.authorization.k8s.io/v1"


def _binding(name: str) -> dict[str, object]:
    return {
        "apiVersion": RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"kind": "User", "name": f"{name}-user",
                      "apiGroup": "rbac.authorization.k8s.io"}],
    }  # fmt: skip


def _webhook(name: str) -> dict[str, object]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": f"{name}.example.com",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"url": "https://127.0.0.1:1/nowhere"},
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                       "operations": ["*"]}],
        }],
    }  # fmt: skip


def _cm(ns: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}


def _nothing_written(kube: Kube, project: str, name: str) -> None:
    assert kube.get("v1", "Namespace", project, None) is None
    assert kube.get(RBAC, "ClusterRoleBinding", name, None) is None
    assert kube.get("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", name,
                    None) is None  # fmt: skip
    assert kube.get(RBAC, "ClusterRole", "system:node", None) is not None  # the server's own
    inventory = inv.inventory_name(f"appops/{project}/dev")
    assert kube.get("v1", "ConfigMap", inventory, "konfig-system") is None


@pytest.mark.parametrize(
    ("what", "rule"),
    [("binding", p.CLUSTER_ADMIN_RULE), ("webhook", p.CATCH_ALL_WEBHOOK_RULE),
     ("system-role", p.SYSTEM_RBAC_RULE)],
)  # fmt: skip
def test_preview_and_apply_refuse_what_check_reports_nothing_written(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    what: str,
    rule: str,
) -> None:
    project = unique("priv")
    name = unique("grant")
    bad = {
        "binding": _binding(name),
        "webhook": _webhook(name),
        # the API server's own role, taken over with its rules emptied
        "system-role": {"apiVersion": RBAC, "kind": "ClusterRole",
                        "metadata": {"name": "system:node"}, "rules": []},
    }[what]  # fmt: skip
    path = raw_stack(
        repo_builder,
        project,
        "dev",
        [resource(_cm(project)), resource(bad)],
        stack_yaml="name: dev\nkubernetes:\n  context: admin\n",
    )
    root, kc = repo_builder.root, f"--kubeconfig={cluster.kubeconfig}"
    checked = konfig("check", f"{project}/dev", "--format", "json", cwd=root)
    assert checked.code == 1
    found = [f for f in json.loads(checked.out) if f["rule"] == rule]
    assert len(found) == 1, checked.out
    where = f"{found[0]['file']}:{found[0]['line']}"
    assert found[0]["file"] == f"{path}/main.k"

    res = konfig("preview", f"{project}/dev", kc, "--format", "json", cwd=root)
    assert res.code == 1, res.out + res.err
    shown = json.loads(res.out)["stacks"][0]
    assert shown["status"] == "error" and shown["changes"] == []
    assert (shown["error"]["file"], shown["error"]["line"]) == (found[0]["file"],
                                                                found[0]["line"])  # fmt: skip
    assert f"refused ({rule}, as `konfig check` reports it): " in shown["error"]["message"]
    assert found[0]["message"] in shown["error"]["message"]
    text = konfig("preview", f"{project}/dev", kc, cwd=root)
    assert text.code == 1 and f"{where}: refused ({rule}" in text.out, text.out

    res = konfig("apply", f"{project}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 1, res.out + res.err
    assert f"{where}: appops/{project}/dev: nothing was applied: refused ({rule}" in res.err
    assert "Traceback" not in res.err
    _nothing_written(kube, project, name)


def test_a_reasoned_opt_out_lets_check_preview_and_apply_through(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    project = unique("priv")
    name = unique("breakglass")
    rid = f"{RBAC}:ClusterRoleBinding:{name}"
    opt_out = (
        "name: dev\nkubernetes:\n  context: admin\npolicies:\n  disable:\n"
        f"    - rule: {p.CLUSTER_ADMIN_RULE}\n      reason: the platform team's break-glass user\n"
        f"      resources: ['{rid}']\n"
    )
    raw_stack(
        repo_builder,
        project,
        "dev",
        [resource(_cm(project)), resource(_binding(name))],
        stack_yaml=opt_out,
    )
    root, kc = repo_builder.root, f"--kubeconfig={cluster.kubeconfig}"
    checked = konfig("check", f"{project}/dev", "--format", "json", cwd=root)
    assert p.CLUSTER_ADMIN_RULE not in checked.out
    res = konfig("preview", f"{project}/dev", kc, "--format", "json", cwd=root)
    assert res.code == 0, res.out + res.err
    actions = {c["id"]: c["action"] for c in json.loads(res.out)["stacks"][0]["changes"]}
    assert actions[rid] == "create"
    res = konfig("apply", f"{project}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert kube.get(RBAC, "ClusterRoleBinding", name, None) is not None
    res = konfig("destroy", f"{project}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert kube.get(RBAC, "ClusterRoleBinding", name, None) is None
