"""The apply, prune and destroy engine (ENGINE.md "Apply").

Plain data in (a :class:`~konfig.engine.plan.StackPlan`, the stack's Spec for
``dependsOn``, the prior :class:`~konfig.engine.inventory.Inventory`), a
:class:`StackResult` out, progress as :class:`Event` records through a callback.
Nothing here prints, reads the environment or exits.

Apply, per stack (the caller holds the stack's Lease, :mod:`konfig.engine.lock`):

1. order the planned objects (:mod:`konfig.engine.ordering`); cycles, unknown ids and
   immutable-field changes the stack did not opt into replacing fail here, before
   anything is written;
2. write the inventory as the union of the prior and the planned members;
3. apply level by level: server-side apply (field manager ``konfig``, force) with
   bounded concurrency and retries with backoff on 409/429/5xx and unreachable
   servers, then wait for the level to be healthy (:mod:`konfig.engine.health`) with a
   timeout that names the object and what it waited for. Dependents of a failed
   object are skipped; independent branches continue;
4. prune (only when every apply succeeded) what the inventory owns and the plan
   no longer has, dependents first, ownership proven per object
   (:meth:`Inventory.owns`) and a UID precondition on every delete; never
   ``default``/``kube-*`` and never a Namespace that still holds objects of
   other owners;
5. shrink the inventory to what exists. The new commit and spec digest are
   recorded only when everything succeeded, so a failed apply is retried by the
   next run. If the API server vanishes in the middle, the inventory is still
   the union written in step 2: a superset of what exists, so nothing is orphaned
   and the next run converges.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

from konfig.engine import health, inventory, ordering
from konfig.engine.diff import scrub
from konfig.engine.inventory import Inventory, Member, ObjectRef
from konfig.engine.kube import Kube, KubeApiError, KubeError, describe
from konfig.engine.plan import Change, StackPlan
from konfig.errors import KonfigError
from konfig.spec import Spec

REPLACE_ANNOTATION = "konfig.io/replace-on-immutable"
RETRYABLE_STATUS = frozenset({409, 429, 500, 502, 503, 504})
PROTECTED_NAMESPACES = ("default",)
PROTECTED_PREFIX = "kube-"

Outcome = Literal[
    "created", "updated", "replaced", "deleted", "unchanged", "failed", "skipped", "kept"
]
Phase = Literal["apply", "prune", "destroy"]
SUMMARY = ("created", "updated", "replaced", "deleted", "unchanged")

_T = TypeVar("_T")

# Before a Namespace is pruned every listable namespaced kind is listed in it; these
# objects are made by the cluster itself, never by another owner.
_CLUSTER_MADE_KINDS = frozenset({"Event", "Endpoints", "EndpointSlice"})
_CLUSTER_MADE = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}


class ApplyError(KonfigError):
    """The stack cannot be applied as planned (before anything was written)."""


@dataclass(frozen=True)
class ApplyOptions:
    concurrency: int = 5
    timeout: float = 300.0  # per health wait (one level, or one deletion wave)
    wait: bool = True
    replace_on_immutable: bool = False  # the stack's stack.yaml `apply: {replaceOnImmutable}`
    commit: str = ""
    poll: float = 1.0
    attempts: int = 4
    backoff: float = 0.5


@dataclass(frozen=True)
class ObjectResult:
    id: str
    outcome: Outcome
    message: str = ""
    phase: Phase = "apply"


@dataclass(frozen=True)
class Event:
    stack: str
    kind: Literal["level", "object", "wait", "prune", "inventory"]
    message: str
    result: ObjectResult | None = None


EventSink = Callable[[Event], None]


@dataclass(frozen=True)
class StackResult:
    path: str
    ok: bool
    objects: tuple[ObjectResult, ...] = ()
    error: str | None = None
    inventory: Inventory | None = None
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys((*SUMMARY, "failed", "skipped", "kept"), 0)
        for r in self.objects:
            out[r.outcome] += 1
        return out

    def failures(self) -> list[ObjectResult]:
        return [r for r in self.objects if r.outcome in ("failed", "skipped")]


class _Unreachable(Exception):
    """The API server stopped answering: stop this stack, keep the union inventory."""

    def __init__(self, error: KubeError) -> None:
        super().__init__(str(error))
        self.error = error


def _retryable(exc: KubeError) -> bool:
    if isinstance(exc, KubeApiError):
        return exc.failure.status in RETRYABLE_STATUS
    return True  # unreachable, connection reset, timeout


def _retry(fn: Callable[[], _T], options: ApplyOptions) -> _T:
    """Call ``fn``, retrying with exponential backoff on 409/429/5xx and timeouts."""
    delay = options.backoff
    for attempt in range(1, options.attempts + 1):
        try:
            return fn()
        except KubeApiError as exc:
            if not _retryable(exc) or attempt == options.attempts:
                raise
        except KubeError as exc:
            if attempt == options.attempts:
                raise _Unreachable(exc) from exc
        time.sleep(delay)
        delay = min(delay * 2, 8.0)
    raise AssertionError("unreachable")  # pragma: no cover


def _uid(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


def _where(ref: ObjectRef) -> str:
    return describe(ref.api_version, ref.kind, ref.name, ref.namespace)


def _ref(change: Change) -> ObjectRef:
    return ObjectRef(change.api_version, change.kind, change.namespace, change.name)


def may_replace(change: Change, options: ApplyOptions) -> bool:
    """Replace on an immutable field only when the stack or the object opts in."""
    if options.replace_on_immutable:
        return True
    annotations = ((change.desired or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(REPLACE_ANNOTATION, "")).lower() == "true"


def check_plan(
    plan: StackPlan, spec: Spec | None, options: ApplyOptions
) -> tuple[list[list[str]], Any]:
    """Everything that must fail before a write: order errors, unapproved replaces.

    Returns the apply levels and the dependency graph.
    """
    resources = spec.by_id() if spec else {}
    planned = [c for c in plan.changes if c.id in resources and c.action != "delete"]
    blocked = [c for c in planned if c.action == "replace" and not may_replace(c, options)]
    if blocked:
        listed = "; ".join(f"{c.id}: {c.reason}" for c in blocked)
        raise ApplyError(
            f"{plan.path}: refusing to replace objects whose immutable fields changed: {listed}",
            hint="revert the immutable field, or let konfig delete and re-create the object: "
            f"`apply: {{replaceOnImmutable: true}}` in the stack's stack.yaml, or the "
            f'annotation {REPLACE_ANNOTATION}: "true" on the resource',
        )
    items = [
        ordering.item_from_manifest(
            c.id, c.desired or resources[c.id].attributes, resources[c.id].depends_on
        )
        for c in planned
    ]
    try:
        graph = ordering.build_graph(items)
        return ordering.levels(graph), graph
    except ordering.OrderError as exc:
        raise ApplyError(f"{plan.path}: {exc.message}", hint=exc.hint) from None


@dataclass
class _Run:
    """Mutable state of one stack's apply or destroy."""

    kube: Kube
    path: str
    options: ApplyOptions
    emit: EventSink
    lost: threading.Event | None
    results: dict[str, ObjectResult] = field(default_factory=dict)
    uids: dict[str, str] = field(default_factory=dict)
    exists: dict[str, bool] = field(default_factory=dict)
    unreachable: KubeError | None = None
    secrets: set[str] = field(default_factory=set)
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)  # last object per id

    def record(self, result: ObjectResult) -> None:
        if self.secrets:
            # Server messages may quote values: never let a Secret's value through.
            result = ObjectResult(
                result.id, result.outcome, scrub(result.message, self.secrets), result.phase
            )
        self.results[result.id] = result
        self.emit(Event(self.path, "object", result.message, result))

    def check_lock(self) -> None:
        if self.lost is not None and self.lost.is_set():
            raise KonfigError(
                f"{self.path}: lost the stack's lock (Lease) during the apply; stopped",
                hint="another apply took it over after our renewals failed; re-run",
            )


