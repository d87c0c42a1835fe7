"""The Kubernetes layer against the real local control plane, plus its pure parts."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fixtures.cluster import Cluster
from kubeutil import configmap, crd, namespace, unique, wait_for

from konfig.engine.kube import (
    Kube,
    KubeApiError,
    KubeError,
    KubeTarget,
    UnknownKindError,
    connect,
    failure_from,
)

# --- pure ------------------------------------------------------------------------------


def test_failure_from_status_with_immutable_causes() -> None:
    body = json.dumps(
        {
            "kind": "Status",
            "code": 422,
            "reason": "Invalid",
            "message": 'Job.batch "m" is invalid: spec.template: Invalid value: field is immutable',
            "details": {
                "kind": "Job",
                "name": "m",
                "causes": [
                    {"field": "spec.template", "message": "Invalid value: field is immutable"}
                ],
            },
        }
    )
    failure = failure_from(422, "Unprocessable Entity", body)
    assert failure.status == 422 and failure.reason == "Invalid"
    assert failure.immutable_fields == ("spec.template",)
    assert failure.namespace_missing is None


def test_failure_from_namespace_not_found_and_non_json() -> None:
    body = json.dumps(
        {
            "code": 404,
            "reason": "NotFound",
            "message": 'namespaces "x" not found',
            "details": {"kind": "namespaces", "name": "x"},
        }
    )
    assert failure_from(404, "Not Found", body).namespace_missing == "x"
    plain = failure_from(502, "Bad Gateway", b"upstream exploded")
    assert (plain.status, plain.message, plain.immutable_fields) == (502, "upstream exploded", ())


def test_missing_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KubeError, match="kubeconfig not found") as info:
        connect(KubeTarget(str(tmp_path / "nope"), None))
    assert info.value.hint and "--kubeconfig" in info.value.hint


# --- against the cluster ---------------------------------------------------------------


@pytest.fixture(scope="module")
def kube(cluster: Cluster) -> Iterator[Kube]:
    k = connect(KubeTarget(str(cluster.kubeconfig), cluster.admin_context))
    yield k
    k.close()


@pytest.mark.cluster
def test_connect_resolves_context_and_server(kube: Kube, cluster: Cluster) -> None:
    assert kube.context == "admin"
    assert kube.server.startswith("https://127.0.0.1:")
    assert kube.resource("apps/v1", "Deployment").plural == "deployments"
    assert kube.is_namespaced("v1", "ConfigMap")
    assert not kube.is_namespaced("v1", "Namespace")


@pytest.mark.cluster
def test_unknown_context_lists_the_available_ones(cluster: Cluster) -> None:
    with pytest.raises(KubeError, match=r"has no context 'prod' \(it has: admin, restricted\)"):
        connect(KubeTarget(str(cluster.kubeconfig), "prod"))


@pytest.mark.cluster
def test_dry_run_apply_writes_nothing_and_real_apply_round_trips(kube: Kube) -> None:
    ns = unique("p6k")
    assert kube.get("v1", "Namespace", ns, None) is None
    dry = kube.apply(namespace(ns), dry_run=True)
    assert dry["metadata"]["name"] == ns
    assert kube.get("v1", "Namespace", ns, None) is None

    kube.apply(namespace(ns), dry_run=False)
    created = kube.apply(
        {**configmap(ns), "metadata": {"name": "cm", "namespace": ns, "labels": {"t": ns}}},
        dry_run=False,
    )
    managers = {m["manager"] for m in created["metadata"]["managedFields"]}
    assert managers == {"konfig"}
    assert [
        o["metadata"]["name"] for o in kube.list("v1", "ConfigMap", ns, label_selector=f"t={ns}")
    ] == ["cm"]
    listed = kube.list("v1", "ConfigMap", ns, label_selector=f"t={ns}")[0]
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "ConfigMap")

    # a UID precondition protects a re-created object
    with pytest.raises(KubeApiError) as info:
        kube.delete("v1", "ConfigMap", "cm", ns, uid="00000000-0000-0000-0000-000000000000")
    assert info.value.failure.status == 409
    kube.delete(
        "v1", "ConfigMap", "cm", ns, uid=created["metadata"]["uid"], propagation="Background"
    )
    assert kube.get("v1", "ConfigMap", "cm", ns) is None
    kube.delete("v1", "ConfigMap", "cm", ns, uid=None)  # already gone is fine


@pytest.mark.cluster
def test_discovery_refreshes_after_a_crd_appears(kube: Kube) -> None:
    group = f"{unique('g')}.konfig.test"
    with pytest.raises(UnknownKindError, match=r"has no resource of kind Sprocket"):
        kube.resource(f"{group}/v1", "Sprocket")
    kube.apply(crd(group, "Sprocket", "sprockets"), dry_run=False)

    def found() -> bool:
        return kube.has_kind(f"{group}/v1", "Sprocket")

    wait_for(found, "discovery to serve the new kind")
    info = kube.resource(f"{group}/v1", "Sprocket")
    assert (info.plural, info.namespaced) == ("sprockets", True)


@pytest.mark.cluster
def test_restricted_identity_gets_a_clear_forbidden_error(cluster: Cluster) -> None:
    target = KubeTarget(str(cluster.kubeconfig), cluster.restricted_context)
    with connect(target) as kube, pytest.raises(KubeApiError) as info:
        kube.apply(configmap("konfig-restricted"), dry_run=True)
    err = info.value
    assert err.failure.status == 403
    text = str(err)
    assert "user 'restricted' of context 'restricted'" in text
    assert "dry-run server-side apply of ConfigMap cm in namespace konfig-restricted" in text
    assert 'User "konfig-restricted" cannot patch resource "configmaps"' in text
    assert "RBAC" in text and "--context" in text


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.cluster
def test_unreachable_server_names_the_url(cluster: Cluster, tmp_path: Path) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    port = _dead_port()
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{port}"
    broken = tmp_path / "kubeconfig"
    broken.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeError) as info:
        connect(KubeTarget(str(broken), "admin"))
    text = str(info.value)
    assert f"cannot reach the Kubernetes API server at https://127.0.0.1:{port}" in text
    assert "connection refused" in text
    assert "hint:" in text


@pytest.mark.cluster
def test_rejected_credentials_name_the_user_and_how_to_fix(
    cluster: Cluster, tmp_path: Path
) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for user in config["users"]:
        user["user"]["token"] = "not-a-valid-token"
    broken = tmp_path / "kubeconfig"
    broken.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeApiError) as info:
        connect(KubeTarget(str(broken), "admin"))
    assert info.value.failure.status == 401
    text = str(info.value)
    assert "rejected the credentials of user 'admin' of context 'admin'" in text
    assert f"renew the credentials of user 'admin' in {broken}" in text


# --- the server-side apply body (non-BMP characters, issue 19 item 5) ------------------


def test_apply_body_sends_emoji_as_utf8_not_as_escapes() -> None:
    from konfig.engine.kube import apply_body

    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "annotations": {"note": "deploy \U0001f680"}},
        "data": {"message": "ok \U0001f600 \u00e9", "ctl": "a\x85b\u2028c\x07d"},
    }
    body = apply_body(manifest)
    text = body.decode("utf-8")
    assert "\U0001f600" in text and "\U0001f680" in text and "\u00e9" in text
    assert "\\ud83d" not in text and "\\U0001" not in text
    # what YAML would fold or refuse is escaped, and reads back as the same value
    assert "\\u0085" in text and "\\u2028" in text and "\\u0007" in text
    assert "\x85" not in text and "\u2028" not in text
    assert json.loads(body) == manifest
    assert yaml.safe_load(body) == manifest  # the apply-patch+yaml reading of it


# --- exec credential plugins (issue 19 item 2): konfig runs them, bounded -------------


def _exec_kubeconfig(cluster: Cluster, tmp_path: Path, script: str) -> tuple[Path, Path]:
    """The cluster's kubeconfig with the admin user's token replaced by an exec plugin."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    plugin = tmp_path / "plugin"
    calls = tmp_path / "calls"
    for entry in config["users"]:
        if entry["name"] == _user_of(config, "admin"):
            token = entry["user"].pop("token")
            plugin.write_text(
                f'#!/bin/sh\necho called >> "{calls}"\n' + script.replace("@TOKEN", token),
                encoding="utf-8",
            )
            plugin.chmod(0o755)
            entry["user"]["exec"] = {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": str(plugin),
                "interactiveMode": "Never",
            }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path, calls


