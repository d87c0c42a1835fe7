"""The preview flow: each stack's plan against its cluster, or the error that stopped it.

``konfig preview`` (and the plan ``konfig destroy`` shows) compose this: compiled stacks
are planned against the live cluster, deleted stacks from their inventories; a stack
that fails (compile, connection, plan) becomes a :class:`StackPreview` with its error
while the others go on. Nothing here writes to the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from konfig.build.compiler import CompileResult
from konfig.engine.inventory import read_inventory
from konfig.engine.planner import DEFAULT_WORKERS, plan_stack
from konfig.errors import KonfigError
from konfig.pipeline.connections import Connections
from konfig.repo.layout import Repository, Stack
from konfig.report.previews import StackError, StackPreview
from konfig.secrets.refs import Resolver, secret_data
from konfig.spec import Spec
from konfig.tofu.model import has_terraform

if TYPE_CHECKING:
    from konfig.tofu.context import TofuContext

# Told what a reader should know that is not an error (e.g. a stack with no inventory).
Note = Callable[[str], None]


def preview_stack(
    conns: Connections,
    stack: Stack,
    compiled: CompileResult,
    *,
    workers: int = DEFAULT_WORKERS,
    resolver: Resolver | None = None,
    tofu: TofuContext | None = None,
) -> StackPreview:
    """One existing stack: its plan, or the compile, decryption or cluster error that
    stopped it. With a ``resolver`` that can decrypt, Secrets from encrypted files are
    compared key by key (in memory); without one they are reported "not compared".
    A stack with Terraform resources is planned with OpenTofu too (``tofu``)."""
    if compiled.spec is None:
        assert compiled.error is not None
        e = compiled.error
        message = e.message + "".join(f"\n  {d}" for d in e.details)
        return StackPreview(
            stack.path,
            context=stack.kube_context,
            error=StackError(f"compile failed: {message}", e.file, e.line),
        )
    refused = _system_namespace_error(conns.repo, stack, compiled.spec)
    if refused is not None:
        # apply refuses it by the rule `konfig check` reports: never a plan of it
        return StackPreview(
            stack.path,
            context=conns.target(stack).context,
            error=refused,
            spec_digest=compiled.spec.digest(),
        )
    problem = _order_problem(compiled.spec)
    if problem is not None:
        # what apply would refuse is shown in the preview too, never a plan apply rejects
        return StackPreview(
            stack.path,
            context=conns.target(stack).context,
            error=StackError(f"cannot be applied: {problem} (`konfig check` shows where)"),
            spec_digest=compiled.spec.digest(),
        )
    try:
        data = None
        if resolver is not None and resolver.can_decrypt:
            data = secret_data(compiled.spec, resolver)
        kube = conns.kube(stack)
        prior = read_inventory(kube, stack)
        if has_terraform(stack, compiled.spec):
            from konfig.tofu.hybrid import preview_hybrid  # OpenTofu: only when used

            if tofu is None:
                raise KonfigError(
                    f"{stack.path}: has Terraform resources and OpenTofu is not set up"
                )
            plan = preview_hybrid(
                kube,
                stack,
                compiled.spec,
                prior,
                tofu,
                conns.target(stack),
                workers=workers,
                secret_data=data,
            )
        else:
            plan = plan_stack(kube, stack, compiled.spec, prior, workers=workers, secret_data=data)
        return StackPreview(stack.path, context=plan.context, plan=plan)
    except KonfigError as exc:
        return StackPreview(
            stack.path,
            context=conns.target(stack).context,
            error=StackError(str(exc)),
            spec_digest=compiled.spec.digest(),
        )


def _system_namespace_error(repo: Repository, stack: Stack, spec: Spec) -> StackError | None:
    """The refusal of objects in system namespaces konfig.yaml does not allow, at the
    place of the first, or None."""
    from konfig.check.specrules import (  # networkx: not for `konfig preview --help`
        system_namespace_findings,
        system_namespace_refusal,
    )

    found = system_namespace_findings(repo.root, stack, spec, repo.config.allow_system_namespaces)
    if not found:
        return None
    return StackError(system_namespace_refusal(found), found[0].file, found[0].line)


def _order_problem(spec: Spec) -> str | None:
    """Why the Spec cannot be ordered (two objects with one id, a cycle, a dependsOn on
    an object the stack lacks), or None."""
    from konfig.engine import ordering  # networkx: not for `konfig preview --help`

    items = [ordering.item_from_manifest(r.id, r.attributes, r.depends_on) for r in spec.resources]
    try:
        ordering.build_graph(items)
    except ordering.OrderError as exc:
        return exc.message
    return None


def preview_deleted(
    conns: Connections, stack: Stack, *, workers: int = DEFAULT_WORKERS, note: Note | None = None
) -> StackPreview:
    """A stack whose directory is gone: the deletion of what its inventory owns."""
    try:
        conns.locate(stack)
        kube = conns.kube(stack)
        prior = read_inventory(kube, stack)
        if prior is None and note is not None:
            note(f"{stack.path}: no inventory in the cluster, nothing to delete")
        from konfig.tofu.hybrid import kept_terraform  # OpenTofu's state: when used

        kept = kept_terraform(kube, stack)
        if kept is not None and note is not None:
            note(kept)
        plan = plan_stack(kube, stack, None, prior, deleted=True, workers=workers)
        return StackPreview(stack.path, context=plan.context, deleted=True, plan=plan)
    except KonfigError as exc:
        return StackPreview(
            stack.path,
            context=conns.target(stack).context,
            deleted=True,
            error=StackError(str(exc)),
        )


def preview_stacks(
    conns: Connections,
    stacks: Sequence[Stack],
    compiled: Mapping[str, CompileResult],
    gone: Sequence[Stack] = (),
    *,
    workers: int = DEFAULT_WORKERS,
    note: Note | None = None,
    resolver: Resolver | None = None,
    tofu: TofuContext | None = None,
) -> list[StackPreview]:
    """The previews of ``stacks`` (compiled) and of the deleted stacks ``gone``, in order."""
    results = [
        preview_stack(conns, s, compiled[s.path], workers=workers, resolver=resolver, tofu=tofu)
        for s in stacks
    ]
    results += [preview_deleted(conns, s, workers=workers, note=note) for s in gone]
    return results
