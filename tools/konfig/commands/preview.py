"""``konfig preview``: what apply would change, computed against the live cluster.

Compiles the stacks, reads each stack's inventory, dry-runs every planned object
(server-side apply, ``dryRun=All``) and reports creates, updates, replaces, deletes
and unchanged objects. Never writes to the cluster.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from konfig.build.compiler import (
    CompileInput,
    CompileResult,
    compile_cached,
    default_jobs,
    stacks_inputs,
)
from konfig.commands._common import load_repository, report_problems, select_stacks
from konfig.commands._console import error, info, progress_bar
from konfig.detect.changeset import affected_stacks, cache_dir
from konfig.engine.inventory import read_inventory
from konfig.engine.kube import MAX_WORKERS, Kube, KubeTarget, connect
from konfig.engine.plan import DEFAULT_WORKERS, deleted_stack, plan_stack
from konfig.errors import EXIT_FINDINGS, EXIT_OK, KonfigError, UsageError
from konfig.repo.files import atomic_write_text
from konfig.repo.layout import Repository, Stack, is_within
from konfig.report.previews import (
    Preview,
    StackError,
    StackPreview,
    render_json,
    render_markdown,
    render_text,
)

EXIT_CHANGES = 2


@click.command("preview")
@click.argument("stacks", nargs=-1)
@click.option("--all", "all_stacks", is_flag=True, help="Preview every stack.")
@click.option(
    "--changed-from",
    metavar="REF",
    default=None,
    help="Preview the stacks affected by the changes from the merge base of REF to the "
    "work tree (see `konfig changed`), including stacks deleted since.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Compile every stack even when .cache/konfig/compile holds its Spec.",
)
@click.option(
    "--deleted",
    "deleted",
    multiple=True,
    metavar="STACK_PATH",
    help="A stack whose directory is gone (appops/<project>/<stack>): preview its "
    "deletion from its inventory. Repeatable.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="Report format (json: the contract in docs/preview-json.md).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report to FILE instead of stdout.",
)
@click.option(
    "--diff", "show_diff", is_flag=True, help="Text format: include each object's unified diff."
)
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 0 when nothing changes, 2 when something does, 1 on error.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="Kubeconfig file (default: the stack's kubernetes.kubeconfig, then KUBECONFIG, "
    "then ~/.kube/config).",
)
@click.option(
    "--context",
    "context",
    default=None,
    help="Kubeconfig context for every stack (default: the stack's kubernetes.context).",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Compile worker processes (default: number of CPUs).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_WORKERS),
    default=DEFAULT_WORKERS,
    show_default=True,
    help="Concurrent API requests per stack.",
)
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    all_stacks: bool,
    changed_from: str | None,
    no_cache: bool,
    deleted: tuple[str, ...],
    fmt: str,
    out: Path | None,
    show_diff: bool,
    detailed_exitcode: bool,
    kubeconfig: str | None,
    context: str | None,
    jobs: int | None,
    workers: int,
) -> int:
    """Preview what applying STACKs would change in their clusters (no writes).

    STACK is appops/<project>/<stack> or <project>/<stack>. Each planned object is
    dry-run with server-side apply and compared with the live object; objects the
    stack's inventory owns but the stack no longer declares are shown as deletes.
    Secret values are masked in every format.
    """
    repo = load_repository(ctx)
    report_problems(repo)
    state = None if no_cache else cache_dir(repo.root)
    deleted_paths = list(deleted)
    if changed_from is not None:
        if stacks or all_stacks:
            raise UsageError("give stacks, --all or --changed-from, not several")
        changes = affected_stacks(repo.root, changed_from, None, cache=state)
        wanted = set(changes.stack_paths)
        selected = [s for s in repo.stacks if s.path in wanted]
        deleted_paths += [p for p in changes.deleted_stacks if p not in deleted_paths]
        if not selected and not deleted_paths:
            info(f"no stacks affected since {changed_from}")
    elif stacks or all_stacks:
        selected = select_stacks(repo, stacks, all_stacks=all_stacks)
    elif deleted_paths:
        selected = []
    else:
        raise UsageError(
            "no stacks given",
            hint="name stacks (e.g. guestbook/dev), or pass --all, --changed-from or --deleted",
        )
    gone = [_deleted(repo, path) for path in deleted_paths]

    env_kubeconfig = os.environ.get("KUBECONFIG") or None
    connections: dict[KubeTarget, Kube | KonfigError] = {}

    def kube_for(target: KubeTarget) -> Kube:
        if target not in connections:
            try:
                connections[target] = connect(target)
            except KonfigError as exc:
                connections[target] = exc
        found = connections[target]
        if isinstance(found, KonfigError):
            raise found
        return found

    def target_of(stack: Stack | None) -> KubeTarget:
        from_stack = stack.kubeconfig if stack else None
        if from_stack and not Path(from_stack).expanduser().is_absolute():
            from_stack = str(repo.root / from_stack)
        return KubeTarget(
            kubeconfig=kubeconfig or from_stack or env_kubeconfig,
            context=context or (stack.kube_context if stack else None),
        )

    results: list[StackPreview] = []
    try:
        compiled = _compile(
            repo, selected, jobs, state=state, quiet=fmt != "text" or out is not None
        )
        for stack in selected:
            result = compiled[stack.path]
            if result.spec is None:
                assert result.error is not None
                e = result.error
                message = e.message + "".join(f"\n  {d}" for d in e.details)
                results.append(
                    StackPreview(
                        stack.path,
                        context=stack.kube_context,
                        error=StackError(f"compile failed: {message}", e.file, e.line),
                    )
                )
                continue
            target = target_of(stack)
            try:
                kube = kube_for(target)
                prior = read_inventory(kube, stack)
                plan = plan_stack(kube, stack, result.spec, prior, workers=workers)
                results.append(StackPreview(stack.path, context=plan.context, plan=plan))
            except KonfigError as exc:
                results.append(
                    StackPreview(
                        stack.path,
                        context=target.context,
                        error=StackError(str(exc)),
                        spec_digest=result.spec.digest(),
                    )
                )
        for stack in gone:
            target = target_of(None)
            try:
                kube = kube_for(target)
                prior = read_inventory(kube, stack)
                if prior is None:
                    info(f"{stack.path}: no inventory in the cluster, nothing to delete")
                plan = plan_stack(kube, stack, None, prior, deleted=True, workers=workers)
                results.append(
                    StackPreview(stack.path, context=plan.context, deleted=True, plan=plan)
                )
            except KonfigError as exc:
                results.append(
                    StackPreview(
                        stack.path, context=target.context, deleted=True, error=StackError(str(exc))
                    )
                )
    finally:
        for conn in connections.values():
            if isinstance(conn, Kube):
                conn.close()

    preview = Preview.of(results)
    if fmt == "json":
        text = render_json(preview)
    elif fmt == "markdown":
        text = render_markdown(preview)
    else:
        color = out is None and sys.stdout.isatty()
        text = render_text(preview, color=color, diff=show_diff)
    if out is not None:
        atomic_write_text(out, text)
        info(f"wrote the preview to {out}")
    else:
        click.echo(text, nl=False)
    if fmt != "text" or out is not None:
        for s in preview.stacks:
            if s.error:
                error(f"{s.path}: {s.error.message}")

    if preview.has_errors:
        return EXIT_FINDINGS
    if detailed_exitcode and preview.has_changes:
        return EXIT_CHANGES
    return EXIT_OK


def _deleted(repo: Repository, path: str) -> Stack:
    stack = deleted_stack(path)
    if not is_within(stack.path, "appops") or ".." in Path(stack.path).parts:
        raise UsageError(f"--deleted {path}: not a stack path under appops/")
    if (repo.root / stack.path / "stack.yaml").exists():
        raise UsageError(
            f"--deleted {path}: the stack still exists in the working tree",
            hint="preview it as a normal stack, or delete its directory first",
        )
    return stack


def _compile(
    repo: Repository, stacks: list[Stack], jobs: int | None, *, state: Path | None, quiet: bool
) -> dict[str, CompileResult]:
    prepared = stacks_inputs(repo, stacks)
    inputs = [p for p in prepared if isinstance(p, CompileInput)]
    early = {p.stack_path: p for p in prepared if isinstance(p, CompileResult)}
    with progress_bar("compiling", len(inputs), enabled=not quiet) as bar:
        done = compile_cached(
            repo,
            inputs,
            state=state,
            jobs=jobs or default_jobs(),
            progress=lambda r: bar.advance(Path(r.stack_path).name),
        )
    return {r.stack_path: r for r in done} | early
