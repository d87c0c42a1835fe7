"""``konfig status``: what is deployed where, at which commit, healthy, drifted."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from konfig.commands._common import connections, load_repository, tofu_context
from konfig.commands._console import out_console
from konfig.commands._options import kube_options
from konfig.errors import EXIT_FINDINGS, EXIT_OK
from konfig.pipeline.selection import select_stacks, stacks_gone_in_history
from konfig.pipeline.status import (
    DEFAULT_REFRESHES,
    TERRAFORM_MODES,
    TerraformMode,
    collect_status,
)
from konfig.report.status import render_json, tables
from konfig.tofu.model import has_terraform

_F = TypeVar("_F", bound=Callable[..., object])


def terraform_option(fn: _F) -> _F:
    """``--terraform`` (how status and drift read the stacks' Terraform resources) and
    ``--terraform-concurrency``."""
    fn = click.option(
        "--terraform-concurrency",
        type=click.IntRange(min=1, max=32),
        default=DEFAULT_REFRESHES,
        show_default=True,
        help="Stacks refreshed by OpenTofu at once (each a tofu process and a provider; "
        "read-only, no state lock).",
    )(fn)
    return click.option(
        "--terraform",
        "terraform_mode",
        type=click.Choice(TERRAFORM_MODES),
        default="refresh",
        show_default=True,
        help="How to read the Terraform resources of stacks with a `terraform` section: "
        "refresh (their state, and `tofu plan -refresh-only` for drift: needs the "
        "provider credentials, one OpenTofu run per stack), state (the state only: no "
        "OpenTofu, no credentials, drift not checked), skip (not read at all: their "
        "drift is unknown).",
    )(fn)


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
            tofu=tofu_context(repo.root)
            if terraform_mode == "refresh" and any(has_terraform(s, None) for s in selected)
            else None,
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
