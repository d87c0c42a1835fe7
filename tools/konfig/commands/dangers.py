"""``konfig dangers``: the danger labels, the status ``konfig/dangers`` and the
confirmations of a pull request (:mod:`konfig.pipeline.confirmations`, docs/danger.md).

With ``--pr`` (the preview workflow, and the comment workflow when someone writes
``/konfig confirm``): reads the danger record Konfig's own comment hides, the
confirmations in the pull request's comments, sets the ``konfig/danger:<class>`` labels
and the status. With ``--merged`` (the apply workflow): writes the confirmations of the
pull request merged as a commit, one ``STACK=DIGEST`` a line, for ``konfig apply
--confirm``. Who may confirm is an owner of the stack's project (konfig.yaml ``owners``,
read at ``--owners-at``, never from the change), or, without owners, a writer of the
repository as the forge says; never the pull request's author.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click

from konfig.commands._common import repository_root
from konfig.commands._console import echo_json, info, warn
from konfig.commands._options import forge_options
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.forge.client import DEFAULT_MARKER, Comment, GitHub, parse_repo
from konfig.forge.sticky import find_own_comment, own_login
from konfig.pipeline.confirmations import (
    LABEL_PREFIX,
    STATUS_CONTEXT,
    Confirmation,
    commands_in,
    confirm_args,
    labels_after,
    may_confirm,
    read_record,
    verdict,
)
from konfig.repo.files import WriteScope, atomic_write_text


@click.command("dangers")
@click.option("--repo", "repo_name", required=True, help="Repository as OWNER/NAME.")
@click.option(
    "--pr",
    "number",
    default=None,
    type=click.IntRange(min=1),
    help="The pull request: set its danger labels and the status of --head-sha.",
)
@click.option(
    "--head-sha",
    default=None,
    metavar="SHA",
    help="With --pr: the head the run is about; nothing is written when the pull "
    "request has moved on (its newer run writes). Default: the pull request's head now.",
)
@click.option(
    "--merged",
    default=None,
    metavar="SHA",
    help="The merge commit: write the confirmations of the pull request merged as it.",
)
@click.option(
    "--confirm-out",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --merged: write STACK=DIGEST lines here (for `konfig apply --confirm`).",
)
@click.option(
    "--owners-at",
    default=None,
    metavar="REF",
    help="The commit whose konfig.yaml `owners` say who may confirm (default: HEAD of "
    "--root with --pr, the merge's first parent with --merged).",
)
@click.option("--post", is_flag=True, help="With --pr: set the labels and the status.")
@click.option(
    "--marker", default=DEFAULT_MARKER, show_default=True, help="Konfig comment's marker."
)
@click.option(
    "--author",
    default=None,
    help="Login Konfig's comments are written as (default: asked, as `konfig comment` does).",
)
@forge_options(token_help="Environment variable holding the token.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@click.pass_context
def command(
    ctx: click.Context,
    repo_name: str,
    number: int | None,
    head_sha: str | None,
    merged: str | None,
    confirm_out: Path | None,
    owners_at: str | None,
    post: bool,
    marker: str,
    author: str | None,
    api_url: str,
    token_env: str,
    as_json: bool,
) -> int:
    """The danger labels and status of a pull request, or the confirmations of a merge.

    A stack whose dangers konfig.yaml `dangers.confirm` names (or that deletes more
    than the count guard allows) is applied only with a confirmation of its change
    digest. A reviewer who may confirm writes a comment on the pull request:

    \b
      /konfig confirm appops/shop/prod 3f2a9c0d1e2b4a5f

    (the line the preview comment shows). A later push that changes the stack's change
    changes the digest: the confirmation no longer counts. Exit 0 when nothing waits
    for a confirmation, 1 when something does.

    \b
    Examples:
      konfig dangers --repo acme/config --pr 12 --head-sha "$SHA" --post
      konfig dangers --repo acme/config --pr 12 --post
      konfig dangers --repo acme/config --merged "$GITHUB_SHA" --confirm-out confirm.txt
    """
    repo = parse_repo(repo_name)
    if (number is None) == (merged is None):
        raise UsageError("give one of --pr (a pull request) or --merged (a merge commit)")
    if merged is not None and confirm_out is None:
        raise UsageError("--merged needs --confirm-out FILE")
    token = os.environ.get(token_env, "")
    if not token:
        raise UsageError(f"no forge token in ${token_env}", hint="pass --token-env NAME")
    root = repository_root(ctx)
    ref = owners_at or (f"{merged}^" if merged else "HEAD")
    with GitHub(token, api_url=api_url) as client:
        if merged is not None and confirm_out is not None:
            return _merged(client, root, repo, merged, confirm_out, ref, author)
        assert number is not None
        return _pull_request(
            client, root, repo, number, head_sha, ref, post, marker, author, as_json
        )


def _allowed(
    client: GitHub, root: Path, repo: str, ref: str, pr_author: str, own: str
) -> Callable[[str, str], bool]:
    """``allowed(login, stack)``: may ``login`` confirm ``stack``'s dangers?"""
    from konfig.pipeline.approvals import owners_at

    owners = owners_at(root, ref)
    permissions: dict[str, str | None] = {}

    def allowed(login: str, stack: str) -> bool:
        if login.lower() in (own.lower(), pr_author.lower()):
            return False
        if owners.enabled:
            return login.lower() in {o.lower() for o in owners.of_stack(stack)}
        if login not in permissions:
            permissions[login] = client.permission(repo, login)
            if permissions[login] is None:
                warn(
                    f"the token may not read {login}'s permission on {repo}: their "
                    "confirmation is not counted (declare konfig.yaml `owners`)"
                )
        return may_confirm(permissions[login] or "none", login, pr_author)

    return allowed


