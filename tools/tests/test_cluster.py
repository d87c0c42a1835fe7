"""The local control plane from hack/cluster, exercised with kubectl."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from fixtures.cluster import CLUSTER_SCRIPT, Cluster

pytestmark = pytest.mark.cluster

WAIT = "--timeout=60s"


def _pinned_kube_version() -> str:
    match = re.search(r'^KUBE_VERSION = "(v[0-9.]+)"', CLUSTER_SCRIPT.read_text(), re.MULTILINE)
    assert match, "KUBE_VERSION not found in hack/cluster"
    return match.group(1)


def _namespace(cluster: Cluster) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    return name


def test_admin_lists_namespaces(cluster: Cluster) -> None:
    out = cluster.kubectl("get", "namespaces", "-o", "name").stdout.split()
    assert {"namespace/default", "namespace/kube-system"} <= set(out)


def test_server_version_is_the_pin(cluster: Cluster) -> None:
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == _pinned_kube_version()


def test_kubeconfig_verifies_the_server_certificate(cluster: Cluster) -> None:
    text = cluster.kubeconfig.read_text()
    assert "certificate-authority-data:" in text
    assert "insecure-skip-tls-verify" not in text


def test_restricted_identity_cannot_create_configmap(cluster: Cluster) -> None:
    manifest = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nope"}})
    res = cluster.kubectl(
        "create",
        "-n",
        "default",
        "-f",
        "-",
        input=manifest,
        context=cluster.restricted_context,
        check=False,
    )
    assert res.returncode != 0
    assert "Error from server (Forbidden)" in res.stderr
    assert 'User "konfig-restricted" cannot create resource "configmaps"' in res.stderr


def test_restricted_identity_reads_only_its_namespace(cluster: Cluster) -> None:
    who = cluster.kubectl(
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
        context=cluster.restricted_context,
    )
    assert who.stdout == "konfig-restricted"
    cluster.kubectl(
        "get", "configmaps", "-n", "konfig-restricted", context=cluster.restricted_context
    )
    res = cluster.kubectl(
        "get", "configmaps", "-n", "default", context=cluster.restricted_context, check=False
    )
    assert res.returncode != 0 and "Forbidden" in res.stderr


def test_nodes_are_ready(cluster: Cluster) -> None:
    cluster.kubectl("wait", "--for=condition=Ready", "node", "--all", WAIT)


def test_deployment_becomes_available(cluster: Cluster) -> None:
    ns = _namespace(cluster)
    cluster.kubectl(
        "create", "deployment", "web", "-n", ns, "--image=registry.invalid/web:1", "--replicas=1"
    )
    cluster.kubectl("wait", "-n", ns, "--for=condition=Available", "deployment/web", WAIT)
    pods = json.loads(cluster.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
    assert [p["status"]["phase"] for p in pods] == ["Running"]
    assert pods[0]["spec"]["nodeName"].startswith("kwok-node-")


def test_job_completes(cluster: Cluster) -> None:
    ns = _namespace(cluster)
    cluster.kubectl("create", "job", "once", "-n", ns, "--image=registry.invalid/once:1")
    cluster.kubectl("wait", "-n", ns, "--for=condition=Complete", "job/once", WAIT)


def test_apiserver_stop_and_start_keeps_data(cluster: Cluster) -> None:
    ns = _namespace(cluster)
    cluster.kubectl("create", "configmap", "survivor", "-n", ns, "--from-literal=k=v")

    cluster.stop_apiserver()
    try:
        down = cluster.kubectl("get", "namespaces", "--request-timeout=5s", check=False)
        assert down.returncode != 0
        assert "connection refused" in down.stderr or "was refused" in down.stderr
    finally:
        cluster.start_apiserver()

    got = cluster.kubectl("get", "configmap", "survivor", "-n", ns, "-o", "jsonpath={.data.k}")
    assert got.stdout == "v"
    # Controllers, scheduler and kwok work again after the outage. The bound is generous:
    # on a loaded 2-core CI machine after several outages in one session, kwok retaking
    # its nodes has been seen to take longer than 20 s.
    cluster.kubectl("create", "deployment", "after", "-n", ns, "--image=registry.invalid/a:1")
    waited = cluster.kubectl(
        "wait",
        "-n",
        ns,
        "--for=condition=Available",
        "deployment/after",
        "--timeout=120s",
        check=False,
    )
    if waited.returncode != 0:
        state = cluster.kubectl(
            "get",
            "deployments,replicasets,pods,nodes,events",
            "-n",
            ns,
            "-o",
            "wide",
            check=False,
        )
        raise AssertionError(
            f"deployment/after not Available 120 s after the restart:\n{waited.stderr}\n"
            f"{state.stdout}{state.stderr}"
        )
