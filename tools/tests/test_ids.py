"""Resource ids (konfig.ids): the one format, parser and type."""

from __future__ import annotations

import pytest
from fixtures.cluster import Cluster

from konfig.ids import (
    BUILTIN_GROUPS,
    ObjectRef,
    ResourceIdError,
    builtin_namespaced,
    crd_scopes,
    group_of,
    parse_id,
    resource_id,
    scope_from,
)


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


def test_rbac_names_with_colons_parse_by_the_kinds_scope() -> None:
    rbac = "rbac.authorization.k8s.io/v1"
    # cluster-scoped: everything after the kind is the name, however many colons
    for name in ("rw:one-colon", "system:auth-delegator", "metrics-server:system:auth-delegator"):
        ref = parse_id(f"{rbac}:ClusterRole:{name}")
        assert ref == ObjectRef(rbac, "ClusterRole", None, name)
        assert ref.id == f"{rbac}:ClusterRole:{name}"
        assert parse_id(f"{rbac}:ClusterRoleBinding:{name}").namespace is None
    # namespaced: the namespace (a DNS label, never a colon) first, then the whole name
    assert parse_id(f"{rbac}:Role:apps:x:leader") == ObjectRef(rbac, "Role", "apps", "x:leader")
    assert parse_id(f"{rbac}:RoleBinding:kube-system:a:b:c").name == "a:b:c"
    with pytest.raises(ResourceIdError, match="namespaced"):
        parse_id(f"{rbac}:Role:only-a-name")


def test_custom_kinds_take_their_scope_from_the_caller_or_the_segments() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Widget"}},
    }
    known = crd_scopes([crd, {"apiVersion": "v1", "kind": "ConfigMap"}])
    assert known == {("example.com", "Widget"): False}
    scope = scope_from(known)
    assert parse_id("example.com/v1:Widget:a", scope=scope).namespace is None
    # unknown scope: a custom resource's name is a DNS subdomain, so segments decide
    assert parse_id("example.com/v1:Gadget:ns:g") == ObjectRef(
        "example.com/v1", "Gadget", "ns", "g"
    )
    assert parse_id("example.com/v1:Gadget:g").namespace is None
    with pytest.raises(ResourceIdError, match="unknown scope"):
        parse_id("example.com/v1:Gadget:ns:a:b")
    assert builtin_namespaced("v1", "ConfigMap") is True
    assert builtin_namespaced("v1", "Namespace") is False
    assert builtin_namespaced("example.com/v1", "Widget") is None
    assert builtin_namespaced("v2", "ConfigMap") is None  # no such core version


@pytest.mark.cluster
def test_the_scope_table_is_the_api_servers(cluster: Cluster) -> None:
    """Every kind the control plane serves in a built-in group has the scope the table
    gives it (discovery: kubectl api-resources)."""
    res = cluster.kubectl("api-resources", "-o", "wide", "--no-headers")
    served = 0
    for line in res.stdout.splitlines():
        for namespaced in ("true", "false"):
            cols = line.split()
            if namespaced not in cols:
                continue
            at = cols.index(namespaced)
            kind, api_version = cols[at + 1], cols[at - 1]
            if group_of(api_version) in BUILTIN_GROUPS:
                served += 1
                assert builtin_namespaced(api_version, kind) is (namespaced == "true"), line
            break
    assert served > 40
