"""The Kubernetes layer against the real local control plane, plus its pure parts.

Every test against the cluster runs twice: with the kubeconfig read by konfig
(``client="auto"``, the fast path) and by the ``kubernetes`` client's loader
(``client="kubernetes"``, the fallback); both must behave alike."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from fixtures.cluster import Cluster
from fixtures.faults import KeepAliveServer, write_kubeconfig
from kubeutil import configmap, crd, namespace, unique, wait_for

from konfig.engine.kube import (
    CLIENT_AUTO,
    CLIENT_KUBERNETES,
    READ_BY_KONFIG,
    READ_BY_KUBERNETES,
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


@pytest.fixture(scope="module", params=[CLIENT_AUTO, CLIENT_KUBERNETES])
def client(request: pytest.FixtureRequest) -> str:
    """Who reads the kubeconfig: konfig (the cluster's kubeconfig is one it understands)
    or the kubernetes client's loader."""
    return str(request.param)


READ_BY = {CLIENT_AUTO: READ_BY_KONFIG, CLIENT_KUBERNETES: READ_BY_KUBERNETES}


@pytest.fixture(scope="module")
def kube(cluster: Cluster, client: str) -> Iterator[Kube]:
    k = connect(KubeTarget(str(cluster.kubeconfig), cluster.admin_context), client=client)
    assert k.client == READ_BY[client]
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
def test_unknown_context_lists_the_available_ones(cluster: Cluster, client: str) -> None:
    with pytest.raises(KubeError, match=r"has no context 'prod' \(it has: admin, restricted\)"):
        connect(KubeTarget(str(cluster.kubeconfig), "prod"), client=client)


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
def test_restricted_identity_gets_a_clear_forbidden_error(cluster: Cluster, client: str) -> None:
    target = KubeTarget(str(cluster.kubeconfig), cluster.restricted_context)
    with connect(target, client=client) as kube, pytest.raises(KubeApiError) as info:
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
def test_unreachable_server_names_the_url(cluster: Cluster, tmp_path: Path, client: str) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    port = _dead_port()
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{port}"
    broken = tmp_path / "kubeconfig"
    broken.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeError) as info:
        connect(KubeTarget(str(broken), "admin"), client=client)
    text = str(info.value)
    assert f"cannot reach the Kubernetes API server at https://127.0.0.1:{port}" in text
    assert "connection refused" in text
    assert "hint:" in text


@pytest.mark.cluster
def test_rejected_credentials_name_the_user_and_how_to_fix(
    cluster: Cluster, tmp_path: Path, client: str
) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for user in config["users"]:
        user["user"]["token"] = "not-a-valid-token"
    broken = tmp_path / "kubeconfig"
    broken.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeApiError) as info:
        connect(KubeTarget(str(broken), "admin"), client=client)
    assert info.value.failure.status == 401
    text = str(info.value)
    assert "rejected the credentials of user 'admin' of context 'admin'" in text
    assert f"renew the credentials of user 'admin' in {broken}" in text


# --- the server-side apply body (non-BMP characters, issue 19 item 5) ------------------


def test_apply_body_sends_emoji_as_utf8_not_as_escapes() -> None:
    from konfig.engine.kube.request import apply_body

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
def test_an_exec_credential_plugin_provides_the_token(
    cluster: Cluster, tmp_path: Path, client: str
) -> None:
    credential = (
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        '"status":{"token":"@TOKEN","expirationTimestamp":"2099-01-01T00:00:00Z"}}'
    )
    path, calls = _exec_kubeconfig(cluster, tmp_path, f"echo '{credential}'\n")
    with connect(KubeTarget(str(path), "admin"), client=client) as kube:
        assert kube.client == READ_BY[client]
        assert kube.get("v1", "Namespace", "default", None) is not None
    assert calls.read_text().count("called") == 1


