"""``konfig changed``: the stacks a change affects, each with why; deleted stacks too."""

from __future__ import annotations

import click

from konfig.commands._common import cache_state, report_problems, repository_root
from konfig.commands._console import echo_json, echo_stacks, info
from konfig.detect import gitrepo
from konfig.detect.changeset import ChangeSet, affected_stacks
from konfig.errors import EXIT_OK


@click.command("changed")
@click.option(
    "--base",
    default=None,
    metavar="REF",
    help="Base commit (e.g. origin/main). Default: the branch a pull request from here "
    "targets: the default branch of the remote the current branch tracks (as cloned: "
    "origin/HEAD), else the current branch's upstream.",
)
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
    help="Also append `has-changes` (true/false), `stack-count`, `deleted-count` and "
    "`project-count` to the file named by $GITHUB_OUTPUT (the lists: --json).",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write .cache/konfig.")
@click.pass_context
def command(
    ctx: click.Context,
    base: str | None,
    head: str,
    as_json: bool,
    github_output: bool,
    no_cache: bool,
) -> int:
    """List the stacks affected by the changes from the merge base of BASE to HEAD.

    A changed file affects a stack when it is inside the stack, is a project-level file
    (project.yaml, <project>/base/**), is imported by the stack's KCL (transitively, per
    package), or matches a repo-wide trigger in konfig.yaml. Stacks present at the merge
    base but gone at HEAD are listed as deleted stacks. A changed stack with a layout
    error (its name, its project) is reported as an error, left out, and the exit code
    is 1.

    \b
    Examples:
      konfig changed                                  # against the upstream branch
      konfig changed --base origin/main --json --github-output
    """
    # Only the root is needed: stacks are found from the git trees, so the (slow, for
    # thousands of stacks) parse of every stack.yaml in the work tree is skipped; the
    # changed stacks' own layout errors are found there too.
    root = repository_root(ctx)
    output_file = None
    if github_output:
        from konfig.commands._outputs import github_output_file  # only with --github-output

        output_file = github_output_file()
    if base is None:
        default = gitrepo.default_base(root)
        base = default.ref
        info(f"comparing with {base} ({default.why}); pass --base to choose another")
    changes = affected_stacks(
        root, base, head, cache=cache_state(root, enabled=not no_cache, git_required=True)
    )
    report_problems(ctx, changes.problems)
    if head == "HEAD":
        _note_uncommitted(gitrepo.uncommitted(root))
    if output_file is not None:
        from konfig.commands._outputs import write_stack_outputs

        write_stack_outputs(
            output_file, changes.stack_paths, changes.deleted_stacks, changes.projects
        )
    if as_json:
        echo_json(changes.to_json())
    else:
        _print_human(changes)
    return EXIT_OK


def _note_uncommitted(paths: list[str]) -> None:
    if paths:
        more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
        info(
            f"not included: uncommitted changes to {paths[0]}{more} (konfig changed compares "
            "commits: commit them, or use --changed-from REF of compile, test, check or "
            "preview, which compare with the work tree)"
        )


def _print_human(changes: ChangeSet) -> None:
    head = changes.head[:12] if changes.head else "work tree"
    info(
        f"{len(changes.files)} changed files between {changes.merge_base[:12]} (merge base of "
        f"{changes.base[:12]} and {head}) and {head}"
    )
    if not changes.stacks and not changes.deleted_stacks:
        click.echo("no stacks affected")
        return
    echo_stacks(((s.path, s.reasons) for s in changes.stacks), changes.deleted_stacks)
    info(
        f"{len(changes.stacks)} stacks affected, {len(changes.deleted_stacks)} deleted, "
        f"in {len(changes.projects)} projects"
    )
