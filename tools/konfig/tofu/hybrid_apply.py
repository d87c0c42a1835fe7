"""Apply and destroy a stack in both runtimes, under the stack's lock.

Apply runs OpenTofu first (the objects it creates are what the Kubernetes objects refer
to), then the Kubernetes engine with the values OpenTofu applied; destroy runs in the
reverse order. The plans are :mod:`konfig.tofu.hybrid`'s; a refused plan writes nothing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from konfig import outputs
from konfig.engine.inventory import Inventory
from konfig.engine.kube import Kube, KubeTarget
from konfig.engine.plan import StackPlan, plan_differences
from konfig.engine.planner import plan_stack
from konfig.engine.stackrun import (
    ApplyOptions,
    Event,
    EventSink,
    ObjectResult,
    Outcome,
    StackResult,
)
from konfig.errors import KonfigError
from konfig.repo.layout import Stack
from konfig.secrets.refs import SecretData
from konfig.spec import Spec
from konfig.tofu.context import TofuContext
from konfig.tofu.hybrid import (
    HybridPlan,
    discard,
    finish_plan,
    plan_destroy_hybrid,
    plan_hybrid,
    plan_terraform_first,
    reuse_plan,
    state_values_by_id,
    unread_plan,
)
from konfig.tofu.plan_apply import TofuOutcome, tofu_apply
from konfig.tofu.records import ensure_state_namespace, read_intent, read_state, write_intent
from konfig.tofu.references import kubernetes_spec, lookup_of
from konfig.words import about

_APPLIED: dict[str, Outcome] = {
    "create": "created",
    "update": "updated",
    "replace": "replaced",
    "delete": "deleted",
    "unchanged": "unchanged",
}


def apply_hybrid(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    options: ApplyOptions,
    emit: EventSink,
    *,
    shown_entry: Mapping[str, Any] | None = None,
    secret_data: SecretData | None = None,
    lost: threading.Event | None = None,
    show_plan: Callable[[StackPlan], None] | None = None,
    stop: threading.Event | None = None,
    saved: HybridPlan | None = None,
) -> StackResult:
    """Apply both runtimes under the stack's lock (the caller holds it), in these steps:

    1. plan (:func:`plan_under_lock`);
    2. compare with the plan shown and refuse unallowed destroys
       (:func:`refused_under_lock`): nothing is written when the plan is refused;
    3. ``tofu apply`` (:func:`_apply_terraform`), the resources' results said once the
       plan is shown (:class:`_Deferred`); a failure stops the stack there
       (:func:`_terraform_failed`);
    4. the Kubernetes objects planned with the values OpenTofu applied
       (:func:`applied_values`, :func:`plan_kubernetes_after`) and applied by the
       engine.

    ``saved``: the plan shown (:func:`plan_hybrid` without the locks, moments ago): its
    OpenTofu plan is applied as it is when the state has not changed since
    (:func:`reuse_plan`) — what was shown is what OpenTofu applies, without planning
    twice; only the Kubernetes part is planned again. Otherwise both are planned again
    under OpenTofu's lock and compared with the plan shown.

    Nothing shown nor saved (``apply --yes``): a plan that only creates and updates is
    not read back (:func:`unread_plan`); OpenTofu applies it, then the Kubernetes part is
    planned with the applied values and ``show_plan`` shows both."""
    started = time.monotonic()
    path = stack.path
    hybrid, unread = plan_under_lock(
        kube,
        stack,
        spec,
        prior,
        tctx,
        target,
        shown=shown_entry is not None,
        secret_data=secret_data,
        saved=saved,
    )
    plan = hybrid.plan
    if show_plan is not None and not unread:
        show_plan(plan)
    refused = refused_under_lock(path, plan, shown_entry)
    if refused is not None:
        discard(hybrid)
        return refused

    tofu = hybrid.tofu
    terraform_changes = list(tofu.plan.changes) if tofu is not None else []
    stopped = stop is not None and stop.is_set()
    if tofu is not None and tofu.plan.has_changes and stopped:
        discard(hybrid)
        return StackResult(
            path,
            False,
            (),
            f"{path}: stopped before OpenTofu applied anything; nothing was applied",
            prior,
            time.monotonic() - started,
        )
    # What OpenTofu does is reported after the plan is shown: a plan not read back is
    # shown once OpenTofu applied it and the Kubernetes part is planned with the values
    # it applied (until then its events wait).
    deferred = _Deferred(emit, show_plan if unread else None, plan, spec)
    results: list[ObjectResult] = []
    with deferred.on_failure():
        outcome = _apply_terraform(kube, hybrid, deferred.say, results)
    if outcome is None:
        discard(hybrid)
        results += [ObjectResult(c.id, "unchanged", c.reason) for c in terraform_changes]
    if outcome is not None and not outcome.ok:
        deferred.show(None)
        return _terraform_failed(path, spec, outcome, results, prior, started)

    lookup = applied_values(kube, spec, tctx, hybrid)
    with deferred.on_failure():
        kspec, kplan = plan_kubernetes_after(kube, stack, spec, prior, hybrid, lookup)
    kplan = replace(kplan, spec_digest=spec.digest())
    deferred.show(kplan)
    from konfig.engine.applier import apply_stack  # networkx: only when applying

    # ``stop`` (SIGTERM/SIGINT) is honoured by the Kubernetes part; a running tofu is
    # never killed: it finishes, writes its state and releases its lock first.
    result = apply_stack(kube, kplan, kspec, prior, options, emit, lost=lost, stop=stop)
    return replace(
        result,
        objects=tuple(results) + result.objects,
        seconds=time.monotonic() - started,
    )


def plan_under_lock(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    *,
    shown: bool,
    secret_data: SecretData | None = None,
    saved: HybridPlan | None = None,
) -> tuple[HybridPlan, bool]:
    """Step 1 of :func:`apply_hybrid`: the plan to apply, under OpenTofu's lock, and
    whether its OpenTofu part was told from OpenTofu's messages without reading it back
    (:func:`unread_plan`: only with nothing ``shown`` nor ``saved``). ``saved`` is
    reused when the state has not changed since (:func:`reuse_plan`), else discarded and
    both runtimes are planned again."""
    ensure_state_namespace(kube)
    hybrid = None if saved is None else reuse_plan(kube, stack, spec, prior, saved)
    if hybrid is None and saved is not None:
        discard(saved)
    elif hybrid is None and not shown:
        quick = plan_terraform_first(kube, stack, spec, tctx, target, secret_data=secret_data)
        if quick is not None:
            told = unread_plan(quick)
            if told is not None:
                return told, True
            hybrid = finish_plan(kube, stack, spec, prior, quick)
    if hybrid is None:
        hybrid = plan_hybrid(
            kube, stack, spec, prior, tctx, target, lock=True, secret_data=secret_data
        )
    return hybrid, False


def refused_under_lock(
    path: str, plan: StackPlan, shown_entry: Mapping[str, Any] | None
) -> StackResult | None:
    """Step 2 of :func:`apply_hybrid`: the result of a plan that destroys what the stack
    does not allow, or that differs from the plan shown (nothing applied), or None."""
    refused = plan.refusals()
    if refused:
        return StackResult(
            path,
            False,
            (),
            f"{path}: nothing was applied: " + "; ".join(c.refused for c in refused),
        )
    problems = [] if shown_entry is None else plan_differences(shown_entry, plan)
    if problems:
        return StackResult(
            path,
            False,
            (),
            f"{path}: the cluster changed since the plan was shown; nothing was applied "
            "to this stack:\n  " + "\n  ".join(problems),
        )
    return None


class _Deferred:
    """What OpenTofu did, said after the plan is shown: with ``show_plan`` (a plan not
    read back), its events wait until :meth:`show` shows the plan (with its Kubernetes
    part when it was planned), once, on the way out of a failure too."""

    def __init__(
        self,
        emit: EventSink,
        show_plan: Callable[[StackPlan], None] | None,
        plan: StackPlan,
        spec: Spec,
    ) -> None:
        self.emit = emit
        self.show_plan = show_plan
        self.plan = plan
        self.spec = spec
        self.waiting: list[Event] = []
        self.say: Callable[[Event], None] = self.waiting.append if show_plan else emit

    def show(self, kplan: StackPlan | None) -> None:
        if self.show_plan is None:
            return
        show_plan, self.show_plan = self.show_plan, None
        changes = (*(kplan.changes if kplan is not None else ()), *self.plan.changes)
        show_plan(
            replace(
                kplan or self.plan,
                spec_digest=self.spec.digest(),
                changes=tuple(sorted(changes, key=lambda c: c.id)),
            )
        )
        for event in self.waiting:
            self.emit(event)

    @contextlib.contextmanager
    def on_failure(self) -> Iterator[None]:
        """Show the plan (without a Kubernetes part) when the block raises."""
        try:
            yield
        except BaseException:
            self.show(None)
            raise


def _terraform_failed(
    path: str,
    spec: Spec,
    outcome: TofuOutcome,
    results: list[ObjectResult],
    prior: Inventory | None,
    started: float,
) -> StackResult:
    """Step 3's failure: OpenTofu failed, so the Kubernetes objects are skipped."""
    results += [
        ObjectResult(r.id, "skipped", "skipped: the Terraform resources failed")
        for r in spec.kubernetes()
    ]
    return StackResult(
        path,
        False,
        tuple(results),
        about(path, outcome.error) + "; the Kubernetes objects were not applied (re-run "
        "once the cause is fixed: OpenTofu's state records what was created)",
        prior,
        time.monotonic() - started,
    )


