"""``konfig list``: the projects and stacks of the repository."""

from __future__ import annotations

import click

from konfig.commands._common import load_repository
from konfig.commands._console import echo_json
from konfig.errors import EXIT_FINDINGS, EXIT_OK


@click.command("list")
@click.argument("stacks", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of stacks.")
@click.option(
    "--terraform",
    is_flag=True,
    help="Only the stacks OpenTofu takes part in (a `terraform` section in stack.yaml).",
)
@click.pass_context
def command(ctx: click.Context, stacks: tuple[str, ...], as_json: bool, terraform: bool) -> int:
    """List the stacks (every one, or the STACKs named): project, stack name and path.

    With --terraform only the stacks whose stack.yaml has a `terraform` section: the
    ones whose preview, apply and drift run OpenTofu (actions/setup installs OpenTofu
    with `tofu: auto` only when the job's stacks include one). Nothing is compiled.

    Layout problems (a name that does not match its directory, a stack outside a
    project, a nested project, ...) are reported on stderr and make the exit code 1.

    \b
    Examples:
      konfig list
      konfig list --json
      konfig list --terraform --json -- appops/webshop/prod appops/guestbook/dev
    """
    repo = load_repository(ctx)
    listed = list(repo.stacks)
    if stacks:
        from konfig.pipeline.selection import select_stacks

        listed = select_stacks(repo, stacks, all_stacks=False)
    if terraform:
        from konfig.pipeline.runtime import uses_opentofu  # the one home of that question

        listed = [s for s in listed if uses_opentofu(s)]
    if as_json:
        echo_json([{"project": s.project, "stack": s.name, "path": s.path} for s in listed])
    else:
        width = max((len(s.short) for s in listed), default=0)
        for stack in listed:
            click.echo(f"{stack.short:<{width}}  {stack.path}")
    return EXIT_FINDINGS if repo.problems else EXIT_OK
