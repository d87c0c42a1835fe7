"""Helpers shared by subcommands: locating the repository, reporting its problems."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from konfig.commands._console import warn
from konfig.commands._options import TIMEOUTS_KEY
from konfig.repo.layout import Repository, discover, find_root

if TYPE_CHECKING:
    from konfig.engine.kube import Timeouts


def load_repository(ctx: click.Context) -> Repository:
    root = (ctx.obj or {}).get("root") if ctx.obj else None
    found = find_root(Path(root) if root else None)
    return discover(found)


def report_problems(repo: Repository) -> None:
    for problem in repo.problems:
        warn(str(problem))


def timeouts_of(ctx: click.Context) -> Timeouts:
    """The cluster timeouts ``_options.timeout_options`` read (flags or environment)."""
    from konfig.engine.kube import Timeouts  # the Kubernetes client: only when used

    given = ctx.meta.get(TIMEOUTS_KEY, {})
    return Timeouts(
        request=float(given.get("request_timeout", Timeouts.request)),
        credential=float(given.get("credential_timeout", Timeouts.credential)),
    )
