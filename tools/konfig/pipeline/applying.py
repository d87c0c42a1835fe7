"""The apply flow: compile, check, plan, compare with what was shown, apply under the lock.

``konfig apply`` composes these steps; the engine (:mod:`konfig.engine.applier`) applies
one stack. Stacks are independent unless they declare the same object, which is refused
before anything is written; a plan that differs from the one shown (or saved with
``--plan``) applies nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from konfig import contracts
from konfig.build.compiler import CompileSettings
from konfig.check.ownership import shared_objects
from konfig.check.specrules import system_namespace_findings, system_namespace_refusal
from konfig.detect import gitrepo
from konfig.detect.dirty import TreeState, tree_state
from konfig.engine import ordering
from konfig.engine.applier import ApplyError, apply_stack, check_plan
from konfig.engine.inventory import read_inventory
from konfig.engine.lock import StackLock
from konfig.engine.plan import StackPlan, plan_differences
from konfig.engine.planner import plan_stack
from konfig.engine.stackrun import INTERRUPTED, ApplyOptions, EventSink, StackResult
from konfig.errors import KonfigError, UsageError
from konfig.pipeline.compiling import compile_stacks
from konfig.pipeline.concurrency import run_concurrently
from konfig.pipeline.connections import Connections
from konfig.pipeline.locking import LockWait, run_locked
from konfig.repo.layout import Repository, Stack
from konfig.secrets.refs import Resolver, secret_data, unresolved
from konfig.spec import Spec
from konfig.tofu.model import has_terraform

if TYPE_CHECKING:
    from konfig.secrets.keys import Keyring
    from konfig.tofu.context import TofuContext
    from konfig.tofu.hybrid import HybridPlan


def check_committed(
    repo: Repository,
    stacks: Sequence[Stack],
    *,
    allow_dirty: bool,
    verb: str = "apply",
    commit: str | None = None,
    cache: Path | None = None,
) -> TreeState:
    """What is applied (or destroyed) is a commit: refuse when uncommitted changes affect
    any of ``stacks`` (or there is no commit at all) unless ``allow_dirty``; ``commit``
    (``--commit``) must name ``HEAD``. Returns the tree's state, to record per stack."""
    state = tree_state(repo.root, [s.path for s in stacks], cache=cache)
    if commit is not None:
        if state.no_commit is not None:
            raise UsageError(f"--commit {commit}: {state.no_commit}")
        if gitrepo.rev_parse(repo.root, commit) != state.commit:
            raise UsageError(
                f"--commit {commit} is not the checked-out commit {state.commit[:12]}: konfig "
                f"{verb}s the work tree, so the commit recorded must be HEAD",
                hint=f"check out {commit} first, or drop --commit",
            )
    if allow_dirty:
        return state
    if state.no_commit is not None:
        raise KonfigError(
            f"refusing to {verb}: {state.no_commit}; nothing was done",
            hint="commit the repository first (what is applied must be a commit), or pass "
            "--allow-dirty to use the files as they are (the inventory records the apply as "
            "dirty)",
        )
    dirty = [(s.path, state.dirty[s.path]) for s in stacks if s.path in state.dirty]
    if dirty:
        listed = "\n".join(
            f"  {path}: " + "; ".join(why[:3]) + (" ..." if len(why) > 3 else "")
            for path, why in dirty
        )
        raise KonfigError(
            f"refusing to {verb} uncommitted changes (HEAD is {state.commit[:12]}); nothing "
            f"was done:\n{listed}",
            hint="commit (or stash) them and run again (what is applied must be a commit, "
            "so that the inventory and `konfig pending` can tell what runs), or pass "
            f"--allow-dirty to {verb} the work tree as it is: the inventory then records the "
            "apply as dirty and `konfig pending` lists the stack until a commit is applied",
        )
    return state


def compile_specs(
    repo: Repository,
    stacks: Sequence[Stack],
    *,
    jobs: int | None,
    state: Path | None,
    settings: CompileSettings | None = None,
) -> dict[str, Spec]:
    """Every stack's Spec; any compile failure stops the apply before anything is written."""
    results = compile_stacks(repo, stacks, jobs=jobs, state=state, settings=settings)
    failed = [r for r in results if r.error is not None]
    if failed:
        lines = "\n".join(f"  {r.stack_path}: {r.error}" for r in failed)
        raise KonfigError(f"compile failed, nothing was applied:\n{lines}")
    return {r.stack_path: r.spec for r in results if r.spec is not None}


def check_order(path: str, spec: Spec) -> None:
    """Cycles and references to unknown ids fail before any write."""
    items = [ordering.item_from_manifest(r.id, r.attributes, r.depends_on) for r in spec.resources]
    try:
        ordering.build_graph(items)
    except ordering.OrderError as exc:
        raise ApplyError(f"{path}: {exc.message}; nothing was applied", hint=exc.hint) from None