def apply_stack(
    kube: Kube,
    plan: StackPlan,
    spec: Spec | None,
    prior: Inventory | None,
    options: ApplyOptions,
    emit: EventSink = lambda _e: None,
    *,
    lost: threading.Event | None = None,
) -> StackResult:
    """Apply one stack's plan. Raises ApplyError before any write; else a result."""
    started = time.monotonic()
    levels, graph = check_plan(plan, spec, options)
    by_id = {c.id: c for c in plan.changes}
    planned_ids = {i for level in levels for i in level}
    run = _Run(kube, plan.path, options, emit, lost, secrets=plan.secrets())
    try:
        if prior is not None and planned_ids <= prior.ids():
            current = prior  # the union is the prior inventory: nothing to write yet
        else:
            current = _retry(
                lambda: inventory.write_union(
                    kube,
                    plan.path,
                    prior,
                    [Member(i, _uid(by_id[i].live)) for i in sorted(planned_ids)],
                ),
                options,
            )
    except _Unreachable as exc:
        return StackResult(plan.path, False, (), _unreachable_message(plan.path, exc.error))
    run.uids = {m.id: m.uid for m in current.members}
    emit(Event(plan.path, "inventory", f"inventory {current.name}: {len(current.members)} members"))

    blocked: dict[str, str] = {}
    for number, level in enumerate(levels, 1):
        if run.unreachable is not None:
            break
        run.check_lock()
        emit(Event(plan.path, "level", f"level {number}/{len(levels)}: {len(level)} objects"))
        todo: list[Change] = []
        for rid in level:
            if rid in blocked:
                run.record(
                    ObjectResult(
                        rid, "skipped", f"skipped: depends on {blocked[rid]}, which failed"
                    )
                )
                run.exists[rid] = by_id[rid].live is not None
            else:
                todo.append(by_id[rid])
        with ThreadPoolExecutor(max_workers=max(1, options.concurrency)) as pool:
            done = list(pool.map(lambda c: _apply_one(run, c), todo))
        if options.wait and run.unreachable is None:
            _wait_healthy(run, [c for c, ok in zip(todo, done, strict=True) if ok])
        for c in todo:
            if run.results[c.id].outcome == "failed":
                for dep in ordering.dependents(graph, c.id):
                    blocked.setdefault(dep, c.id)

    applied_ok = run.unreachable is None and all(
        run.results[i].outcome not in ("failed", "skipped") for i in planned_ids
    )
    prune_ids = [c.id for c in plan.changes if c.id not in planned_ids and c.id in current.ids()]
    if applied_ok:
        _prune(run, current, [by_id[i] for i in prune_ids if by_id[i].action == "delete"], "prune")
    else:
        for i in prune_ids:
            if by_id[i].action == "delete":
                run.record(
                    ObjectResult(
                        i, "skipped", "prune skipped: not every object applied", phase="prune"
                    )
                )
                run.exists[i] = True

    # Shrink to what exists: applied or pre-existing planned objects, and prune survivors.
    final: list[Member] = []
    for m in current.members:
        if m.id in planned_ids:
            keep = run.exists.get(m.id, by_id[m.id].live is not None)
        elif m.id in run.exists:
            keep = run.exists[m.id]
        else:
            keep = False  # not in the plan and already gone or not ours: dropped
        if keep:
            final.append(Member(m.id, run.uids.get(m.id, m.uid)))
    ok = applied_ok and all(r.outcome != "failed" for r in run.results.values())
    written: Inventory | None = None
    error = _summary_error(run, ok)
    try:
        written = _retry(
            lambda: inventory.write_inventory(
                kube,
                plan.path,
                final,
                commit=options.commit if ok else (prior.commit if prior else ""),
                spec_digest=(plan.spec_digest or "")
                if ok
                else (prior.spec_digest if prior else ""),
                applied_at=None if ok else (prior.applied_at if prior else None),
            ),
            options,
        )
        emit(Event(plan.path, "inventory", f"inventory {written.name}: {len(final)} members"))
    except _Unreachable as exc:
        run.unreachable = run.unreachable or exc.error
        ok = False
        error = _unreachable_message(plan.path, run.unreachable)
    return StackResult(
        plan.path,
        ok,
        tuple(sorted(run.results.values(), key=lambda r: (r.phase != "apply", r.id))),
        error,
        written,
        time.monotonic() - started,
    )


