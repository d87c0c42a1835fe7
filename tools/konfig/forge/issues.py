"""One issue kept in step with a condition (the drift issue), on top of the forge client.

While the condition holds there is exactly one open issue for it: created once,
updated in place when the body changes, left alone when it does not. When the
condition is gone the issue gets a closing comment and is closed. The issue is
found like the PR comment: a hidden marker line in its body AND its author (the
token's own identity), among the open issues of the repository (all pages; pull
requests, which the issues API lists too, are skipped). Several open issues with
the marker (made by hand, or by a race of two runs) are all kept in step: the
oldest is the one updated, the others are closed as duplicates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from konfig.forge.client import Issue
from konfig.forge.sticky import marker_comment, with_marker

DRIFT_MARKER = "konfig:drift"


class IssueApi(Protocol):
    """The part of :class:`konfig.forge.client.GitHub` this module needs."""

    def identity(self) -> str | None: ...

    def list_issues(self, repo: str, *, state: str = "open") -> list[Issue]: ...

    def create_issue(self, repo: str, title: str, body: str) -> Issue: ...

    def update_issue(
        self, repo: str, number: int, *, title: str | None = None, body: str | None = None,
        state: str | None = None,
    ) -> Issue: ...  # fmt: skip

    def create_comment(self, repo: str, number: int, body: str) -> object: ...


IssueAction = Literal["created", "updated", "unchanged", "closed", "none"]


@dataclass(frozen=True)
class IssueResult:
    action: IssueAction
    issue: Issue | None
    closed_duplicates: tuple[int, ...] = ()


def _has_marker(body: str, marker: str) -> bool:
    line = marker_comment(marker)
    return any(candidate.strip() == line for candidate in body.splitlines())


def find_issues(issues: Sequence[Issue], *, marker: str, author: str) -> list[Issue]:
    """Open issues by ``author`` carrying ``marker``, oldest first."""
    mine = [
        i
        for i in issues
        if i.author.lower() == author.lower() and _has_marker(i.body, marker) and i.state == "open"
    ]
    return sorted(mine, key=lambda i: i.number)


def _normalise(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def sync_issue(
    client: IssueApi,
    repo: str,
    *,
    title: str,
    body: str | None,
    marker: str = DRIFT_MARKER,
    author: str,
    resolved_comment: str = "Resolved: the condition this issue tracked is gone.",
) -> IssueResult:
    """Open/update the one issue while ``body`` is given; close it when ``body`` is None."""
    found = find_issues(client.list_issues(repo, state="open"), marker=marker, author=author)
    if body is None:
        if not found:
            return IssueResult("none", None)
        closed: list[int] = []
        last: Issue | None = None
        for issue in found:
            client.create_comment(repo, issue.number, with_marker(resolved_comment, marker))
            last = client.update_issue(repo, issue.number, state="closed")
            closed.append(issue.number)
        return IssueResult("closed", last, tuple(closed[1:]))
    full = with_marker(body, marker)
    duplicates: list[int] = []
    for extra in found[1:]:
        client.create_comment(
            repo, extra.number, with_marker(f"Duplicate of #{found[0].number}.", marker)
        )
        client.update_issue(repo, extra.number, state="closed")
        duplicates.append(extra.number)
    if not found:
        return IssueResult("created", client.create_issue(repo, title, full))
    current = found[0]
    if _normalise(current.body) == _normalise(full) and current.title == title:
        return IssueResult("unchanged", current, tuple(duplicates))
    updated = client.update_issue(repo, current.number, title=title, body=full)
    return IssueResult("updated", updated, tuple(duplicates))
