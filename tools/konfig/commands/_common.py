"""Helpers shared by subcommands: locating the repository and selecting stacks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from konfig.commands._console import warn
from konfig.errors import UsageError
from konfig.repo.layout import Repository, Stack, discover, find_root, resolve_stacks


def load_repository(ctx: click.Context) -> Repository:
    root = (ctx.obj or {}).get("root") if ctx.obj else None
    found = find_root(Path(root) if root else None)
    return discover(found)


def report_problems(repo: Repository) -> None:
    for problem in repo.problems:
        warn(str(problem))


def select_stacks(repo: Repository, addresses: Sequence[str], *, all_stacks: bool) -> list[Stack]:
    if all_stacks and addresses:
        raise UsageError("give stacks or --all, not both")
    if all_stacks:
        return list(repo.stacks)
    if not addresses:
        raise UsageError("no stacks given", hint="name stacks (e.g. guestbook/dev) or pass --all")
    return resolve_stacks(repo, addresses)