def _unreachable_message(path: str, error: KubeError) -> str:
    return (
        f"{path}: stopped: {error.message}. The inventory still lists every object this "
        "stack may own (the union written before applying); re-run the apply once the "
        "API server is back and it converges"
    )


def _summary_error(run: _Run, ok: bool) -> str | None:
    if ok:
        return None
    if run.unreachable is not None:
        return _unreachable_message(run.path, run.unreachable)
    failed = [r for r in run.results.values() if r.outcome == "failed"]
    skipped = [r for r in run.results.values() if r.outcome == "skipped"]
    return f"{run.path}: {len(failed)} failed, {len(skipped)} skipped"


def _apply_one(run: _Run, change: Change) -> bool:
    """Apply one object; records its result. True when it was written (or unchanged)."""
    kube, options = run.kube, run.options
    ref = _ref(change)
    if run.unreachable is not None:
        run.record(ObjectResult(change.id, "skipped", "skipped: the API server is unreachable"))
        run.exists[change.id] = change.live is not None
        return False
    manifest = inventory.label_member(change.desired or {}, _set_id(run.path))
    live_labels = ((change.live or {}).get("metadata") or {}).get("labels") or {}
    deleted = False  # a replace deleted the old object
    try:
        if change.action == "unchanged" and live_labels.get(inventory.LABEL_PART_OF) == _set_id(
            run.path
        ):
            run.uids[change.id] = _uid(change.live)
            run.exists[change.id] = True
            if change.live is not None:
                run.seen[change.id] = change.live
            run.record(ObjectResult(change.id, "unchanged", "unchanged"))
            return True
        if change.action == "replace":
            _retry(
                lambda: kube.delete(
                    ref.api_version,
                    ref.kind,
                    ref.name,
                    ref.namespace,
                    uid=_uid(change.live) or None,
                    propagation="Foreground",
                ),
                options,
            )
            _wait_gone(run, ref, _uid(change.live))
            deleted = True
        result = _retry(lambda: kube.apply(manifest, dry_run=False, force=True), options)
    except _Unreachable as exc:
        # The request may have been carried out before the connection broke: keep the
        # object in the inventory (a member that turns out not to exist is dropped later).
        run.unreachable = run.unreachable or exc.error
        run.exists[change.id] = True
        run.record(ObjectResult(change.id, "failed", f"failed: {exc.error.message}"))
        return False
    except KubeError as exc:
        uncertain = isinstance(exc, KubeApiError) and exc.failure.status in RETRYABLE_STATUS
        # A rejection (admission, validation, ...) leaves the object as it was.
        run.exists[change.id] = uncertain or (change.live is not None and not deleted)
        run.record(ObjectResult(change.id, "failed", f"failed: {exc.message}"))
        return False
    except _WaitTimeout as exc:
        run.exists[change.id] = True
        run.record(ObjectResult(change.id, "failed", f"failed: {exc}"))
        return False
    run.uids[change.id] = _uid(result)
    run.exists[change.id] = True
    run.seen[change.id] = result
    outcome: Outcome
    if change.action == "replace":
        outcome = "replaced"
    elif change.action == "unchanged":
        outcome = "unchanged"  # adopted: only our part-of label was added
    else:
        outcome = "updated" if change.live is not None else "created"
    run.record(ObjectResult(change.id, outcome, f"{outcome} {_where(ref)}"))
    return True


