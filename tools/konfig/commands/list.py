"""``konfig list``: the projects and stacks of the repository."""

from __future__ import annotations

import click

from konfig.commands._common import load_repository
from konfig.commands._console import echo_json
from konfig.errors import EXIT_FINDINGS, EXIT_OK


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of stacks.")
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> int:
    """List every stack: project, stack name and path.

    Layout problems (a name that does not match its directory, a stack outside a
    project, a nested project, ...) are reported on stderr and make the exit code 1.

    \b
    Examples:
      konfig list
      konfig list --json
    """
    repo = load_repository(ctx)
    if as_json:
        echo_json([{"project": s.project, "stack": s.name, "path": s.path} for s in repo.stacks])
    else:
        width = max((len(s.short) for s in repo.stacks), default=0)
        for stack in repo.stacks:
            click.echo(f"{stack.short:<{width}}  {stack.path}")
    return EXIT_FINDINGS if repo.problems else EXIT_OK