@pytest.mark.cluster
def test_an_expired_exec_credential_is_fetched_again(
    cluster: Cluster, tmp_path: Path, client: str
) -> None:
    # the first answer is already expired, so the first request runs the plugin again
    credential = (
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        '"status":{"token":"@TOKEN","expirationTimestamp":"2001-01-01T00:00:00Z"}}'
    )
    path, calls = _exec_kubeconfig(cluster, tmp_path, f"echo '{credential}'\n")
    with connect(KubeTarget(str(path), "admin"), client=client) as kube:
        assert kube.client == READ_BY[client]
        assert kube.get("v1", "Namespace", "default", None) is not None
    assert calls.read_text().count("called") >= 2


@pytest.mark.cluster
def test_apply_without_force_is_a_conflict_with_the_other_manager(kube: Kube) -> None:
    ns = unique("p6f")
    kube.apply(namespace(ns), dry_run=False)
    kube.apply(configmap(ns), dry_run=False, field_manager="by-hand")
    changed = configmap(ns, k="mine")  # the field "by-hand" set to "v"
    with pytest.raises(KubeApiError) as info:
        kube.apply(changed, dry_run=True, force=False)
    assert info.value.failure.status == 409
    assert "conflict" in str(info.value).lower() and "by-hand" in str(info.value)
    assert kube.apply(changed, dry_run=True, force=True)["data"] == {"k": "mine"}
    kube.delete("v1", "Namespace", ns, None, uid=None, propagation="Background")


# --- kubeconfigs: konfig's reader and the kubernetes client's loader agree -------------


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _client_certificate(cluster: Cluster, where: Path) -> tuple[bytes, bytes]:
    """A client certificate (PEM) of the group system:masters, signed by the cluster's CA,
    and its key."""
    pki = cluster.kubeconfig.parent / "pki"
    where.mkdir(parents=True, exist_ok=True)
    _openssl(where, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "key.pem")
    _openssl(where, "req", "-new", "-key", "key.pem", "-out", "req.csr",
             "-subj", "/CN=konfig-cert-user/O=system:masters")  # fmt: skip
    _openssl(where, "x509", "-req", "-in", "req.csr", "-CA", str(pki / "ca.crt"),
             "-CAkey", str(pki / "ca.key"), "-set_serial", "7", "-days", "1", "-sha256",
             "-out", "cert.pem")  # fmt: skip
    return (where / "cert.pem").read_bytes(), (where / "key.pem").read_bytes()


