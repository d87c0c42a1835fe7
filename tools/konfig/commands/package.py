"""``konfig package --helm``: a stack's objects as a Helm chart (docs/pull.md, Helm)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from konfig.commands._common import (
    cache_state,
    compile_settings,
    load_repository,
    repository_root,
)
from konfig.commands._console import echo_json, error, info
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.repo.files import WriteScope, update_text


@click.command("package")
@click.argument("stack")
@click.option("--helm", "helm", is_flag=True, help="Package as a Helm chart (the one format).")
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Write the chart to DIR/<chart name>/.",
)
@click.option(
    "--version",
    "chart_version",
    default="0.1.0",
    show_default=True,
    help="The chart's version (SemVer 2).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the chart's folder and files.")
@click.pass_context
def command(
    ctx: click.Context, stack: str, helm: bool, out: Path, chart_version: str, as_json: bool
) -> int:
    """Package STACK's compiled objects as a Helm chart.

    The chart's templates are the stack's objects as `konfig publish` renders them (one
    canonical YAML file per object); values.yaml is empty, so `helm template` of the
    chart gives back the stack's objects. A Secret with values or a Terraform resource
    is refused, as by publish.

    \b
    Examples:
      konfig package --helm guestbook/prod --out charts/
    """
    from konfig.build.helmchart import chart, chart_name
    from konfig.build.rendered import refusals
    from konfig.pipeline.compiling import compile_stacks

    if not helm:
        raise UsageError("name the package format: --helm (the one konfig makes)")
    if not _SEMVER.match(chart_version):
        raise UsageError(f"--version {chart_version!r} is not a SemVer 2 version (e.g. 1.2.3)")
    root = repository_root(ctx)
    state = cache_state(root, enabled=True, git_required=False)
    repo = load_repository(ctx, state=state)
    target = repo.stack(stack)
    [result] = compile_stacks(repo, [target], state=state, settings=compile_settings())
    if result.spec is None:
        error(f"{target.path}: compile failed\n  {result.error}".replace("\n", "\n  "))
        return EXIT_FINDINGS
    refused = refusals(result.spec)
    if refused:
        for r in refused:
            error(f"{target.path}: not packaged: {r.message} [{r.rule}]\n  hint: {r.hint}")
        return EXIT_FINDINGS
    name = chart_name(target.short)
    description = str(target.raw.get("description") or "")
    files = chart(result.spec, name=name, version=chart_version, description=description)
    scope = WriteScope.named(out, "--out", folder=True)
    for path, data in files.items():
        update_text(out / name / path, data.decode("utf-8"), scope=scope)
    if as_json:
        echo_json({"stack": target.path, "chart": str(out / name), "files": sorted(files)})
    else:
        info(f"{target.path}: chart {name} {chart_version} in {out / name}")
    return EXIT_OK


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
)
