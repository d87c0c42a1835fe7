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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from konfig import contracts
from konfig.build.compiler import CompileSettings
from konfig.check.ownership import shared_objects
from konfig.detect import gitrepo
from konfig.detect.dirty import TreeState, tree_state
from konfig.engine.applier import ApplyError
from konfig.engine.guards import DangerGuard, DangerPolicy
from konfig.engine.inventory_store import read_inventory
from konfig.engine.lock import StackLock
from konfig.engine.plan import StackPlan, plan_differences
from konfig.engine.stackrun import INTERRUPTED, ApplyOptions, EventSink, StackResult
from konfig.errors import KonfigError, UsageError
from konfig.pipeline.compiling import compile_stacks
from konfig.pipeline.concurrency import run_concurrently
from konfig.pipeline.connections import Connections
from konfig.pipeline.locking import LockWait, run_locked
from konfig.pipeline.refusals import first_refusal
from konfig.pipeline.runtime import (
    NOTHING_SET_UP,
    Contexts,
    SavedPlan,
    check_credentials,
    runtime_of,
    shown_entry,
    uses_opentofu,
)
from konfig.repo.layout import Repository, Stack
from konfig.repo.settings import RepoConfig
from konfig.secrets.refs import Resolver, SecretData, secret_data, unresolved
from konfig.spec import Spec

if TYPE_CHECKING:
    from konfig.secrets.keys import Keyring


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


