"""Helpers shared by subcommands: locating the repository, reporting its problems."""

from __future__ import annotations

from pathlib import Path

import click

from konfig.commands._console import warn
from konfig.repo.layout import Repository, discover, find_root


def load_repository(ctx: click.Context) -> Repository:
    root = (ctx.obj or {}).get("root") if ctx.obj else None
    found = find_root(Path(root) if root else None)
    return discover(found)


def report_problems(repo: Repository) -> None:
    for problem in repo.problems:
        warn(str(problem))
