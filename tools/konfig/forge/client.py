"""The GitHub API: the one module that talks to GitHub (or an API-compatible forge).

It uses PyGithub with a configurable base URL (``https://api.github.com``, a GitHub
Enterprise ``https://HOST/api/v3``, or any forge that speaks the same REST subset).
Konfig needs very little of the API: who am I, list an issue's comments (all pages),
create a comment, edit a comment. :func:`upsert_comment` builds the sticky PR comment
on top of those.

Nothing here reads the environment or prints: the CLI passes the token and prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import requests
from github import Auth, Github, GithubException
from urllib3.util import Retry

from konfig.errors import KonfigError, UsageError
from konfig.report.budget import COMMENT_LIMIT, chars

_T = TypeVar("_T")

DEFAULT_API_URL = "https://api.github.com"
# GitHub rejects issue comment bodies longer than this with HTTP 422.
DEFAULT_MARKER = "konfig:preview"

_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_MARKER_RE = re.compile(r"^[A-Za-z0-9_.:/-]+$")


class GitHubError(KonfigError):
    """A GitHub API request failed; the message names the request and how to fix it."""


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    body: str
    url: str


@dataclass(frozen=True)
class UpsertResult:
    action: Literal["created", "updated", "unchanged"]
    comment: Comment
    # Other comments carrying the marker written by the same identity (left alone).
    duplicates: tuple[int, ...] = ()


def parse_repo(full_name: str) -> str:
    if not _REPO_RE.match(full_name):
        raise UsageError(
            f"invalid repository {full_name!r}", hint="use OWNER/NAME, e.g. acme/konfig"
        )
    return full_name


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


class GitHub:
    """A thin, typed wrapper around PyGithub for the requests Konfig makes."""

    def __init__(
        self,
        token: str,
        *,
        api_url: str = DEFAULT_API_URL,
        retries: int = 3,
        throttle: bool = True,
    ) -> None:
        if not token:
            raise UsageError("no GitHub token", hint="set GITHUB_TOKEN (or pass --token-env NAME)")
        self.api_url = api_url.rstrip("/")
        kwargs: dict[str, Any] = {}
        if not throttle:
            kwargs.update(seconds_between_requests=None, seconds_between_writes=None)
        self._gh = Github(
            auth=Auth.Token(token),
            base_url=self.api_url,
            per_page=100,
            lazy=True,
            retry=Retry(
                total=retries,
                backoff_factor=0.5,
                status_forcelist=(500, 502, 503, 504),
                allowed_methods=("GET",),
            ),
            timeout=30,
            **kwargs,
        )
        self._objects: dict[int, Any] = {}

    def close(self) -> None:
        self._gh.close()

    def __enter__(self) -> GitHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def identity(self) -> str | None:
        """The login of the token's user, or ``None`` when the token may not ask.

        ``GITHUB_TOKEN`` and GitHub App installation tokens get 403 "Resource not
        accessible by integration" from ``GET /user``; their comments are authored by
        ``github-actions[bot]`` / ``<app-slug>[bot]``, which the caller must supply.
        """
        try:
            user = self._gh.get_user()
            return str(user.login)
        except GithubException as exc:
            if exc.status == 403:
                return None
            raise self._error(exc, "GET /user", "read the token's identity") from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._unreachable(exc) from exc

    def _call(self, request: str, what: str, fn: Callable[[], _T]) -> _T:
        """``fn()``, its API and transport failures as a :class:`GitHubError` naming
        ``request`` and ``what`` it was trying to do."""
        try:
            return fn()
        except GithubException as exc:
            raise self._error(exc, request, what) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._unreachable(exc) from exc

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        """Every comment on issue/PR ``number``, following every page."""

        def call() -> list[Comment]:
            issue = self._gh.get_repo(repo).get_issue(number)
            comments = []
            for item in issue.get_comments():
                self._objects[item.id] = item
                comments.append(_comment(item))
            return comments

        return self._call(f"GET /repos/{repo}/issues/{number}/comments", "list the comments", call)

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        _check_length(body)

        def call() -> Comment:
            item = self._gh.get_repo(repo).get_issue(number).create_comment(body)
            self._objects[item.id] = item
            return _comment(item)

        return self._call(
            f"POST /repos/{repo}/issues/{number}/comments", "create the comment", call
        )

    def update_comment(self, repo: str, number: int, comment_id: int, body: str) -> Comment:
        _check_length(body)

        def call() -> Comment:
            item = self._objects.get(comment_id)
            if item is None:
                item = self._gh.get_repo(repo).get_issue(number).get_comment(comment_id)
            item.edit(body)
            return _comment(item)

        return self._call(
            f"PATCH /repos/{repo}/issues/comments/{comment_id}", "update the comment", call
        )

    def _unreachable(self, exc: Exception) -> GitHubError:
        return GitHubError(
            f"cannot reach the GitHub API at {self.api_url}: {exc}",
            hint="check --api-url (GitHub Enterprise: https://HOST/api/v3) and the network",
        )

    def _error(self, exc: GithubException, request: str, what: str) -> GitHubError:
        message = _api_message(exc)
        hints = {
            401: "the token is invalid or expired; check GITHUB_TOKEN (or --token-env)",
            403: "the token lacks permission; the workflow job needs "
            "`permissions: pull-requests: write` (issues: write for issues)",
            404: "check --repo and --pr, and that the token can see the repository",
            422: "GitHub rejected the content (a comment body must be at most "
            f"{COMMENT_LIMIT} characters)",
        }
        return GitHubError(
            f"{request} on {self.api_url} failed with HTTP {exc.status} while trying to "
            f"{what}: {message}",
            hint=hints.get(exc.status),
        )


def _api_message(exc: GithubException) -> str:
    data = exc.data
    if isinstance(data, dict):
        message = str(data.get("message", "")) or "no message"
        errors = data.get("errors")
        if isinstance(errors, list) and errors:
            details = "; ".join(
                str(e.get("message") or e.get("code")) if isinstance(e, dict) else str(e)
                for e in errors
            )
            message = f"{message} ({details})"
        return message
    return str(data) if data else "no message"


def _comment(item: Any) -> Comment:
    user = item.user
    return Comment(
        id=int(item.id),
        author=str(user.login) if user is not None else "",
        body=str(item.body or ""),
        url=str(item.html_url or ""),
    )


def _check_length(body: str) -> None:
    length = chars(body)  # as GitHub counts: UTF-16 code units
    if length > COMMENT_LIMIT:
        raise KonfigError(
            f"the comment body has {length} characters (counted as GitHub does, an emoji "
            f"as two); GitHub accepts at most {COMMENT_LIMIT} (it would answer HTTP 422)",
            hint="render it with `konfig report --budget 60000`, which keeps it under the limit",
        )


def upsert_comment(
    client: GitHub,
    repo: str,
    number: int,
    body: str,
    *,
    marker: str = DEFAULT_MARKER,
    author: str | None = None,
) -> UpsertResult:
    """Create Konfig's comment on PR ``number``, or update it in place.

    The comment is found by its hidden ``marker`` line AND its author (``author``, or
    the token's own login); all pages are searched. An unchanged body sends no write.
    The length is checked before any request, so GitHub never answers 422.
    """
    body = with_marker(body, marker)
    _check_length(body)
    login = author or client.identity()
    if login is None:
        raise UsageError(
            "this token may not read its own identity (GET /user answered 403), so konfig "
            "cannot tell its comment from other bots' comments",
            hint="pass --author LOGIN: github-actions[bot] for GITHUB_TOKEN, "
            "<app-slug>[bot] for a GitHub App token",
        )
    existing, duplicates = find_own_comment(
        client.list_comments(repo, number), marker=marker, author=login
    )
    if existing is None:
        return UpsertResult("created", client.create_comment(repo, number, body))
    if _normalise(existing.body) == _normalise(body):
        return UpsertResult("unchanged", existing, duplicates)
    return UpsertResult(
        "updated", client.update_comment(repo, number, existing.id, body), duplicates
    )


# Transport failures PyGithub lets through (connection refused, DNS, timeouts).
_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (OSError, requests.RequestException)

__all__ = [
    "DEFAULT_API_URL",
    "DEFAULT_MARKER",
    "Comment",
    "GitHub",
    "GitHubError",
    "UpsertResult",
    "find_own_comment",
    "marker_comment",
    "parse_repo",
    "upsert_comment",
    "with_marker",
]
