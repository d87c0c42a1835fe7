"""The forge API: the one module that talks to GitHub or Gitea.

It uses PyGithub with a configurable base URL (``https://api.github.com``, a GitHub
Enterprise ``https://HOST/api/v3``, Gitea's ``https://HOST/api/v1``: Gitea serves the
same REST subset). Konfig needs very little of the API: who am I, a pull request's
head, list an issue's comments (all pages), create a comment, edit a comment.
The sticky PR comment is built on top of those in :mod:`konfig.forge.sticky`.

Who "I" am decides which comment is Konfig's own (docs/forges.md): ``GET /user``
answers for Gitea's job token (``gitea-actions``) and for personal tokens; GitHub's
``GITHUB_TOKEN`` may not ask (HTTP 403) and always comments as
:data:`GITHUB_ACTIONS_LOGIN`, which is then assumed.

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
from konfig.pipeline.approvals import Approval
from konfig.report.budget import COMMENT_LIMIT, chars

_T = TypeVar("_T")

DEFAULT_API_URL = "https://api.github.com"
# GitHub rejects issue comment bodies longer than this with HTTP 422.
DEFAULT_MARKER = "konfig:preview"
# The author of every comment made with GitHub Actions' GITHUB_TOKEN, which may not call
# GET /user. Assumed when GET /user answers 403: only a workflow of the repository can
# comment as this login, and the marker tells Konfig's comment from other workflows'.
GITHUB_ACTIONS_LOGIN = "github-actions[bot]"

_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


# The danger labels konfig creates (konfig dangers): red, as GitHub's "bug".
LABEL_COLOR = "b60205"
LABEL_DESCRIPTION = "Konfig: a danger class of this change (docs/danger.md)"

StatusState = Literal["pending", "success", "failure", "error"]
STATUS_STATES = ("pending", "success", "failure", "error")
# review states that decide (GitHub's, then Gitea's names); COMMENTED/COMMENT do not
_DECISIVE = frozenset({"APPROVED", "CHANGES_REQUESTED", "REQUEST_CHANGES"})


@dataclass(frozen=True)
class Review:
    """A pull request review: who, what they said, about which commit."""

    id: int
    login: str
    state: str  # APPROVED, CHANGES_REQUESTED / REQUEST_CHANGES, COMMENTED / COMMENT, ...
    commit: str
    dismissed: bool = False


class GitHubError(KonfigError):
    """A GitHub API request failed; the message names the request and how to fix it."""


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    body: str
    url: str


@dataclass(frozen=True)
class PullRequest:
    """An open pull request, as the forge says (never as an artifact or a branch says)."""

    number: int
    head_sha: str
    head_repo: str | None  # None: the fork is gone
    base_repo: str
    base_ref: str
    base_sha: str
    labels: tuple[str, ...] = ()  # the label names (set by people with triage rights)
    author: str = ""  # who opened it
    head_ref: str = ""  # the head branch's name (in head_repo)

    @property
    def fork(self) -> bool:
        """From another repository: its author may not be a writer of this one."""
        return self.head_repo is None or self.head_repo.lower() != self.base_repo.lower()


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    body: str
    author: str
    state: str  # "open" or "closed"
    url: str = ""


def parse_repo(full_name: str) -> str:
    if not _REPO_RE.match(full_name):
        raise UsageError(
            f"invalid repository {full_name!r}", hint="use OWNER/NAME, e.g. acme/konfig"
        )
    return full_name


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
        self._token = token
        # one request at a time, a second between writes (GitHub's rules); reads are not
        # spaced (PyGithub's 0.25 s default cost the PR round a second a comment)
        kwargs: dict[str, Any] = {"seconds_between_requests": None, "seconds_between_writes": 1.0}
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
        ``github-actions[bot]`` / ``<app-slug>[bot]``. Gitea answers for its job token
        (``gitea-actions``).
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

    def pull_head(self, repo: str, number: int) -> str:
        """The commit a pull request's head branch points at now."""
        return self._call(
            f"GET /repos/{repo}/pulls/{number}",
            "read the pull request's head",
            lambda: str(self._gh.get_repo(repo).get_pull(number).head.sha),
        )

    def open_pulls_at(self, repo: str, head_sha: str) -> list[PullRequest]:
        """The open pull requests whose head is commit ``head_sha`` (every page), by
        number."""
        return [p for p in self.open_pulls(repo) if p.head_sha == head_sha]

    def open_pulls(self, repo: str) -> list[PullRequest]:
        """Every open pull request (every page), by number. Paged by number while
        ``Link`` names a next page, as :meth:`list_issues` (Gitea's ``Link`` header is
        not one PyGithub's list follows)."""
        path = f"/repos/{repo}/pulls"

        def call() -> list[PullRequest]:
            found: list[PullRequest] = []
            page = 1
            while True:
                headers, data = self._gh.requester.requestJsonAndCheck(
                    "GET",
                    path,
                    parameters={"state": "open", "per_page": 100, "limit": 50, "page": page},
                )
                if not isinstance(data, list):
                    raise GitHubError(f"GET {path} answered {type(data).__name__}, not a list")
                found += [_pull(item) for item in data if isinstance(item, dict)]
                link = next((str(v) for k, v in headers.items() if k.lower() == "link"), "")
                if not data or 'rel="next"' not in link:
                    return sorted(found, key=lambda p: p.number)
                page += 1

        return self._call(f"GET {path}?state=open", "list the open pull requests", call)

    def download_artifact(self, repo: str, artifact_id: int, *, limit: int) -> bytes:
        """Artifact ``artifact_id``'s zip (``GET .../actions/artifacts/{id}/zip``: a redirect
        to it; the token only to the API's host), at most ``limit`` bytes."""
        path = f"/repos/{repo}/actions/artifacts/{artifact_id}/zip"

        def call() -> bytes:
            with requests.Session() as session:  # (no Authorization to another host)
                answer = session.get(
                    self.api_url + path,
                    headers={"Authorization": f"token {self._token}"},
                    timeout=60,
                    stream=True,
                )
                with answer:
                    if answer.status_code != 200:
                        raise GitHubError(f"GET {path} answered {answer.status_code}")
                    data = bytearray()
                    for chunk in answer.iter_content(1 << 20):
                        data += chunk
                        if len(data) > limit:
                            raise GitHubError(f"GET {path}: the archive is over {limit} bytes")
                    return bytes(data)

        return self._call(f"GET {path}", "download the artifact", call)

    def get_json(self, path: str, what: str, parameters: dict[str, Any] | None = None) -> Any:
        """``GET path`` of the API with ``parameters``: its JSON (``what``: for the error)."""
        return self._call(
            f"GET {path}",
            what,
            lambda: self._gh.requester.requestJsonAndCheck("GET", path, parameters=parameters)[1],
        )

    def merged_pull(self, repo: str, merge_sha: str, *, pages: int = 5) -> int | None:
        """The pull request merged as commit ``merge_sha`` (its merge commit, as the forge
        records it), looked for among the most recently updated closed ones (``pages`` of
        100); None: none (a direct push). GitHub and Gitea both list ``merge_commit_sha``."""
        path = f"/repos/{repo}/pulls"

        def call() -> int | None:
            for page in range(1, pages + 1):
                headers, data = self._gh.requester.requestJsonAndCheck(
                    "GET",
                    path,
                    parameters={
                        "state": "closed",
                        "sort": "updated",  # GitHub (Gitea: recentupdate, below)
                        "direction": "desc",
                        "per_page": 100,
                        "limit": 50,
                        "page": page,
                    },
                )
                if not isinstance(data, list):
                    raise GitHubError(f"GET {path} answered {type(data).__name__}, not a list")
                for item in data:
                    if item.get("merge_commit_sha") == merge_sha and (
                        item.get("merged") or item.get("merged_at")
                    ):
                        return int(item["number"])
                link = next((str(v) for k, v in headers.items() if k.lower() == "link"), "")
                if not data or 'rel="next"' not in link:
                    return None
            return None

        return self._call(f"GET {path}?state=closed", "find the merged pull request", call)

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        """Every comment on issue/PR ``number``, following every page."""

        def call() -> list[Comment]:
            issue = self._gh.get_repo(repo).get_issue(number)
            comments = []
            for item in issue.get_comments():
                comments.append(_comment(item))
            return comments

        return self._call(f"GET /repos/{repo}/issues/{number}/comments", "list the comments", call)

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        check_length(body)

        def call() -> Comment:
            item = self._gh.get_repo(repo).get_issue(number).create_comment(body)
            return _comment(item)

        return self._call(
            f"POST /repos/{repo}/issues/{number}/comments", "create the comment", call
        )

    def update_comment(self, repo: str, number: int, comment_id: int, body: str) -> Comment:
        """Edit a comment by its API path. PyGithub's ``IssueComment.edit`` PATCHes the
        comment's ``url`` field, which Gitea's comments do not carry (it answers 400)."""
        check_length(body)
        path = f"/repos/{repo}/issues/comments/{comment_id}"

        def call() -> Comment:
            _, data = self._gh.requester.requestJsonAndCheck("PATCH", path, input={"body": body})
            return _comment_from_json(data)

        return self._call(f"PATCH {path}", "update the comment", call)

    def delete_comment(self, repo: str, comment_id: int) -> None:
        """Delete a comment; one already gone (a concurrent run deleted it) is no error."""
        path = f"/repos/{repo}/issues/comments/{comment_id}"

        def call() -> None:
            try:
                self._gh.requester.requestJsonAndCheck("DELETE", path)
            except GithubException as exc:
                if exc.status != 404:
                    raise

        self._call(f"DELETE {path}", "delete a duplicate comment", call)

    # --- issues (the drift issue, konfig.forge.issues) --------------------------------

    def list_issues(self, repo: str, *, state: str = "open") -> list[Issue]:
        """Every issue of the repository in ``state`` (all pages; pull requests, which
        the issues API lists too, left out).

        Paged by number while the answer's ``Link`` header names a next page, not by
        PyGithub's list: Gitea writes ``Link`` without a space after the comma, which
        PyGithub's parser does not split, so it stopped after the first page (30 issues
        on Gitea, which also ignores ``per_page`` for its ``limit``; both are sent)."""
        path = f"/repos/{repo}/issues"

        def call() -> list[Issue]:
            found: list[Issue] = []
            page = 1
            while True:
                headers, data = self._gh.requester.requestJsonAndCheck(
                    "GET",
                    path,
                    parameters={"state": state, "per_page": 100, "limit": 50, "page": page},
                )
                if not isinstance(data, list):
                    raise GitHubError(f"GET {path} answered {type(data).__name__}, not a list")
                for item in data:
                    if item.get("pull_request") is not None:
                        continue
                    found.append(_issue_from_json(item))
                link = next((str(v) for k, v in headers.items() if k.lower() == "link"), "")
                if not data or 'rel="next"' not in link:
                    return found
                page += 1

        return self._call(f"GET {path}", "list the issues", call)

    def create_issue(self, repo: str, title: str, body: str) -> Issue:
        check_length(body)

        def call() -> Issue:
            item = self._gh.get_repo(repo).create_issue(title=title, body=body)
            return _issue(item)

        return self._call(f"POST /repos/{repo}/issues", "create the issue", call)

    def update_issue(
        self,
        repo: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
    ) -> Issue:
        """Edit an issue's title, body or state (``open``/``closed``); None keeps it.
        By its API path, as comments are (Gitea's objects lack the ``url`` PyGithub
        would PATCH)."""
        if body is not None:
            check_length(body)
        fields = {"title": title, "body": body, "state": state}
        path = f"/repos/{repo}/issues/{number}"

        def call() -> Issue:
            _, data = self._gh.requester.requestJsonAndCheck(
                "PATCH", path, input={k: v for k, v in fields.items() if v is not None}
            )
            return _issue_from_json(data)

        return self._call(f"PATCH /repos/{repo}/issues/{number}", "update the issue", call)

    # --- reviews and commit statuses (konfig owners) ----------------------------------

    def list_reviews(self, repo: str, number: int) -> list[Review]:
        """Every review of pull request ``number``, oldest first (all pages, as
        :meth:`list_issues`). GitHub and Gitea answer the same path."""
        path = f"/repos/{repo}/pulls/{number}/reviews"

        def call() -> list[Review]:
            found: list[Review] = []
            page = 1
            while True:
                headers, data = self._gh.requester.requestJsonAndCheck(
                    "GET", path, parameters={"per_page": 100, "limit": 50, "page": page}
                )
                if not isinstance(data, list):
                    raise GitHubError(f"GET {path} answered {type(data).__name__}, not a list")
                found += [_review(item) for item in data if isinstance(item, dict)]
                link = next((str(v) for k, v in headers.items() if k.lower() == "link"), "")
                if not data or 'rel="next"' not in link:
                    return sorted(found, key=lambda r: r.id)
                page += 1

        return self._call(f"GET {path}", "read the pull request's reviews", call)

    def set_status(
        self, repo: str, sha: str, *, context: str, state: StatusState, description: str
    ) -> None:
        """Set commit status ``context`` of ``sha`` (the forge keeps the latest per
        context; a branch protection rule may require it)."""
        if state not in STATUS_STATES:
            raise ValueError(f"unknown status state {state!r}")
        path = f"/repos/{repo}/statuses/{sha}"
        body = {"state": state, "context": context, "description": description[:140]}

        def call() -> None:
            self._gh.requester.requestJsonAndCheck("POST", path, input=body)

        self._call(f"POST {path}", f"set the commit status {context}", call)

    # --- labels and permissions (konfig dangers) -------------------------------------

    def pull(self, repo: str, number: int) -> PullRequest:
        """Pull request ``number`` as the forge says now (open or not)."""
        path = f"/repos/{repo}/pulls/{number}"

        def call() -> PullRequest:
            _, data = self._gh.requester.requestJsonAndCheck("GET", path)
            if not isinstance(data, dict):
                raise GitHubError(f"GET {path} answered {type(data).__name__}, not an object")
            return _pull(data)

        return self._call(f"GET {path}", "read the pull request", call)

    def permission(self, repo: str, login: str) -> str | None:
        """``login``'s permission on the repository (admin, maintain, write, read, none;
        Gitea: owner too), or None when the token may not ask (Gitea's job token is not
        a repository admin: HTTP 403)."""
        path = f"/repos/{repo}/collaborators/{login}/permission"
        try:
            _, data = self._gh.requester.requestJsonAndCheck("GET", path)
        except GithubException as exc:
            if exc.status == 403:
                return None
            if exc.status == 404:
                return "none"
            raise self._error(exc, f"GET {path}", "read a user's permission") from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._unreachable(exc) from exc
        return str((data or {}).get("permission") or "none") if isinstance(data, dict) else "none"

    def set_labels(
        self, repo: str, number: int, names: Sequence[str], *, create: Sequence[str] = ()
    ) -> None:
        """Replace issue/PR ``number``'s labels with ``names`` (PUT, by name: GitHub and
        Gitea >= 1.21), first creating those of ``create`` the repository lacks (Gitea
        drops an unknown name; GitHub would create it plain)."""
        if create:
            existing = {x.lower() for x in self._label_names(repo)}
            for name in create:
                if name.lower() not in existing:
                    path = f"/repos/{repo}/labels"
                    body = {"name": name, "color": LABEL_COLOR, "description": LABEL_DESCRIPTION}

                    def make(path: str = path, body: dict[str, str] = body) -> None:
                        self._gh.requester.requestJsonAndCheck("POST", path, input=body)

                    self._call(f"POST {path}", f"create the label {name}", make)
        path = f"/repos/{repo}/issues/{number}/labels"

        def put() -> None:
            self._gh.requester.requestJsonAndCheck("PUT", path, input={"labels": list(names)})

        self._call(f"PUT {path}", "set the pull request's labels", put)

    def _label_names(self, repo: str) -> list[str]:
        path = f"/repos/{repo}/labels"

        def call() -> list[str]:
            found: list[str] = []
            page = 1
            while True:
                headers, data = self._gh.requester.requestJsonAndCheck(
                    "GET", path, parameters={"per_page": 100, "limit": 50, "page": page}
                )
                if not isinstance(data, list):
                    raise GitHubError(f"GET {path} answered {type(data).__name__}, not a list")
                found += [str(x.get("name") or "") for x in data if isinstance(x, dict)]
                link = next((str(v) for k, v in headers.items() if k.lower() == "link"), "")
                if not data or 'rel="next"' not in link:
                    return found
                page += 1

        return self._call(f"GET {path}", "list the repository's labels", call)

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