def applied_values(kube: Kube, spec: Spec, tctx: TofuContext, hybrid: HybridPlan) -> outputs.Lookup:
    """Step 4 of :func:`apply_hybrid`, first half: the references of the Kubernetes
    objects resolved with the values OpenTofu applied (read from its state)."""
    tofu = hybrid.tofu
    state = read_state(kube, hybrid.context.backend, where=hybrid.context.stack_path)
    return lookup_of(
        hybrid.context.terraform,
        tctx.environment,
        state_values_by_id(state, tofu) if tofu is not None else {},
        known={r.id for r in spec.terraform()},
    )


def plan_kubernetes_after(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    hybrid: HybridPlan,
    lookup: outputs.Lookup,
) -> tuple[Spec, StackPlan]:
    """Step 4 of :func:`apply_hybrid`, second half: the Kubernetes objects with the
    applied values (``lookup``: :func:`applied_values`), and their plan: the one made
    under this lock when the values are the same, else planned again. A reference still
    unresolved stops the stack before any Kubernetes write."""
    path = stack.path
    kspec = kubernetes_spec(spec, lookup)
    unresolved = [
        f"{r.id}: {', '.join(outputs.unresolved_in(r.attributes))}"
        for r in kspec.resources
        if outputs.unresolved_in(r.attributes)
    ]
    if unresolved:
        raise KonfigError(
            f"{path}: references still unresolved after OpenTofu applied: "
            + "; ".join(unresolved)
            + "; the Kubernetes objects were not applied"
        )
    if hybrid.kube_plan is not None and kspec == hybrid.kube_spec:
        # planned under this lock with the same values: nothing of it changed since
        return kspec, hybrid.kube_plan
    return kspec, plan_stack(kube, stack, kspec, prior, secret_data=hybrid.data or None)


