"""Prune: delete what a stack's inventory owns and its plan no longer has, dependents first.

Only objects the inventory provably owns are deleted, each with a UID precondition,
and only when no guard (:mod:`konfig.engine.guards`) objects; an object a guard keeps
either leaves the inventory (not ours, or never deleted) or stays in it until what
blocks it is gone. Survivors stay in the inventory (``StackRun.exists``).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from konfig.engine import ordering
from konfig.engine.guards import (
    Candidate,
    InUse,
    first_objection,
    prune_guards,
)
from konfig.engine.inventory import Inventory
from konfig.engine.kube import KubeError
from konfig.engine.plan import Change
from konfig.engine.retry import Unreachable, delete_object, retry
from konfig.engine.stackrun import (
    Event,
    ObjectResult,
    Phase,
    StackRun,
    ref_of,
    set_id_of,
    uid_of,
    where,
)
from konfig.engine.waiter import WaitTimeout, wait_gone
from konfig.words import plural


def prune(
    run: StackRun,
    current: Inventory,
    changes: list[Change],
    phase: Phase,
    cascades: Mapping[str, int] | None = None,
) -> None:
    """Delete owned objects dependents first; survivors stay in ``run.exists``.
    ``cascades``: the confirmed cascades (a Namespace's or a CRD's id -> the live objects
    confirmed, :func:`konfig.engine.danger.confirmed_cascades`): such a Namespace or CRD
    goes with the objects of other owners it holds, and its result names them."""
    if not changes:
        return
    kube, options = run.kube, run.options
    live_now: dict[str, dict[str, Any] | None] = {}
    for c in changes:
        try:
            live_now[c.id] = retry(
                partial(kube.get, c.api_version, c.kind, c.name, c.namespace), options
            )
        except Unreachable as exc:
            run.unreachable = run.unreachable or exc.error
            for rest in changes:
                run.exists.setdefault(rest.id, True)
            return
    by_id = {c.id: c for c in changes}
    items = [
        ordering.item_from_manifest(
            c.id,
            live_now[c.id]
            or {
                "apiVersion": c.api_version,
                "kind": c.kind,
                "metadata": {"name": c.name, "namespace": c.namespace},
            },
        )
        for c in changes
    ]
    waves = ordering.reverse_levels(items)
    guards = prune_guards(current, RunReader(run), set_id_of(run.path), cascades)
    taken: dict[str, list[str]] = {}
    for guard in guards:
        if isinstance(guard, InUse):
            taken = guard.taken  # one for both in-use guards (prune_guards)
    run.emit(
        Event(
            run.path,
            "prune",
            f"{phase}: {plural(len(changes), 'object')} in {plural(len(waves), 'wave')}",
        )
    )
    for wave in waves:
        if run.unreachable is not None or run.stopping():
            for rid in wave:
                run.exists[rid] = True
            continue
        deleting: list[tuple[str, str]] = []
        for rid in wave:
            c = by_id[rid]
            ref = ref_of(c)
            live = live_now[rid]
            if live is None:
                run.exists[rid] = False
                run.record(ObjectResult(rid, "deleted", f"already gone: {where(ref)}", phase=phase))
                continue
            try:
                objection = first_objection(guards, Candidate(rid, ref, live))
            except Unreachable as exc:
                run.unreachable = run.unreachable or exc.error
                run.exists[rid] = True
                continue
            if objection is not None:
                run.exists[rid] = objection.keep_member
                run.record(ObjectResult(rid, "kept", objection.reason, phase=phase))
                continue
            deleting.append((rid, uid_of(live)))

        def delete(item: tuple[str, str]) -> tuple[str, str, str | None]:
            rid, uid = item
            ref = ref_of(by_id[rid])
            try:
                delete_object(kube, ref, uid=uid, propagation="Background", options=options)
            except Unreachable as exc:
                run.unreachable = run.unreachable or exc.error
                return rid, uid, exc.error.message
            except KubeError as exc:
                return rid, uid, exc.message
            return rid, uid, None

        with ThreadPoolExecutor(max_workers=max(1, options.concurrency)) as pool:
            outcomes = list(pool.map(delete, deleting))
        for rid, uid, failure in outcomes:
            ref = ref_of(by_id[rid])
            if failure is not None:
                run.exists[rid] = True
                run.record(ObjectResult(rid, "failed", f"failed to delete: {failure}", phase=phase))
                continue
            if options.wait and run.unreachable is None:
                try:
                    wait_gone(run, ref, uid)
                except WaitTimeout as exc:
                    run.exists[rid] = True
                    run.record(ObjectResult(rid, "failed", f"failed: {exc}", phase=phase))
                    continue
                except Unreachable as exc:
                    run.unreachable = run.unreachable or exc.error
                    run.exists[rid] = True
                    continue
            run.exists[rid] = False
            message = f"deleted {where(ref)}"
            if taken.get(rid):
                held = taken[rid]
                shown = ", ".join(held[:10]) + (
                    f" and {len(held) - 10} more" if len(held) > 10 else ""
                )
                message += (
                    f" with the {plural(len(held), 'object')} of other owners it held "
                    f"(confirmed cascade): {shown}"
                )
            run.record(ObjectResult(rid, "deleted", message, phase=phase))


class RunReader:
    """The cluster as the guards read it: the run's API client, with retries."""

    def __init__(self, run: StackRun) -> None:
        self._run = run

    def namespaced_kinds(self) -> list[tuple[str, str]]:
        return retry(self._run.kube.namespaced_kinds, self._run.options)

    def list(
        self, api_version: str, kind: str, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        return retry(partial(self._run.kube.list, api_version, kind, namespace), self._run.options)
