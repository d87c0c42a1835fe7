"""``konfig apply``: apply stacks in dependency order, wait for health, prune, record.

The plan is computed and shown first (as ``konfig preview`` computes it); after
confirmation each stack is applied under its Lease: the plan is recomputed under
the lock and must equal the one shown (or the one in ``--plan FILE``), then
:func:`konfig.engine.applier.apply_stack` runs the inventory protocol. A stack's
OpenTofu plan shown is applied as it is (not planned twice) unless its state changed
since (:func:`konfig.tofu.hybrid.reuse_plan`). The steps are those of
:mod:`konfig.pipeline.applying`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import click

from konfig.commands._common import (
    cache_state,
    compile_settings,
    connections,
    load_repository,
    tofu_context,
)
from konfig.commands._keys import take_keyring_from_env
from konfig.commands._options import kube_options
from konfig.commands._progress import StackProgress
from konfig.commands._results import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_TIMEOUT,
    confirm,
    finish,
    show_plans,
)
from konfig.commands._signals import Stop, graceful, stopped
from konfig.engine.lock import DEFAULT_DURATION
from konfig.engine.plan import StackPlan
from konfig.engine.stackrun import ApplyOptions, StackResult
from konfig.errors import UsageError
from konfig.pipeline.applying import (
    Planned,
    apply_locked,
    apply_options,
    check_committed,
    check_order,
    check_shared,
    check_system_namespaces,
    compare_saved,
    compile_specs,
    discard_kept,
    load_saved_preview,
    plan_all,
    resolve_secrets,
)
from konfig.pipeline.concurrency import run_concurrently
from konfig.pipeline.selection import select_stacks
from konfig.repo.layout import Stack
from konfig.report.previews import StackPreview
from konfig.tofu.model import has_terraform

if TYPE_CHECKING:
    from konfig.tofu.hybrid import HybridPlan


@click.command("apply")
@click.argument("stacks", nargs=-1)
@click.option("--all", "all_stacks", is_flag=True, help="Apply every stack.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for each level to become healthy (and for each deletion wave).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=64),
    default=5,
    show_default=True,
    help="Objects applied at once within a level.",
)
@click.option(
    "--stack-concurrency",
    type=click.IntRange(min=1, max=64),
    default=4,
    show_default=True,
    help="Stacks applied at once.",
)
@click.option("--no-wait", is_flag=True, help="Do not wait for objects to become healthy.")
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A saved `konfig preview --format json`: refuse if the recomputed plan differs.",
)
@click.option(
    "--commit",
    default=None,
    metavar="REF",
    help="The commit expected to be applied: refused unless it is HEAD (recorded: HEAD).",
)
@click.option(
    "--allow-dirty",
    is_flag=True,
    help="Apply even when uncommitted changes affect the stacks (or there is no commit): "
    "the inventory records the apply as dirty and `konfig pending` lists the stack until "
    "a commit is applied.",
)
@click.option(
    "--lock-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_LOCK_TIMEOUT,
    show_default=True,
    help="Seconds to wait for another apply of the same stack to finish.",
)
@click.option(
    "--lease-duration",
    type=click.IntRange(min=2),
    default=DEFAULT_DURATION,
    show_default=True,
    help="Seconds after which a lock whose holder stopped renewing it is stale.",
)
@kube_options
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Compile workers.")
@click.option("--no-cache", is_flag=True, help="Compile every stack (ignore the compile cache).")
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    all_stacks: bool,
    yes: bool,
    timeout: float,
    concurrency: int,
    stack_concurrency: int,
    no_wait: bool,
    plan_file: Path | None,
    commit: str | None,
    allow_dirty: bool,
    lock_timeout: float,
    lease_duration: int,
    kubeconfig: str | None,
    context: str | None,
    as_json: bool,
    jobs: int | None,
    no_cache: bool,
) -> int:
    """Apply STACKs to their clusters: order, wait for health, prune, record.

    Shows the plan and asks first (unless --yes). Objects are applied level by
    level in dependency order with server-side apply; objects the stack no longer
    declares are pruned; the stack's inventory records what it owns, the commit and
    the spec digest. What is applied is a commit: uncommitted changes to a stack's
    inputs are refused (see --allow-dirty). Exit 0 when every stack applied, 1 otherwise.

    \b
    Examples:
      konfig apply guestbook/dev                       # show the plan, ask, apply
      konfig apply --all --yes --plan preview.json --json   # CI: exactly what was previewed
    """
    keyring = take_keyring_from_env()  # before anything compiles: see commands/_keys.py
    repo = load_repository(ctx)
    selected = select_stacks(repo, stacks, all_stacks=all_stacks)
    if not selected:
        raise UsageError("the repository has no stacks", hint="add appops/<project>/<stack>/")
    conns = connections(ctx, repo, kubeconfig, context)
    conns.check(selected)  # every stack's cluster is in the kubeconfig: before anything else
    saved = load_saved_preview(plan_file) if plan_file else None
    state = cache_state(repo.root, enabled=not no_cache)
    tree = check_committed(
        repo, selected, allow_dirty=allow_dirty, commit=commit, cache=state
    )  # what is applied is a commit: before anything else
    specs = compile_specs(repo, selected, jobs=jobs, state=state, settings=compile_settings())
    for stack in selected:
        check_order(stack.path, specs[stack.path])  # cycles, unknown ids: before any write
        check_system_namespaces(repo, stack, specs[stack.path])  # what check refuses, too
    secrets = resolve_secrets(repo.root, selected, specs, keyring)  # also before any write
    hybrid = [s for s in selected if has_terraform(s, specs[s.path])]
    # OpenTofu's runtime is imported only for stacks that have Terraform resources
    tofu = tofu_context(repo.root) if hybrid else None
    if tofu is not None:
        from konfig.tofu.preflight import read_states, require_credentials

        require_credentials(selected, specs, tofu.environment)  # the providers' credentials

    def options_of(stack: Stack) -> ApplyOptions:
        return apply_options(
            stack, tree=tree, timeout=timeout, concurrency=concurrency, wait=not no_wait
        )

    kept: dict[str, HybridPlan] = {}  # OpenTofu plans shown, applied as they are
    with conns, contextlib.ExitStack() as cleanup:
        cleanup.callback(discard_kept, kept)
        if tofu is not None:
            # the credentials of what only the states record (a pruned resource's provider)
            states = read_states(hybrid, conns.kube)
            require_credentials(selected, specs, tofu.environment, states=states)
        check_shared(selected, specs, conns)
        shown: dict[str, StackPlan] = {}
        if not yes or saved is not None:
            # Plan every stack first: to show it and ask, or to compare it with the saved
            # preview so that a difference anywhere applies nothing anywhere.
            plans = plan_all(
                selected,
                specs,
                conns,
                options_of,
                workers=stack_concurrency,
                secrets=secrets,
                tofu=tofu,
                keep=kept,
            )
            shown = {p.path: p for p in plans}
            if saved is not None:
                compare_saved(saved, plans, plan_file)
            if not as_json:
                show_plans([StackPreview(p.path, plan=p) for p in plans])
            confirm("apply these changes", yes=yes)
        show = yes and saved is None and not as_json
        contexts = conns.contexts(selected)
        with StackProgress("apply", quiet=as_json, contexts=contexts) as progress:

            def one(stack: Stack, stop: Stop) -> StackResult:
                progress.start(stack.path)
                result = apply_locked(
                    conns,
                    Planned(
                        stack,
                        specs[stack.path],
                        shown.get(stack.path),
                        secrets.get(stack.path),
                        kept.get(stack.path),
                    ),
                    options_of(stack),
                    progress,
                    lock_timeout=lock_timeout,
                    lease_duration=lease_duration,
                    on_lock_wait=progress.lock_wait,
                    show_plan=progress.plan if show else None,
                    stop=stop.event,
                    tofu=tofu,
                )
                progress.finish(result)
                return result

            with graceful("the apply") as stop:
                results = run_concurrently(selected, lambda s: one(s, stop), stack_concurrency)
    code = finish("Apply", results, as_json=as_json, contexts=contexts)
    return stopped(stop, code)
