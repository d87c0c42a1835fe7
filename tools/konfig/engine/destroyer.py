"""Destroy: delete everything a stack's inventory owns (dependents first), then the inventory."""

from __future__ import annotations

import threading
import time

from konfig.engine import inventory_store
from konfig.engine.danger import confirmed_cascades
from konfig.engine.inventory import Inventory, Member
from konfig.engine.kube import Kube
from konfig.engine.plan import StackPlan
from konfig.engine.pruner import RunReader, prune
from konfig.engine.retry import Unreachable, retry
from konfig.engine.stackrun import (
    ApplyOptions,
    Event,
    EventSink,
    StackResult,
    StackRun,
    interrupted_message,
    summary_error,
    unreachable_message,
)


def destroy_stack(
    kube: Kube,
    plan: StackPlan,
    prior: Inventory | None,
    options: ApplyOptions,
    emit: EventSink = lambda _e: None,
    *,
    lost: threading.Event | None = None,
    stop: threading.Event | None = None,
) -> StackResult:
    """Delete everything the inventory owns (dependents first), then the inventory.

    ``plan`` is the plan of the stack with no Spec (``plan_stack(..., spec=None)``):
    every owned, existing member is a ``delete``.
    """
    started = time.monotonic()
    if prior is None:
        return StackResult(plan.path, True, (), None, None, 0.0)
    run = StackRun(kube, plan.path, options, emit, lost, secrets=plan.secrets(), stop=stop)
    run.check_lock()
    by_id = {c.id: c for c in plan.changes}
    deletes = [c for c in plan.changes if c.action == "delete"]
    try:
        cascades = confirmed_cascades(
            plan, options.dangers, reader=RunReader(run), version=options.kubernetes_version
        )
    except Unreachable as exc:
        run.unreachable = exc.error
        cascades = {}
    prune(run, prior, deletes, "destroy", cascades)
    survivors = [
        Member(m.id, m.uid)
        for m in prior.members
        if m.id in by_id and by_id[m.id].action == "delete" and run.exists.get(m.id, True)
    ]
    failed = any(r.outcome == "failed" for r in run.results.values())
    ok = run.unreachable is None and not run.stopping() and not failed
    error: str | None = None
    written: Inventory | None = None
    try:
        if not survivors and ok:
            retry(
                lambda: inventory_store.delete_inventory(
                    kube, plan.path, uid=prior.uid or None, name=prior.name or None
                ),
                options,
            )
            emit(Event(plan.path, "inventory", f"inventory {prior.name} deleted"))
            if prior.former_name and prior.former_name != prior.name:
                retry(lambda: inventory_store.retire_former(kube, prior), options)
                emit(Event(plan.path, "inventory", f"inventory {prior.former_name} deleted"))
        else:
            written = retry(
                lambda: inventory_store.write_inventory(
                    kube,
                    plan.path,
                    survivors,
                    commit=prior.commit,
                    spec_digest=prior.spec_digest,
                    applied_at=prior.applied_at or None,
                    dirty=prior.dirty,
                    applied_fields=prior.applied_fields,
                ),
                options,
            )
            ok = False
            kept = ", ".join(m.id for m in survivors[:5])
            error = (
                f"{plan.path}: {len(survivors)} objects survive ({kept}); they stay in the "
                "inventory and the next destroy retries them"
            )
    except Unreachable as exc:
        run.unreachable = run.unreachable or exc.error
    if run.unreachable is not None:
        ok = False
        error = unreachable_message(plan.path, run.unreachable)
    elif run.stopping():
        ok = False
        done = sum(1 for r in run.results.values() if r.outcome == "deleted")
        error = interrupted_message(plan.path, done, len(deletes))
    elif not ok and error is None:
        error = summary_error(run, ok)
    return StackResult(
        plan.path,
        ok,
        tuple(sorted(run.results.values(), key=lambda r: r.id)),
        error,
        written,
        time.monotonic() - started,
    )