def _apply_terraform(
    kube: Kube, hybrid: HybridPlan, say: EventSink, results: list[ObjectResult]
) -> TofuOutcome | None:
    """``tofu apply`` of the plan when it changes something (None: nothing to apply),
    between the intent record and its clearing (only once OpenTofu succeeded: after a
    failure the next plan imports what the state lacks of it, or drops the import of
    what does not exist); each resource's result appended to ``results`` and said."""
    tofu = hybrid.tofu
    if tofu is None or not tofu.plan.has_changes:
        return None
    path = hybrid.context.stack_path
    changes = tofu.plan.changes
    say(Event(path, "level", f"OpenTofu: {len(changes)} resources"))
    backend = hybrid.context.backend
    creating = [c.id for c in changes if c.action in ("create", "replace")]
    if creating:
        write_intent(kube, backend, creating)
    outcome = tofu_apply(tofu)
    # Cleared only when OpenTofu finished: a tofu that failed may have been killed
    # before it wrote its state (what it created is then only in the record).
    if outcome.ok and (creating or read_intent(kube, backend)):
        write_intent(kube, backend, [])
    by_id = tofu.addresses
    for c in changes:
        error = outcome.errors.get(by_id.get(c.id, ""))
        if outcome.ok or (error is None and c.action == "unchanged"):
            outcome_name = _APPLIED[c.action]
            done = ObjectResult(
                c.id, outcome_name, f"{outcome_name} {c.kind} {c.name} ({c.api_version})"
            )
        elif error is not None:
            done = ObjectResult(c.id, "failed", error)
        else:
            done = ObjectResult(c.id, "failed", "not applied: OpenTofu stopped (see the error)")
        results.append(done)
        say(Event(path, "object", done.message, done))
    return outcome


