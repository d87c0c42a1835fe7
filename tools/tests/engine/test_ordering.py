"""Ordering: explicit and implicit edges, levels, kind order, errors before any write."""

from __future__ import annotations

import random

import pytest

from konfig.engine.ordering import (
    Item,
    OrderError,
    build_graph,
    dependents,
    item_from_manifest,
    kind_rank,
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


def _random_items(rng: random.Random, count: int, *, acyclic: bool) -> list[Item]:
    kinds = ["ConfigMap", "Deployment", "Service", "Gizmo", "Secret", "Job"]
    ids = [f"v1:{rng.choice(kinds)}:n:o{i}" for i in range(count)]
    items = []
    for i, rid in enumerate(ids):
        pool = ids[:i] if acyclic else ids[:i] + ids[i + 1 :]
        deps = rng.sample(pool, k=min(len(pool), rng.randint(0, 3)))
        items.append(Item(rid, "v1", rid.split(":")[1], None, depends_on=tuple(deps)))
    rng.shuffle(items)
    return items


def test_levels_dependents_and_cycles_agree_with_networkx() -> None:
    """The graph (graphlib and a walk of our own) gives what networkx gives, on random
    graphs: the same levels, the same dependents, and a cycle exactly when there is one."""
    import networkx as nx

    rng = random.Random(13)
    for round_ in range(300):
        items = _random_items(rng, rng.randint(1, 25), acyclic=round_ % 2 == 0)
        reference = nx.DiGraph()
        reference.add_nodes_from(i.id for i in items)
        reference.add_edges_from((dep, i.id) for i in items for dep in i.depends_on)
        graph = build_graph(items, strict=False)
        cycle = graph.find_cycle()
        assert (cycle is None) == nx.is_directed_acyclic_graph(reference)
        if cycle is not None:
            # the nodes found are a cycle of the graph
            for a, b in zip(cycle, [*cycle[1:], cycle[0]], strict=True):
                assert reference.has_edge(a, b)
            with pytest.raises(OrderError, match="dependency cycle"):
                build_graph(items)
            continue
        expected = [
            sorted(gen, key=lambda n: (kind_rank(n.split(":")[1]), n))
            for gen in nx.topological_generations(reference)
        ]
        assert levels_of(items) == expected
        for item in items:
            assert dependents(graph, item.id) == set(nx.descendants(reference, item.id))