def _user_of(config: dict, context: str) -> str:  # type: ignore[type-arg]
    for entry in config["contexts"]:
        if entry["name"] == context:
            return str(entry["context"]["user"])
    raise AssertionError(context)


@pytest.mark.cluster
def test_an_exec_credential_plugin_provides_the_token(cluster: Cluster, tmp_path: Path) -> None:
    credential = (
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        '"status":{"token":"@TOKEN","expirationTimestamp":"2099-01-01T00:00:00Z"}}'
    )
    path, calls = _exec_kubeconfig(cluster, tmp_path, f"echo '{credential}'\n")
    with connect(KubeTarget(str(path), "admin")) as kube:
        assert kube.get("v1", "Namespace", "default", None) is not None
    assert calls.read_text().count("called") == 1


@pytest.mark.cluster
def test_an_expired_exec_credential_is_fetched_again(cluster: Cluster, tmp_path: Path) -> None:
    # the first answer is already expired, so the first request runs the plugin again
    credential = (
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        '"status":{"token":"@TOKEN","expirationTimestamp":"2001-01-01T00:00:00Z"}}'
    )
    path, calls = _exec_kubeconfig(cluster, tmp_path, f"echo '{credential}'\n")
    with connect(KubeTarget(str(path), "admin")) as kube:
        assert kube.get("v1", "Namespace", "default", None) is not None
    assert calls.read_text().count("called") >= 2