def _set_id(path: str) -> str:
    return inventory.applyset_id(inventory.inventory_name(path))


class _WaitTimeout(Exception):
    pass


def _wait_gone(run: _Run, ref: ObjectRef, uid: str) -> None:
    deadline = time.monotonic() + run.options.timeout
    delay = min(0.25, run.options.poll)  # short first polls: most objects are quick
    while True:
        live = _retry(
            lambda: run.kube.get(ref.api_version, ref.kind, ref.name, ref.namespace), run.options
        )
        if live is None or (uid and _uid(live) != uid):
            return
        if time.monotonic() >= deadline:
            raise _WaitTimeout(
                f"timed out after {run.options.timeout:g}s waiting for {_where(ref)} to be "
                "deleted (it still exists"
                + (
                    ", terminating)"
                    if (live.get("metadata") or {}).get("deletionTimestamp")
                    else ")"
                )
            )
        time.sleep(delay)
        delay = min(delay * 2, run.options.poll)


def _wait_healthy(run: _Run, changes: list[Change]) -> None:
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
                    else _retry(
                        partial(run.kube.get, c.api_version, c.kind, c.name, c.namespace),
                        run.options,
                    )
                )
            except _Unreachable as exc:
                run.unreachable = run.unreachable or exc.error
                return
            except KubeError as exc:
                run.record(ObjectResult(rid, "failed", f"failed: health check: {exc.message}"))
                del pending[rid]
                continue
            h = health.status(live)
            last[rid] = h
            if h.state == "current":
                del pending[rid]
            elif h.state == "failed":
                run.record(
                    ObjectResult(
                        rid, "failed", f"failed: {_where(_ref(c))} is unhealthy: {h.message}"
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
                        f"{_where(_ref(c))}: waiting for {h.waiting_for} (last seen: {h.message})",
                    )
                )
            return
        if not announced:
            names = ", ".join(f"{pending[r].kind}/{pending[r].name}" for r in sorted(pending)[:5])
            more = f" and {len(pending) - 5} more" if len(pending) > 5 else ""
            run.emit(Event(run.path, "wait", f"waiting for {names}{more} to become healthy"))
            announced = True
        time.sleep(delay)
        delay = min(delay * 2, run.options.poll)