def check_system_namespaces(repo: Repository, stack: Stack, spec: Spec) -> None:
    """Objects in system namespaces konfig.yaml does not allow (the rule `konfig check`
    reports as ``spec/system-namespace``) fail before any write."""
    found = system_namespace_findings(repo.root, stack, spec, repo.config.allow_system_namespaces)
    if found:
        first = found[0]
        raise ApplyError(
            f"{first.location()}: {stack.path}: nothing was applied: "
            + system_namespace_refusal(found),
            hint="`konfig check` lists every such object; system namespaces a stack may write "
            "to are listed in konfig.yaml `allowSystemNamespaces` (docs/apply.md)",
        )


def check_shared(stacks: Sequence[Stack], specs: Mapping[str, Spec], conns: Connections) -> None:
    """Stacks are independent unless they declare the same object: then refuse (the
    clashes `konfig check` reports as ``ownership/shared-object``)."""
    clashes = shared_objects(
        (s.path, conns.target(s), (r.id for r in specs[s.path].resources)) for s in stacks
    )
    if clashes:
        raise UsageError(
            "stacks share objects, so they cannot be applied independently: "
            + "; ".join(
                f"{c.id} is declared by {c.stacks[0]} and {c.stacks[1]}" for c in clashes[:10]
            ),
            hint="an object must belong to exactly one stack (`konfig check` reports these "
            "as ownership/shared-object)",
        )


def apply_options(
    stack: Stack, *, tree: TreeState, timeout: float, concurrency: int, wait: bool
) -> ApplyOptions:
    """The options of one stack's apply: the commit (and whether the stack's inputs were
    dirty) to record, and ``stack.yaml`` ``apply: {replaceOnImmutable}``."""
    return ApplyOptions(
        concurrency=concurrency,
        timeout=timeout,
        wait=wait,
        replace_on_immutable=stack.apply_setting("replaceOnImmutable"),
        commit=tree.commit,
        dirty=tree.is_dirty(stack.path),
    )


def load_saved_preview(path: Path) -> dict[str, dict[str, Any]]:
    """The stacks of a saved ``konfig preview --format json``, by path."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--plan {path}: cannot read a preview JSON file: {exc}") from None
    try:
        contracts.validate("preview", data, file=str(path), text=text)
    except contracts.ContractError as exc:
        raise UsageError(
            f"--plan {exc}", hint="pass the file `konfig preview --format json` wrote"
        ) from None
    return {s["path"]: s for s in data["stacks"]}


def compare_saved(
    saved: Mapping[str, Mapping[str, Any]], plans: Sequence[StackPlan], plan_file: Path | None
) -> None:
    """Refuse when any recomputed plan differs from the saved preview."""
    for plan in plans:
        entry = saved.get(plan.path)
        problems = (
            [f"{plan.path} is not in the saved preview"]
            if entry is None
            else plan_differences(entry, plan)
        )
        if problems:
            raise KonfigError(
                f"{plan.path}: the plan differs from the previewed one ({plan_file}); "
                "nothing was applied:\n  " + "\n  ".join(problems),
                hint="preview again, review, and apply the new preview",
            )


SecretData = Mapping[str, Mapping[str, str]]  # resource id -> data key -> base64 value


def resolve_secrets(
    root: Path, stacks: Sequence[Stack], specs: Mapping[str, Spec], keyring: Keyring | None
) -> dict[str, SecretData]:
    """Every stack's values from encrypted files, decrypted in memory before anything is
    written: without a key, or when any file does not decrypt (wrong key, tampered, MAC
    mismatch, changed since compile), this raises and nothing is applied anywhere."""
    needing = {s.path: unresolved(specs[s.path]) for s in stacks}
    needing = {path: ids for path, ids in needing.items() if ids}
    if needing and keyring is None:
        listed = "; ".join(f"{path}: {', '.join(ids)}" for path, ids in needing.items())
        raise KonfigError(
            f"these Secrets take their values from encrypted files and no decryption key "
            f"was given ({listed}); nothing was applied",
            hint="set SOPS_AGE_KEY_FILE (a file of age keys) or SOPS_AGE_KEY to a key of "
            "the files' recipients (docs/secrets.md)",
        )
    resolver = Resolver(root, keyring)
    return {path: secret_data(specs[path], resolver) for path in needing}


def plan_all(
    stacks: Sequence[Stack],
    specs: Mapping[str, Spec],
    conns: Connections,
    options_of: Callable[[Stack], ApplyOptions],
    *,
    workers: int,
    secrets: Mapping[str, SecretData] | None = None,
    tofu: TofuContext | None = None,
    keep: dict[str, HybridPlan] | None = None,
) -> list[StackPlan]:
    """Every stack's plan, checked as apply will check it (order, replaces, Terraform
    resources it would destroy without the stack's opt-in). ``keep``: where the plans of
    stacks with Terraform resources go (stack path -> plan, its OpenTofu plan file kept
    for :func:`apply_locked`; the caller discards them) instead of being discarded."""

    def plan_one(stack: Stack) -> StackPlan:
        kube = conns.kube(stack)
        spec = specs[stack.path]
        if has_terraform(stack, spec):
            from konfig.tofu.hybrid import discard, plan_hybrid  # OpenTofu: only here

            hybrid = plan_hybrid(
                kube,
                stack,
                spec,
                read_inventory(kube, stack),
                _need(tofu, stack),
                conns.target(stack),
                lock=False,
                secret_data=(secrets or {}).get(stack.path),
            )
            if keep is None:
                discard(hybrid)
            else:
                keep[stack.path] = hybrid
            kube_only = replace(
                hybrid.plan,
                changes=tuple(c for c in hybrid.plan.changes if c.runtime != "Terraform"),
            )
            check_plan(kube_only, hybrid.kube_spec, options_of(stack))
            refused = hybrid.plan.refusals()
            if refused:
                raise ApplyError(
                    f"{stack.path}: nothing was applied: " + "; ".join(c.refused for c in refused)
                )
            return hybrid.plan
        plan = plan_stack(
            kube,
            stack,
            specs[stack.path],
            read_inventory(kube, stack),
            secret_data=(secrets or {}).get(stack.path),
        )
        check_plan(plan, specs[stack.path], options_of(stack))
        return plan

    return run_concurrently(stacks, plan_one, workers)


def shown_entry(plan: StackPlan) -> dict[str, Any]:
    """A plan as a saved preview's stack entry (to compare it with the recomputed one)."""
    return {
        "status": "ok",
        "specDigest": plan.spec_digest,
        "changes": [c.to_dict() for c in plan.changes],
    }


