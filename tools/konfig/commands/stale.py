"""``konfig stale``: mark the open pull requests a push to the default branch made stale.

``stale.yml`` runs it on each push to the default branch: the stacks the push changes
(through the KCL import graph, as ``konfig changed``) are compared with the stacks in
each open pull request's reviewed record (Konfig's own comment, read as hostile
input). A pull request whose preview planned one of them did not see that change and
its merge would apply it too: its head gets the status ``konfig/reviewed`` failure
(``stale: main@<sha> changed <stacks>``) and its comment one line naming the commit
and the stacks, until the branch is updated and previewed again (``konfig approved``
then finds it is no longer behind in those stacks).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from konfig.commands._common import cache_state, repository_root
from konfig.commands._console import echo_json, info, warn
from konfig.commands._options import forge_options
from konfig.detect import gitrepo
from konfig.errors import EXIT_OK, UsageError
from konfig.pipeline.reviewed import REVIEWED_CONTEXT, stale_description

_NO_COMMIT = "0" * 40  # GitHub's and Gitea's `before` of a branch's first push


@click.command("stale")
@click.option("--repo", "repo_name", required=True, help="Repository as OWNER/NAME.")
@click.option(
    "--before",
    default=None,
    metavar="SHA",
    help="The branch's commit before the push (default, or unknown here: AFTER's first parent).",
)
@click.option("--after", default="HEAD", show_default=True, metavar="REF", help="The push.")
@click.option(
    "--base-ref",
    default="main",
    show_default=True,
    help="The branch pushed: only pull requests into it are looked at.",
)
@click.option("--marker", default=None, help="Konfig comment's marker (default konfig:preview).")
@click.option("--author", default=None, help="Login Konfig's comments are written as.")
@click.option(
    "--post",
    is_flag=True,
    help=f"Set {REVIEWED_CONTEXT} of each stale pull request's head to failure and add "
    "the line to its comment.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was found as JSON.")
@forge_options(token_help="Environment variable holding the token (reads, posts).")
@click.pass_context
def command(
    ctx: click.Context,
    repo_name: str,
    before: str | None,
    after: str,
    base_ref: str,
    marker: str | None,
    author: str | None,
    post: bool,
    as_json: bool,
    api_url: str,
    token_env: str,
) -> int:
    """Mark the open pull requests whose previews a push to BASE-REF made stale.

    \b
    Example:
      konfig stale --repo acme/config --before "$BEFORE" --after "$GITHUB_SHA" --post
    """
    from konfig.commands._reviewed import comment_record, pull_comment
    from konfig.detect.changeset import affected_stacks
    from konfig.forge.client import DEFAULT_MARKER, GitHub, parse_repo
    from konfig.report.reviewed import STALE_TAG, insert_line, stale_line

    repo_name = parse_repo(repo_name)
    root = repository_root(ctx)
    tip = gitrepo.rev_parse(root, after)
    start = _before(root, before, tip)
    if start is None:
        info(f"{tip[:12]} has no parent: nothing to compare")
        return EXIT_OK
    changes = affected_stacks(root, start, tip, cache=cache_state(root, git_required=True))
    touched = set(changes.stack_paths) | set(changes.deleted_stacks)
    found: list[dict[str, object]] = []
    if touched:
        token = os.environ.get(token_env, "")
        if not token:
            raise UsageError(f"no forge token in ${token_env}", hint="pass --token-env NAME")
        with GitHub(token, api_url=api_url) as client:
            for pull in client.open_pulls(repo_name):
                if pull.base_ref != base_ref:
                    continue
                comment, _ = pull_comment(
                    client, repo_name, pull.number, marker=marker or DEFAULT_MARKER, author=author
                )
                if comment is None:
                    continue
                try:
                    record = comment_record(
                        client,
                        repo_name,
                        comment.body,
                        where=f"pull request #{pull.number}'s comment",
                        number=pull.number,
                    )
                except UsageError as exc:
                    warn(f"{exc}: not looked at")
                    continue
                hit = sorted(touched & set(record.stacks))
                if not hit:
                    continue
                found.append({"number": pull.number, "head": pull.head_sha, "stacks": hit})
                if not post:
                    continue
                client.set_status(
                    repo_name,
                    pull.head_sha,
                    context=REVIEWED_CONTEXT,
                    state="failure",
                    description=stale_description(tip, hit, base_ref),
                )
                if f"<!-- {STALE_TAG} {tip} -->" not in comment.body:
                    body = insert_line(comment.body, stale_line(tip, hit, branch=base_ref))
                    client.update_comment(repo_name, pull.number, comment.id, body)
    if as_json:
        echo_json({"commit": tip, "stacks": sorted(touched), "pulls": found})
    else:
        for item in found:
            names = ", ".join(str(s) for s in item["stacks"])  # type: ignore[attr-defined]
            click.echo(f"#{item['number']}: stale: {base_ref}@{tip[:12]} changed {names}")
        info(
            f"{base_ref}@{tip[:12]} changed {len(touched)} stack(s); "
            f"{len(found)} open pull request(s) previewed one of them"
        )
    return EXIT_OK


def _before(root: Path, before: str | None, tip: str) -> str | None:
    """The commit the push started from: ``before`` when git knows it, else the tip's
    first parent (a new branch, a force push whose old commit is gone)."""
    if before and before != _NO_COMMIT:
        try:
            return gitrepo.rev_parse(root, before)
        except UsageError:
            warn(f"--before {before[:12]} is not in this clone: comparing with the first parent")
    try:
        return gitrepo.rev_parse(root, f"{tip}^")
    except UsageError:
        return None