def _pull(item: Any) -> PullRequest:
    head, base = item.get("head") or {}, item.get("base") or {}
    head_repo = head.get("repo") or None
    return PullRequest(
        number=int(item["number"]),
        head_sha=str(head.get("sha") or ""),
        head_repo=str(head_repo["full_name"]) if head_repo else None,
        base_repo=str((base.get("repo") or {}).get("full_name") or ""),
        base_ref=str(base.get("ref") or ""),
        base_sha=str(base.get("sha") or ""),
        labels=tuple(
            str(label.get("name") or "")
            for label in item.get("labels") or ()
            if isinstance(label, dict)
        ),
        author=str((item.get("user") or {}).get("login") or ""),
        head_ref=str(head.get("ref") or ""),
    )


def _issue(item: Any) -> Issue:
    user = item.user
    return Issue(
        number=int(item.number),
        title=str(item.title or ""),
        body=str(item.body or ""),
        author=str(user.login) if user is not None else "",
        state=str(item.state or ""),
        url=str(item.html_url or ""),
    )


def _issue_from_json(data: Any) -> Issue:
    if not isinstance(data, dict):
        raise GitHubError(f"the API answered the issue edit with {type(data).__name__}")
    user = data.get("user") or {}
    return Issue(
        number=int(data["number"]),
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        author=str(user.get("login") or ""),
        state=str(data.get("state") or ""),
        url=str(data.get("html_url") or ""),
    )


