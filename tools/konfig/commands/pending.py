"""``konfig pending``: the stacks apply-on-merge must apply, from the inventories."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from konfig.commands._common import load_repository, report_problems
from konfig.commands._console import echo_json, info
from konfig.commands.apply import Connections
from konfig.commands.changed import GITHUB_OUTPUT, append_github_output
from konfig.detect.behind import Pending, pending_stacks
from konfig.engine.inventory import (
    NAMESPACE,
    Inventory,
    InventoryError,
    parse_inventory,
    read_inventory,
)
from konfig.errors import EXIT_OK, UsageError


@click.command("pending")
@click.option(
    "--head", default="HEAD", show_default=True, metavar="REF", help="Commit to be applied."
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig.")
@click.option("--context", default=None, help="Kubeconfig context for every stack.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--github-output",
    is_flag=True,
    help="Also append `stacks`, `deleted-stacks`, `projects` (JSON arrays) and "
    "`has-changes` to $GITHUB_OUTPUT (the outputs of `konfig changed`).",
)
@click.pass_context
def command(
    ctx: click.Context,
    head: str,
    kubeconfig: str | None,
    context: str | None,
    as_json: bool,
    github_output: bool,
) -> int:
    """List the stacks whose last applied commit is behind HEAD, and deleted stacks.

    Each stack's inventory in its cluster records the commit last applied; a stack
    is pending when it was never applied or the change from that commit to HEAD
    affects it. Inventories in those clusters whose stack is gone at HEAD but was
    applied from a commit of this repository are deleted stacks (to destroy);
    inventories of other repositories sharing a cluster are ignored.
    """
    output_file: Path | None = None
    if github_output:
        raw = os.environ.get(GITHUB_OUTPUT)
        if not raw:
            raise UsageError(f"--github-output needs ${GITHUB_OUTPUT}")
        output_file = Path(raw)
    repo = load_repository(ctx)
    if not as_json:
        report_problems(repo)
    conns = Connections(repo, kubeconfig, context)
    inventories: dict[str, Inventory | None] = {}
    found: dict[str, Inventory] = {}
    try:
        seen_targets = set()
        for stack in repo.stacks:
            kube = conns.kube(stack)
            inventories[stack.path] = read_inventory(kube, stack)
            target = conns.target(stack)
            if target in seen_targets:
                continue
            seen_targets.add(target)
            listed = kube.list(
                "v1", "ConfigMap", namespace=NAMESPACE,
                label_selector="app.kubernetes.io/managed-by=konfig",
            )  # fmt: skip
            for obj in listed:
                try:
                    inv = parse_inventory(obj)
                except InventoryError:
                    continue  # not ours after all; apply/destroy report it when addressed
                if inv.stack_path:
                    found[inv.stack_path] = inv
    finally:
        conns.close()
    result = pending_stacks(
        repo.root, head, [s.path for s in repo.stacks], inventories, found.values()
    )
    if output_file is not None:
        append_github_output(output_file, _outputs(result))
    if as_json:
        echo_json(result.to_json())
    else:
        for s in result.stacks:
            click.echo(s.path)
            for reason in s.reasons:
                click.echo(f"  - {reason}")
        for path in result.deleted_stacks:
            click.echo(f"{path} (deleted)")
        for path in result.foreign:
            info(f"ignored: inventory of {path}, not applied from this repository's history")
        info(
            f"{len(result.stacks)} stacks to apply, {len(result.deleted_stacks)} to destroy, "
            f"{len(result.up_to_date)} up to date at {result.head[:12]}"
        )
    return EXIT_OK


def _outputs(result: Pending) -> dict[str, str]:
    return {
        "stacks": json.dumps(result.stack_paths),
        "deleted-stacks": json.dumps(list(result.deleted_stacks)),
        "projects": json.dumps(result.projects),
        "has-changes": "true" if result.stacks or result.deleted_stacks else "false",
    }
