"""``konfig pending``: the stacks apply-on-merge must apply, from the inventories."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import click

from konfig.commands._common import connections, load_repository
from konfig.commands._console import echo_json, echo_stacks, info, warn
from konfig.commands._options import kube_options
from konfig.commands._outputs import github_output_file, write_stack_outputs
from konfig.detect.behind import pending_stacks
from konfig.errors import EXIT_OK
from konfig.pipeline.inventories import read_inventories
from konfig.pipeline.promotion import holds, promotions
from konfig.words import plural


@click.command("pending")
@click.option(
    "--head", default="HEAD", show_default=True, metavar="REF", help="Commit to be applied."
)
@kube_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--github-output",
    is_flag=True,
    help="Also append `has-changes`, `stack-count`, `deleted-count` and `project-count` "
    "to $GITHUB_OUTPUT (the outputs of `konfig changed`; the lists: --json).",
)
@click.pass_context
def command(
    ctx: click.Context,
    head: str,
    kubeconfig: str | None,
    context: str | None,
    as_json: bool,
    github_output: bool,
) -> int:
    """List the stacks whose last applied commit is behind HEAD, and deleted stacks.

    Each stack's inventory in its cluster records the commit last applied; a stack
    is pending when it was never applied or the change from that commit to HEAD
    affects it. Inventories in those clusters whose stack is gone at HEAD but was
    applied from a commit of this repository are deleted stacks (to destroy);
    inventories of other repositories sharing a cluster are ignored. A stack whose
    `promotion.after` stacks are not applied (or still soaking) is held: listed with
    why and until when, not among the stacks to apply.

    \b
    Examples:
      konfig pending --json
      konfig pending --github-output
    """
    output_file = github_output_file() if github_output else None
    repo = load_repository(ctx)
    with connections(ctx, repo, kubeconfig, context) as conns:
        conns.check(repo.stacks)
        found = read_inventories(repo, conns)
    result = pending_stacks(
        repo.root, head, [s.path for s in repo.stacks], found.by_stack, found.found.values()
    )
    # promotion order: a stack waiting for another is left to a later run
    held = holds(
        result.stack_paths,
        promotions(repo.stacks),
        result.stack_paths,
        found.by_stack,
        datetime.now(UTC),
    )
    result = replace(result, stacks=tuple(s for s in result.stacks if s.path not in held))
    # pull delivery: konfig publish delivers the stack, apply never writes it (its
    # inventory, if it still has one, is not a deleted stack's: docs/pull.md, Hand-off)
    pulled = {s.path for s in repo.stacks if s.delivery.pull}
    result = replace(result, stacks=tuple(s for s in result.stacks if s.path not in pulled))
    if output_file is not None:
        write_stack_outputs(output_file, result.stack_paths, result.deleted_stacks, result.projects)
    for hold in held.values():  # on stderr, with --json too: the workflow's log says why
        info(f"held: {hold.message()}")
    if as_json:
        echo_json({**result.to_json(), "held": [h.to_json() for h in held.values()]})
    else:
        echo_stacks(((s.path, s.reasons) for s in result.stacks), result.deleted_stacks)
        for path in result.foreign:
            info(f"ignored: inventory of {path}, not applied from this repository's history")
        for path in result.unusable:
            info(f"not applied: {path} has a layout error (above); fix it to apply it")
        info(
            f"{plural(len(result.stacks), 'stack')} to apply, "
            f"{len(result.deleted_stacks)} to destroy, {len(held)} held, "
            f"{len(result.up_to_date)} up to date at {result.head[:12]}"
        )
    for skipped in found.skipped:
        warn(f"not read (a cluster only deleted stacks used): {skipped}")
    for problem in found.problems:
        warn(f"not read: {problem}")
    return EXIT_OK
