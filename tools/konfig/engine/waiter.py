"""Waiting for objects: until a level is healthy (:mod:`konfig.engine.health`), or an
object is gone. Every wait has the run's timeout and says what it was waiting for."""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import partial
from typing import Any

from konfig.engine import health
from konfig.engine.inventory import manifest_digest
from konfig.engine.kube import KubeError
from konfig.engine.plan import Change
from konfig.engine.retry import Unreachable, retry
from konfig.engine.stackrun import Event, ObjectResult, StackRun, ref_of, uid_of, where
from konfig.ids import ObjectRef


class WaitTimeout(Exception):
    pass


def wait_gone(run: StackRun, ref: ObjectRef, uid: str) -> None:
    deadline = time.monotonic() + run.options.timeout
    delay = min(0.25, run.options.poll)  # short first polls: most objects are quick
    while True:
        live = retry(
            lambda: run.kube.get(ref.api_version, ref.kind, ref.name, ref.namespace), run.options
        )
        if live is None or (uid and uid_of(live) != uid):
            return
        if time.monotonic() >= deadline:
            raise WaitTimeout(
                f"timed out after {run.options.timeout:g}s waiting for {where(ref)} to be "
                "deleted (it still exists"
                + (
                    ", terminating)"
                    if (live.get("metadata") or {}).get("deletionTimestamp")
                    else ")"
                )
            )
        if run.pause(delay):
            raise WaitTimeout(f"stopped by a signal while waiting for {where(ref)} to be deleted")
        delay = min(delay * 2, run.options.poll)


def wait_healthy(run: StackRun, changes: list[Change]) -> None:
    """Wait until every object of a level is current, failed, or the timeout passed."""
    pending = {c.id: c for c in changes}
    last: dict[str, health.Health] = {}
    deadline = time.monotonic() + run.options.timeout
    delay = min(0.25, run.options.poll)  # short first polls: most objects are quick
    announced = False
    while pending:
        for rid in sorted(pending):
            c = pending[rid]
            # First look at what the apply returned (most kinds are healthy at once);
            # poll the server only for what is not.
            first = run.seen.pop(rid, None)
            try:
                live = (
                    first
                    if first is not None
                    else retry(
                        partial(run.kube.get, c.api_version, c.kind, c.name, c.namespace),
                        run.options,
                    )
                )
            except Unreachable as exc:
                run.unreachable = run.unreachable or exc.error
                return
            except KubeError as exc:
                run.record(ObjectResult(rid, "failed", f"failed: health check: {exc.message}"))
                del pending[rid]
                continue
            h = health.status(live)
            if health.removes_itself(c.desired) and (live is None or h.state == "current"):
                # A Job with ttlSecondsAfterFinished: complete, or already removed by the
                # TTL controller (it was applied a moment ago: gone means finished).
                h = health.COLLECTED if live is None else h
                run.finished[rid] = manifest_digest(c.desired or {})
            last[rid] = h
            if h.state == "current":
                del pending[rid]
            elif h.state == "failed":
                run.record(
                    ObjectResult(
                        rid, "failed", f"failed: {where(ref_of(c))} is unhealthy: {h.message}"
                    )
                )
                del pending[rid]
        if not pending:
            return
        if time.monotonic() >= deadline:
            for rid, c in sorted(pending.items()):
                h = last[rid]
                run.record(
                    ObjectResult(
                        rid,
                        "failed",
                        f"failed: timed out after {run.options.timeout:g}s waiting for "
                        f"{where(ref_of(c))}: waiting for {h.waiting_for} (last seen: {h.message})",
                    )
                )
            return
        if not announced:
            names = ", ".join(sorted(pending)[:5])
            more = f" and {len(pending) - 5} more" if len(pending) > 5 else ""
            verb = "becomes" if len(pending) == 1 else "become"
            # one event: the heartbeat shows the last one, so why it may never end (no load
            # balancer controller) is said in the same line as what it waits for
            why = "".join(
                f"; {rid}: {health.NO_LOAD_BALANCER}"
                for rid in sorted(pending)
                if last[rid].message == health.NO_LOAD_BALANCER
            )
            run.emit(Event(run.path, "wait", f"waiting until {names}{more} {verb} healthy{why}"))
            announced = True
        if run.pause(delay):
            return  # told to stop: what was applied stays applied, the rest is not started
        delay = min(delay * 2, run.options.poll)


def wait_served(run: StackRun, crds: list[Change]) -> None:
    """Wait until each CustomResourceDefinition of ``crds`` is established and the API
    server serves its kind in every served version (discovery lags ``Established`` for a
    moment). Part of the apply order, so it happens with ``--no-wait`` too: custom
    resources are applied after their CRD is served. A CRD that is not served in time
    fails with what it waited for; its custom resources are then skipped."""
    deadline = time.monotonic() + run.options.timeout
    delay = min(0.1, run.options.poll)
    pending = {c.id: c for c in crds}
    last: dict[str, str] = {}
    while pending:
        for rid in sorted(pending):
            c = pending[rid]
            try:
                live = retry(
                    partial(run.kube.get, c.api_version, c.kind, c.name, c.namespace), run.options
                )
            except Unreachable as exc:
                run.unreachable = run.unreachable or exc.error
                return
            except KubeError as exc:
                last[rid] = f"could not read it: {exc.message}"
                continue
            h = health.status(live)
            if h.state == "failed":
                run.record(ObjectResult(rid, "failed", f"failed: {where(ref_of(c))}: {h.message}"))
                del pending[rid]
                continue
            if h.state != "current":
                last[rid] = h.message
                continue
            try:
                missing = [
                    gv
                    for gv in served_versions(live or {})
                    if not run.kube.has_kind(gv, _kind(live))
                ]
            except KubeError as exc:  # discovery itself failed: not served yet, as far as we know
                last[rid] = f"discovery failed: {exc.message}"
                continue
            if missing:
                last[rid] = f"established, not served yet in {', '.join(missing)}"
                continue
            del pending[rid]
        if not pending:
            return
        if time.monotonic() >= deadline:
            for rid, c in sorted(pending.items()):
                run.record(
                    ObjectResult(
                        rid,
                        "failed",
                        f"failed: timed out after {run.options.timeout:g}s waiting for "
                        f"{where(ref_of(c))} to be established and served (last seen: "
                        f"{last.get(rid, 'nothing')})",
                    )
                )
            return
        if run.pause(delay):
            return
        delay = min(delay * 2, run.options.poll)


def served_versions(crd: Mapping[str, Any]) -> list[str]:
    """``group/version`` of every version a CustomResourceDefinition serves."""
    spec = crd.get("spec") or {}
    group = spec.get("group") or ""
    return [
        f"{group}/{v['name']}"
        for v in spec.get("versions") or []
        if isinstance(v, Mapping) and v.get("name") and v.get("served", True)
    ]


def _kind(crd: Mapping[str, Any] | None) -> str:
    return str((((crd or {}).get("spec") or {}).get("names") or {}).get("kind") or "")
