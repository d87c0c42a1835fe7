"""Several named control planes from hack/cluster, side by side."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
from fixtures.cluster import CLUSTER_SCRIPT, Cluster, kubeconfigs

pytestmark = pytest.mark.cluster


def _kubectl(kubeconfig: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    # Only $KUBECONFIG merges a list of files (kubectl --kubeconfig takes one).
    res = subprocess.run(
        ["kubectl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, KUBECONFIG=kubeconfig),
    )
    if check and res.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed:\n{res.stdout}{res.stderr}")
    return res


def _state(c: Cluster) -> dict[str, object]:
    data: dict[str, object] = json.loads((c.dir / "state.json").read_text())
    return data


def test_two_clusters_have_their_own_ports_dirs_and_contexts(
    cluster: Cluster, edge_cluster: Cluster
) -> None:
    local, edge = _state(cluster), _state(edge_cluster)
    assert (local["name"], edge["name"]) == ("local", "edge")
    ports = {k: (local[k], edge[k]) for k in ("apiserver_port", "etcd_client_port")}
    assert all(a != b for a, b in ports.values()), ports
    assert cluster.dir != edge_cluster.dir
    assert edge_cluster.admin_context == "edge"
    assert edge_cluster.restricted_context == "edge-restricted"

    merged = kubeconfigs(cluster, edge_cluster)
    contexts = _kubectl(merged, "config", "get-contexts", "-o", "name").stdout.split()
    assert sorted(contexts) == ["admin", "edge", "edge-restricted", "restricted"]
    server = "jsonpath={.clusters[0].cluster.server}"
    servers = {
        ctx: _kubectl(merged, "config", "view", "--minify", f"--context={ctx}", "-o", server).stdout
        for ctx in ("admin", "edge")
    }
    assert servers == {
        "admin": f"https://127.0.0.1:{local['apiserver_port']}",
        "edge": f"https://127.0.0.1:{edge['apiserver_port']}",
    }


def test_an_object_made_in_one_cluster_is_not_in_the_other(
    cluster: Cluster, edge_cluster: Cluster
) -> None:
    merged = kubeconfigs(cluster, edge_cluster)
    name = f"only-edge-{uuid.uuid4().hex[:8]}"
    _kubectl(merged, "--context=edge", "create", "configmap", name, "-n", "default")
    assert _kubectl(merged, "--context=edge", "get", "configmap", name, "-n", "default")
    missing = _kubectl(
        merged, "--context=admin", "get", "configmap", name, "-n", "default", check=False
    )
    assert missing.returncode != 0 and "NotFound" in missing.stderr
    # The restricted identity of each cluster is its own.
    denied = _kubectl(
        merged, "--context=edge-restricted", "get", "configmaps", "-n", "default", check=False
    )
    assert denied.returncode != 0 and "Forbidden" in denied.stderr


def test_a_directory_keeps_its_cluster_name(edge_cluster: Cluster) -> None:
    env = dict(os.environ, KONFIG_CLUSTER_DIR=str(edge_cluster.dir))
    res = subprocess.run(
        [str(CLUSTER_SCRIPT), "--name", "other", "up"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    assert f"{edge_cluster.dir} holds the cluster 'edge', not 'other'" in res.stderr
    assert "pass --name edge" in res.stderr
    status = subprocess.run(
        [str(CLUSTER_SCRIPT), "--name", "edge", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert "contexts                 edge, edge-restricted" in status.stdout


def test_a_bad_name_is_refused_before_anything_starts(tmp_path: object) -> None:
    res = subprocess.run(
        [str(CLUSTER_SCRIPT), "--name", "Bad_Name", "up"],
        env=dict(os.environ, KONFIG_CLUSTER_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    assert "invalid cluster name 'Bad_Name'" in res.stderr
    assert not any(p.name == "state.json" for p in tmp_path.iterdir())  # type: ignore[attr-defined]
