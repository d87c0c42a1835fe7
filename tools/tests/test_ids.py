"""Resource ids (konfig.ids): the one format, parser and type."""

from __future__ import annotations

import pytest

from konfig.ids import ObjectRef, ResourceIdError, parse_id, resource_id


def test_resource_id_format() -> None:
    web = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"namespace": "apps", "name": "web"},
    }
    assert resource_id(web) == "apps/v1:Deployment:apps:web"
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}
    assert resource_id(ns) == "v1:Namespace:apps"


def test_parse_id() -> None:
    assert parse_id("apps/v1:Deployment:ns:web") == ObjectRef("apps/v1", "Deployment", "ns", "web")
    assert parse_id("v1:Namespace:ns") == ObjectRef("v1", "Namespace", None, "ns")
    assert parse_id("apps/v1:Deployment:ns:web").group_kind == "Deployment.apps"
    assert parse_id("v1:Namespace:ns").group_kind == "Namespace"
    for bad in ("web", "v1:Namespace", "a:b:c:d:e", "v1::x"):
        with pytest.raises(ResourceIdError, match="malformed resource id"):
            parse_id(bad)


def test_known_scope_reads_cluster_scoped_names_with_colons_whole() -> None:
    rid = "rbac.authorization.k8s.io/v1:ClusterRole:system:controller:x"
    assert parse_id(rid, namespaced=False) == ObjectRef(
        "rbac.authorization.k8s.io/v1", "ClusterRole", None, "system:controller:x"
    )
    assert parse_id("v1:ConfigMap:ns:a:b", namespaced=True) == ObjectRef(
        "v1", "ConfigMap", "ns", "a:b"
    )


def test_ref_round_trips_and_describes_itself() -> None:
    for rid in ("apps/v1:Deployment:ns:web", "v1:Namespace:ns"):
        assert parse_id(rid).id == rid
    assert parse_id("apps/v1:Deployment:ns:web").describe() == (
        "Deployment web in namespace ns (apps/v1)"
    )
    assert parse_id("v1:Namespace:ns").describe() == "Namespace ns (v1)"
