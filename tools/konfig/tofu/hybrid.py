"""A stack's plan in both runtimes: OpenTofu's and the Kubernetes engine's, as one plan.

A stack whose Spec holds ``type: Terraform`` resources is planned in two runtimes:

1. **OpenTofu** (:mod:`konfig.tofu`): the stack's resources as one JSON configuration,
   its state in the stack's cluster (:mod:`konfig.tofu.records`), ``tofu plan``
   translated into changes;
2. **Kubernetes** (:mod:`konfig.engine`): the Spec's Kubernetes objects with every
   reference to a Terraform attribute replaced by its value
   (:mod:`konfig.tofu.references`) and every generated Secret key filled in memory
   (:mod:`konfig.tofu.values`).

Both plans become one :class:`~konfig.engine.plan.StackPlan`. A Terraform resource that
apply would destroy (removed from the stack, or replaced) is **refused** unless the stack
lists it under ``terraform.allowDestroy``; the preview marks it, and apply writes
nothing. Applying and destroying are in :mod:`konfig.tofu.hybrid_apply`. Nothing here
prints or reads the environment: the CLI builds the
:class:`~konfig.tofu.context.TofuContext`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from konfig.engine.inventory import Inventory
from konfig.engine.kube import Kube, KubeTarget
from konfig.engine.plan import Change, NotPreviewed, StackPlan
from konfig.engine.planner import DEFAULT_WORKERS, plan_stack
from konfig.repo.files import remove
from konfig.repo.layout import Stack
from konfig.secrets.refs import SecretData
from konfig.spec import Spec
from konfig.tofu import plans
from konfig.tofu.config import Backend
from konfig.tofu.context import TofuContext, stack_tofu
from konfig.tofu.model import StackTerraform
from konfig.tofu.plan_apply import (
    PlannedStack,
    StackTofu,
    plan_from_actions,
    show_plan,
    tofu_plan,
)
from konfig.tofu.preflight import missing_credentials
from konfig.tofu.records import read_intent, read_state, state_backend, state_serial
from konfig.tofu.references import keeplive_where_unknown, kubernetes_spec, lookup_of
from konfig.tofu.state import state_addresses, state_ids
from konfig.tofu.values import generated_data, merged_data, write_only_values

PREVIEW_STATE = "konfig-preview.tfstate"  # an empty state (a preview before any apply)


def not_previewed(
    spec: Spec, state: Mapping[str, Any] | None, missing: tuple[str, ...]
) -> tuple[NotPreviewed, ...]:
    """Every Terraform resource of the Spec and of the state, not previewed because the
    credentials ``missing`` (variable names) are not set."""
    reason = f"not previewed: credentials {', '.join(missing)} missing"
    ids = {r.id for r in spec.terraform()} | set(state_ids(state).values())
    return tuple(NotPreviewed(i, plans.RUNTIME, reason) for i in sorted(ids))


def state_values_by_id(state: Mapping[str, Any] | None, planned: PlannedStack) -> dict[str, Any]:
    by_address = plans.state_values(state or {})
    return {rid: by_address[a] for a, rid in planned.ids.items() if a in by_address}


# --- planning ------------------------------------------------------------------------


def preview_backend(backend: Backend, state: Mapping[str, Any] | None) -> Backend:
    """The backend a preview plans with: the stack's, or, for a stack without state
    yet, an empty local state (the kubernetes backend would create its Secret: a
    preview writes nothing)."""
    return backend if state is not None else Backend(kind="local", path=PREVIEW_STATE)


def refuse_destroys(changes: tuple[Change, ...], terraform: StackTerraform) -> tuple[Change, ...]:
    """Deletes and replaces of Terraform resources the stack does not allow, marked."""
    out: list[Change] = []
    for c in changes:
        if c.action in ("delete", "replace") and not terraform.may_destroy(c.id):
            c = replace(
                c,
                refused=f"apply refuses to {'destroy' if c.action == 'delete' else 'replace'} "
                f"{c.kind} {c.name}: add {c.id} to `terraform.allowDestroy` in stack.yaml to "
                "allow it (its data is lost)",
            )
        out.append(c)
    return tuple(out)


@dataclass
class HybridPlan:
    """A stack's plan in both runtimes (the OpenTofu plan file is in its working dir)."""

    plan: StackPlan
    tofu: PlannedStack | None  # None: nothing in the configuration nor in the state
    kube_spec: Spec
    data: dict[str, dict[str, str]] = field(repr=False)
    context: StackTofu
    state_serial: tuple[str, int] | None = None  # the state planned against (lineage, serial)
    # the Kubernetes part as planned (with ``kube_spec``): reused after OpenTofu applied
    # when the values it refers to did not change (None: planned after OpenTofu applied)
    kube_plan: StackPlan | None = None

    def discard(self) -> None:
        """Remove its saved OpenTofu plan (not applied)."""
        discard(self)