def _confirmations(
    comments: list[Comment], allowed: Callable[[str, str], bool]
) -> list[Confirmation]:
    found = []
    for c in comments:
        for stack, digest in commands_in(c.body):
            if allowed(c.author, stack):
                found.append(Confirmation(c.author, stack, digest, c.id))
            else:
                info(f"comment {c.id}: {c.author} may not confirm {stack}: not counted")
    return found


def _merged(
    client: GitHub,
    root: Path,
    repo: str,
    merged: str,
    out: Path,
    ref: str,
    author: str | None,
) -> int:
    found: list[Confirmation] = []
    number = client.merged_pull(repo, merged)
    if number is None:
        warn(f"{merged[:12]} is not a merged pull request (a direct push): no confirmation")
    else:
        pr = client.pull(repo, number)
        login, _ = own_login(client, author)
        allowed = _allowed(client, root, repo, ref, pr.author, login)
        found = _confirmations(client.list_comments(repo, number), allowed)
    lines = confirm_args(found)
    atomic_write_text(
        out, "".join(f"{x}\n" for x in lines), scope=WriteScope.named(out, "--confirm-out")
    )
    where = f"pull request #{number}" if number else merged[:12]
    info(f"confirmations of {where}: {len(lines)} -> {out}")
    return EXIT_OK


def _pull_request(
    client: GitHub,
    root: Path,
    repo: str,
    number: int,
    head_sha: str | None,
    ref: str,
    post: bool,
    marker: str,
    author: str | None,
    as_json: bool,
) -> int:
    pr = client.pull(repo, number)
    head_sha = head_sha or pr.head_sha
    if pr.head_sha != head_sha:
        return _skipped(
            f"pull request #{number} is at {pr.head_sha[:12]} now, not {head_sha[:12]}: "
            "its newer run sets the status",
            head_sha,
            as_json,
        )
    login, _ = own_login(client, author)
    comments = client.list_comments(repo, number)
    own, _ = find_own_comment(comments, marker=marker, author=login)
    record = None
    if own is not None:
        record = read_record(own.body, where=f"pull request #{number}'s Konfig comment")
    if record is None or record.head != head_sha:
        return _skipped(
            f"pull request #{number} has no preview of {head_sha[:12]} with a danger record "
            "yet: nothing to set",
            head_sha,
            as_json,
        )
    allowed = _allowed(client, root, repo, ref, pr.author, login)
    others = [c for c in comments if own is None or c.id != own.id]
    result = verdict(record, _confirmations(others, allowed))
    if post:
        labels = labels_after(pr.labels, record.labels)
        if labels is not None:
            client.set_labels(repo, number, labels, create=record.labels)
        client.set_status(
            repo, head_sha, context=STATUS_CONTEXT, state=result.state, description=result.summary()
        )
    if as_json:
        echo_json(
            {
                "context": STATUS_CONTEXT,
                "head": head_sha,
                "state": result.state,
                "description": result.summary(),
                "labels": list(record.labels),
                "stacks": [
                    {
                        "stack": s.needed.stack,
                        "digest": s.needed.digest,
                        "what": s.needed.what,
                        "confirmedBy": list(s.by),
                    }
                    for s in result.stacks
                ],
            }
        )
    else:
        for s in result.stacks:
            by = f"confirmed by {', '.join(s.by)}" if s.confirmed else "waiting"
            click.echo(f"{s.needed.stack}: {s.needed.what} (digest {s.needed.digest}): {by}")
        shown = ", ".join(x.removeprefix(LABEL_PREFIX) for x in record.labels) or "none"
        info(f"danger classes: {shown}; {STATUS_CONTEXT}: {result.state}: {result.summary()}")
    return EXIT_OK if result.state == "success" else EXIT_FINDINGS


def _skipped(why: str, head_sha: str, as_json: bool) -> int:
    """Nothing to set (another run writes, or there is nothing to read yet)."""
    if as_json:
        echo_json({"context": STATUS_CONTEXT, "head": head_sha, "state": None, "skipped": why})
    info(why)
    return EXIT_OK
