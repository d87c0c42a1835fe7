"""What apply refuses before anything is written, and preview shows instead of a plan.

One list, :data:`PRE_WRITE_REFUSALS`, read by both (:func:`konfig.pipeline.previewing.
preview_stack` and :func:`konfig.pipeline.applying.check_before_write`), so that a
preview never shows a plan apply would reject. Each rule is one `konfig check` reports
too (one named rule, three places). A rule takes a compiled stack and returns its
:class:`Refusal` or None; the first refusal of a stack is the one said.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from konfig.repo.layout import Repository, Stack
from konfig.spec import Spec


@dataclass(frozen=True)
class Refusal:
    """Why a stack cannot be applied, worded for the preview and for apply."""

    preview: str  # the preview's error for the stack
    apply: str  # apply's error: names the stack and says nothing was applied
    hint: str | None = None
    file: str | None = None  # where, when the rule knows the line
    line: int | None = None


def system_namespaces(repo: Repository, stack: Stack, spec: Spec) -> Refusal | None:
    """Objects in system namespaces konfig.yaml does not allow (``konfig check``'s
    ``spec/system-namespace``), at the place of the first."""
    from konfig.check.specrules import (  # networkx: not for `konfig preview --help`
        system_namespace_findings,
        system_namespace_refusal,
    )

    found = system_namespace_findings(repo.root, stack, spec, repo.config.allow_system_namespaces)
    if not found:
        return None
    first = found[0]
    refusal = system_namespace_refusal(found)
    return Refusal(
        preview=refusal,
        apply=f"{first.location()}: {stack.path}: nothing was applied: {refusal}",
        hint="`konfig check` lists every such object; system namespaces a stack may write "
        "to are listed in konfig.yaml `allowSystemNamespaces` (docs/apply.md)",
        file=first.file,
        line=first.line,
    )


def privileges(repo: Repository, stack: Stack, spec: Spec) -> Refusal | None:
    """A binding to cluster-admin, a catch-all failing admission webhook, the API
    server's own RBAC objects (``konfig check``'s rules of :mod:`konfig.check.privilege`),
    unless the stack switches the rule off with a reason, at the place of the first."""
    from konfig.check.privilege import privilege_findings, privilege_refusal

    found = privilege_findings(repo.root, stack, spec)
    if not found:
        return None
    first = found[0]
    refusal = privilege_refusal(found)
    return Refusal(
        preview=refusal,
        apply=f"{first.location()}: {stack.path}: nothing was applied: {refusal}",
        hint="`konfig check` lists every such object; docs/apply.md (Privileges) says which "
        "rules a stack may switch off, with a reason, in its stack.yaml",
        file=first.file,
        line=first.line,
    )


def promql(repo: Repository, stack: Stack, spec: Spec) -> Refusal | None:
    """A PrometheusRule expression that is not PromQL (``konfig check``'s
    ``promql/parse``), at the place of the first."""
    from konfig.check.promql import check_promql  # the parser: not for `--help`

    found = check_promql(repo.root, stack, spec)
    if not found:
        return None
    first = found[0]
    refusal = f"cannot be applied: {first.message}"
    return Refusal(
        preview=refusal,
        apply=f"{first.location()}: {stack.path}: nothing was applied: {first.message}",
        hint="`konfig check` lists every such expression; fix its PromQL (docs/monitoring.md)",
        file=first.file,
        line=first.line,
    )


def unordered(repo: Repository, stack: Stack, spec: Spec) -> Refusal | None:
    """A Spec that cannot be ordered (two objects with one id, a dependency cycle, a
    ``dependsOn`` on an object the stack lacks: ``konfig check``'s ``spec/*`` rules)."""
    from konfig.engine import ordering  # networkx: not for `konfig preview --help`

    items = [ordering.item_from_manifest(r.id, r.attributes, r.depends_on) for r in spec.resources]
    try:
        ordering.build_graph(items)
    except ordering.OrderError as exc:
        return Refusal(
            preview=f"cannot be applied: {exc.message} (`konfig check` shows where)",
            apply=f"{stack.path}: {exc.message}; nothing was applied",
            hint=exc.hint,
        )
    return None


def terraform_forbidden(repo: Repository, stack: Stack, spec: Spec) -> Refusal | None:
    """A Terraform resource that runs code, reads files or reaches a host the stack
    chooses (a provisioner, another provider's type, a meta-argument: ``konfig check``'s
    and compile's ``terraform/forbidden``, :mod:`konfig.tofu.guards`)."""
    if not spec.terraform():
        return None
    from konfig.check.locate import locate
    from konfig.tofu.guards import forbidden, refusal

    found = forbidden(spec.terraform())
    if not found:
        return None
    file, line = locate(repo.root, stack, spec.by_id().get(found[0].resource))
    text = refusal(found)
    return Refusal(
        preview=text,
        apply=f"{file}: {stack.path}: nothing was applied: {text}",
        hint="`konfig check` lists every such construct (docs/terraform.md)",
        file=file,
        line=line,
    )


Rule = Callable[[Repository, Stack, Spec], "Refusal | None"]

PRE_WRITE_REFUSALS: tuple[Rule, ...] = (
    system_namespaces,
    privileges,
    promql,
    terraform_forbidden,
    unordered,
)


def first_refusal(repo: Repository, stack: Stack, spec: Spec) -> Refusal | None:
    """The first of :data:`PRE_WRITE_REFUSALS` that refuses the stack, or None."""
    for rule in PRE_WRITE_REFUSALS:
        found = rule(repo, stack, spec)
        if found is not None:
            return found
    return None
