"""What vendors ship must apply (issue 30): the reproductions, end to end against the
real control plane (RBAC names with colons, DaemonSet and self-deleting Job health, CRDs
with their custom resources under --no-wait, List documents)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"
RBAC = "rbac.authorization.k8s.io/v1"

YAML_MAIN = """\
import file
import yaml
import base.pkg.models.frontend

extras: frontend.Manifests {
    manifests = yaml.decode_all(file.read("objects.yaml"))
}
"""


def yaml_stack(repo: RepoBuilder, project: str, docs: list[dict[str, Any]]) -> str:
    """A stack whose objects come from a YAML file of its directory (as vendors ship)."""
    repo.stack(project, "dev", main=YAML_MAIN, stack_yaml=STACK_YAML)
    repo.write(f"appops/{project}/dev/objects.yaml", yaml.safe_dump_all(docs, sort_keys=False))
    return f"{project}/dev"


def _preview_actions(konfig: KonfigRunner, address: str, kc: str, root: Path) -> dict[str, str]:
    res = konfig("preview", address, "--format", "json", kc, cwd=root)
    assert res.code == 0, res.err
    data = json.loads(res.out)
    return {c["id"]: c["action"] for s in data["stacks"] for c in s["changes"]}


# --- 1. object ids with colons ---------------------------------------------------------


def test_rbac_names_with_colons_apply_record_and_destroy(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """Issue 30's reproduction: a ClusterRole `rw:one-colon` and a Role `x:leader`
    (before: apply refused the stack with "malformed resource id", and the inventory
    recorded a namespace `rw`)."""
    ns = unique("colons")
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": f"rw:{ns}"}, "rules": []},
        {
            "apiVersion": RBAC,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{ns}:system:auth-delegator"},
            "roleRef": {"apiGroup": RBAC.split("/")[0], "kind": "ClusterRole", "name": f"rw:{ns}"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
        },
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": "x:leader", "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        },
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "x:leader:binding", "namespace": ns},
            "roleRef": {"apiGroup": RBAC.split("/")[0], "kind": "Role", "name": "x:leader"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
        },
    ]
    address = yaml_stack(repo_builder, ns, docs)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    root = repo_builder.root
    ids = {
        f"v1:Namespace:{ns}",
        f"{RBAC}:ClusterRole:rw:{ns}",
        f"{RBAC}:ClusterRoleBinding:{ns}:system:auth-delegator",
        f"{RBAC}:Role:{ns}:x:leader",
        f"{RBAC}:RoleBinding:{ns}:x:leader:binding",
    }
    assert set(_preview_actions(konfig, address, kc, root)) == ids
    res = konfig("apply", "--allow-dirty", address, "--yes", "--json", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    check = konfig("check", address, "--format", "json", cwd=root)
    assert check.code == 0, check.out + check.err  # no spec/invalid-name on RBAC colons
    assert {o["id"] for s in json.loads(res.out)["stacks"] for o in s["objects"]} == ids
    stored = inventory_store.read_inventory(kube, f"appops/{address}")
    assert stored is not None and stored.ids() == ids
    cm = kube.get("v1", "ConfigMap", inv.inventory_name(f"appops/{address}"), inv.NAMESPACE)
    assert cm is not None
    # no made-up namespace ("rw", or the binding's prefix) among the recorded ones
    assert cm["metadata"]["annotations"][inv.ANNOTATION_NAMESPACES] == ns
    role = kube.get(RBAC, "Role", "x:leader", ns)
    assert role is not None
    assert kube.get(RBAC, "ClusterRole", f"rw:{ns}", None) is not None
    # previewed again: nothing to do, every id whole
    assert set(_preview_actions(konfig, address, kc, root).values()) == {"unchanged"}
    status = konfig("status", address, "--json", kc, cwd=root)
    assert status.code == 0, status.err
    res = konfig("destroy", "--allow-dirty", address, "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert kube.get(RBAC, "ClusterRole", f"rw:{ns}", None) is None
    assert kube.get(RBAC, "ClusterRoleBinding", f"{ns}:system:auth-delegator", None) is None


# --- 3. DaemonSet health ---------------------------------------------------------------


def _daemonset(ns: str, name: str, cpu: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "agent",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ]
                },
            },
        },
    }


def test_a_daemonset_is_healthy_once_its_pods_are(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """The create response counts 0 desired pods: apply must wait for the controller
    (before: "Apply complete" at once, with every pod Pending). kwok runs the pods on
    both nodes; a pod that asks for more CPU than a node has stays Pending."""
    ns = unique("ds")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    root = repo_builder.root
    ok = yaml_stack(
        repo_builder,
        ns,
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            _daemonset(ns, "agent", "10m"),
        ],
    )
    res = konfig("apply", "--allow-dirty", ok, "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    live = kube.get("apps/v1", "DaemonSet", "agent", ns)
    assert live is not None
    st = live["status"]
    # applied means: the controller saw it and both nodes run an available pod
    assert st["observedGeneration"] == live["metadata"]["generation"]
    assert st["desiredNumberScheduled"] == 2 and st["numberAvailable"] == 2, st

    pending = unique("dsp")
    stuck = yaml_stack(
        repo_builder,
        pending,
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": pending}},
            _daemonset(pending, "greedy", "100000"),
        ],
    )
    started = time.monotonic()
    res = konfig("apply", "--allow-dirty", stuck, "--yes", "--timeout", "6", kc, cwd=root)
    assert res.code == 1, res.out + res.err
    assert time.monotonic() - started >= 6
    assert "DaemonSet greedy" in res.out + res.err
    assert "0/2 pods" in res.out + res.err
    stored = inventory_store.read_inventory(kube, f"appops/{stuck}")
    assert stored is not None and stored.commit == ""  # not recorded as applied
    for address in (ok, stuck):
        assert konfig("destroy", "--allow-dirty", address, "--yes", kc, cwd=root).code == 0


# --- 4. a Job that removes itself ------------------------------------------------------


def _ttl_job(ns: str, name: str, command: str = "true") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "ttlSecondsAfterFinished": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": [command]}],
                }
            },
        },
    }


def test_a_job_that_removes_itself_after_finishing_is_success(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """ttlSecondsAfterFinished: 0, as ingress-nginx's admission Jobs: the Job completes
    and is deleted by the TTL controller. Apply succeeds and records the commit; preview,
    drift and status know it ran (before: a wait until the timeout, a failed apply, and
    "deleted outside Konfig" drift forever)."""
    ns = unique("ttl")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    root = repo_builder.root
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        _ttl_job(ns, "migrate"),
    ]
    address = yaml_stack(repo_builder, ns, docs)
    repo_builder.write(".gitignore", "/.cache/\n")
    git_init(root)
    head = git_commit(root, "a stack with a Job")
    job_id = f"batch/v1:Job:{ns}:migrate"
    res = konfig("apply", address, "--yes", "--timeout", "60", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    stored = inventory_store.read_inventory(kube, f"appops/{address}")
    assert stored is not None and stored.commit == head
    member = stored.member(job_id)
    assert member is not None and member.finished
    deadline = time.monotonic() + 30
    while kube.get("batch/v1", "Job", "migrate", ns) is not None:
        assert time.monotonic() < deadline, "the TTL controller did not remove the Job"
        time.sleep(0.5)
    # gone as it should be: no change planned, no drift, healthy
    assert _preview_actions(konfig, address, kc, root)[job_id] == "unchanged"
    drift = konfig("drift", address, "--json", kc, cwd=root)
    assert drift.code == 0, drift.out + drift.err
    assert json.loads(drift.out)["hasDrift"] is False
    status = konfig("status", address, "--json", kc, cwd=root)
    assert status.code == 0, status.err
    stack = next(s for s in json.loads(status.out)["stacks"] if s["path"] == f"appops/{address}")
    assert stack["health"]["state"] == "healthy", stack
    assert stack["drift"]["state"] == "none", stack
    again = konfig("apply", address, "--yes", kc, cwd=root)
    assert again.code == 0, again.out + again.err
    assert kube.get("batch/v1", "Job", "migrate", ns) is None  # not run a second time
    # a changed Job runs again
    repo_builder.write(
        f"appops/{address}/objects.yaml",
        yaml.safe_dump_all([docs[0], _ttl_job(ns, "migrate", "date")], sort_keys=False),
    )
    head2 = git_commit(root, "change the Job")
    assert _preview_actions(konfig, address, kc, root)[job_id] == "create"
    res = konfig("apply", address, "--yes", "--timeout", "60", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    stored = inventory_store.read_inventory(kube, f"appops/{address}")
    assert stored is not None and stored.commit == head2
    assert konfig("destroy", address, "--yes", kc, cwd=root).code == 0


# --- 5. CRDs and their custom resources ------------------------------------------------


def _crd(group: str, kind: str, plural: str, *, served_version: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": served_version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def test_crds_and_their_resources_apply_with_no_wait(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """--no-wait still applies custom resources after their CRD is established and
    served; a kind discovery does not serve is that object's failure, not an unreachable
    API server, and unrelated objects are applied (before: after ~3.5 s of retries the
    server was called unreachable and every later object skipped)."""
    ns = unique("crd")
    group = f"{ns}.example.com"
    kc = f"--kubeconfig={cluster.kubeconfig}"
    root = repo_builder.root
    widgets = [
        {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": f"w{i}", "namespace": ns},
            "spec": {"size": i},
        }
        for i in range(3)
    ]
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        _crd(group, "Widget", "widgets"),
        *widgets,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain", "namespace": ns}},
    ]
    address = yaml_stack(repo_builder, ns, docs)
    res = konfig("apply", "--allow-dirty", address, "--yes", "--no-wait", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    for i in range(3):
        assert kube.get(f"{group}/v1", "Widget", f"w{i}", ns) is not None
    assert set(_preview_actions(konfig, address, kc, root).values()) == {"unchanged"}

    # A custom resource of a version the CRD does not serve: discovery never finds it.
    # "late" comes after a good custom resource (a level later): it must still be applied.
    bad = {**widgets[0], "apiVersion": f"{group}/v2", "metadata": {"name": "v2", "namespace": ns}}
    repo_builder.write(
        f"appops/{address}/objects.yaml", yaml.safe_dump_all([*docs, bad], sort_keys=False)
    )
    late = (
        "\nlate: frontend.Manifests {\n"
        f'    manifests = [{{apiVersion = "v1", kind = "ConfigMap", metadata = {{name = "late", '
        f'namespace = "{ns}"}}}}]\n'
        f'    dependsOn = ["{group}/v1:Widget:{ns}:w1"]\n}}\n'
    )
    repo_builder.write(f"appops/{address}/main.k", YAML_MAIN + late)
    res = konfig("apply", "--allow-dirty", address, "--yes", "--no-wait", "--json", kc, cwd=root)
    assert res.code == 1, res.out + res.err
    stack = json.loads(res.out)["stacks"][0]
    outcomes = {o["id"]: (o["outcome"], o["message"]) for o in stack["objects"]}
    assert "stopped" not in (stack["error"] or ""), stack["error"]  # not "unreachable"
    outcome, message = outcomes[f"{group}/v2:Widget:{ns}:v2"]
    assert outcome == "failed" and f"no resource of kind Widget in {group}/v2" in message
    assert outcomes[f"v1:ConfigMap:{ns}:late"][0] == "created", outcomes
    assert kube.get("v1", "ConfigMap", "late", ns) is not None  # unrelated: applied
    repo_builder.write(f"appops/{address}/main.k", YAML_MAIN)
    repo_builder.write(f"appops/{address}/objects.yaml", yaml.safe_dump_all(docs, sort_keys=False))
    res = konfig("destroy", "--allow-dirty", address, "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err


# --- 6. List documents -----------------------------------------------------------------


def test_list_documents_are_expanded_as_kubectl_does(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    ns = unique("list")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    root = repo_builder.root
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": ns}}
                for n in ("a", "b")
            ],
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccountList",
            "metadata": {},
            "items": [
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": "bot", "namespace": ns},
                }
            ],
        },
    ]
    address = yaml_stack(repo_builder, ns, docs)
    objects = str(root / f"appops/{address}/objects.yaml")
    actions = _preview_actions(konfig, address, kc, root)
    assert sorted(actions) == sorted(
        [
            f"v1:Namespace:{ns}",
            f"v1:ConfigMap:{ns}:a",
            f"v1:ConfigMap:{ns}:b",
            f"v1:ServiceAccount:{ns}:bot",
        ]
    )
    res = konfig("apply", "--allow-dirty", address, "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    # kubectl as the oracle: the objects it reads from the same file exist, as it would
    # apply them (no difference)
    got = cluster.kubectl("get", "-f", objects, "-o", "name").stdout.split()
    assert sorted(got) == sorted(
        [f"namespace/{ns}", "configmap/a", "configmap/b", "serviceaccount/bot"]
    )
    diff = cluster.kubectl("diff", "--server-side", "--force-conflicts", "-f", objects, check=False)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert konfig("destroy", "--allow-dirty", address, "--yes", kc, cwd=root).code == 0

    # a List item without a name: the error names the document and the item
    broken = [docs[0], {"apiVersion": "v1", "kind": "List", "items": [{"kind": "ConfigMap"}]}]
    repo_builder.write(f"appops/{address}/objects.yaml", yaml.safe_dump_all(broken))
    res = konfig("compile", address, cwd=root)
    assert res.code == 1
    assert f"appops/{address}/main.k" in res.err
    assert "manifests[1].items[0] (kind ConfigMap) has no apiVersion, metadata.name" in res.err