def plan_hybrid(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    *,
    lock: bool,
    workers: int = DEFAULT_WORKERS,
    secret_data: SecretData | None = None,
    degrade: bool = False,
) -> HybridPlan:
    """Plan both runtimes; ``lock``: take OpenTofu's state lock (apply), or not (preview).

    ``degrade`` (a preview): without the provider credentials the Terraform resources are
    not planned but listed as not previewed (naming the variables), and the Kubernetes
    objects are planned with the values the state records (the live value where even
    that is unknown); otherwise a missing credential is an error naming it."""
    ctx = stack_tofu(tctx, stack, target, state_backend(kube, stack.path, move=lock))
    generated = generated_data(kube, spec)
    data = merged_data(secret_data, generated)
    state = read_state(kube, ctx.backend, where=stack.path)
    planned: PlannedStack | None = None
    tchanges: tuple[Change, ...] = ()
    values: Mapping[str, Mapping[str, Any]] = {}
    skipped: tuple[NotPreviewed, ...] = ()
    missing: tuple[str, ...] = ()
    if degrade and (spec.terraform() or state_addresses(state)):
        missing = missing_credentials(ctx.terraform, spec, state, tctx.environment)
    if missing:
        skipped = not_previewed(spec, state, missing)
        by_address = plans.state_values(state or {})
        values = {
            r.id: by_address[r.terraform.address]
            for r in spec.terraform()
            if r.terraform.address in by_address
        }
    elif spec.terraform() or state_addresses(state):
        if not lock:
            ctx = replace(ctx, backend=preview_backend(ctx.backend, state))
        planned = tofu_plan(
            ctx,
            spec,
            values=write_only_values(spec, data),
            state=state,
            lock=lock,
            members=read_intent(kube, ctx.backend),
        )
        tchanges = refuse_destroys(planned.plan.changes, ctx.terraform)
        values = planned.plan.values
    lookup = lookup_of(
        ctx.terraform,
        tctx.environment,
        values,
        known={r.id for r in spec.terraform()},
        unset_unknown=bool(missing),
    )
    kspec = kubernetes_spec(spec, lookup)
    if missing:
        kspec = keeplive_where_unknown(kube, kspec)
    kplan = plan_stack(kube, stack, kspec, prior, workers=workers, secret_data=data or None)
    plan = replace(
        kplan,
        spec_digest=spec.digest(),
        changes=tuple(sorted((*kplan.changes, *tchanges), key=lambda c: c.id)),
        not_previewed=skipped,
        tofu_state=state_serial(state),
    )
    return HybridPlan(plan, planned, kspec, data, ctx, state_serial(state), kplan)


def reuse_plan(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    saved: HybridPlan,
    *,
    workers: int = DEFAULT_WORKERS,
) -> HybridPlan | None:
    """``saved`` (the plan konfig apply showed, made moments ago without the locks) with
    its Kubernetes part planned again, now under the stack's lock; None when its OpenTofu
    plan cannot be applied as it is: it was made against an empty local state (no state
    yet), the state changed since (another lineage or serial), or an apply was
    interrupted since (its intent record). Then the caller plans again under OpenTofu's
    lock. ``tofu apply`` of the saved plan also refuses a stale plan by itself."""
    tofu = saved.tofu
    ctx = saved.context
    if tofu is None or ctx.backend.kind != "kubernetes" or saved.state_serial is None:
        return None
    if state_serial(read_state(kube, ctx.backend, where=stack.path)) != saved.state_serial:
        return None
    if read_intent(kube, ctx.backend):
        return None
    return _with_kubernetes(kube, stack, spec, prior, saved, workers=workers)


def _with_kubernetes(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    hybrid: HybridPlan,
    *,
    workers: int = DEFAULT_WORKERS,
) -> HybridPlan:
    """``hybrid`` with its Kubernetes part planned (with the OpenTofu plan's values) next
    to the Terraform changes (unallowed destroys marked)."""
    ctx = hybrid.context
    tofu = hybrid.tofu
    values = tofu.plan.values if tofu is not None else {}
    lookup = lookup_of(
        ctx.terraform, ctx.environment, values, known={r.id for r in spec.terraform()}
    )
    kspec = kubernetes_spec(spec, lookup)
    kplan = plan_stack(kube, stack, kspec, prior, workers=workers, secret_data=hybrid.data or None)
    tchanges = refuse_destroys(tofu.plan.changes, ctx.terraform) if tofu is not None else ()
    plan = replace(
        kplan,
        spec_digest=spec.digest(),
        changes=tuple(sorted((*kplan.changes, *tchanges), key=lambda c: c.id)),
    )
    return replace(hybrid, plan=plan, kube_spec=kspec, kube_plan=kplan)


