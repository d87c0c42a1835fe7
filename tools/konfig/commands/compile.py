"""``konfig compile``: compile stacks into Specs, in parallel worker processes."""

from __future__ import annotations

from pathlib import Path

import click

from konfig.build.compiler import (
    CompileResult,
)
from konfig.commands._common import (
    cache_state,
    compile_settings,
    load_repository,
    repository_root,
)
from konfig.commands._console import compile_progress, echo_json, error, info
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.pipeline.compiling import compile_stacks
from konfig.pipeline.selection import select_stacks, stacks_affected_since
from konfig.repo.files import WriteScope, update_text


@click.command("compile")
@click.argument("stacks", nargs=-1)
@click.option("--all", "all_stacks", is_flag=True, help="Compile every stack.")
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write each Spec to DIR/<stack path>/spec.yaml instead of stdout.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default: number of CPUs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary per stack.")
@click.option(
    "--changed-from",
    metavar="REF",
    default=None,
    help="Compile the stacks affected by the changes from the merge base of REF to the "
    "work tree (see `konfig changed`).",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Compile every stack even when .cache/konfig/compile holds its Spec.",
)
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    all_stacks: bool,
    out: Path | None,
    jobs: int | None,
    as_json: bool,
    changed_from: str | None,
    no_cache: bool,
) -> int:
    """Compile STACKs (appops/<project>/<stack> or <project>/<stack>) into Specs.

    A broken stack never stops the others: its error is reported with file, line
    and column, the others still compile, and the exit code is 1.

    \b
    Examples:
      konfig compile guestbook/prod                   # one Spec to stdout
      konfig compile --all --out out/ -j 4 --json
      konfig compile --changed-from origin/main
    """
    root = repository_root(ctx)
    state = cache_state(root, enabled=not no_cache, git_required=changed_from is not None)
    repo = load_repository(ctx, state=state)
    if changed_from is not None:
        if stacks or all_stacks:
            raise UsageError("give stacks, --all or --changed-from, not several")
        selected, _ = stacks_affected_since(repo, changed_from, cache=state)
        if not selected:
            info(f"no stacks affected since {changed_from}")
            if as_json:
                echo_json([])
            return EXIT_OK
    else:
        selected = select_stacks(repo, stacks, all_stacks=all_stacks)
    if not selected:
        # only --all gets here: a repository without stacks yet (konfig init --no-examples)
        info("the repository has no stacks yet (appops/<project>/<stack>/): nothing to compile")
        if as_json:
            echo_json([])
        return EXIT_OK
    results = compile_stacks(
        repo,
        selected,
        jobs=jobs,
        state=state,
        meter=compile_progress(enabled=not as_json),
        settings=compile_settings(),
    )

    written = WriteScope.named(out, "--out", folder=True) if out is not None else None
    for result in results:
        if result.spec is None:
            continue
        if out is not None and written is not None:
            update_text(out / result.stack_path / "spec.yaml", result.yaml(), scope=written)
        elif not as_json:
            if len(results) > 1:
                click.echo(f"---\n# {result.stack_path}")
            click.echo(result.yaml(), nl=False)

    failures = [r for r in results if r.error is not None]
    if as_json:
        echo_json(
            [
                {
                    "path": r.stack_path,
                    "ok": r.ok,
                    "resources": len(r.spec.resources) if r.spec else 0,
                    "seconds": round(r.seconds, 4),
                    "cached": r.cached,
                    "error": _error_json(r),
                }
                for r in results
            ]
        )
    else:
        for r in failures:
            error(f"{r.stack_path}: compile failed\n  {r.error}".replace("\n", "\n  "))
        if out is not None or len(results) > 1:
            ok = len(results) - len(failures)
            cached = sum(1 for r in results if r.cached)
            info(
                f"compiled {ok}/{len(results)} stacks"
                + (f" ({cached} from cache)" if cached else "")
                + (f" into {out}" if out else "")
            )
    return EXIT_FINDINGS if failures else EXIT_OK


def _error_json(result: CompileResult) -> dict[str, object] | None:
    if result.error is None:
        return None
    e = result.error
    return {
        "message": e.message,
        "file": e.file,
        "line": e.line,
        "column": e.column,
        "details": list(e.details),
    }
