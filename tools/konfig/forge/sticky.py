"""Konfig's sticky comment on a pull request: found by its hidden marker line and its
author, created once, updated in place, duplicates of concurrent runs deleted."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from konfig.errors import UsageError
from konfig.forge.client import (
    DEFAULT_MARKER,
    GITHUB_ACTIONS_LOGIN,
    Comment,
    GitHub,
    check_length,
)

_MARKER_RE = re.compile(r"^[A-Za-z0-9_.:/-]+$")

AuthorSource = Literal["given", "GET /user", "GITHUB_TOKEN fallback"]


@dataclass(frozen=True)
class UpsertResult:
    # "stale": the body is about a commit that is no longer the pull request's head
    # (a newer push overtook this run); nothing was written.
    action: Literal["created", "updated", "unchanged", "stale"]
    comment: Comment | None
    # Other comments carrying the marker written by the same identity, deleted: two runs
    # that both found no comment both create one (Gitea sends a failed run's
    # ``workflow_run`` twice); every writer keeps the oldest, so they converge on one.
    duplicates: tuple[int, ...] = ()
    # The identity the comment was searched for, and how it was learnt.
    author: str = ""
    author_source: AuthorSource = "given"
    # With a head SHA to check: the pull request's head at the time of writing.
    head: str | None = None


def marker_comment(marker: str) -> str:
    """The hidden HTML comment that identifies Konfig's comment on a PR."""
    if not _MARKER_RE.match(marker):
        raise UsageError(
            f"invalid marker {marker!r}",
            hint="use letters, digits and . _ : / - only, e.g. konfig:preview",
        )
    return f"<!-- {marker} -->"


def with_marker(body: str, marker: str) -> str:
    """``body`` with the marker line first (added when the body does not carry it yet)."""
    line = marker_comment(marker)
    if _has_marker(body, line):
        return body
    return f"{line}\n{body}"


def _has_marker(body: str, line: str) -> bool:
    # A whole line, so `konfig:preview` never matches `konfig:preview-staging`.
    return any(candidate.strip() == line for candidate in body.splitlines())


def _normalise(body: str) -> str:
    # GitHub stores CRLF as sent but editors differ; trailing whitespace is not content.
    return body.replace("\r\n", "\n").strip()


def find_own_comment(
    comments: Sequence[Comment], *, marker: str, author: str
) -> tuple[Comment | None, tuple[int, ...]]:
    """The first comment by ``author`` that carries ``marker``, and any later duplicates.

    Both must hold: another bot may post a body with the same marker (a copy of the
    template, a quote), and a human may quote ours.
    """
    line = marker_comment(marker)
    mine = [c for c in comments if c.author.lower() == author.lower() and _has_marker(c.body, line)]
    if not mine:
        return None, ()
    return mine[0], tuple(c.id for c in mine[1:])


def own_login(client: GitHub, author: str | None) -> tuple[str, AuthorSource]:
    """The login the token writes as, and how it was learnt: ``author`` when given, else
    the token's own (``GET /user``: Gitea's job token ``gitea-actions``, a personal
    access token's user), else, when the token may not ask (GitHub's ``GITHUB_TOKEN``),
    :data:`GITHUB_ACTIONS_LOGIN`. Konfig's comment and issue are found by it."""
    if author:
        return author, "given"
    login = client.identity()
    if login is None:
        return GITHUB_ACTIONS_LOGIN, "GITHUB_TOKEN fallback"
    return login, "GET /user"


def upsert_comment(
    client: GitHub,
    repo: str,
    number: int,
    body: str,
    *,
    marker: str = DEFAULT_MARKER,
    author: str | None = None,
    head_sha: str | None = None,
    transform: Callable[[str | None, str], str] | None = None,
) -> UpsertResult:
    """Create Konfig's comment on PR ``number``, or update it in place.

    The comment is found by its hidden ``marker`` line AND its author: ``author``, else
    the token's own login (``GET /user``), else, when the token may not ask (GitHub's
    ``GITHUB_TOKEN``), :data:`GITHUB_ACTIONS_LOGIN`. All pages are searched. An
    unchanged body sends no write. Other comments with the marker by the same author are
    deleted and the oldest kept, also when a concurrent run created one between this
    run's search and its create. The length is checked before any request, so the
    forge never answers 422. With ``head_sha``, nothing is written unless that commit
    is still the pull request's head (the run was not overtaken by a newer push).
    ``transform(previous body or None, body)`` makes the body written from the one it
    replaces (``konfig comment`` carries the reviewed record's history this way).
    """
    body = with_marker(body, marker)
    check_length(body)
    login, source = own_login(client, author)
    head = None
    if head_sha:
        head = client.pull_head(repo, number)
        if head != head_sha:
            return UpsertResult("stale", None, (), login, source, head)
    existing, duplicates = find_own_comment(
        client.list_comments(repo, number), marker=marker, author=login
    )
    action: Literal["created", "updated", "unchanged"] = "updated"
    if transform is not None:
        body = with_marker(transform(existing.body if existing else None, body), marker)
        check_length(body)
    if existing is None:
        created = client.create_comment(repo, number, body)
        # Another run may have found no comment either and created its own meanwhile:
        # look again and keep the oldest, whichever run made it.
        existing, duplicates = find_own_comment(
            client.list_comments(repo, number), marker=marker, author=login
        )
        if existing is None or existing.id == created.id:
            existing, action = created, "created"
    if _normalise(existing.body) == _normalise(body):
        comment = existing
        if action != "created":
            action = "unchanged"
    else:
        comment = client.update_comment(repo, number, existing.id, body)
    for duplicate in duplicates:
        client.delete_comment(repo, duplicate)
    return UpsertResult(action, comment, duplicates, login, source, head)
