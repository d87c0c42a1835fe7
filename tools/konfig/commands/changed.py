"""``konfig changed``: the stacks a change affects, each with why; deleted stacks too."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import click

from konfig.commands._console import echo_json, info
from konfig.detect.changeset import ChangeSet, affected_stacks, cache_dir
from konfig.errors import EXIT_OK, UsageError
from konfig.repo.layout import find_root

GITHUB_OUTPUT = "GITHUB_OUTPUT"


@click.command("changed")
@click.option("--base", required=True, metavar="REF", help="Base commit (e.g. origin/main).")
@click.option(
    "--head",
    default="HEAD",
    show_default=True,
    metavar="REF",
    help="Head commit. Committed state only: uncommitted changes are not seen.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the change set as JSON.")
@click.option(
    "--github-output",
    is_flag=True,
    help="Also append `stacks`, `deleted-stacks`, `projects` (JSON arrays) and "
    "`has-changes` (true/false) to the file named by $GITHUB_OUTPUT.",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write .cache/konfig.")
@click.pass_context
def command(
    ctx: click.Context, base: str, head: str, as_json: bool, github_output: bool, no_cache: bool
) -> int:
    """List the stacks affected by the changes between the merge base of BASE and HEAD.

    A changed file affects a stack when it is inside the stack, is a project-level file
    (project.yaml, <project>/base/**), is imported by the stack's KCL (transitively, per
    package), or matches a repo-wide trigger in konfig.yaml. Stacks present at the merge
    base but gone at HEAD are listed as deleted stacks.
    """
    # Only the root is needed: stacks are found from the git trees, so the (slow, for
    # thousands of stacks) parse of every stack.yaml in the work tree is skipped.
    given = (ctx.obj or {}).get("root")
    root = find_root(Path(given) if given else None)
    output_file: Path | None = None
    if github_output:
        raw = os.environ.get(GITHUB_OUTPUT)
        if not raw:
            raise UsageError(
                f"--github-output needs ${GITHUB_OUTPUT}",
                hint="it is set inside GitHub Actions; elsewhere export it to a file path",
            )
        output_file = Path(raw)
    changes = affected_stacks(root, base, head, cache=None if no_cache else cache_dir(root))
    if output_file is not None:
        append_github_output(output_file, github_outputs(changes))
    if as_json:
        echo_json(changes.to_json())
    else:
        _print_human(changes)
    return EXIT_OK


def github_outputs(changes: ChangeSet) -> dict[str, str]:
    """Step outputs: JSON strings a workflow can use as a matrix (``fromJSON``)."""
    return {
        "stacks": json.dumps(changes.stack_paths),
        "deleted-stacks": json.dumps(list(changes.deleted_stacks)),
        "projects": json.dumps(list(changes.projects)),
        "has-changes": "true" if changes.stacks or changes.deleted_stacks else "false",
    }


def append_github_output(path: Path, outputs: dict[str, str]) -> None:
    """Append ``name<<DELIM`` blocks (GitHub's multi-line format) in one write.

    The delimiter is random and checked against the value, so no value can end a block
    early and inject another output.
    """
    blocks: list[str] = []
    for name, value in outputs.items():
        delimiter = f"KONFIG_EOF_{secrets.token_hex(8)}"
        while delimiter in value:
            delimiter = f"KONFIG_EOF_{secrets.token_hex(8)}"
        blocks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(blocks))


def _print_human(changes: ChangeSet) -> None:
    head = changes.head[:12] if changes.head else "work tree"
    info(
        f"{len(changes.files)} changed files between {changes.merge_base[:12]} (merge base of "
        f"{changes.base[:12]} and {head}) and {head}"
    )
    if not changes.stacks and not changes.deleted_stacks:
        click.echo("no stacks affected")
        return
    for stack in changes.stacks:
        click.echo(stack.path)
        for reason in stack.reasons:
            click.echo(f"  - {reason}")
    for path in changes.deleted_stacks:
        click.echo(f"{path} (deleted)")
    info(
        f"{len(changes.stacks)} stacks affected, {len(changes.deleted_stacks)} deleted, "
        f"in {len(changes.projects)} projects"
    )
