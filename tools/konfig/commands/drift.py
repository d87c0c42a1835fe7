"""``konfig drift``: objects someone changed in the cluster since Konfig applied them."""

from __future__ import annotations

from pathlib import Path

import click

from konfig.commands._common import connections, load_repository, runtime_contexts
from konfig.commands._console import error, info
from konfig.commands._options import kube_options, terraform_option
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.pipeline.compiling import compile_stacks
from konfig.pipeline.runtime import uses_opentofu
from konfig.pipeline.selection import select_stacks
from konfig.pipeline.status import TerraformMode, collect_status, planned_values
from konfig.repo.files import WriteScope, atomic_write_text
from konfig.repo.layout import cache_dir
from konfig.report.drift import DriftReport, render_json, render_markdown, render_text
from konfig.words import about

EXIT_DRIFT = 2


@click.command("drift")
@click.argument("stacks", nargs=-1)
@click.option("--all", "all_stacks", is_flag=True, help="Check every stack (the default).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="Report format (markdown: the drift issue's body; json: docs/contracts/drift.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report to FILE instead of stdout.",
)
@click.option(
    "--json-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the JSON report to FILE (one cluster read for both).",
)
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 0 when nothing drifted, 2 when something did, 1 on error.",
)
@click.option(
    "--no-compile",
    is_flag=True,
    help="Do not compile the drifted stacks (their repository values are then not shown).",
)
@click.option("--run-url", default=None, help="Markdown: link to the run that checked.")
@terraform_option
@kube_options
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    all_stacks: bool,
    fmt: str,
    as_json: bool,
    out: Path | None,
    json_out: Path | None,
    detailed_exitcode: bool,
    no_compile: bool,
    run_url: str | None,
    terraform_mode: TerraformMode,
    terraform_concurrency: int,
    kubeconfig: str | None,
    context: str | None,
) -> int:
    """Find what someone changed, removed or deleted in a cluster since Konfig applied it.

    Drift: fields of applied objects that someone changed or removed in the cluster
    since Konfig's last apply, and applied objects deleted or re-created outside Konfig.

    Konfig's last apply is what the API server recorded as Konfig's own fields
    (server-side apply's managed fields); the inventory keeps that record. Drift is
    read with get and list only (no dry-run, no write); the drifted stacks are
    compiled to show the value the repository sets. Without STACKs: every stack.

    A stack's Terraform resources are refreshed by OpenTofu (`tofu plan
    -refresh-only`, read-only, no lock; needs the provider credentials). With
    --terraform state or skip their drift is not checked, and the report says so
    (never "no drift" for what it did not check).

    \b
    Example:
      konfig drift guestbook/dev --detailed-exitcode
      konfig drift guestbook/dev --format markdown --out drift.md   # the issue's body
      konfig drift --terraform skip   # the Kubernetes objects only, no OpenTofu runs
    """
    if as_json:
        if fmt not in ("text", "json"):
            raise UsageError("give --json or --format, not both")
        fmt = "json"
    if stacks and all_stacks:
        raise UsageError("give stacks or --all, not both")
    repo = load_repository(ctx)
    selected = select_stacks(repo, stacks, all_stacks=not stacks)
    with connections(ctx, repo, kubeconfig, context) as conns:
        refresh = terraform_mode == "refresh" and any(uses_opentofu(s) for s in selected)
        status = collect_status(
            repo.root,
            selected,
            repo.stacks,
            conns,
            orphans=False,
            contexts=runtime_contexts(repo.root, opentofu=refresh),
            terraform=terraform_mode,
            refreshes=terraform_concurrency,
        )
    report = DriftReport(status)
    drifted = [s for s in selected if s.path in {d.path for d in report.drifted}]
    if drifted and not no_compile:
        results = compile_stacks(repo, drifted, state=cache_dir(repo.root))
        specs = {r.stack_path: r.spec for r in results if r.spec is not None}
        for r in results:
            if r.error is not None:
                info(f"{r.stack_path}: not compiled, repository values not shown: {r.error}")
        report = DriftReport(status, planned_values(status, specs))
    if fmt == "json":
        text = render_json(report)
    elif fmt == "markdown":
        text = render_markdown(report, run_url=run_url)
    else:
        text = render_text(report)
    if json_out is not None:
        atomic_write_text(
            json_out, render_json(report), scope=WriteScope.named(json_out, "--json-out")
        )
    if out is not None:
        atomic_write_text(out, text, scope=WriteScope.named(out, "--out"))
        info(f"wrote the drift report to {out}")
    else:
        click.echo(text, nl=False)
    if report.errors:
        if fmt != "text" or out is not None:
            for s in report.errors:
                error(about(s.path, str(s.error)))
        return EXIT_FINDINGS
    if detailed_exitcode and report.has_drift:
        return EXIT_DRIFT
    return EXIT_OK