# --- prune and destroy -------------------------------------------------------------


def _holds_others(run: _Run, namespace: str, members: Iterable[str]) -> list[str]:
    """Objects in ``namespace`` that belong to someone else (every listable kind)."""
    ours = set(members)
    set_id = _set_id(run.path)
    found: list[str] = []
    kinds = _retry(run.kube.namespaced_kinds, run.options)
    for api_version, kind in sorted(set(kinds)):
        if kind in _CLUSTER_MADE_KINDS:
            continue
        try:
            items = _retry(partial(run.kube.list, api_version, kind, namespace), run.options)
        except KubeApiError:
            continue  # not listable for us (403, 405): nothing we could judge
        for obj in items:
            meta = obj.get("metadata") or {}
            name = str(meta.get("name", ""))
            rid = f"{api_version}:{kind}:{namespace}:{name}"
            if (kind, name) in _CLUSTER_MADE or meta.get("ownerReferences"):
                continue
            if kind == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
                continue
            if rid in ours and (meta.get("labels") or {}).get(inventory.LABEL_PART_OF) == set_id:
                continue
            if meta.get("deletionTimestamp"):
                continue
            found.append(f"{kind}/{name}")
    return found


def _instances_of_others(run: _Run, crd: Mapping[str, Any], members: Iterable[str]) -> list[str]:
    """Custom resources of the CRD's kind that are not ours (all namespaces)."""
    spec = crd.get("spec") or {}
    group = str(spec.get("group", ""))
    kind = str((spec.get("names") or {}).get("kind", ""))
    served = [v.get("name") for v in spec.get("versions") or [] if v.get("served")]
    if not group or not kind or not served:
        return []
    api_version = f"{group}/{served[0]}"
    ours = set(members)
    set_id = _set_id(run.path)
    try:
        items = _retry(partial(run.kube.list, api_version, kind), run.options)
    except KubeError:
        return []  # the kind is not served (any more): nothing left to protect
    found: list[str] = []
    for obj in items:
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace"), str(meta.get("name", ""))
        rid = ":".join([api_version, kind, *([str(ns)] if ns else []), name])
        mine = (meta.get("labels") or {}).get(inventory.LABEL_PART_OF) == set_id and rid in ours
        if not mine and not meta.get("deletionTimestamp"):
            found.append(f"{kind}/{name}" + (f" in {ns}" if ns else ""))
    return found


def _is_protected_namespace(c: Change) -> bool:
    return (
        c.kind == "Namespace"
        and c.api_version == "v1"
        and (c.name in PROTECTED_NAMESPACES or c.name.startswith(PROTECTED_PREFIX))
    )