def check_refusals(repo: Repository, stack: Stack, spec: Spec) -> None:
    """What :data:`~konfig.pipeline.refusals.PRE_WRITE_REFUSALS` refuses (the preview
    shows the same instead of a plan) fails before any write."""
    refused = first_refusal(repo, stack, spec)
    if refused is not None:
        raise ApplyError(refused.apply, hint=refused.hint)


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
    stack: Stack,
    *,
    tree: TreeState,
    timeout: float,
    concurrency: int,
    wait: bool,
    config: RepoConfig | None = None,
    confirmed: Mapping[str, frozenset[str]] | None = None,
    preconditions: bool = False,
    review: Mapping[str, Any] | None = None,
    before: DangerPolicy | None = None,
) -> ApplyOptions:
    """The options of one stack's apply: the commit (and whether the stack's inputs were
    dirty) to record, ``stack.yaml`` ``apply: {replaceOnImmutable}``, and ``danger/confirm``
    (``konfig.yaml`` ``dangers`` of ``config``, held together with ``before``, the
    policy before the merge, when given; the ``confirmed`` stacks' digests)."""
    policy = None if config is None else DangerPolicy.of(config.dangers)
    if policy is not None and before is not None:
        policy = policy.stricter(before)
    return ApplyOptions(
        concurrency=concurrency,
        timeout=timeout,
        wait=wait,
        replace_on_immutable=stack.apply_setting("replaceOnImmutable"),
        commit=tree.commit,
        dirty=tree.is_dirty(stack.path),
        dangers=None if policy is None else DangerGuard(policy, dict(confirmed or {})),
        kubernetes_version=None if config is None else config.kubernetes_version,
        preconditions=preconditions,
        review=review,
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


@dataclass(frozen=True)
class ApplyInputs:
    """What apply checked before anything is written, for the plans and the applies."""

    tree: TreeState  # the commit applied (and which stacks' inputs are dirty)
    specs: dict[str, Spec]
    secrets: dict[str, SecretData]  # values from encrypted files, in memory
    contexts: Contexts  # the runtimes set up beside the Kubernetes engine
    saved: dict[str, dict[str, Any]] | None = None  # --plan: the saved preview's stacks


def check_before_write(
    repo: Repository,
    stacks: Sequence[Stack],
    conns: Connections,
    set_up: Callable[[bool], Contexts],
    *,
    keyring: Keyring | None,
    plan_file: Path | None = None,
    allow_dirty: bool = False,
    commit: str | None = None,
    cache: Path | None = None,
    jobs: int | None = None,
    settings: CompileSettings | None = None,
) -> ApplyInputs:
    """Apply's safety order, before any plan or write; each step raises, and then
    nothing is applied anywhere:

    1. every stack's cluster is in the kubeconfig;
    2. the saved preview (``--plan``) is one;
    3. what is applied is a commit (:func:`check_committed`);
    4. every stack compiles (:func:`compile_specs`);
    5. no stack is refused by :data:`~konfig.pipeline.refusals.PRE_WRITE_REFUSALS`;
    6. every value from an encrypted file decrypts (:func:`resolve_secrets`);
    7. the runtimes the stacks use are set up (``set_up(True)``: OpenTofu takes part,
       its runtime imported only then) and their credentials are in the environment.

    Then, connected: :func:`check_against_clusters`."""
    conns.check(stacks)
    saved = load_saved_preview(plan_file) if plan_file else None
    tree = check_committed(repo, stacks, allow_dirty=allow_dirty, commit=commit, cache=cache)
    specs = compile_specs(repo, stacks, jobs=jobs, state=cache, settings=settings)
    for stack in stacks:
        check_refusals(repo, stack, specs[stack.path])
    secrets = resolve_secrets(repo.root, stacks, specs, keyring)
    contexts = set_up(any(uses_opentofu(s, specs[s.path]) for s in stacks))
    check_credentials(stacks, specs, contexts)
    return ApplyInputs(tree, specs, secrets, contexts, saved)


def check_against_clusters(
    stacks: Sequence[Stack], inputs: ApplyInputs, conns: Connections
) -> None:
    """Connected, before any plan: the credentials of what only a runtime's records in
    the cluster use (the provider of a Terraform resource apply prunes), and no object
    declared by two stacks (:func:`check_shared`)."""
    check_credentials(stacks, inputs.specs, inputs.contexts, conns.kube)
    check_shared(stacks, inputs.specs, conns)


def plan_all(
    stacks: Sequence[Stack],
    specs: Mapping[str, Spec],
    conns: Connections,
    options_of: Callable[[Stack], ApplyOptions],
    *,
    workers: int,
    secrets: Mapping[str, SecretData] | None = None,
    contexts: Contexts = NOTHING_SET_UP,
    keep: dict[str, SavedPlan] | None = None,
) -> list[StackPlan]:
    """Every stack's plan, checked as apply will check it (order, replaces, Terraform
    resources it would destroy without the stack's opt-in). ``keep``: where what a
    runtime keeps of a plan goes (stack path -> saved plan: OpenTofu's plan file, for
    :func:`apply_locked`; the caller discards them) instead of being discarded."""

    def plan_one(stack: Stack) -> StackPlan:
        kube = conns.kube(stack)
        spec = specs[stack.path]
        plan, saved = runtime_of(stack, spec, contexts).plan(
            kube,
            stack,
            spec,
            read_inventory(kube, stack),
            conns.target(stack),
            options_of(stack),
            secret_data=(secrets or {}).get(stack.path),
            keep=keep is not None,
        )
        if saved is not None and keep is not None:
            keep[stack.path] = saved
        return plan

    return run_concurrently(stacks, plan_one, workers)


def discard_kept(kept: Mapping[str, SavedPlan]) -> None:
    """Remove the saved plans :func:`plan_all` kept (those not applied)."""
    for saved in kept.values():
        saved.discard()


@dataclass(frozen=True)
class Planned:
    stack: Stack
    spec: Spec
    plan: StackPlan | None  # the plan shown (None: planned only under the lock)
    secret_data: SecretData | None = None  # values from encrypted files, in memory
    saved: SavedPlan | None = None  # the plan shown, as its runtime kept it (OpenTofu's)


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
    contexts: Contexts = NOTHING_SET_UP,
) -> StackResult:
    """Apply one stack under its Lease: its runtime plans again, compares with the plan
    shown and applies (:func:`konfig.pipeline.runtime.runtime_of`: a stack with
    Terraform resources runs OpenTofu first, :mod:`konfig.tofu.hybrid_apply`).

    ``stop`` set (SIGTERM, SIGINT): a stack not started is not touched; one being applied
    finishes its requests in flight, records what exists and releases its Lease."""
    kube = conns.kube(planned.stack)
    path = planned.stack.path

    def work(lock: StackLock) -> StackResult:
        prior = read_inventory(kube, planned.stack)
        return runtime_of(planned.stack, planned.spec, contexts).apply(
            kube,
            planned.stack,
            planned.spec,
            prior,
            conns.target(planned.stack),
            options,
            emit,
            shown=None if planned.plan is None else shown_entry(planned.plan),
            secret_data=planned.secret_data,
            lost=lock.lost,
            show_plan=show_plan,
            stop=stop,
            saved=planned.saved,
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
