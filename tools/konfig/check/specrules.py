"""Spec rules: the compiled resources of one stack, before any cluster sees them.

- ``spec/invalid-resource``: a manifest without ``apiVersion``, ``kind`` or ``metadata.name``;
- ``spec/id-mismatch``: ``id`` is not ``apiVersion:Kind[:namespace]:name`` of its attributes;
- ``spec/duplicate-id``: two resources share an id (one would overwrite the other);
- ``spec/dangling-dependency``: a ``dependsOn`` id that is not in the Spec;
- ``spec/dependency-cycle``: resources that depend on each other in a circle;
- ``spec/missing-namespace``: a namespaced kind without ``metadata.namespace``;
- ``spec/cluster-scoped-namespace``: a cluster-scoped kind with a namespace.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import networkx as nx

from konfig.check.findings import Finding
from konfig.check.kinds import KindCatalog
from konfig.check.locate import locate
from konfig.ids import resource_id
from konfig.repo.layout import Stack
from konfig.spec import Resource, Spec


def check_spec(root: Path, stack: Stack, spec: Spec, kinds: KindCatalog) -> list[Finding]:
    findings: list[Finding] = []

    def add(rule: str, message: str, resource: Resource | None) -> None:
        file, line = locate(root, stack, resource)
        rid = resource.id if resource is not None else None
        findings.append(Finding(rule, message, file, line, stack=stack.path, resource=rid))

    ids = Counter(r.id for r in spec.resources)
    reported: set[str] = set()
    for r in spec.resources:
        if r.is_terraform:
            # konfig.check.terraform checks its shape; ids and edges are checked here
            if ids[r.id] > 1 and r.id not in reported:
                reported.add(r.id)
                add("spec/duplicate-id", f"{ids[r.id]} resources have the id {r.id!r}", r)
            for dep in r.depends_on:
                if dep not in ids:
                    add(
                        "spec/dangling-dependency",
                        f"{r.id} depends on {dep!r}, which is not in the stack's Spec",
                        r,
                    )
            continue
        missing = [
            label
            for label, value in (
                ("apiVersion", r.api_version),
                ("kind", r.kind),
                ("metadata.name", r.name),
            )
            if not value
        ]
        if missing:
            add("spec/invalid-resource", f"{r.id}: the manifest has no {', '.join(missing)}", r)
            continue
        expected = resource_id(r.attributes)
        if r.id != expected:
            add(
                "spec/id-mismatch",
                f"id {r.id!r} does not match its attributes: expected {expected!r} "
                "(apiVersion:Kind[:namespace]:name)",
                r,
            )
        if ids[r.id] > 1 and r.id not in reported:
            reported.add(r.id)
            add(
                "spec/duplicate-id",
                f"{ids[r.id]} resources have the id {r.id!r}: each object may appear once",
                r,
            )
        namespaced = kinds.is_namespaced(r.api_version, r.kind)
        if namespaced and not r.namespace:
            add(
                "spec/missing-namespace",
                f"{r.id}: {r.kind} is namespaced but has no metadata.namespace",
                r,
            )
        elif not namespaced and r.namespace:
            add(
                "spec/cluster-scoped-namespace",
                f"{r.id}: {r.kind} is cluster-scoped but sets metadata.namespace "
                f"{r.namespace!r}: remove it",
                r,
            )
        for dep in r.depends_on:
            if dep not in ids:
                add(
                    "spec/dangling-dependency",
                    f"{r.id} depends on {dep!r}, which is not in the stack's Spec",
                    r,
                )
    findings.extend(_cycles(root, stack, spec))
    return findings


def _cycles(root: Path, stack: Stack, spec: Spec) -> list[Finding]:
    graph: nx.DiGraph = nx.DiGraph()
    by_id = {r.id: r for r in spec.resources}
    for r in spec.resources:
        graph.add_node(r.id)
        for dep in r.depends_on:
            if dep in by_id:
                graph.add_edge(r.id, dep)
    findings: list[Finding] = []
    for component in nx.strongly_connected_components(graph):
        members = sorted(component)
        if len(members) == 1 and not graph.has_edge(members[0], members[0]):
            continue
        sub = graph.subgraph(members)
        cycle = [edge[0] for edge in nx.find_cycle(sub, source=members[0])]
        path = " -> ".join([*cycle, cycle[0]])
        first = by_id[members[0]]
        file, line = locate(root, stack, first)
        findings.append(
            Finding(
                "spec/dependency-cycle",
                f"dependency cycle: {path}: remove one of these dependsOn edges",
                file,
                line,
                stack=stack.path,
                resource=first.id,
            )
        )
    return findings
