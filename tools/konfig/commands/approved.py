"""``konfig approved``: the status ``konfig/reviewed`` of a pull request's head.

Green only when the live preview of the head is the record in Konfig's comment, no
commit of the base branch since the head's merge base changed one of its stacks (a
stale preview, through the import graph), and every stack whose change is not empty
has an approval that still holds: of a commit at which the stack's change digest was
the one it is now, with no preview since showing another
(:func:`konfig.pipeline.reviewed.review_state`). ``preview-cluster.yml`` runs it
once the live preview wrote the head's record, ``owners.yml`` beside ``konfig owners``
whenever a review completes (docs/review.md).
"""

from __future__ import annotations

import os
import re

import click
from click.core import ParameterSource

from konfig.commands._common import cache_state, repository_root
from konfig.commands._console import echo_json, info, warn
from konfig.commands._options import forge_options
from konfig.detect import gitrepo
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.pipeline.reviewed import REVIEWED_CONTEXT, review_state, stale_stacks


@click.command("approved")
@click.option("--repo", "repo_name", required=True, help="Repository as OWNER/NAME.")
@click.option(
    "--pr", "number", required=True, type=click.IntRange(min=1), help="Pull request number."
)
@click.option("--head", default="HEAD", show_default=True, metavar="REF", help="Its head.")
@click.option(
    "--pr-head",
    is_flag=True,
    help="Its head as the forge says it now, instead of --head (the commit must be in "
    "this checkout): a merge queue's run knows the pull request's number, not its head.",
)
@click.option(
    "--main",
    "main",
    default=None,
    metavar="REF",
    help="The branch it merges into, as fetched here (default: as `konfig changed`): "
    "what it changed since the head's merge base makes the preview stale.",
)
@click.option("--marker", default=None, help="Konfig comment's marker (default konfig:preview).")
@click.option("--author", default=None, help="Login Konfig's comments are written as.")
@click.option("--post", is_flag=True, help=f"Set the commit status {REVIEWED_CONTEXT}.")
@click.option(
    "--status-sha",
    default=None,
    metavar="SHA",
    help="With --post: set the status on this commit instead of the head (a merge "
    "queue's merge commit, `merge_group`: docs/review.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@forge_options(token_help="Environment variable holding the token (reads, sets a status).")
@click.pass_context
def command(
    ctx: click.Context,
    repo_name: str,
    number: int,
    head: str,
    pr_head: bool,
    main: str | None,
    marker: str | None,
    author: str | None,
    post: bool,
    status_sha: str | None,
    as_json: bool,
    api_url: str,
    token_env: str,
) -> int:
    """Whether the pull request's head is approved as it is previewed now.

    Exit 0 when it is (status success), 1 when not (failure: stale, or a stack without
    an approval that still holds; pending: no preview of the head yet).

    \b
    Example:
      konfig approved --repo acme/config --pr 12 --main origin/main --post
      konfig approved --repo acme/config --pr 12 --pr-head --main origin/main --json
    """
    from konfig.commands._reviewed import pull_record
    from konfig.forge.client import DEFAULT_MARKER, GitHub, current_approvals, parse_repo

    repo_name = parse_repo(repo_name)
    if status_sha is not None and not re.fullmatch(r"[0-9a-f]{40,64}", status_sha):
        raise UsageError(f"--status-sha {status_sha!r} is not a commit id (40 hex digits)")
    if pr_head and ctx.get_parameter_source("head") is not ParameterSource.DEFAULT:
        raise UsageError("--head and --pr-head both name the head: pass one")
    root = repository_root(ctx)
    if main is None:
        default = gitrepo.default_base(root)
        main = default.ref
        info(f"the base branch is {main} ({default.why}); pass --main to choose another")
    change = None if pr_head else gitrepo.rev_parse(root, head)
    token = os.environ.get(token_env, "")
    if not token:
        raise UsageError(f"no forge token in ${token_env}", hint="pass --token-env NAME")
    with GitHub(token, api_url=api_url) as client:
        forge_head = client.pull_head(repo_name, number)
        if change is None:
            if not re.fullmatch(r"[0-9a-f]{40,64}", forge_head):
                raise UsageError(f"the forge names no commit as #{number}'s head: {forge_head!r}")
            change = gitrepo.rev_parse(root, forge_head)  # says how to fetch it when absent
        elif forge_head != change:
            raise UsageError(
                f"pull request #{number}'s head is {forge_head[:12]}, not {head} "
                f"({change[:12]}): the status is of the head",
                hint="check out the pull request's head, or pass --head with its commit",
            )
        record, why = pull_record(
            client, repo_name, number, marker=marker or DEFAULT_MARKER, author=author
        )
        if why:
            warn(why)
        reviews = client.list_reviews(repo_name, number)
        approvals = [(a.login, a.change) for a in current_approvals(reviews)]
        stale: dict[str, str] = {}
        if record is not None and record.head == change:
            stale = stale_stacks(
                root,
                change,
                main,
                record.stacks,
                cache=cache_state(root, git_required=True),
            )
        result = review_state(record, change, approvals, stale)
        if post:
            client.set_status(
                repo_name,
                status_sha or change,
                context=REVIEWED_CONTEXT,
                state=result.state,
                description=result.description,
            )
    if as_json:
        echo_json(result.to_json())
    else:
        for s in result.stacks:
            state = (
                f"stale (main@{s.stale_by[:12]} changed it)"
                if s.stale_by
                else f"approved by {', '.join(s.approved_by)}"
                if s.approved_by
                else "waiting for an approval of this change"
            )
            click.echo(f"{s.path}: digest {s.digest[:12]}: {state}")
        info(f"{REVIEWED_CONTEXT}: {result.state}: {result.description}")
    return EXIT_OK if result.state == "success" else EXIT_FINDINGS
