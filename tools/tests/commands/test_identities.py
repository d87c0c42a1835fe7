"""An identity per stack on the real control plane: konfig impersonates the project's
ServiceAccount (konfig.yaml ``identities``, made by ``hack/cluster identity``), and the
API server refuses a write into another project's namespace: the error names the
identity and nothing of the stack is written. The namespaces are the platform's
(``hack/cluster identity`` makes them): the stacks write into them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.rawstacks import raw_stack, resource
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory as inv
from konfig.engine.kube import Kube, KubeTarget, connect

pytestmark = pytest.mark.cluster


def configmap(ns: str, name: str, **data: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {"app": name, **data},
    }


@pytest.fixture(scope="module")
def kube(cluster: Cluster) -> Iterator[Kube]:
    k = connect(KubeTarget(str(cluster.kubeconfig), cluster.admin_context))
    yield k
    k.close()


def _repo(builder: RepoBuilder, a: str, b: str, sa_a: str, sa_b: str) -> Path:
    config = builder.root / "konfig.yaml"
    config.write_text(config.read_text() + f"\nidentities:\n  {a}: {sa_a}\n  {b}: {sa_b}\n")
    builder.write(".gitignore", "/.cache/\n")
    stack_yaml = "name: dev\nkubernetes:\n  context: admin\n"
    raw_stack(
        builder,
        a,
        "dev",
        [resource(configmap(f"{a}-dev", "own"))],
        stack_yaml=stack_yaml,
    )
    git_init(builder.root)
    git_commit(builder.root, "a")
    return builder.root


def test_a_stack_applies_as_its_project_identity_and_cannot_write_another_project(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster, kube: Kube
) -> None:
    a, b = unique("ida"), unique("idb")
    sa_a = cluster.identity(a, f"{a}-dev")
    sa_b = cluster.identity(b, f"{b}-dev")
    assert sa_a == f"konfig-identities/{a}"
    root = _repo(repo_builder, a, b, sa_a, sa_b)
    kubecfg = ("--kubeconfig", str(cluster.kubeconfig))

    # its own namespace: applied as the identity; the inventory records it and the
    # approvals given (a `konfig owners --json`), and `konfig status` shows both
    head = git_commit(root, "head")
    approvals = root.parent / "owners.json"
    approvals.write_text(
        json.dumps(
            {
                "context": "konfig/owners",
                "change": head,
                "ok": True,
                "stacks": [
                    {
                        "path": f"appops/{a}/dev",
                        "project": f"appops/{a}",
                        "owners": ["ann", "bob"],
                        "approved_by": ["ann"],
                        "reasons": ["main.k changed"],
                    }
                ],
                "overrides": [
                    {
                        "stack": f"appops/{a}/dev",
                        "rule": "prod-replicas",
                        "reason": "a canary of one pod",
                        "owners": ["sam"],
                        "approved_by": ["sam"],
                    }
                ],
            }
        )
    )
    ok = konfig(
        "--root", str(root), "apply", "--yes", "--no-wait", "--approvals", str(approvals),
        "--json", f"{a}/dev", *kubecfg,
    )  # fmt: skip
    assert ok.code == 0, ok.err
    user = f"system:serviceaccount:konfig-identities:{a}"
    # the apply's JSON (the merge's job summary) names the identity and the audit
    (applied,) = json.loads(ok.out)["stacks"]
    assert applied["identity"] == user
    assert (applied["inventory"]["appliedBy"], applied["inventory"]["approvedBy"]) == (
        user,
        ["ann"],
    )
    assert applied["inventory"]["approvedChange"] == head
    override = {"rule": "prod-replicas", "reason": "a canary of one pod", "approvedBy": ["sam"]}
    assert applied["inventory"]["approvedOverrides"] == [override]
    assert kube.get("v1", "ConfigMap", "own", f"{a}-dev") is not None
    user = f"system:serviceaccount:konfig-identities:{a}"
    status = konfig("--root", str(root), "status", "--json", f"{a}/dev", *kubecfg)
    assert status.code == 0, status.err
    (entry,) = json.loads(status.out)["stacks"]
    assert (entry["appliedBy"], entry["approvedBy"], entry["approvedChange"]) == (
        user,
        ["ann"],
        head,
    )
    assert entry["approvedOverrides"] == [override]
    text = konfig("--root", str(root), "status", f"{a}/dev", *kubecfg)
    assert (
        f"{a}/dev: applied as {user}; approved by ann of {head[:12]}; override prod-replicas "
        "(a canary of one pod) approved by sam" in text.out
    )

    # the Spec now also writes into b's namespace: the API server refuses the identity
    stack = f"appops/{a}/dev"
    raw_stack(
        repo_builder,
        a,
        "dev",
        [
            resource(configmap(f"{a}-dev", "own", changed="yes")),
            resource(configmap(f"{b}-dev", "intruder")),
        ],
        stack_yaml="name: dev\nkubernetes:\n  context: admin\n",
    )
    git_commit(root, "write into b")
    refused = konfig(
        "--root", str(root), "apply", "--yes", "--no-wait", "--json", f"{a}/dev", *kubecfg
    )
    assert refused.code == 1
    (failed,) = json.loads(refused.out)["stacks"]
    assert failed["identity"] == user
    # the identity and what it lacked, as the API server said it
    said = failed["error"] or ""
    assert f"user '{user}' of context 'admin' may not get ConfigMap intruder" in said
    assert f"system:serviceaccount:konfig-identities:{a}" in said
    assert f"{b}-dev" in said
    # nothing of it written: not the intruder, not the change to its own object, and
    # the inventory still records the first apply
    assert kube.get("v1", "ConfigMap", "intruder", f"{b}-dev") is None
    own = kube.get("v1", "ConfigMap", "own", f"{a}-dev")
    assert own is not None and "changed" not in (own.get("data") or {})
    record = kube.get("v1", "ConfigMap", inv.inventory_name(stack), "konfig-system")
    assert record is not None