def _other_ca(where: Path) -> bytes:
    where.mkdir(parents=True, exist_ok=True)
    _openssl(where, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key")
    _openssl(where, "req", "-x509", "-new", "-key", "ca.key", "-days", "1",
             "-subj", "/CN=not-the-cluster-ca", "-out", "ca.crt")  # fmt: skip
    return (where / "ca.crt").read_bytes()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _edit(cluster: Cluster, path: Path, change: Callable[[dict, dict, Path], None]) -> Path:  # type: ignore[type-arg]
    """The cluster's kubeconfig with the admin context's cluster and user entries edited
    by ``change(cluster_entry, user_entry, directory)``, written to ``path``."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    ctx = next(c["context"] for c in config["contexts"] if c["name"] == "admin")
    entry = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == ctx["user"])
    path.parent.mkdir(parents=True, exist_ok=True)
    change(entry, user, path.parent)
    path.write_text(yaml.safe_dump(config))
    return path


def _ca_as_file(entry: dict, user: dict, where: Path) -> None:  # type: ignore[type-arg]
    (where / "ca.crt").write_bytes(base64.b64decode(entry.pop("certificate-authority-data")))
    entry["certificate-authority"] = "ca.crt"  # relative to the kubeconfig


def _insecure(entry: dict, user: dict, where: Path) -> None:  # type: ignore[type-arg]
    entry.pop("certificate-authority-data")
    entry["insecure-skip-tls-verify"] = True


def _server_name(entry: dict, user: dict, where: Path) -> None:  # type: ignore[type-arg]
    entry["tls-server-name"] = "kubernetes"  # in the certificate; 127.0.0.1 is dialled


def _token_file(entry: dict, user: dict, where: Path) -> None:  # type: ignore[type-arg]
    (where / "token").write_text(user.pop("token") + "\n")
    user["tokenFile"] = "token"


def _unknown_key(entry: dict, user: dict, where: Path) -> None:  # type: ignore[type-arg]
    entry["x-vendor-setting"] = "1"  # konfig leaves what it does not know to the loader


def _wrong_server_name(entry: dict, user: dict, where: Path) -> None:  # type: ignore[type-arg]
    entry["tls-server-name"] = "elsewhere.example"


def _no_ca(entry: dict, user: dict, where: Path) -> None:  # type: ignore[type-arg]
    entry.pop("certificate-authority-data")  # the system's CAs do not know the cluster's


def _outcome(kubeconfig: Path, client: str) -> tuple[str, str, str]:
    """(who read the kubeconfig, the default Namespace's uid, '') or ('', '', error)."""
    try:
        with connect(KubeTarget(str(kubeconfig), "admin"), client=client) as kube:
            live = kube.get("v1", "Namespace", "default", None)
            assert live is not None
            return kube.client, str(live["metadata"]["uid"]), ""
    except KubeError as exc:
        return "", "", str(exc)


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("change", "read_by"),
    [
        (_ca_as_file, READ_BY_KONFIG),
        (_insecure, READ_BY_KONFIG),
        (_server_name, READ_BY_KONFIG),
        (_token_file, READ_BY_KONFIG),
        (_unknown_key, READ_BY_KUBERNETES),
    ],
)
def test_kubeconfig_variants_connect_alike_on_both_paths(
    cluster: Cluster, tmp_path: Path, change: Callable[..., None], read_by: str
) -> None:
    path = _edit(cluster, tmp_path / "k" / "kubeconfig", change)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        auto = _outcome(path, CLIENT_AUTO)
        loader = _outcome(path, CLIENT_KUBERNETES)
    # nothing printed per request (urllib3 warns on each unverified one by default)
    assert [w for w in said if issubclass(w.category, urllib3.exceptions.HTTPWarning)] == []
    assert auto[0] == read_by, auto
    assert loader[0] == READ_BY_KUBERNETES, loader
    assert auto[1] == loader[1] and auto[1], (auto, loader)


@pytest.mark.cluster
@pytest.mark.parametrize("as_files", [False, True])
def test_a_client_certificate_authenticates_on_both_paths(
    cluster: Cluster, tmp_path: Path, as_files: bool
) -> None:
    cert, key = _client_certificate(cluster, tmp_path / "k")

    def use_certificate(entry: dict, user: dict, where: Path) -> None:  # type: ignore[type-arg]
        user.pop("token")
        if as_files:  # cert.pem and key.pem beside the kubeconfig, relative
            user["client-certificate"], user["client-key"] = "cert.pem", "key.pem"
        else:
            user["client-certificate-data"], user["client-key-data"] = _b64(cert), _b64(key)

    path = _edit(cluster, tmp_path / "k" / "kubeconfig", use_certificate)
    auto = _outcome(path, CLIENT_AUTO)
    loader = _outcome(path, CLIENT_KUBERNETES)
    assert auto[0] == READ_BY_KONFIG and loader[0] == READ_BY_KUBERNETES, (auto, loader)
    assert auto[1] == loader[1] and auto[1], (auto, loader)
    # the key material written for ssl is gone again
    assert not list(Path(tempfile.gettempdir()).glob("konfig-tls-*"))


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_wrong_server_name, "elsewhere.example"),
        (_no_ca, "certificate verify failed"),
        ("other-ca", "certificate verify failed"),
    ],
)
def test_tls_failures_are_the_same_clear_error_on_both_paths(
    cluster: Cluster, tmp_path: Path, change: Any, expected: str
) -> None:
    if change == "other-ca":
        ca = _other_ca(tmp_path / "ca")

        def change(entry: dict, user: dict, where: Path) -> None:  # type: ignore[type-arg]
            entry["certificate-authority-data"] = _b64(ca)

    path = _edit(cluster, tmp_path / "k" / "kubeconfig", change)
    auto = _outcome(path, CLIENT_AUTO)
    loader = _outcome(path, CLIENT_KUBERNETES)
    assert auto[2] and auto[2] == loader[2], (auto, loader)
    assert "cannot reach the Kubernetes API server at https://127.0.0.1:" in auto[2]
    assert expected in auto[2], auto[2]


