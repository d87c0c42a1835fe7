"""Posting Konfig's one comment: what ``konfig comment`` and ``konfig report --post`` share.

The forge is talked to by :mod:`konfig.forge` (the sticky comment's rules live in
:mod:`konfig.forge.sticky`); here only the token from the environment and what is said
about the outcome. ``konfig report --post`` renders and posts in one process: a pull
request's comment costs one Python start, not two (issue 33).
"""

from __future__ import annotations

import os

from konfig.commands._console import info, warn
from konfig.errors import UsageError
from konfig.forge.client import GitHub
from konfig.forge.sticky import upsert_comment
from konfig.pipeline.reusing import keep_previous_run
from konfig.report.reviewed import carried_body


def post_comment(
    *,
    repo: str,
    number: int,
    body: str,
    marker: str,
    author: str | None,
    head_sha: str | None,
    api_url: str,
    token_env: str,
) -> None:
    """Create Konfig's comment on pull request ``number`` of ``repo``, or update it in
    place (only while ``head_sha`` is still its head, when given); the reviewed record
    of the comment it replaces is carried (:func:`konfig.report.reviewed.carried_body`)."""
    token = os.environ.get(token_env, "")
    if not token:
        raise UsageError(
            f"no GitHub token in ${token_env}",
            hint="in a workflow: env: {GITHUB_TOKEN: ${{ github.token }}}",
        )
    notes: list[str] = []

    def carried(previous: str | None, text: str) -> str:
        out = carried_body(previous, text)
        if out.warning:
            notes.append(out.warning)
        return keep_previous_run(previous, out.text)

    with GitHub(token, api_url=api_url) as client:
        result = upsert_comment(
            client,
            repo,
            number,
            body,
            marker=marker,
            author=author,
            head_sha=head_sha,
            transform=carried,
        )
    for note in notes:
        warn(note)
    if result.comment is None:
        info(
            f"comment not written: the pull request's head is now {result.head}, this body "
            f"is about {head_sha} (the run for the newer head reports)"
        )
        return
    info(
        f"comment {result.action}: {result.comment.url or result.comment.id} "
        f"(as {result.author}, from {result.author_source})"
    )
    if result.duplicates:
        warn(
            f"deleted {len(result.duplicates)} duplicate comment(s) with the same marker "
            f"({', '.join(str(d) for d in result.duplicates)}); kept the oldest, "
            f"{result.comment.id}"
        )