def destroy_hybrid(
    kube: Kube,
    stack: Stack,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    options: ApplyOptions,
    emit: EventSink,
    *,
    lost: threading.Event | None = None,
    stop: threading.Event | None = None,
) -> StackResult:
    """Destroy both runtimes under the stack's lock: refused as a whole when the stack
    does not allow destroying one of its Terraform resources; else the Kubernetes objects
    first (they use the database), then ``tofu apply`` of the destroy plan."""
    from konfig.engine.destroyer import destroy_stack

    started = time.monotonic()
    path = stack.path
    hybrid = plan_destroy_hybrid(kube, stack, prior, tctx, target, lock=True)
    refused = hybrid.plan.refusals()
    if refused:
        discard(hybrid)
        listed = "; ".join(c.refused for c in refused)
        return StackResult(path, False, (), f"{path}: nothing was destroyed: {listed}")
    kplan = replace(
        hybrid.plan, changes=tuple(c for c in hybrid.plan.changes if c.runtime != "Terraform")
    )
    result = destroy_stack(kube, kplan, prior, options, emit, lost=lost, stop=stop)
    tofu = hybrid.tofu
    if tofu is None or not tofu.plan.has_changes:
        discard(hybrid)
        return result
    if not result.ok:
        discard(hybrid)
        return replace(
            result,
            error=f"{result.error}; the Terraform resources were kept (destroy again once "
            "the Kubernetes objects are gone)",
        )
    emit(Event(path, "level", f"OpenTofu: destroying {len(tofu.plan.changes)} resources"))
    outcome = tofu_apply(tofu)
    results = list(result.objects)
    by_id = tofu.addresses
    for c in tofu.plan.changes:
        error = outcome.errors.get(by_id.get(c.id, ""))
        if outcome.ok:
            message = f"deleted {c.kind} {c.name} ({c.api_version})"
            done = ObjectResult(c.id, "deleted", message, phase="destroy")
        else:
            done = ObjectResult(
                c.id, "failed", error or "not destroyed: OpenTofu stopped", phase="destroy"
            )
        results.append(done)
        emit(Event(path, "object", done.message, done))
    return replace(
        result,
        ok=result.ok and outcome.ok,
        objects=tuple(results),
        error=None if outcome.ok else about(path, outcome.error),
        seconds=time.monotonic() - started,
    )
