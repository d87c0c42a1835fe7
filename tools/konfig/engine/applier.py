"""Apply one stack's plan: the inventory protocol of ENGINE.md "Apply".

Plain data in (a :class:`~konfig.engine.plan.StackPlan`, the stack's Spec for
``dependsOn``, the prior :class:`~konfig.engine.inventory.Inventory`), a
:class:`StackResult` out, progress as :class:`Event` records through a callback.
Nothing here prints, reads the environment or exits.

Apply, per stack (the caller holds the stack's Lease, :mod:`konfig.engine.lock`):

1. order the planned objects (:mod:`konfig.engine.ordering`); conflicts (objects another
   owner has), cycles, unknown ids and immutable-field changes the stack did not opt
   into replacing fail here, before anything is written;
2. write the inventory as the union of the prior and the planned members;
3. apply level by level: server-side apply (field manager ``konfig``, force) with
   bounded concurrency and retries with backoff on 409/429/5xx and unreachable
   servers, then wait for the level to be healthy (:mod:`konfig.engine.health`) with a
   timeout that names the object and what it waited for. A CRD whose custom resources
   are in the plan is waited for (established and served) even with ``--no-wait``: that
   wait is part of the order. Dependents of a failed object are skipped; independent
   branches continue;
4. prune (only when every apply succeeded, :mod:`konfig.engine.pruner`) what the
   inventory owns and the plan no longer has, dependents first, ownership proven
   per object and a UID precondition on every delete; the guards of
   :mod:`konfig.engine.guards` keep ``default``/``kube-*``, a Namespace that still
   holds objects of other owners and a CRD whose custom resources others own;
5. shrink the inventory to what exists. The new commit and spec digest (and whether
   the Spec came from uncommitted changes) are recorded only when everything
   succeeded, so a failed apply is retried by the next run. If the API server
   vanishes in the middle, the inventory is still the union written in step 2: a
   superset of what exists, so nothing is orphaned and the next run converges.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from konfig.engine import inventory, inventory_store, ordering
from konfig.engine.danger import assess, confirmed_cascades
from konfig.engine.diff import normalize
from konfig.engine.guards import (
    CONFIRM_RULE,
    REPLACE_ANNOTATION,
    ClusterReader,
    confirm_hint,
    replace_allowed,
    unconfirmed,
)
from konfig.engine.inventory import Inventory, Member
from konfig.engine.kube import Kube, KubeApiError, KubeError
from konfig.engine.plan import Change, StackPlan
from konfig.engine.pruner import RunReader, prune
from konfig.engine.retry import (
    RETRYABLE_STATUS,
    PreconditionFailed,
    Unreachable,
    delete_object,
    retry,
)
from konfig.engine.stackrun import (
    INTERRUPTED,
    ApplyOptions,
    Event,
    EventSink,
    ObjectResult,
    Outcome,
    StackResult,
    StackRun,
    ref_of,
    set_id_of,
    summary_error,
    uid_of,
    unreachable_message,
    where,
)
from konfig.engine.waiter import WaitTimeout, wait_gone, wait_healthy, wait_served
from konfig.errors import KonfigError
from konfig.spec import Spec
from konfig.words import plural


class ApplyError(KonfigError):
    """The stack cannot be applied as planned (before anything was written)."""


def check_plan(
    plan: StackPlan,
    spec: Spec | None,
    options: ApplyOptions,
    reader: ClusterReader | None = None,
) -> tuple[list[list[str]], Any]:
    """Everything that must fail before a write: conflicts (objects that belong to someone
    else), order errors, unapproved replaces.

    Returns the apply levels and the dependency graph.
    """
    if plan.conflicts:
        listed = "; ".join(f"{c.id}: {c.reason}" for c in plan.conflicts)
        raise ApplyError(
            f"{plan.path}: refusing to apply: {len(plan.conflicts)} object(s) belong to someone "
            f"else; nothing was applied to this stack: {listed}",
            hint="an object belongs to exactly one stack: resolve each conflict as its reason "
            "says (the pull request's preview shows them first)",
        )
    if options.dangers is not None and options.dangers.policy.active:
        # with the cluster (``reader``): a cascade's live count, which its confirmation binds
        assessed = (
            plan
            if reader is None and any(c.dangers for c in plan.changes)
            else assess(plan, version=options.kubernetes_version, reader=reader)
        )
        found = unconfirmed(assessed, options.dangers)
        if found is not None:
            raise ApplyError(
                f"{plan.path}: nothing was applied: {CONFIRM_RULE}: {found.summary} needs a "
                f"confirmation ({len(found.why)} change{'s' if len(found.why) != 1 else ''})",
                hint=confirm_hint(plan.path, found),
            )
    resources = spec.by_id() if spec else {}
    planned = [c for c in plan.changes if c.id in resources and c.action != "delete"]
    blocked = [
        c
        for c in planned
        if c.action == "replace"
        and not replace_allowed(c.desired, stack_opts_in=options.replace_on_immutable)
    ]
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


def apply_stack(
    kube: Kube,
    plan: StackPlan,
    spec: Spec | None,
    prior: Inventory | None,
    options: ApplyOptions,
    emit: EventSink = lambda _e: None,
    *,
    lost: threading.Event | None = None,
    stop: threading.Event | None = None,
) -> StackResult:
    """Apply one stack's plan. Raises ApplyError before any write; else a result.

    When ``stop`` is set (the process got SIGTERM or SIGINT), requests in flight
    finish, nothing new is applied or pruned, and the inventory is shrunk to what
    exists (the commit is not recorded), as after any failure.
    """
    started = time.monotonic()
    levels, graph = check_plan(plan, spec, options, kube)
    by_id = {c.id: c for c in plan.changes}
    planned_ids = {i for level in levels for i in level}
    run = StackRun(kube, plan.path, options, emit, lost, secrets=plan.secrets(), stop=stop)
    if run.stopping():
        return StackResult(plan.path, False, (), f"{plan.path}: {INTERRUPTED}; nothing was written")
    try:
        if (
            prior is not None
            and planned_ids <= prior.ids()
            and prior.name == inventory.inventory_name(plan.path)
        ):
            current = prior  # the union is the prior inventory: nothing to write yet
        else:
            current = retry(
                lambda: inventory_store.write_union(
                    kube,
                    plan.path,
                    prior,
                    [Member(i, uid_of(by_id[i].live)) for i in sorted(planned_ids)],
                ),
                options,
            )
    except Unreachable as exc:
        return StackResult(plan.path, False, (), unreachable_message(plan.path, exc.error))
    run.uids = {m.id: m.uid for m in current.members}
    emit(
        Event(
            plan.path,
            "inventory",
            f"inventory {current.name}: {plural(len(current.members), 'member')}",
        )
    )

    blocked: dict[str, str] = {}
    for number, level in enumerate(levels, 1):
        if run.unreachable is not None or run.stopping():
            break
        run.check_lock()
        emit(
            Event(
                plan.path, "level", f"level {number}/{len(levels)}: {plural(len(level), 'object')}"
            )
        )
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
        applied = [c for c, ok in zip(todo, done, strict=True) if ok]
        if options.wait and run.unreachable is None:
            wait_healthy(run, applied)
        # Order, not health: a CRD whose custom resources come later must be established
        # and served first, with --no-wait too.
        defining = [
            c
            for c in applied
            if run.results[c.id].outcome != "failed"
            and any(why == "crd" for why in graph.edges.get(c.id, {}).values())
        ]
        if defining and run.unreachable is None and not run.stopping():
            wait_served(run, defining)
        for c in todo:
            if run.results[c.id].outcome == "failed":
                for dep in ordering.dependents(graph, c.id):
                    blocked.setdefault(dep, c.id)
    if run.stopping():
        for rid in sorted(planned_ids - set(run.results)):
            run.record(ObjectResult(rid, "skipped", INTERRUPTED))
            run.exists[rid] = by_id[rid].live is not None

    applied_ok = (
        run.unreachable is None
        and not run.stopping()
        and all(run.results[i].outcome not in ("failed", "skipped") for i in planned_ids)
    )
    prune_ids = [c.id for c in plan.changes if c.id not in planned_ids and c.id in current.ids()]
    if applied_ok:
        doomed = [by_id[i] for i in prune_ids if by_id[i].action == "delete"]
        try:
            cascades = confirmed_cascades(
                plan, options.dangers, reader=RunReader(run), version=options.kubernetes_version
            )
        except Unreachable as exc:
            run.unreachable = exc.error
            cascades = {}
        prune(run, current, doomed, "prune", cascades)
    else:
        for i in prune_ids:
            if by_id[i].action == "delete":
                run.record(
                    ObjectResult(
                        i,
                        "skipped",
                        "prune skipped: "
                        + ("konfig was stopped" if run.stopping() else "not every object applied"),
                        phase="prune",
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
            final.append(Member(m.id, run.uids.get(m.id, m.uid), _finished(m, by_id, run)))
    ok = applied_ok and all(r.outcome != "failed" for r in run.results.values())
    written: Inventory | None = None
    error = summary_error(run, ok)
    try:
        written = retry(
            lambda: inventory_store.write_inventory(
                kube,
                plan.path,
                final,
                commit=options.commit if ok else (prior.commit if prior else ""),
                spec_digest=(plan.spec_digest or "")
                if ok
                else (prior.spec_digest if prior else ""),
                applied_at=None if ok else (prior.applied_at if prior else None),
                dirty=options.dirty if ok else (prior.dirty if prior else False),
                applied_fields=_applied_fields(prior, run),
                review=options.review if ok else (prior.review if prior else None),
                audit=_audit(kube, options) if ok else _prior_audit(prior),
            ),
            options,
        )
        emit(
            Event(
                plan.path, "inventory", f"inventory {written.name}: {plural(len(final), 'member')}"
            )
        )
        if ok and prior is not None and prior.former_name:
            # every object carries the new id now: the old name goes
            retry(lambda: inventory_store.retire_former(kube, prior), options)
            emit(
                Event(
                    plan.path,
                    "inventory",
                    f"inventory {prior.former_name} (its name before names were injective) "
                    f"deleted: moved to {written.name}",
                )
            )
    except Unreachable as exc:
        run.unreachable = run.unreachable or exc.error
        ok = False
        error = unreachable_message(plan.path, run.unreachable)
    return StackResult(
        plan.path,
        ok,
        tuple(sorted(run.results.values(), key=lambda r: (r.phase != "apply", r.id))),
        error,
        written,
        time.monotonic() - started,
    )


def _finished(member: Member, by_id: dict[str, Change], run: StackRun) -> str:
    """The digest of the Job manifest that ran to completion and removed itself (see
    :attr:`Member.finished`): seen finished by this run, else kept while the plan keeps
    it unchanged and gone; anything else clears it."""
    if member.id in run.finished:
        return run.finished[member.id]
    change = by_id.get(member.id)
    if change is None or (change.action == "unchanged" and change.live is None):
        return member.finished
    return ""


def _applied_fields(prior: Inventory | None, run: StackRun) -> dict[str, Any]:
    """Konfig's fields per member after this run: what it wrote or kept now, else what
    the prior inventory recorded (an object this run did not reach is unchanged)."""
    fields: dict[str, Any] = dict(prior.applied_fields or {}) if prior else {}
    fields.update(run.owned)
    return fields


def _precondition(run: StackRun, change: Change) -> str:
    """The resourceVersion an update is sent with (``options.preconditions``: the version
    the plan read under the Lease), or "" for none (a create has no version yet, a
    replace re-creates the object)."""
    if not run.options.preconditions or change.action != "update" or change.live is None:
        return ""
    return str((change.live.get("metadata") or {}).get("resourceVersion") or "")


def _send(kube: Kube, manifest: dict[str, Any], version: str, change: Change) -> dict[str, Any]:
    """Server-side apply; with ``version``, a 409 is the precondition refused (the server
    answers a stale resourceVersion so; proven in engine/test_preconditions.py). Then the
    object is read again: when only what the server itself moves changed (status,
    resourceVersion, generation, managedFields: a controller's status update), it is sent
    once more with the version just read; anything else that changed is refused."""
    for attempt in (1, 2):
        try:
            return kube.apply(manifest, dry_run=False, force=True)
        except KubeApiError as exc:
            if not version or exc.failure.status != 409:
                raise
            ref = ref_of(change)
            now = kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)
            fresh = str(((now or {}).get("metadata") or {}).get("resourceVersion") or "")
            if attempt == 2 or now is None or normalize(now) != normalize(change.live):
                raise PreconditionFailed(
                    f"changed in the cluster since the plan read it (resourceVersion "
                    f"{version}): not applied; preview again",
                    exc.failure,
                ) from exc
            version = fresh
            manifest = {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": fresh}}
    raise AssertionError("unreachable")  # pragma: no cover


def _apply_one(run: StackRun, change: Change) -> bool:
    """Apply one object; records its result. True when it was written (or unchanged)."""
    kube, options = run.kube, run.options
    ref = ref_of(change)
    if run.unreachable is not None or run.stopping():
        why = INTERRUPTED if run.unreachable is None else "skipped: the API server is unreachable"
        run.record(ObjectResult(change.id, "skipped", why))
        run.exists[change.id] = change.live is not None
        return False
    manifest = inventory.label_member(change.desired or {}, set_id_of(run.path))
    live_labels = ((change.live or {}).get("metadata") or {}).get("labels") or {}
    deleted = False  # a replace deleted the old object
    try:
        if change.action == "unchanged" and change.live is None:
            # A Job that ran to completion and removed itself (planner: finished): the
            # same manifest is not run again.
            run.exists[change.id] = True
            run.finished[change.id] = inventory.manifest_digest(change.desired or {})
            run.record(ObjectResult(change.id, "unchanged", f"unchanged {where(ref)}"))
            return True
        if change.action == "unchanged" and live_labels.get(inventory.LABEL_PART_OF) == set_id_of(
            run.path
        ):
            run.uids[change.id] = uid_of(change.live)
            run.exists[change.id] = True
            run.saw(change.id, change.live)
            run.record(ObjectResult(change.id, "unchanged", f"unchanged {where(ref)}"))
            return True
        if change.action == "replace":
            delete_object(
                kube, ref, uid=uid_of(change.live), propagation="Foreground", options=options
            )
            wait_gone(run, ref, uid_of(change.live))
            deleted = True
        version = _precondition(run, change)
        if version:
            manifest = {
                **manifest,
                "metadata": {**manifest["metadata"], "resourceVersion": version},
            }
        result = retry(lambda: _send(kube, manifest, version, change), options)
    except Unreachable as exc:
        # The request may have been carried out before the connection broke: keep the
        # object in the inventory (a member that turns out not to exist is dropped later).
        run.unreachable = run.unreachable or exc.error
        run.exists[change.id] = True
        run.record(ObjectResult(change.id, "failed", f"failed: {exc.error.message}"))
        return False
    except KubeError as exc:
        uncertain = (
            isinstance(exc, KubeApiError)
            and exc.failure.status in RETRYABLE_STATUS
            and not isinstance(exc, PreconditionFailed)
        )
        # A rejection (admission, validation, ...) leaves the object as it was.
        run.exists[change.id] = uncertain or (change.live is not None and not deleted)
        run.record(ObjectResult(change.id, "failed", f"failed: {exc.message}"))
        return False
    except WaitTimeout as exc:
        run.exists[change.id] = True
        run.record(ObjectResult(change.id, "failed", f"failed: {exc}"))
        return False
    run.uids[change.id] = uid_of(result)
    run.exists[change.id] = True
    run.saw(change.id, result)
    outcome: Outcome
    if change.action == "replace":
        outcome = "replaced"
    elif change.action == "unchanged":
        outcome = "unchanged"  # adopted: only our part-of label was added
    else:
        outcome = "updated" if change.live is not None else "created"
    run.record(ObjectResult(change.id, outcome, f"{outcome} {where(ref)}"))
    return True


def _audit(kube: Any, options: ApplyOptions) -> inventory.Audit:
    """The audit of a complete apply: the user the requests were made as (the
    impersonated identity, else the kubeconfig's user) and the approvals given."""
    return inventory.Audit(
        applied_by=str(getattr(kube, "user", "") or ""),
        approved_by=options.approved_by,
        approved_change=options.approved_change,
        overrides=options.approved_overrides,
    )


def _prior_audit(prior: Inventory | None) -> inventory.Audit:
    """An apply that did not complete keeps the last complete one's audit."""
    if prior is None:
        return inventory.Audit()
    return prior.audit
