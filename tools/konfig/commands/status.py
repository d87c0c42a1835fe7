"""``konfig status``: what is deployed where, at which commit, healthy, drifted."""

from __future__ import annotations

import click

from konfig.commands._common import connections, load_repository, tofu_context
from konfig.commands._console import out_console
from konfig.commands._options import kube_options
from konfig.errors import EXIT_FINDINGS, EXIT_OK
from konfig.pipeline.selection import select_stacks, stacks_gone_in_history
from konfig.pipeline.status import collect_status
from konfig.report.status import render_json, tables
from konfig.tofu.model import has_terraform


@click.command("status")
@click.argument("stacks", nargs=-1)
@kube_options
@click.option(
    "--head", default="HEAD", show_default=True, metavar="REF", help="Commit to compare with."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the status as JSON (docs/contracts/status.md)."
)
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    head: str,
    as_json: bool,
) -> int:
    """Show what is deployed where, at which commit, and whether it is healthy or drifted.

    Per cluster, every stack's last applied commit (and whether HEAD changed it since),
    when, how many objects it owns, their health and drift; stacks never applied;
    inventories whose stack is gone (orphans).

    Reads the inventories and one list per kind per cluster; compiles nothing and
    writes nothing. Without STACKs: every stack, and orphans in their clusters.
    Exit 0, or 1 when a cluster could not be read.

    \b
    Example:
      konfig status guestbook/dev webshop/dev
      konfig status guestbook/dev --json
    """
    repo = load_repository(ctx)
    selected = select_stacks(repo, stacks, all_stacks=not stacks)
    with connections(ctx, repo, kubeconfig, context) as conns:
        report = collect_status(
            repo.root,
            selected,
            repo.stacks,
            conns,
            orphans=not stacks,
            gone=[] if stacks else stacks_gone_in_history(repo),
            head=head,
            # OpenTofu (and its part of Konfig) only for stacks with a `terraform` section
            tofu=tofu_context(repo.root) if any(has_terraform(s, None) for s in selected) else None,
        )
    if as_json:
        click.echo(render_json(report), nl=False)
    else:
        console = out_console()
        for renderable in tables(report):
            console.print(renderable)
    return EXIT_FINDINGS if any(c.error and not c.optional for c in report.clusters) else EXIT_OK
