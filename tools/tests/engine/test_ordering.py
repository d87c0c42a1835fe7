"""Ordering: explicit and implicit edges, levels, kind order, errors before any write."""

from __future__ import annotations

import pytest

from konfig.engine.ordering import (
    Item,
    OrderError,
    build_graph,
    dependents,
    item_from_manifest,
    levels_of,
    reverse_levels,
)

NS = Item("v1:Namespace:web", "v1", "Namespace", None)
DEPLOY = Item("apps/v1:Deployment:web:web", "apps/v1", "Deployment", "web")
SVC = Item("v1:Service:web:web", "v1", "Service", "web")
CM = Item("v1:ConfigMap:web:cfg", "v1", "ConfigMap", "web")
CRD_MANIFEST = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}},
}


def test_namespace_edge_and_kind_order_within_a_level() -> None:
    assert levels_of([DEPLOY, SVC, CM, NS]) == [
        ["v1:Namespace:web"],
        ["v1:ConfigMap:web:cfg", "v1:Service:web:web", "apps/v1:Deployment:web:web"],
    ]


def test_no_namespace_edge_when_namespace_not_in_plan() -> None:
    assert levels_of([DEPLOY, SVC]) == [["v1:Service:web:web", "apps/v1:Deployment:web:web"]]


def test_explicit_depends_on_makes_a_new_level() -> None:
    deploy = Item(DEPLOY.id, "apps/v1", "Deployment", "web", depends_on=(CM.id,))
    svc = Item(SVC.id, "v1", "Service", "web", depends_on=(deploy.id,))
    assert levels_of([svc, deploy, CM, NS]) == [[NS.id], [CM.id], [DEPLOY.id], [SVC.id]]


def test_custom_resource_after_its_crd() -> None:
    crd = item_from_manifest(
        "apiextensions.k8s.io/v1:CustomResourceDefinition:widgets.example.com", CRD_MANIFEST
    )
    assert crd.defines == ("example.com", "Widget")
    widget = item_from_manifest(
        "example.com/v1:Widget:web:w1",
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "web"},
        },
    )
    other = Item("other.io/v1:Widget:web:w2", "other.io/v1", "Widget", "web")
    assert levels_of([widget, other, crd, NS]) == [[crd.id, NS.id], [widget.id, other.id]]
    graph = build_graph([widget, other, crd, NS])
    assert graph.has_edge(crd.id, widget.id)
    assert not graph.has_edge(crd.id, other.id)


def test_unknown_dependency_is_rejected_naming_both() -> None:
    bad = Item(DEPLOY.id, "apps/v1", "Deployment", "web", depends_on=("v1:Secret:web:nope",))
    with pytest.raises(
        OrderError, match=r"apps/v1:Deployment:web:web depends on 'v1:Secret:web:nope'"
    ):
        levels_of([bad, NS])


def test_cycle_is_rejected_naming_the_path() -> None:
    a = Item("v1:ConfigMap:web:a", "v1", "ConfigMap", "web", depends_on=("v1:ConfigMap:web:b",))
    b = Item("v1:ConfigMap:web:b", "v1", "ConfigMap", "web", depends_on=("v1:ConfigMap:web:a",))
    with pytest.raises(
        OrderError, match=r"dependency cycle: .*v1:ConfigMap:web:a.*v1:ConfigMap:web:b"
    ):
        levels_of([a, b])


def test_self_dependency_is_rejected() -> None:
    a = Item("v1:ConfigMap:web:a", "v1", "ConfigMap", "web", depends_on=("v1:ConfigMap:web:a",))
    with pytest.raises(OrderError, match="depends on itself"):
        levels_of([a])


def test_reverse_levels_put_dependents_first() -> None:
    assert reverse_levels([NS, DEPLOY, SVC, CM]) == [
        ["apps/v1:Deployment:web:web", "v1:Service:web:web", "v1:ConfigMap:web:cfg"],
        ["v1:Namespace:web"],
    ]


def test_dependents_are_transitive_and_branches_independent() -> None:
    cm2 = Item("v1:ConfigMap:web:other", "v1", "ConfigMap", "web")
    deploy = Item(DEPLOY.id, "apps/v1", "Deployment", "web", depends_on=(CM.id,))
    svc = Item(SVC.id, "v1", "Service", "web", depends_on=(deploy.id,))
    graph = build_graph([NS, CM, cm2, deploy, svc])
    assert dependents(graph, CM.id) == {deploy.id, svc.id}
    assert dependents(graph, NS.id) == {CM.id, cm2.id, deploy.id, svc.id}
    assert dependents(graph, cm2.id) == set()


def test_webhooks_and_unknown_kinds_sort_late() -> None:
    hook = Item(
        "admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration:h",
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        None,
    )
    odd = Item("x.io/v1:Gizmo:g", "x.io/v1", "Gizmo", None)
    pdb = Item("policy/v1:PodDisruptionBudget:web:p", "policy/v1", "PodDisruptionBudget", "web")
    assert levels_of([hook, odd, pdb]) == [[pdb.id, odd.id, hook.id]]


def test_two_objects_with_one_id_are_an_error_not_a_silent_replacement() -> None:
    from konfig.engine.ordering import Item, OrderError, build_graph

    items = [
        Item(id="v1:ConfigMap:ns:c", api_version="v1", kind="ConfigMap", namespace="ns"),
        Item(id="v1:ConfigMap:ns:c", api_version="v1", kind="ConfigMap", namespace="ns"),
    ]
    with pytest.raises(OrderError, match="two objects of the stack have the same id"):
        build_graph(items)
    assert list(build_graph(items, strict=False).nodes) == ["v1:ConfigMap:ns:c"]
