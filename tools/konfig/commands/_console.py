"""Terminal output for the CLI: errors, JSON, progress. Only the CLI layer imports this."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import click

from konfig.repo.names import display

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def no_color() -> bool:
    """``NO_COLOR`` set to anything but the empty string turns colour off (no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


def use_color(stream: Any) -> bool:
    """Colour on ``stream``: a terminal that is not ``dumb``, and no ``NO_COLOR``."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not no_color() and os.environ.get("TERM", "") != "dumb"


def out_console() -> Console:
    """A rich console on stdout (rich itself honours ``NO_COLOR`` and non-terminals).

    Not a terminal (a pipe, a file, CI logs): wide, so that no table row is wrapped
    and every row stays one line a script or a person can grep.
    """
    from rich.console import Console  # rich only where something is rendered with it

    wide = None if sys.stdout.isatty() else 240
    return Console(highlight=False, width=wide, color_system=None if no_color() else "auto")


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def error(message: str) -> None:
    click.secho(
        f"error: {display(message, keep_newlines=True)}",
        fg="red",
        err=True,
        color=use_color(sys.stderr),
    )


def warn(message: str) -> None:
    click.secho(
        f"warning: {display(message, keep_newlines=True)}",
        fg="yellow",
        err=True,
        color=use_color(sys.stderr),
    )


def info(message: str) -> None:
    click.echo(display(message, keep_newlines=True), err=True)


class ProgressBar:
    """A progress bar on stderr when it is a terminal; silent otherwise."""

    def __init__(self, progress: Progress | None, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, label: str = "") -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, status=label)


@contextmanager
def progress_bar(description: str, total: int, *, enabled: bool = True) -> Iterator[ProgressBar]:
    if not enabled or total <= 1 or not sys.stderr.isatty():
        yield ProgressBar(None, None)
        return
    # rich takes a tenth of a second to import: only a progress bar on a terminal pays it
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    progress = RichProgress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[status]}"),
        console=Console(stderr=True, highlight=False, color_system=None if no_color() else "auto"),
        transient=True,
    )
    with progress:
        task = progress.add_task(description, total=total, status="")
        yield ProgressBar(progress, task)


def compile_progress(*, enabled: bool) -> Callable[[int], AbstractContextManager[ProgressBar]]:
    """A progress bar for compiling that many stacks (see ``pipeline.compiling``)."""
    return lambda total: progress_bar("compiling", total, enabled=enabled)


def echo_stacks(stacks: Iterable[tuple[str, Sequence[str]]], deleted: Iterable[str]) -> None:
    """Stack paths with their reasons indented below, then the deleted stacks."""
    for path, reasons in stacks:
        click.echo(path)
        for reason in reasons:
            click.echo(f"  - {reason}")
    for path in deleted:
        click.echo(f"{path} (deleted)")
