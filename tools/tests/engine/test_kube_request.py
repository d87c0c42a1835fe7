"""Kubernetes API requests as data: built without a socket, a kubeconfig or a cluster."""

from __future__ import annotations

import json

from konfig import __version__
from konfig.engine.kube.request import (
    Request,
    ResourceInfo,
    apply,
    delete,
    get,
    group_version_path,
    list_page,
    read,
)

CONFIGMAP = ResourceInfo("v1", "ConfigMap", "configmaps", namespaced=True)
DEPLOYMENT = ResourceInfo("apps/v1", "Deployment", "deployments", namespaced=True)
NAMESPACE = ResourceInfo("v1", "Namespace", "namespaces", namespaced=False)


def test_get_names_the_object_and_its_path() -> None:
    assert get(DEPLOYMENT, "web", "shop") == Request(
        "GET",
        "/apis/apps/v1/namespaces/shop/deployments/web",
        "get Deployment web in namespace shop (apps/v1)",
    )
    # a cluster-scoped kind's path has no namespace
    assert get(NAMESPACE, "shop", None).path == "/api/v1/namespaces/shop"


def test_server_side_apply_is_a_patch_with_the_field_manager_and_dry_run() -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "shop"},
        "data": {"greeting": "héllo 😀"},
    }
    call = apply(CONFIGMAP, manifest, dry_run=True, force=True)
    assert call.method == "PATCH"
    assert call.path == "/api/v1/namespaces/shop/configmaps/settings"
    assert call.content_type == "application/apply-patch+yaml"
    assert call.target == (
        "/api/v1/namespaces/shop/configmaps/settings?fieldManager=konfig&force=true&dryRun=All"
    )
    assert call.what == "dry-run server-side apply of ConfigMap settings in namespace shop (v1)"
    assert call.body == json.dumps(manifest, ensure_ascii=False, separators=(",", ":")).encode()
    real = apply(CONFIGMAP, manifest, dry_run=False, force=False, field_manager="by-hand")
    assert real.query == {"fieldManager": "by-hand"}
    assert real.what == "server-side apply of ConfigMap settings in namespace shop (v1)"


def test_delete_sends_its_options_and_the_uid_precondition() -> None:
    call = delete(CONFIGMAP, "settings", "shop", uid="u-1", propagation="Foreground")
    assert (call.method, call.path) == ("DELETE", "/api/v1/namespaces/shop/configmaps/settings")
    assert call.body is not None
    assert json.loads(call.body) == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": "u-1"},
    }
    any_incarnation = delete(CONFIGMAP, "settings", "shop", uid=None, propagation="Background")
    assert any_incarnation.body == (
        b'{"apiVersion":"v1","kind":"DeleteOptions","propagationPolicy":"Background"}'
    )


def test_a_list_page_carries_selector_limit_and_continue_token() -> None:
    first = list_page(CONFIGMAP, "shop", "app=web", None)
    assert first.target == "/api/v1/namespaces/shop/configmaps?labelSelector=app%3Dweb&limit=500"
    assert first.what == "list configmaps (v1) in namespace shop"
    every = list_page(DEPLOYMENT, None, None, "tok en")
    assert every.target == "/apis/apps/v1/deployments?limit=500&continue=tok+en"
    assert every.what == "list deployments (apps/v1)"
    assert every.headers(None)["Accept"] == "application/json"


def test_a_metadata_only_list_asks_for_partial_object_metadata() -> None:
    call = list_page(CONFIGMAP, "shop", None, None, metadata_only=True)
    accept = call.headers(None)["Accept"]
    assert accept.startswith("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    assert accept.endswith(",application/json")  # a server without it answers the full list
    assert call.target == list_page(CONFIGMAP, "shop", None, None).target


def test_paths_are_quoted_and_discovery_paths_follow_the_group() -> None:
    assert read("/api/v1/namespaces/a b", "x").target == "/api/v1/namespaces/a%20b"
    assert group_version_path("v1") == "/api/v1"
    assert group_version_path("apps/v1") == "/apis/apps/v1"
    assert group_version_path("") is None


def test_headers_carry_the_credential_and_a_content_type_only_with_a_body() -> None:
    agent = f"konfig/{__version__}"
    assert read("/api", "discover").headers(None) == {
        "Accept": "application/json",
        "User-Agent": agent,
    }
    call = delete(CONFIGMAP, "settings", "shop", uid=None, propagation="Foreground")
    assert call.headers("Bearer t0ken\n") == {
        "Accept": "application/json",
        "User-Agent": agent,
        "Authorization": "Bearer t0ken",  # a token file's newline is not sent
        "Content-Type": "application/json",
    }
