"""The destroy flow: which stacks, their plans (all deletes), destroy under the lock.

``konfig destroy`` composes these steps; the engine (:mod:`konfig.engine.destroyer`)
destroys one stack. A stack is addressed like any other, or by its path when its
directory is gone (a merge that deleted it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from konfig.engine.danger import assess
from konfig.engine.guards import (
    CONFIRM_RULE,
    ClusterReader,
    DangerGuard,
    DangerPolicy,
    confirm_hint,
    unconfirmed,
)
from konfig.engine.inventory_store import read_inventory
from konfig.engine.lock import StackLock
from konfig.engine.plan import StackPlan
from konfig.engine.stackrun import INTERRUPTED, ApplyOptions, EventSink, StackResult
from konfig.errors import UsageError
from konfig.pipeline.applying import check_committed
from konfig.pipeline.connections import Connections
from konfig.pipeline.locking import LockWait, run_locked
from konfig.pipeline.runtime import (
    NOTHING_SET_UP,
    Contexts,
    check_credentials,
    kept_of_gone,
    runtime_of,
    uses_opentofu,
)
from konfig.pipeline.selection import gone_stack
from konfig.repo.layout import (
    Repository,
    Stack,
    cache_dir,
    parse_stack_address,
    resolve_stacks,
    unusable_error,
)


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


def check_before_destroy(
    repo: Repository, addresses: Sequence[str], *, deleted: bool, allow_dirty: bool
) -> list[DestroyTarget]:
    """Destroy's safety order before connecting: the targets (:func:`destroy_targets`),
    and what is destroyed is a commit (a deletion not committed is refused unless
    ``allow_dirty``). Then, connected: :func:`plan_destroy_all`."""
    targets = destroy_targets(repo, addresses, deleted=deleted)
    check_committed(
        repo,
        [t.stack for t in targets],
        allow_dirty=allow_dirty,
        verb="destroy",
        cache=cache_dir(repo.root),
    )
    return targets


def plan_destroy_all(
    conns: Connections,
    targets: Sequence[DestroyTarget],
    set_up: Callable[[bool], Contexts],
    *,
    note: Callable[[str], None] | None = None,
    confirmed: Mapping[str, frozenset[str]] | None = None,
    policy: DangerPolicy | None = None,
) -> tuple[Contexts, list[StackPlan]]:
    """Connected, before any write: the runtimes the targets use set up (``set_up(True)``:
    OpenTofu takes part), every existing target's cluster in the kubeconfig, what the
    runtimes need from the environment (:func:`require_destroy_credentials`), then each
    target's plan (:func:`plan_destroys`: raises for what a runtime refuses)."""
    contexts = set_up(any(uses_opentofu(t.stack) for t in targets))
    conns.check([t.stack for t in targets if not t.deleted])
    require_destroy_credentials(conns, targets, contexts)
    plans = plan_destroys(conns, targets, note=note, contexts=contexts)
    readers = [conns.kube(t.stack) for t in targets]
    check_dangers(conns, plans, confirmed or {}, readers, policy)
    return contexts, plans


def check_dangers(
    conns: Connections,
    plans: Sequence[StackPlan],
    confirmed: Mapping[str, frozenset[str]],
    readers: Sequence[ClusterReader] | None = None,
    policy: DangerPolicy | None = None,
) -> None:
    """``danger/confirm`` (konfig.yaml ``dangers``), as apply checks it: a destroy is
    every object of the stack deleted; refused before any write until ``confirmed``
    (stack path -> digests, ``--confirm``) names each stack that needs it. ``readers``
    (each plan's cluster): a cascade's live count, which the digest binds, as the
    preview's does. ``policy``: default konfig.yaml ``dangers``."""
    if policy is None:
        policy = DangerPolicy.of(conns.repo.config.dangers)
    if not policy.active:
        return
    from konfig.engine.applier import ApplyError  # networkx: only when refusing

    guard = DangerGuard(policy, dict(confirmed))
    for i, plan in enumerate(plans):
        reader = readers[i] if readers is not None else None
        assessed = assess(plan, version=conns.repo.config.kubernetes_version, reader=reader)
        found = unconfirmed(assessed, guard)
        if found is not None:
            raise ApplyError(
                f"{plan.path}: nothing was destroyed: {CONFIRM_RULE}: {found.summary} needs a "
                "confirmation",
                hint=confirm_hint(plan.path, found).replace("konfig apply", "konfig destroy"),
            )


def require_destroy_credentials(
    conns: Connections, targets: Sequence[DestroyTarget], contexts: Contexts
) -> None:
    """Before any plan or write: what each target's runtime needs from the environment
    (the provider credentials of every resource the OpenTofu state of a target with a
    ``terraform`` section records: OpenTofu starts each provider to destroy them); else
    one error naming every stack, provider configuration and variable."""
    for t in targets:
        if t.deleted and uses_opentofu(t.stack):
            conns.locate(t.stack)
    stacks = [t.stack for t in targets]
    check_credentials(stacks, {}, contexts, conns.kube, verb="destroy")


def plan_destroys(
    conns: Connections,
    targets: Sequence[DestroyTarget],
    *,
    note: Callable[[str], None] | None = None,
    contexts: Contexts = NOTHING_SET_UP,
) -> list[StackPlan]:
    """Each target's plan with no Spec, by its runtime: every owned, existing member is a
    delete, and every Terraform resource of a stack whose stack.yaml has a ``terraform``
    section (refused without its ``allowDestroy``: raises before anything is written)."""
    plans: list[StackPlan] = []
    for t in targets:
        if t.deleted:
            conns.locate(t.stack)
        kube = conns.kube(t.stack)
        prior = read_inventory(kube, t.stack)
        if prior is None and note is not None:
            note(f"{t.stack.path}: no inventory in the cluster, nothing to destroy")
        if t.deleted and note is not None:
            for kept in kept_of_gone(kube, t.stack, contexts):
                note(kept)
        runtime = runtime_of(t.stack, None, contexts)
        plans.append(runtime.plan_destroy(kube, t.stack, prior, conns.target(t.stack)))
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
    contexts: Contexts = NOTHING_SET_UP,
) -> StackResult:
    """Destroy one stack under its Lease (planned again under the lock) by its runtime;
    ``stop`` as in :func:`konfig.pipeline.applying.apply_locked`. A stack with Terraform
    resources: :func:`konfig.tofu.hybrid_apply.destroy_hybrid`."""
    kube = conns.kube(stack)

    def work(lock: StackLock) -> StackResult:
        prior = read_inventory(kube, stack)
        runtime = runtime_of(stack, None, contexts)
        return runtime.destroy(
            kube, stack, prior, conns.target(stack), options, emit, lost=lock.lost, stop=stop
        )

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