def plan_terraform_first(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    tctx: TofuContext,
    target: KubeTarget,
    *,
    secret_data: SecretData | None = None,
) -> HybridPlan | None:
    """For ``konfig apply --yes`` (nothing shown to compare with): ``tofu plan`` under
    OpenTofu's lock, not read back yet: ``tofu.actions`` says what it does, the changes
    are not known yet (:func:`unread_plan` tells them from the actions when that is
    enough, else :func:`finish_plan` reads them). None for a stack without
    Terraform resources in its Spec: the caller plans as usual. What it plans with is
    what :func:`plan_hybrid` plans with under the lock: a change to one is a change to
    both."""
    if not spec.terraform():
        return None
    ctx = stack_tofu(tctx, stack, target, state_backend(kube, stack.path, move=True))
    data = merged_data(secret_data, generated_data(kube, spec))
    state = read_state(kube, ctx.backend, where=stack.path)
    planned = tofu_plan(
        ctx,
        spec,
        values=write_only_values(spec, data),
        state=state,
        lock=True,
        members=read_intent(kube, ctx.backend),
        show=False,
    )
    empty = StackPlan(stack.path, None, False, None, None, None, ())
    return HybridPlan(empty, planned, Spec(()), data, ctx, state_serial(state))


def unread_plan(quick: HybridPlan) -> HybridPlan | None:
    """The plan of :func:`plan_terraform_first` told from OpenTofu's messages alone,
    without reading it back (``tofu show -json``, one more start of the provider): when
    it creates, updates or leaves alone and destroys, replaces, forgets, moves and adopts
    nothing (no destroy apply would refuse; nothing to compare). Its ``plan`` holds the
    Terraform changes only, without field changes; the Kubernetes part is planned once,
    after OpenTofu applied, with the values it applied. None: read it back
    (:func:`finish_plan`)."""
    told = plan_from_actions(quick.tofu) if quick.tofu is not None else None
    if told is None:
        return None
    return replace(quick, plan=replace(quick.plan, changes=told.plan.changes), tofu=told)


def finish_plan(
    kube: Kube, stack: Stack, spec: Spec, prior: Inventory | None, quick: HybridPlan
) -> HybridPlan:
    """A plan of :func:`plan_terraform_first` read back and translated, its Kubernetes
    part planned: what apply shows, checks and compares."""
    assert quick.tofu is not None
    return _with_kubernetes(kube, stack, spec, prior, replace(quick, tofu=show_plan(quick.tofu)))


def discard(hybrid: HybridPlan) -> None:
    """Remove the saved OpenTofu plan (a preview's)."""
    if hybrid.tofu is None:
        return
    workdir = hybrid.tofu.workdir
    remove(
        [workdir.path / hybrid.tofu.plan_file, workdir.path / PREVIEW_STATE], scope=workdir.scope
    )


def preview_hybrid(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    *,
    workers: int = DEFAULT_WORKERS,
    secret_data: SecretData | None = None,
) -> StackPlan:
    """A preview: both runtimes planned, nothing written (OpenTofu's lock not taken);
    without the provider credentials the Terraform resources are not previewed."""
    hybrid = plan_hybrid(
        kube,
        stack,
        spec,
        prior,
        tctx,
        target,
        lock=False,
        workers=workers,
        secret_data=secret_data,
        degrade=True,
    )
    discard(hybrid)
    return hybrid.plan


def plan_destroy_hybrid(
    kube: Kube,
    stack: Stack,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    *,
    lock: bool,
) -> HybridPlan:
    """The destroy plan of both runtimes: every object the inventory owns and every
    resource OpenTofu's state records is a delete (refused without the stack's opt-in)."""
    ctx = stack_tofu(tctx, stack, target, state_backend(kube, stack.path, move=lock))
    state = read_state(kube, ctx.backend, where=stack.path)
    kplan = plan_stack(kube, stack, None, prior, deleted=True)
    planned: PlannedStack | None = None
    tchanges: tuple[Change, ...] = ()
    if state_addresses(state):
        planned = tofu_plan(ctx, None, values={}, state=state, lock=lock, destroy=True)
        tchanges = refuse_destroys(planned.plan.changes, ctx.terraform)
    plan = replace(kplan, changes=tuple(sorted((*kplan.changes, *tchanges), key=lambda c: c.id)))
    return HybridPlan(plan, planned, Spec(()), {}, ctx)


def kept_terraform(kube: Kube, stack: Stack) -> str | None:
    """For a stack whose directory is gone: what its OpenTofu state still records (kept:
    without its stack.yaml neither the credentials nor the opt-in to destroy are known)."""
    backend = state_backend(kube, stack.path)
    found = sorted(state_addresses(read_state(kube, backend, where=stack.path)))
    if not found:
        return None
    return (
        f"{stack.path}: its Terraform resources are kept ({', '.join(found)}; state Secret "
        f"{backend.namespace}/{backend.secret_name}): to destroy them, restore the stack with "
        "`terraform.allowDestroy` and no resources, apply, then delete it"
    )