def _prune_blocker(
    run: _Run, c: Change, live: Mapping[str, Any], members: Iterable[str]
) -> str | None:
    """Why deleting ``c`` would harm other owners, or None when nothing stops it."""
    if c.kind == "Namespace" and c.api_version == "v1":
        others = _holds_others(run, c.name, members)
        what = f"Namespace {c.name}: it still holds objects of other owners"
    elif c.kind == "CustomResourceDefinition":
        # Deleting a CRD deletes every custom resource of its kind, cluster-wide.
        others = _instances_of_others(run, live, members)
        what = (
            f"CustomResourceDefinition {c.name}: deleting it would delete custom resources "
            "of other owners"
        )
    else:
        return None
    if not others:
        return None
    shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
    return f"kept {what} ({shown}); it stays in the inventory and is pruned once they are gone"


def _prune(run: _Run, current: Inventory, changes: list[Change], phase: Phase) -> None:
    """Delete owned objects dependents first; survivors stay in ``run.exists``."""
    if not changes:
        return
    kube, options = run.kube, run.options
    live_now: dict[str, dict[str, Any] | None] = {}
    for c in changes:
        try:
            live_now[c.id] = _retry(
                partial(kube.get, c.api_version, c.kind, c.name, c.namespace), options
            )
        except _Unreachable as exc:
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
    run.emit(Event(run.path, "prune", f"{phase}: {len(changes)} objects in {len(waves)} waves"))
    for wave in waves:
        if run.unreachable is not None:
            for rid in wave:
                run.exists[rid] = True
            continue
        deleting: list[tuple[str, str]] = []
        for rid in wave:
            c = by_id[rid]
            ref = _ref(c)
            live = live_now[rid]
            if live is None:
                run.exists[rid] = False
                run.record(
                    ObjectResult(rid, "deleted", f"already gone: {_where(ref)}", phase=phase)
                )
                continue
            if not current.owns(rid, live):
                run.exists[rid] = False
                run.record(
                    ObjectResult(
                        rid,
                        "kept",
                        f"kept {_where(ref)}: not provably owned by this stack (its "
                        f"{inventory.LABEL_PART_OF} label or UID differs); dropped from the "
                        "inventory",
                        phase=phase,
                    )
                )
                continue
            if _is_protected_namespace(c):
                run.exists[rid] = False
                run.record(
                    ObjectResult(
                        rid,
                        "kept",
                        f"kept Namespace {c.name}: konfig never deletes it",
                        phase=phase,
                    )
                )
                continue
            try:
                blocker = _prune_blocker(run, c, live, current.ids())
            except _Unreachable as exc:
                run.unreachable = run.unreachable or exc.error
                run.exists[rid] = True
                continue
            if blocker is not None:
                run.exists[rid] = True
                run.record(ObjectResult(rid, "kept", blocker, phase=phase))
                continue
            deleting.append((rid, _uid(live)))

        def delete(item: tuple[str, str]) -> tuple[str, str, str | None]:
            rid, uid = item
            ref = _ref(by_id[rid])
            try:
                _retry(
                    lambda: kube.delete(
                        ref.api_version,
                        ref.kind,
                        ref.name,
                        ref.namespace,
                        uid=uid or None,
                        propagation="Background",
                    ),
                    options,
                )
            except _Unreachable as exc:
                run.unreachable = run.unreachable or exc.error
                return rid, uid, exc.error.message
            except KubeError as exc:
                return rid, uid, exc.message
            return rid, uid, None

        with ThreadPoolExecutor(max_workers=max(1, options.concurrency)) as pool:
            outcomes = list(pool.map(delete, deleting))
        for rid, uid, failure in outcomes:
            ref = _ref(by_id[rid])
            if failure is not None:
                run.exists[rid] = True
                run.record(ObjectResult(rid, "failed", f"failed to delete: {failure}", phase=phase))
                continue
            if options.wait and run.unreachable is None:
                try:
                    _wait_gone(run, ref, uid)
                except _WaitTimeout as exc:
                    run.exists[rid] = True
                    run.record(ObjectResult(rid, "failed", f"failed: {exc}", phase=phase))
                    continue
                except _Unreachable as exc:
                    run.unreachable = run.unreachable or exc.error
                    run.exists[rid] = True
                    continue
            run.exists[rid] = False
            run.record(ObjectResult(rid, "deleted", f"deleted {_where(ref)}", phase=phase))