def test_unreadable_kubeconfigs_are_clear_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(KubeError, match=r"kubeconfig .*empty is empty"):
        connect(KubeTarget(str(empty), None))
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n")
    with pytest.raises(KubeError, match=r"cannot read kubeconfig .*broken"):
        connect(KubeTarget(str(broken), None))
    listed = tmp_path / "listed"
    listed.write_text("- a\n- b\n")
    with pytest.raises(KubeError, match=r"is not a kubeconfig \(no mapping at the top\)"):
        connect(KubeTarget(str(listed), None))
    with pytest.raises(KubeError, match=r"unknown Kubernetes client 'kubectl'"):
        connect(KubeTarget(str(listed), None), client="kubectl")


# --- the transport: keep-alive connections, and a server that drops them ---------------


def _connect_to(server: KeepAliveServer, tmp_path: Path) -> Kube:
    path = write_kubeconfig(tmp_path / "kubeconfig", server.url, {"token": "t0k"})
    return connect(KubeTarget(str(path), "ctx"))


def test_requests_share_one_kept_alive_connection(tmp_path: Path) -> None:
    server = KeepAliveServer("/k8s/clusters/c-1")  # a server URL with a path keeps it
    try:
        with _connect_to(server, tmp_path) as kube:
            for name in ("a", "b", "c"):
                live = kube.get("v1", "Namespace", name, None)
                assert live is not None and live["metadata"]["name"] == name
            assert kube.get("v1", "Namespace", "missing", None) is None  # a 404 keeps it too
        assert server.connections == 1
        paths = [path for path, _ in server.requests]
        assert paths[:3] == ["/k8s/clusters/c-1/api", "/k8s/clusters/c-1/api/v1",
                             "/k8s/clusters/c-1/api/v1/namespaces/a"]  # fmt: skip
        assert {auth for _, auth in server.requests} == {"Bearer t0k"}
    finally:
        server.close()


@pytest.mark.parametrize("how", ["drop_second", "close_silently"])
def test_a_connection_the_server_dropped_is_replaced(tmp_path: Path, how: str) -> None:
    """The server closes a kept-alive connection: as the next request arrives on it (the
    request is sent again on a new connection), or right after answering without saying
    so (the closed connection is not used). Every request gets its answer."""
    server = KeepAliveServer(**{how: True})
    try:
        with _connect_to(server, tmp_path) as kube:
            for name in ("a", "b", "c", "d"):
                live = kube.get("v1", "Namespace", name, None)
                assert live is not None and live["metadata"]["name"] == name
        answered = [path for path, _ in server.requests]
        assert answered == ["/api", "/api/v1"] + [f"/api/v1/namespaces/{n}" for n in "abcd"]
        assert server.connections > 1
    finally:
        server.close()


@pytest.mark.cluster
def test_concurrent_requests_each_get_their_answer(kube: Kube) -> None:
    from concurrent.futures import ThreadPoolExecutor

    names = ["default", "kube-system", "kube-public", "kube-node-lease"] * 8
    with ThreadPoolExecutor(max_workers=16) as pool:
        found = list(pool.map(lambda n: kube.get("v1", "Namespace", n, None), names))
    assert [f["metadata"]["name"] for f in found if f is not None] == names
