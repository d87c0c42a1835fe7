"""The destroy flow: which stacks, their plans (all deletes), destroy under the lock.

``konfig destroy`` composes these steps; the engine (:mod:`konfig.engine.destroyer`)
destroys one stack. A stack is addressed like any other, or by its path when its
directory is gone (a merge that deleted it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from konfig.engine.destroyer import destroy_stack
from konfig.engine.inventory import read_inventory
from konfig.engine.lock import StackLock
from konfig.engine.plan import StackPlan
from konfig.engine.planner import plan_stack
from konfig.engine.stackrun import INTERRUPTED, ApplyOptions, EventSink, StackResult
from konfig.errors import KonfigError, UsageError
from konfig.pipeline.connections import Connections
from konfig.pipeline.locking import LockWait, run_locked
from konfig.pipeline.selection import gone_stack
from konfig.repo.layout import (
    Repository,
    Stack,
    parse_stack_address,
    resolve_stacks,
    unusable_error,
)
from konfig.tofu.context import TofuContext
from konfig.tofu.hybrid import discard, kept_terraform, plan_destroy_hybrid
from konfig.tofu.hybrid_apply import destroy_hybrid
from konfig.tofu.model import has_terraform
from konfig.tofu.preflight import read_states, require_credentials


@dataclass(frozen=True)
class DestroyTarget:
    stack: Stack
    deleted: bool  # the stack's directory is gone


def destroy_targets(
    repo: Repository, addresses: Sequence[str], *, deleted: bool
) -> list[DestroyTarget]:
    """The stacks to destroy, each once; with ``deleted`` every address is the path of a
    stack whose directory is gone, else an existing stack (or, failing that, a path)."""
    targets: list[DestroyTarget] = []
    for address in addresses:
        target = _target(repo, address, deleted=deleted)
        if all(target.stack.path != t.stack.path for t in targets):
            targets.append(target)
    return targets


def _target(repo: Repository, address: str, *, deleted: bool) -> DestroyTarget:
    read = parse_stack_address(repo.root, address)  # outside the repository: a usage error
    if not deleted:
        try:
            found = resolve_stacks(repo, [address])
        except UsageError:
            found = []
        if found:
            return DestroyTarget(found[0], False)
        if not found and any(repo.unusable(p) for p in read.candidates):
            # its kubernetes context is unknown: never guess the cluster to delete from
            raise unusable_error(repo, [address])
    hint = "drop --deleted to destroy an existing stack" if deleted else None
    return DestroyTarget(gone_stack(repo, address, what=address, must_be_gone=hint), True)


def require_destroy_credentials(
    conns: Connections, targets: Sequence[DestroyTarget], tofu: TofuContext
) -> None:
    """Before any plan or write: the provider credentials of every resource the state of
    a target with a ``terraform`` section records are in ``tofu.environment`` (OpenTofu
    starts each provider to destroy them); else one error naming every stack, provider
    configuration and variable."""
    chosen = [t.stack for t in targets if has_terraform(t.stack, None)]
    for t in targets:
        if t.deleted and t.stack in chosen:
            conns.locate(t.stack)
    states = read_states(chosen, conns.kube)
    require_credentials(chosen, {}, tofu.environment, states=states, verb="destroy")


def plan_destroys(
    conns: Connections,
    targets: Sequence[DestroyTarget],
    *,
    note: Callable[[str], None] | None = None,
    tofu: TofuContext | None = None,
) -> list[StackPlan]:
    """Each target's plan with no Spec: every owned, existing member is a delete, and
    every Terraform resource of a stack whose stack.yaml has a ``terraform`` section
    (refused without its ``allowDestroy``: raises before anything is written)."""
    plans: list[StackPlan] = []
    for t in targets:
        if t.deleted:
            conns.locate(t.stack)
        kube = conns.kube(t.stack)
        prior = read_inventory(kube, t.stack)
        if prior is None and note is not None:
            note(f"{t.stack.path}: no inventory in the cluster, nothing to destroy")
        if t.deleted and note is not None:
            kept = kept_terraform(kube, t.stack)
            if kept is not None:
                note(kept)
        if tofu is not None and has_terraform(t.stack, None):
            hybrid = plan_destroy_hybrid(
                kube, t.stack, prior, tofu, conns.target(t.stack), lock=False
            )
            discard(hybrid)
            refused = hybrid.plan.refusals()
            if refused:
                raise KonfigError(
                    f"{t.stack.path}: nothing was destroyed: "
                    + "; ".join(c.refused for c in refused)
                )
            plans.append(hybrid.plan)
        else:
            plans.append(plan_stack(kube, t.stack, None, prior, deleted=True))
    return plans


def destroy_locked(
    conns: Connections,
    stack: Stack,
    options: ApplyOptions,
    emit: EventSink,
    *,
    lock_timeout: float,
    lease_duration: int,
    on_lock_wait: LockWait | None = None,
    stop: threading.Event | None = None,
    tofu: TofuContext | None = None,
) -> StackResult:
    """Destroy one stack under its Lease (planned again under the lock); ``stop`` as in
    :func:`konfig.pipeline.applying.apply_locked`. A stack with Terraform resources:
    :func:`konfig.tofu.hybrid_apply.destroy_hybrid`."""
    kube = conns.kube(stack)

    def work(lock: StackLock) -> StackResult:
        prior = read_inventory(kube, stack)
        if tofu is not None and has_terraform(stack, None):
            return destroy_hybrid(
                kube,
                stack,
                prior,
                tofu,
                conns.target(stack),
                options,
                emit,
                lost=lock.lost,
                stop=stop,
            )
        plan = plan_stack(kube, stack, None, prior, deleted=True)
        return destroy_stack(kube, plan, prior, options, emit, lost=lock.lost, stop=stop)

    if stop is not None and stop.is_set():
        message = f"{stack.path}: {INTERRUPTED}; nothing was written"
        return StackResult(stack.path, False, (), message)
    return run_locked(
        kube,
        stack,
        work,
        lock_timeout=lock_timeout,
        lease_duration=lease_duration,
        on_wait=on_lock_wait,
        stop=stop,
    )