def discard_kept(kept: Mapping[str, HybridPlan]) -> None:
    """Remove the OpenTofu plan files :func:`plan_all` kept (those not applied)."""
    if not kept:
        return
    from konfig.tofu.hybrid import discard

    for hybrid in kept.values():
        discard(hybrid)


@dataclass(frozen=True)
class Planned:
    stack: Stack
    spec: Spec
    plan: StackPlan | None  # the plan shown (None: planned only under the lock)
    secret_data: SecretData | None = None  # values from encrypted files, in memory
    hybrid: HybridPlan | None = None  # the plan shown, with its OpenTofu plan file


def _need(tofu: TofuContext | None, stack: Stack) -> TofuContext:
    if tofu is None:
        raise KonfigError(f"{stack.path}: has Terraform resources and OpenTofu is not set up")
    return tofu


def apply_locked(
    conns: Connections,
    planned: Planned,
    options: ApplyOptions,
    emit: EventSink,
    *,
    lock_timeout: float,
    lease_duration: int,
    on_lock_wait: LockWait | None = None,
    show_plan: Callable[[StackPlan], None] | None = None,
    stop: threading.Event | None = None,
    tofu: TofuContext | None = None,
) -> StackResult:
    """Apply one stack under its Lease: plan again, compare with the plan shown, apply
    (a stack with Terraform resources: OpenTofu first, :mod:`konfig.tofu.hybrid_apply`).

    ``stop`` set (SIGTERM, SIGINT): a stack not started is not touched; one being applied
    finishes its requests in flight, records what exists and releases its Lease."""
    kube = conns.kube(planned.stack)
    path = planned.stack.path

    def work(lock: StackLock) -> StackResult:
        prior = read_inventory(kube, planned.stack)
        if has_terraform(planned.stack, planned.spec):
            from konfig.tofu.hybrid_apply import apply_hybrid  # OpenTofu's runtime: only here

            return apply_hybrid(
                kube,
                planned.stack,
                planned.spec,
                prior,
                _need(tofu, planned.stack),
                conns.target(planned.stack),
                options,
                emit,
                shown_entry=None if planned.plan is None else shown_entry(planned.plan),
                secret_data=planned.secret_data,
                lost=lock.lost,
                show_plan=show_plan,
                stop=stop,
                saved=planned.hybrid,
            )
        plan = plan_stack(kube, planned.stack, planned.spec, prior, secret_data=planned.secret_data)
        problems = [] if planned.plan is None else plan_differences(shown_entry(planned.plan), plan)
        if show_plan is not None:
            show_plan(plan)
        if problems:
            return StackResult(
                path,
                False,
                (),
                f"{path}: the cluster changed since the plan was shown; nothing was applied "
                "to this stack:\n  " + "\n  ".join(problems),
            )
        return apply_stack(
            kube, plan, planned.spec, prior, options, emit, lost=lock.lost, stop=stop
        )

    if stop is not None and stop.is_set():
        return StackResult(path, False, (), f"{path}: {INTERRUPTED}; nothing was written")
    return run_locked(
        kube,
        planned.stack,
        work,
        lock_timeout=lock_timeout,
        lease_duration=lease_duration,
        on_wait=on_lock_wait,
        stop=stop,
    )
