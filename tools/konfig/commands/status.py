"""``konfig status``: what is deployed where, at which commit, healthy, drifted."""

from __future__ import annotations

import click

from konfig.commands._common import connections, load_repository, runtime_contexts
from konfig.commands._console import out_console
from konfig.commands._options import kube_options, terraform_option
from konfig.errors import EXIT_FINDINGS, EXIT_OK
from konfig.pipeline.runtime import uses_opentofu
from konfig.pipeline.selection import select_stacks, stacks_gone_in_history
from konfig.pipeline.status import TerraformMode, collect_status
from konfig.report.status import render_json, tables


@click.command("status")
@click.argument("stacks", nargs=-1)
@kube_options
@terraform_option
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
    terraform_mode: TerraformMode,
    terraform_concurrency: int,
) -> int:
    """Show what is deployed where, at which commit, and whether it is healthy or drifted.

    Per cluster, every stack's last applied commit (and whether HEAD changed it since),
    when, how many objects it owns, their health and drift; stacks never applied;
    inventories whose stack is gone (orphans).

    Reads the inventories and one list per kind per cluster; compiles nothing and
    writes nothing. Without STACKs: every stack, and orphans in their clusters.
    Exit 0, or 1 when a cluster could not be read.

    A stack with a `terraform` section also lists the Terraform resources its state
    records and, by default, their drift from a read-only OpenTofu refresh: slow over
    many stacks and it needs the provider credentials; --terraform state reads the
    state only (and says their drift was not checked), --terraform skip not even that.

    \b
    Example:
      konfig status guestbook/dev webshop/dev
      konfig status guestbook/dev --json
      konfig status --terraform state     # no OpenTofu runs, no credentials
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
            # OpenTofu (and its part of Konfig) only to refresh stacks with `terraform`
            contexts=runtime_contexts(
                repo.root,
                opentofu=terraform_mode == "refresh" and any(uses_opentofu(s) for s in selected),
            ),
            terraform=terraform_mode,
            refreshes=terraform_concurrency,
        )
    if as_json:
        click.echo(render_json(report), nl=False)
    else:
        console = out_console()
        for renderable in tables(report):
            console.print(renderable)
    return EXIT_FINDINGS if any(c.error and not c.optional for c in report.clusters) else EXIT_OK