def _review(item: Any) -> Review:
    user = item.get("user") or {}
    return Review(
        id=int(item.get("id") or 0),
        login=str(user.get("login") or ""),
        state=str(item.get("state") or "").upper(),
        commit=str(item.get("commit_id") or ""),
        dismissed=bool(item.get("dismissed")) or str(item.get("state")).upper() == "DISMISSED",
    )


def current_approvals(reviews: Sequence[Review]) -> list[Approval]:
    """Who approves now, and which commit: each reviewer's last decisive review (an
    approval, a request for changes, a dismissal; comments decide nothing) counts when
    it is an approval that was not dismissed."""
    last: dict[str, Review] = {}
    for review in sorted(reviews, key=lambda r: r.id):
        if review.login and (review.dismissed or review.state in _DECISIVE):
            last[review.login.lower()] = review
    return [
        Approval(r.login, r.commit)
        for r in last.values()
        if r.state == "APPROVED" and not r.dismissed
    ]


def _comment(item: Any) -> Comment:
    user = item.user
    return Comment(
        id=int(item.id),
        author=str(user.login) if user is not None else "",
        body=str(item.body or ""),
        url=str(item.html_url or ""),
    )


def _comment_from_json(data: Any) -> Comment:
    if not isinstance(data, dict):
        raise GitHubError(f"the API answered the comment edit with {type(data).__name__}")
    user = data.get("user") or {}
    return Comment(
        id=int(data["id"]),
        author=str(user.get("login") or ""),
        body=str(data.get("body") or ""),
        url=str(data.get("html_url") or ""),
    )


def check_length(body: str) -> None:
    length = chars(body)  # as GitHub counts: UTF-16 code units
    if length > COMMENT_LIMIT:
        raise KonfigError(
            f"the comment body has {length} characters (counted as GitHub does, an emoji "
            f"as two); GitHub accepts at most {COMMENT_LIMIT} (it would answer HTTP 422)",
            hint="render it with `konfig report --budget 60000`, which keeps it under the limit",
        )


# Transport failures PyGithub lets through (connection refused, DNS, timeouts).
_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (OSError, requests.RequestException)

__all__ = [
    "DEFAULT_API_URL",
    "DEFAULT_MARKER",
    "GITHUB_ACTIONS_LOGIN",
    "Comment",
    "GitHub",
    "GitHubError",
    "Issue",
    "check_length",
    "parse_repo",
]