def destroy_stack(
    kube: Kube,
    plan: StackPlan,
    prior: Inventory | None,
    options: ApplyOptions,
    emit: EventSink = lambda _e: None,
    *,
    lost: threading.Event | None = None,
) -> StackResult:
    """Delete everything the inventory owns (dependents first), then the inventory.

    ``plan`` is the plan of the stack with no Spec (``plan_stack(..., spec=None)``):
    every owned, existing member is a ``delete``.
    """
    started = time.monotonic()
    if prior is None:
        return StackResult(plan.path, True, (), None, None, 0.0)
    run = _Run(kube, plan.path, options, emit, lost, secrets=plan.secrets())
    run.check_lock()
    by_id = {c.id: c for c in plan.changes}
    deletes = [c for c in plan.changes if c.action == "delete"]
    _prune(run, prior, deletes, "destroy")
    survivors = [
        Member(m.id, m.uid)
        for m in prior.members
        if m.id in by_id and by_id[m.id].action == "delete" and run.exists.get(m.id, True)
    ]
    ok = run.unreachable is None and not any(r.outcome == "failed" for r in run.results.values())
    error: str | None = None
    written: Inventory | None = None
    try:
        if not survivors and ok:
            _retry(
                lambda: inventory.delete_inventory(kube, plan.path, uid=prior.uid or None), options
            )
            emit(Event(plan.path, "inventory", f"inventory {prior.name} deleted"))
        else:
            written = _retry(
                lambda: inventory.write_inventory(
                    kube,
                    plan.path,
                    survivors,
                    commit=prior.commit,
                    spec_digest=prior.spec_digest,
                    applied_at=prior.applied_at or None,
                ),
                options,
            )
            ok = False
            kept = ", ".join(m.id for m in survivors[:5])
            error = (
                f"{plan.path}: {len(survivors)} objects survive ({kept}); they stay in the "
                "inventory and the next destroy retries them"
            )
    except _Unreachable as exc:
        run.unreachable = run.unreachable or exc.error
    if run.unreachable is not None:
        ok = False
        error = _unreachable_message(plan.path, run.unreachable)
    elif not ok and error is None:
        error = _summary_error(run, ok)
    return StackResult(
        plan.path,
        ok,
        tuple(sorted(run.results.values(), key=lambda r: r.id)),
        error,
        written,
        time.monotonic() - started,
    )


# --- apply what was previewed --------------------------------------------------------


def change_signature(change: Mapping[str, Any]) -> tuple[str, str, str]:
    """What must match between a saved preview and the recomputed plan for one change."""
    fields = json.dumps(change.get("fields") or [], sort_keys=True, default=str)
    return (str(change.get("id")), str(change.get("action")), fields)


def plan_differences(saved_stack: Mapping[str, Any], plan: StackPlan) -> list[str]:
    """Why the recomputed ``plan`` is not the one in a saved preview stack entry."""
    problems: list[str] = []
    if saved_stack.get("status") != "ok":
        return [f"the saved preview of {plan.path} has status {saved_stack.get('status')!r}"]
    if (saved_stack.get("specDigest") or None) != plan.spec_digest:
        problems.append(
            f"spec digest {str(plan.spec_digest)[:12]} != previewed "
            f"{str(saved_stack.get('specDigest'))[:12]} (the configuration changed)"
        )
    saved = {change_signature(c)[0]: change_signature(c) for c in saved_stack.get("changes") or []}
    now = {c.id: change_signature(c.to_dict()) for c in plan.changes}
    for rid in sorted(set(saved) | set(now)):
        if rid not in now:
            problems.append(f"{rid}: previewed as {saved[rid][1]}, no longer in the plan")
        elif rid not in saved:
            problems.append(f"{rid}: now {now[rid][1]}, not in the preview")
        elif saved[rid][1] != now[rid][1]:
            problems.append(f"{rid}: previewed as {saved[rid][1]}, now {now[rid][1]}")
        elif saved[rid][2] != now[rid][2]:
            problems.append(f"{rid}: {now[rid][1]} with different field changes than previewed")
    return problems
