"""Help output: command lists that show each command's whole first sentence.

click cuts a command's summary in a group's ``--help`` to fit one line ("Apply STACKs
to their clusters: order, wait for health, prune,..."); :class:`Group` lists the whole
first sentence instead, wrapped under the command's name.
"""

from __future__ import annotations

import click


def summary(command: click.Command) -> str:
    """The first sentence of a command's help (its ``short_help`` when it has one)."""
    return command.get_short_help_str(limit=10_000)


class Group(click.Group):
    """A click group whose command list is never cut off."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, summary(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
