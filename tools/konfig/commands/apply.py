"""``konfig apply``: apply stacks in dependency order, wait for health, prune, record.

The plan is computed and shown first (as ``konfig preview`` computes it); after
confirmation each stack is applied under its Lease: the plan is recomputed under
the lock and must equal the one shown (or the one in ``--plan FILE``), then
:func:`konfig.engine.applier.apply_stack` runs the inventory protocol. A stack's
OpenTofu plan shown is applied as it is (not planned twice) unless its state changed
since (:func:`konfig.tofu.hybrid.reuse_plan`). The steps, and the safety order before
any write, are :mod:`konfig.pipeline.applying`'s; this command reads the flags and the
environment, shows, asks and prints.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from konfig.commands._common import (
    cache_state,
    compile_settings,
    connections,
    load_repository,
    runtime_contexts,
)
from konfig.commands._console import echo_json, info
from konfig.commands._keys import take_keyring_from_env
from konfig.commands._options import (
    confirm_file_option,
    confirmation_sets,
    confirmations,
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
from konfig.commands._reviewed import blocked, blocked_result, read_reviewed_file, show_verdicts
from konfig.commands._signals import Stop, graceful, stopped
from konfig.engine.plan import StackPlan
from konfig.engine.stackrun import ApplyOptions, StackResult
from konfig.errors import EXIT_OK, UsageError
from konfig.pipeline.applying import (
    Planned,
    apply_locked,
    apply_options,
    check_against_clusters,
    check_before_write,
    compare_saved,
    discard_kept,
    plan_all,
)
from konfig.pipeline.approvals import load_approvals, policy_at
from konfig.pipeline.compiling import refuse_bad_kcl_mod
from konfig.pipeline.concurrency import run_concurrently
from konfig.pipeline.previewing import StackPreview
from konfig.pipeline.promotion import refuse_held
from konfig.pipeline.reviewed import Reviewed, Verdict, moved_since, verify
from konfig.pipeline.runtime import SavedPlan
from konfig.pipeline.selection import select_stacks
from konfig.repo.layout import Stack
from konfig.secrets.refs import sealed_files


@click.command("apply")
@click.argument("stacks", nargs=-1)
@stacks_file_option
@click.option("--all", "all_stacks", is_flag=True, help="Apply every stack.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@pace_options(
    timeout="Seconds to wait for each level to become healthy (and for each deletion wave).",
    concurrency="Objects applied at once within a level.",
    stack_concurrency="Stacks applied at once.",
    no_wait="Do not wait for objects to become healthy.",
)
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A saved `konfig preview --format json`: refuse if the recomputed plan differs.",
)
@click.option(
    "--reviewed",
    "reviewed_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The reviewed record (the pull request's Konfig comment, `konfig report "
    "--reviewed-out`, or the preview JSON): each stack's change is recomputed and compared "
    "with the reviewed one; the same is applied with the resourceVersions just read as "
    "preconditions, another is blocked or applied as stack.yaml apply.onReviewedChanged "
    "says (default: block for production stacks). docs/review.md.",
)
@click.option(
    "--release",
    "releases",
    multiple=True,
    metavar="STACK=DIGEST",
    help="Release a stack blocked because its change is not the reviewed one: it is "
    "applied when its change digest now is DIGEST (the one the blocked report names), "
    "blocked again otherwise. What apply.yml's workflow_dispatch with a stack and a "
    "digest runs (docs/review.md). Repeatable.",
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
    "--confirm",
    "confirms",
    multiple=True,
    metavar="STACK=DIGEST",
    help="Confirm a stack's dangers that konfig.yaml `dangers` says need a confirmation "
    "(danger/confirm): the digest the preview names. Repeatable.",
)
@confirm_file_option
@policy_from_option("apply")
@click.option(
    "--approvals",
    "approvals_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A `konfig owners --json` of the merged pull request: each stack's inventory "
    "records who approved which commit, and its policy overrides with their reasons and "
    "approvers (shown by `konfig status`).",
)
@lock_options(lock_timeout="Seconds to wait for another apply of the same stack to finish.")
@kube_options
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Compile workers.")
@click.option("--no-cache", is_flag=True, help="Compile every stack (ignore the compile cache).")
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    stacks_file: Path | None,
    all_stacks: bool,
    yes: bool,
    timeout: float,
    concurrency: int,
    stack_concurrency: int,
    no_wait: bool,
    plan_file: Path | None,
    reviewed_file: Path | None,
    commit: str | None,
    allow_dirty: bool,
    confirms: tuple[str, ...],
    confirm_file: Path | None,
    policy_from: str | None,
    releases: tuple[str, ...],
    approvals_file: Path | None,
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
      konfig apply --all --yes --reviewed reviewed.json      # merge: what was reviewed
      konfig apply --yes --stacks-file pending.json          # CI: thousands of stacks
    """
    keyring = take_keyring_from_env()  # before anything compiles: see commands/_keys.py
    named = stacks_given(stacks, stacks_file)
    if stacks_file is not None and not named and not all_stacks:
        if as_json:  # an empty list: nothing to apply (never "every stack")
            echo_json({"ok": True, "stacks": []})
        info(f"--stacks-file {stacks_file} lists no stack: nothing to apply")
        return EXIT_OK
    stacks = named
    confirmed = confirmation_sets(confirms_given(confirms, confirm_file))
    approvals = load_approvals(approvals_file) if approvals_file else {}
    reviewed = read_reviewed_file(reviewed_file) if reviewed_file is not None else None
    released = confirmations(releases, option="--release")
    for path, digest in released.items():
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise UsageError(
                f"--release {path}={digest}: not a change digest (64 hex digits)",
                hint="copy the digest the blocked report names",
            )
    if released and reviewed is None:
        reviewed = Reviewed()  # compare every stack: only the released ones are let through
    repo = load_repository(ctx)
    before = policy_at(repo.root, policy_from) if policy_from is not None else None
    selected = select_stacks(repo, stacks, all_stacks=all_stacks)
    if not selected:
        raise UsageError("the repository has no stacks", hint="add appops/<project>/<stack>/")
    selected = _push_only(selected, named=bool(stacks))
    if not selected:
        if as_json:
            echo_json({"ok": True, "stacks": []})
        return EXIT_OK
    refuse_bad_kcl_mod(repo)  # what `check` refuses, before any cluster is asked
    conns = connections(ctx, repo, kubeconfig, context)
    inputs = check_before_write(  # the safety order: nothing written until it passed
        repo,
        selected,
        conns,
        lambda opentofu: runtime_contexts(repo.root, opentofu=opentofu),
        keyring=keyring,
        plan_file=plan_file,
        allow_dirty=allow_dirty,
        commit=commit,
        cache=cache_state(repo.root, enabled=not no_cache),
        jobs=jobs,
        settings=compile_settings(),
    )
    specs, saved = inputs.specs, inputs.saved

    reviews: dict[str, dict[str, Any]] = {}  # what each inventory records of the review

    def options_of(stack: Stack) -> ApplyOptions:
        options = apply_options(
            stack,
            tree=inputs.tree,
            timeout=timeout,
            concurrency=concurrency,
            wait=not no_wait,
            config=repo.config,
            confirmed=confirmed,
            before=before,
            preconditions=reviewed is not None,
            review=reviews.get(stack.path),
        )
        if stack.path not in approvals:
            return options
        given = approvals[stack.path]
        return replace(
            options,
            approved_by=given.approved_by,
            approved_change=given.change,
            approved_overrides=given.overrides,
        )

    kept: dict[str, SavedPlan] = {}  # OpenTofu plans shown, applied as they are
    with conns, contextlib.ExitStack() as cleanup:
        cleanup.callback(discard_kept, kept)
        check_against_clusters(selected, inputs, conns)
        refuse_held(repo, selected, conns)  # promotion order, before any write
        shown: dict[str, StackPlan] = {}
        verdicts: list[Verdict] = []
        if not yes or saved is not None or reviewed is not None:
            # Plan every stack first: to show it and ask, or to compare it with the saved
            # preview so that a difference anywhere applies nothing anywhere.
            plans = plan_all(
                selected,
                specs,
                conns,
                options_of,
                workers=stack_concurrency,
                secrets=inputs.secrets,
                contexts=inputs.contexts,
                keep=kept,
            )
            shown = {p.path: p for p in plans}
            if saved is not None:
                compare_saved(saved, plans, plan_file)
            if reviewed is not None:
                by_path = {s.path: s for s in selected}
                record = reviewed
                verdicts = verify(
                    reviewed,
                    plans,
                    lambda path: by_path[path].on_reviewed_changed(repo.config.production_stacks),
                    lambda path: sealed_files(repo.root, specs[path]),
                    released=released,
                    because=lambda moved: moved_since(repo.root, str(record.head), "HEAD", moved),
                )
                show_verdicts(verdicts)
                reviews.update((v.path, v.record(reviewed.pr)) for v in verdicts)
            if not as_json:
                show_plans(
                    [StackPreview(p.path, plan=p) for p in plans if p.path not in blocked(verdicts)]
                )
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
                        inputs.secrets.get(stack.path),
                        kept.get(stack.path),
                    ),
                    options_of(stack),
                    progress,
                    lock_timeout=lock_timeout,
                    lease_duration=lease_duration,
                    on_lock_wait=progress.lock_wait,
                    show_plan=progress.plan if show else None,
                    stop=stop.event,
                    contexts=inputs.contexts,
                )
                progress.finish(result)
                return result

            held = blocked(verdicts)
            with graceful("the apply") as stop:
                results = run_concurrently(
                    [s for s in selected if s.path not in held],
                    lambda s: one(s, stop),
                    stack_concurrency,
                )
            results = sorted(
                [*results, *(blocked_result(v) for v in verdicts if v.blocked)],
                key=lambda r: [s.path for s in selected].index(r.path),
            )
    code = finish(
        "Apply",
        results,
        as_json=as_json,
        contexts=contexts,
        reviews={v.path: v.to_json() for v in verdicts},
        identities=conns.identities(selected),
    )
    return stopped(stop, code)


def _push_only(selected: list[Stack], *, named: bool) -> list[Stack]:
    """The stacks apply writes: a stack in pull delivery is the controller's (konfig
    publish renders it; docs/pull.md). Named on the command line it is refused (exit 2);
    with --all it is left out, said on stderr."""
    pull = [s for s in selected if s.delivery.pull]
    if pull and named:
        raise UsageError(
            f"{', '.join(s.path for s in pull)}: in pull delivery (stack.yaml `delivery:`): "
            "konfig publish renders it and its cluster's controller applies it; konfig "
            "apply never writes it",
            hint="run `konfig publish`, or set `delivery: {mode: push}` to apply it",
        )
    for s in pull:
        info(f"{s.path}: in pull delivery: left to konfig publish and the controller")
    return [s for s in selected if not s.delivery.pull]
