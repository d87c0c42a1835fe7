"""``konfig fmt``: format KCL files the way ``kcl fmt`` does, or check that they are."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import click

from konfig.build import kcl
from konfig.commands._common import repository_root
from konfig.commands._console import info
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.repo.files import WriteScope, atomic_write_text
from konfig.repo.layout import find_root

DEFAULT_DIRS = ("base", "appops")


def _kcl_files(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"no such file or directory: {path}")
        if path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                found.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".k"))
        elif path.suffix == ".k":
            found.append(path)
    return found


def _scope_of(ctx: click.Context, paths: Iterable[Path]) -> WriteScope:
    """Inside a Konfig repository: the repository; elsewhere: the paths named."""
    root_opt = (ctx.obj or {}).get("root") if ctx.obj else None
    try:
        return WriteScope.repository(find_root(Path(root_opt) if root_opt else None))
    except UsageError:
        named = list(paths)
        scope = WriteScope.named(named[0], "the path", folder=named[0].is_dir())
        for path in named[1:]:
            more = WriteScope.named(path, "the path", folder=path.is_dir())
            scope = WriteScope((*scope.places, *more.places))
        return scope


@click.command("fmt")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; list the files that are not formatted and exit 1 if there are any.",
)
@click.pass_context
def command(ctx: click.Context, paths: tuple[Path, ...], check: bool) -> int:
    """Format KCL files (default: everything under base/ and appops/).

    \b
    Examples:
      konfig fmt
      konfig fmt --check appops/guestbook
    """
    if paths:
        files = _kcl_files(paths)
        scope = _scope_of(ctx, paths)
    else:
        root = repository_root(ctx)
        files = _kcl_files(root / d for d in DEFAULT_DIRS)
        scope = WriteScope.repository(root)
    unformatted: list[Path] = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        formatted = kcl.format_source(source)
        if formatted == source:
            continue
        unformatted.append(path)
        if check:
            click.echo(f"{path}: not formatted (run `konfig fmt {path}`)")
        else:
            atomic_write_text(path, formatted, scope=scope)
            click.echo(f"formatted {path}")
    if check and unformatted:
        info(f"{len(unformatted)} of {len(files)} KCL file(s) need formatting")
        return EXIT_FINDINGS
    return EXIT_OK
