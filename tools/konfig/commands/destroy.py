"""``konfig destroy``: delete everything a stack's inventory owns, then the inventory.

Works for stacks that still exist and, addressed by path
(``appops/<project>/<stack>``), for stacks whose directory is gone (a merge that
deleted a stack). Dependents are deleted first, each delete carries a UID
precondition, and only objects the inventory provably owns are touched.
"""

from __future__ import annotations

from pathlib import Path

import click

from konfig.commands._common import connections, load_repository, runtime_contexts
from konfig.commands._console import echo_json, info
from konfig.commands._options import (
    confirm_file_option,
    confirmation_sets,
    confirms_given,
    kube_options,
    lock_options,
    pace_options,
    policy_from_option,
    stacks_file_option,
    stacks_given,
)
from konfig.commands._progress import StackProgress
from konfig.commands._results import confirm, finish, show_plans
from konfig.commands._signals import Stop, graceful, stopped
from konfig.engine.guards import DangerGuard, DangerPolicy
from konfig.engine.stackrun import ApplyOptions, StackResult
from konfig.errors import EXIT_OK, UsageError
from konfig.pipeline.approvals import policy_at
from konfig.pipeline.concurrency import run_concurrently
from konfig.pipeline.destroying import (
    DestroyTarget,
    check_before_destroy,
    destroy_locked,
    plan_destroy_all,
)
from konfig.pipeline.previewing import StackPreview


@click.command("destroy")
@click.argument("stacks", nargs=-1)
@stacks_file_option
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--deleted",
    is_flag=True,
    help="The STACKs are paths of stacks whose directories are gone (appops/<project>/<stack>).",
)
@pace_options(
    timeout="Seconds to wait for each deletion wave to finish.",
    concurrency="Objects deleted at once within a wave.",
    stack_concurrency="Stacks destroyed at once.",
    no_wait="Do not wait until deleted objects are gone.",
)
@lock_options(lock_timeout="Seconds to wait for an apply or destroy of the same stack to finish.")
@click.option(
    "--allow-dirty",
    is_flag=True,
    help="Destroy even when uncommitted changes affect the stacks (e.g. a deletion not "
    "committed yet), or there is no commit.",
)
@click.option(
    "--confirm",
    "confirms",
    multiple=True,
    metavar="STACK=DIGEST",
    help="Confirm a stack's dangers that konfig.yaml `dangers` says need a confirmation "
    "(danger/confirm): the digest the preview names. Repeatable.",
)
@confirm_file_option
@policy_from_option("destroy")
@kube_options
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    stacks_file: Path | None,
    yes: bool,
    deleted: bool,
    timeout: float,
    concurrency: int,
    stack_concurrency: int,
    no_wait: bool,
    lock_timeout: float,
    lease_duration: int,
    allow_dirty: bool,
    confirms: tuple[str, ...],
    confirm_file: Path | None,
    policy_from: str | None,
    kubeconfig: str | None,
    context: str | None,
    as_json: bool,
) -> int:
    """Delete every object STACKs own (dependents first), then their inventories.

    STACK is <project>/<stack> or appops/<project>/<stack>; a stack whose directory
    no longer exists is addressed by its path (its cluster: --context, else the
    kubeconfig's current context). Like apply, destroy acts on a commit: a stack whose
    deletion (or any input) is not committed is refused (see --allow-dirty). Exit 0
    when everything is gone.

    \b
    Examples:
      konfig destroy guestbook/dev
      konfig destroy appops/old/dev --deleted --yes
      konfig destroy --deleted --yes --stacks-file deleted.json   # CI
    """
    named = stacks_given(stacks, stacks_file)
    if not named:
        if stacks_file is None:
            raise UsageError(
                "give the STACKs to destroy (or --stacks-file)",
                hint="konfig destroy guestbook/dev",
            )
        if as_json:
            echo_json({"ok": True, "stacks": []})
        info(f"--stacks-file {stacks_file} lists no stack: nothing to destroy")
        return EXIT_OK
    stacks = named
    repo = load_repository(ctx)
    targets = check_before_destroy(repo, stacks, deleted=deleted, allow_dirty=allow_dirty)
    confirmed = confirmation_sets(confirms_given(confirms, confirm_file))
    policy = DangerPolicy.of(repo.config.dangers)
    if policy_from is not None:
        policy = policy.stricter(policy_at(repo.root, policy_from))
    # the confirmations given also let a confirmed cascade take the objects it counted
    # (engine.danger.confirmed_cascades)
    options = ApplyOptions(
        concurrency=concurrency,
        timeout=timeout,
        wait=not no_wait,
        dangers=DangerGuard(policy, confirmed),
        kubernetes_version=repo.config.kubernetes_version,
    )
    with connections(ctx, repo, kubeconfig, context) as conns:
        runtimes, plans = plan_destroy_all(  # before any write
            conns,
            targets,
            lambda opentofu: runtime_contexts(repo.root, opentofu=opentofu),
            note=None if as_json else info,
            confirmed=confirmed,
            policy=policy,
        )
        if not as_json:
            show_plans([StackPreview(p.path, deleted=True, plan=p) for p in plans])
        confirm("destroy these stacks", yes=yes)

        contexts = conns.contexts([t.stack for t in targets])
        identities = conns.identities([t.stack for t in targets])
        with StackProgress("destroy", quiet=as_json, contexts=contexts) as progress:

            def one(t: DestroyTarget, stop: Stop) -> StackResult:
                progress.start(t.stack.path)
                result = destroy_locked(
                    conns,
                    t.stack,
                    options,
                    progress,
                    lock_timeout=lock_timeout,
                    lease_duration=lease_duration,
                    on_lock_wait=progress.lock_wait,
                    stop=stop.event,
                    contexts=runtimes,
                )
                progress.finish(result)
                return result

            with graceful("the destroy") as stop:
                results = run_concurrently(targets, lambda t: one(t, stop), stack_concurrency)
    code = finish("Destroy", results, as_json=as_json, contexts=contexts, identities=identities)
    return stopped(stop, code)
