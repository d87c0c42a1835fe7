"""Spec rules: the compiled resources of one stack, before any cluster sees them.

- ``spec/invalid-resource``: a manifest without ``apiVersion``, ``kind`` or ``metadata.name``;
- ``spec/id-mismatch``: ``id`` is not ``apiVersion:Kind[:namespace]:name`` of its attributes;
- ``spec/duplicate-id``: two resources share an id (one would overwrite the other);
- ``spec/dangling-dependency``: a ``dependsOn`` id that is not in the Spec;
- ``spec/dependency-cycle``: resources that depend on each other in a circle;
- ``spec/missing-namespace``: a namespaced kind without ``metadata.namespace``;
- ``spec/cluster-scoped-namespace``: a cluster-scoped kind with a namespace;
- ``spec/invalid-name``: a name or namespace the API server refuses, by the kind's own
  rule (:mod:`konfig.check.objectnames`: RBAC names are path segments and may hold
  ``:``, a Service's name is an RFC 1035 label, ...), caught before any cluster sees it;
- ``spec/object-too-large``: a manifest over 1 MiB as JSON (a ConfigMap's or Secret's
  data may not exceed 1 MiB, and etcd refuses a request over 1.5 MiB);
- ``spec/system-namespace``: an object in ``default`` or a ``kube-*`` namespace (or such
  a Namespace itself), unless konfig.yaml ``allowSystemNamespaces`` lists it; preview
  and apply refuse such a stack by the same rule (:func:`system_namespace_findings`);
- ``spec/cluster-admin-binding``, ``spec/catch-all-webhook``, ``spec/system-rbac``: see
  :mod:`konfig.check.privilege` (refused by preview and apply by the same rules).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from konfig.check.findings import Finding
from konfig.check.kinds import KindCatalog
from konfig.check.locate import locate
from konfig.check.objectnames import name_problem, namespace_problem
from konfig.check.privilege import privilege_findings
from konfig.ids import resource_id
from konfig.repo.layout import Stack
from konfig.spec import Resource, Spec

if TYPE_CHECKING:
    import networkx as nx

# the API server's bound on a ConfigMap's or Secret's data; an object past it is refused
MAX_OBJECT_BYTES = 1024 * 1024


SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_NAMESPACE_RULE = "spec/system-namespace"


def check_spec(
    root: Path,
    stack: Stack,
    spec: Spec,
    kinds: KindCatalog,
    *,
    allowed_system_namespaces: Collection[str] = (),
) -> list[Finding]:
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
        if not r.is_terraform:
            for field, value, why in (
                (
                    "metadata.name",
                    r.name,
                    name_problem(r.api_version, r.kind, r.name, r.attributes),
                ),
                ("metadata.namespace", r.namespace, r.namespace and namespace_problem(r.namespace)),
            ):
                if value and why:
                    shown = value if len(value) <= 70 else f"{value[:60]}...({len(value)} chars)"
                    add(
                        "spec/invalid-name",
                        f"{r.kind} {field} {shown!r} is invalid for Kubernetes: {why}; "
                        "the API server would refuse it, rename it",
                        r,
                    )
            size = len(json.dumps(r.attributes, separators=(",", ":"), default=str))
            if size > MAX_OBJECT_BYTES:
                add(
                    "spec/object-too-large",
                    f"{r.id} is {size:,} bytes as JSON, more than the API server stores "
                    f"({MAX_OBJECT_BYTES:,}): keep large data out of the manifest (a volume, "
                    "an image, object storage) or split it",
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
    findings.extend(system_namespace_findings(root, stack, spec, allowed_system_namespaces))
    findings.extend(privilege_findings(root, stack, spec))
    findings.extend(_cycles(root, stack, spec))
    return findings


def system_namespace_findings(
    root: Path, stack: Stack, spec: Spec, allowed: Collection[str] = ()
) -> list[Finding]:
    """``spec/system-namespace``: the objects of ``spec`` in ``default`` or a ``kube-*``
    namespace, or such a Namespace itself, that konfig.yaml ``allowSystemNamespaces``
    (``allowed``) does not list. The one rule: `konfig check` reports these, and preview
    and apply refuse the stack (:func:`system_namespace_refusal`)."""
    findings: list[Finding] = []
    for r in spec.resources:
        if r.is_terraform:
            continue
        system = r.name if (r.api_version, r.kind) == ("v1", "Namespace") else r.namespace
        if system in SYSTEM_NAMESPACES and system not in allowed:
            file, line = locate(root, stack, r)
            message = (
                f"{r.id} is in the system namespace {system!r}, where the cluster's own "
                "components live: give the stack its own namespace, or allow it in "
                f"konfig.yaml (`allowSystemNamespaces: [{system}]`)"
            )
            findings.append(
                Finding(SYSTEM_NAMESPACE_RULE, message, file, line, stack=stack.path, resource=r.id)
            )
    return findings


def system_namespace_refusal(findings: Sequence[Finding]) -> str:
    """Why preview and apply refuse a stack with ``findings`` of
    :func:`system_namespace_findings` (the first one's place is the stack error's; the
    others' are listed)."""
    first, rest = findings[0], findings[1:]
    return (
        f"refused ({SYSTEM_NAMESPACE_RULE}, as `konfig check` reports it): {first.message}"
        + "".join(f"\n  {f.location()}: {f.message}" for f in rest)
    )


def _cycles(root: Path, stack: Stack, spec: Spec) -> list[Finding]:
    import networkx as nx  # only for `konfig check` (preview and apply use other rules here)

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
