"""Several clusters in one run: stacks choose theirs by `kubernetes.context`; apply,
status, pending, drift and destroy group by cluster; an object never lands on the wrong
one; a context missing from the kubeconfig fails before anything is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import Cluster, kubeconfigs, merged_kubeconfig
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory_store
from konfig.engine.kube import Kube, KubeTarget, connect

pytestmark = pytest.mark.cluster


def context_yaml(context: str) -> str:
    return f"name: dev\nkubernetes:\n  context: {context}\n"


@pytest.fixture
def two(cluster: Cluster, edge_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Any:
    """KUBECONFIG with both clusters (contexts admin and edge), and a client for each."""
    monkeypatch.setenv("KUBECONFIG", kubeconfigs(cluster, edge_cluster))
    local = connect(KubeTarget(str(cluster.kubeconfig), "admin"))
    edge = connect(KubeTarget(str(edge_cluster.kubeconfig), "edge"))
    try:
        yield local, edge
    finally:
        local.close()
        edge.close()


def objects_of(kube: Kube, project: str) -> set[str]:
    """Every Namespace, Deployment, Service and inventory of ``project`` in a cluster."""
    found = {f"Namespace/{n['metadata']['name']}" for n in kube.list("v1", "Namespace")}
    for api, kind in (("apps/v1", "Deployment"), ("v1", "Service")):
        found |= {
            f"{kind}/{o['metadata']['namespace']}/{o['metadata']['name']}"
            for o in kube.list(api, kind)
        }
    found |= {f"inventory/{i.stack_path}" for i in inventory_store.list_inventories(kube)}
    return {f for f in found if project in f}


def test_two_clusters_in_one_apply(
    konfig: KonfigRunner,
    repo_builder: RepoBuilder,
    two: tuple[Kube, Kube],
    cluster: Cluster,
    edge_cluster: Cluster,
) -> None:
    local, edge = two
    p = unique("p15two")
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(p, "dev", stack_yaml=context_yaml("admin"))
    repo_builder.stack(p, "edge", stack_yaml=context_yaml("edge").replace("dev", "edge"))
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "a stack per cluster")
    root = str(repo_builder.root)

    res = konfig("--root", root, "apply", "--yes", "--all")
    assert res.code == 0, res.out + res.err
    # Reported per cluster: each stack's block names its context, the summary one line each.
    assert f"appops/{p}/dev (context admin): applied in " in res.out
    assert f"appops/{p}/edge (context edge): applied in " in res.out
    assert "  cluster admin: 1 stack: 3 created" in res.out
    assert "  cluster edge: 1 stack: 3 created" in res.out

    # Every object is in its own cluster and never in the other one.
    assert objects_of(local, p) == {
        f"Namespace/{p}-dev",
        f"Deployment/{p}-dev/{p}",
        f"Service/{p}-dev/{p}",
        f"inventory/appops/{p}/dev",
    }
    assert objects_of(edge, p) == {
        f"Namespace/{p}-edge",
        f"Deployment/{p}-edge/{p}",
        f"Service/{p}-edge/{p}",
        f"inventory/appops/{p}/edge",
    }

    status = konfig("--root", root, "status", "--json")
    assert status.code == 0, status.err
    doc = json.loads(status.out)
    mine = {s["path"]: s for s in doc["stacks"] if f"/{p}/" in s["path"]}
    assert {path: s["context"] for path, s in mine.items()} == {
        f"appops/{p}/dev": "admin",
        f"appops/{p}/edge": "edge",
    }
    assert all(s["state"] == "applied" and s["upToDate"] for s in mine.values())
    assert {c["context"] for c in doc["clusters"]} == {"admin", "edge"}
    # One file holding both clusters' contexts (what a workflow's secret holds) is the same.
    merged = repo_builder.root.parent / "merged.kubeconfig"
    merged.write_text(merged_kubeconfig(cluster, edge_cluster), encoding="utf-8")
    again = konfig("--root", root, "status", "--json", f"--kubeconfig={merged}")
    assert again.code == 0, again.err
    assert [(s["path"], s["context"], s["state"]) for s in json.loads(again.out)["stacks"]] == [
        (s["path"], s["context"], s["state"]) for s in doc["stacks"]
    ]
    text = konfig("--root", root, "status").out
    assert text.index("cluster admin (") < text.index(f"{p}/dev ") < text.index("cluster edge (")
    assert text.index("cluster edge (") < text.index(f"{p}/edge ")

    pending = konfig("--root", root, "pending", "--json")
    assert pending.code == 0, pending.err
    assert not [s for s in json.loads(pending.out)["stacks"] if f"/{p}/" in s["path"]]

    # The edge stack leaves the repository: pending finds its inventory on edge, and
    # destroy --deleted finds the cluster that holds it (no stack.yaml names it any more).
    shutil.rmtree(repo_builder.root / "appops" / p / "edge")
    git_commit(repo_builder.root, "retire the edge stack")
    gone = json.loads(konfig("--root", root, "pending", "--json").out)
    assert f"appops/{p}/edge" in gone["deleted_stacks"]
    destroyed = konfig(
        "--root", root, "destroy", "--deleted", f"appops/{p}/edge", "--yes", "--timeout", "120"
    )
    assert destroyed.code == 0, destroyed.out + destroyed.err
    assert f"appops/{p}/edge (context edge): destroyed in " in destroyed.out
    assert inventory_store.read_inventory(edge, f"appops/{p}/edge") is None
    assert (
        inventory_store.read_inventory(local, f"appops/{p}/dev") is not None
    )  # the other untouched
    assert konfig("--root", root, "destroy", f"{p}/dev", "--yes", "--no-wait").code == 0


def test_a_missing_context_fails_before_anything_is_written(
    konfig: KonfigRunner, repo_builder: RepoBuilder, two: tuple[Kube, Kube], tmp_path: Path
) -> None:
    local, edge = two
    p = unique("p15ctx")
    repo_builder.stack(p, "dev", stack_yaml=context_yaml("admin"))
    repo_builder.stack(p, "far", stack_yaml=context_yaml("far-away").replace("dev", "far"))
    root = str(repo_builder.root)

    res = konfig("--root", root, "apply", "--yes", "--all")
    assert res.code == 1
    assert f"appops/{p}/far: kubeconfig " in res.err
    assert "has no context 'far-away' (it has: admin, edge, edge-restricted, restricted)" in res.err
    assert "nothing was read or written" in res.err
    assert objects_of(local, p) == set() and objects_of(edge, p) == set()

    pending = konfig("--root", root, "pending")
    assert pending.code == 1 and "has no context 'far-away'" in pending.err
    destroy = konfig("--root", root, "destroy", f"{p}/far", "--yes", "--allow-dirty")
    assert destroy.code == 1 and "has no context 'far-away'" in destroy.err

    # Preview and status report it for that stack and go on with the others.
    preview = konfig("--root", root, "preview", "--all")
    assert preview.code == 1
    assert f"appops/{p}/far (context far-away): error" in preview.out
    assert f"appops/{p}/dev (context admin): 3 to create" in preview.out
    status = konfig("--root", root, "status")
    assert status.code == 1 and "cluster far-away: cannot be read" in status.out

    # A kubeconfig file that does not exist at all.
    missing = konfig(
        "--root",
        root,
        "apply",
        "--yes",
        "--allow-dirty",
        f"{p}/dev",
        f"--kubeconfig={tmp_path}/nope",
    )
    assert missing.code == 1 and f"kubeconfig not found: {tmp_path}/nope" in missing.err
