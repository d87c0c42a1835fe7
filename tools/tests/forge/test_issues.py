"""The one drift issue: created once, updated in place, closed when gone.

Real PyGithub against a real HTTP server speaking the GitHub REST subset
(fixtures/github_server.py); ``konfig issue`` against the real forge (Gitea) is in
test_gitea.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixtures.github_server import FakeGitHub
from fixtures.repos import KonfigRunner

from konfig.forge.client import GitHub, GitHubError
from konfig.forge.issues import find_issues, sync_issue

REPO = "acme/config"
ME = "konfig-bot"
MARK = "<!-- konfig:drift -->"
TITLE = "Konfig: the clusters drifted from main"


def client(server: FakeGitHub, token: str = "t0k") -> GitHub:
    server.tokens.setdefault(token, ME)
    return GitHub(token, api_url=server.url, throttle=False, retries=0)


def writes(server: FakeGitHub) -> list[tuple[str, str]]:
    return [(w.method, w.path.removeprefix("/api/v3")) for w in server.writes]


def test_created_once_updated_in_place_then_closed(github_server: FakeGitHub) -> None:
    with client(github_server) as gh:
        first = sync_issue(gh, REPO, title=TITLE, body="drift: 1 object", author=ME)
        assert first.action == "created" and first.issue is not None
        number = first.issue.number
        assert writes(github_server) == [("POST", f"/repos/{REPO}/issues")]

        same = sync_issue(gh, REPO, title=TITLE, body="drift: 1 object\n", author=ME)
        assert same.action == "unchanged"
        assert len(github_server.writes) == 1  # nothing sent for an unchanged body

        more = sync_issue(gh, REPO, title=TITLE, body="drift: 2 objects", author=ME)
        assert more.action == "updated" and more.issue is not None
        assert more.issue.number == number
        assert writes(github_server)[-1] == ("PATCH", f"/repos/{REPO}/issues/{number}")

        gone = sync_issue(gh, REPO, title=TITLE, body=None, author=ME)
        assert gone.action == "closed"
        again = sync_issue(gh, REPO, title=TITLE, body=None, author=ME)
        assert again.action == "none"

    (issue,) = github_server.issues_of(REPO)
    assert (issue.number, issue.state, issue.author) == (number, "closed", ME)
    assert issue.body == f"{MARK}\ndrift: 2 objects"
    closing = github_server.comments_on(REPO, number)
    assert [c.body for c in closing] == [
        f"{MARK}\nResolved: the condition this issue tracked is gone."
    ]
    # one issue in all: never a second one while the first was open
    assert sum(1 for m, p in writes(github_server) if m == "POST" and p.endswith("/issues")) == 1


def test_only_our_own_open_issue_is_touched(github_server: FakeGitHub) -> None:
    # a person's issue quoting the marker, another bot's issue with it, a pull request
    # with it, and our own closed issue from an earlier drift: all left alone
    human = github_server.add_issue(REPO, "alice", "about drift", f"see {MARK} above")
    other = github_server.add_issue(REPO, "other-bot", TITLE, f"{MARK}\ntheirs")
    pull = github_server.add_issue(REPO, ME, "a PR", f"{MARK}\npr", pull_request=True)
    old = github_server.add_issue(REPO, ME, TITLE, f"{MARK}\nold", state="closed")
    for i in range(120):  # our issue is on the second page
        github_server.add_issue(REPO, "someone", f"issue {i}", "text")
    mine = github_server.add_issue(REPO, ME, TITLE, f"{MARK}\nbefore")
    with client(github_server) as gh:
        result = sync_issue(gh, REPO, title=TITLE, body="after", author=ME)
    assert result.action == "updated" and result.issue is not None
    assert result.issue.number == mine.number
    assert (human.body, other.body, pull.body, old.body, old.state) == (
        f"see {MARK} above",
        f"{MARK}\ntheirs",
        f"{MARK}\npr",
        f"{MARK}\nold",
        "closed",
    )
    assert mine.body == f"{MARK}\nafter"
    pages = [r.query.get("page", ["1"])[0] for r in github_server.requests if r.method == "GET"]
    assert pages == ["1", "2"]


def test_duplicates_are_closed_and_the_oldest_kept(github_server: FakeGitHub) -> None:
    first = github_server.add_issue(REPO, ME, TITLE, f"{MARK}\nrun 1")
    second = github_server.add_issue(REPO, ME, TITLE, f"{MARK}\nrun 2")
    with client(github_server) as gh:
        result = sync_issue(gh, REPO, title=TITLE, body="run 3", author=ME)
    assert result.action == "updated" and result.closed_duplicates == (second.number,)
    assert (first.state, first.body) == ("open", f"{MARK}\nrun 3")
    assert second.state == "closed"
    assert [c.body for c in github_server.comments_on(REPO, second.number)] == [
        f"{MARK}\nDuplicate of #{first.number}."
    ]


def test_find_issues_needs_marker_line_author_and_open() -> None:
    from konfig.forge.client import Issue

    issues = [
        Issue(1, TITLE, f"{MARK}\nx", ME, "closed"),
        Issue(2, TITLE, f"{MARK}x", ME, "open"),
        Issue(3, TITLE, f"{MARK}\nx", "someone", "open"),
        Issue(5, TITLE, f"{MARK}\nx", ME.upper(), "open"),
        Issue(4, TITLE, f"text\n{MARK}\n", ME, "open"),
    ]
    assert [i.number for i in find_issues(issues, marker="konfig:drift", author=ME)] == [4, 5]


def test_a_bad_token_names_the_request(github_server: FakeGitHub) -> None:
    gh = GitHub("wrong", api_url=github_server.url, throttle=False, retries=0)
    with pytest.raises(GitHubError) as info:
        sync_issue(gh, REPO, title=TITLE, body="x", author=ME)
    assert "GET /repos/acme/config/issues" in str(info.value) and "HTTP 401" in str(info.value)
    assert github_server.writes == []


def test_cli_opens_updates_and_closes(
    github_server: FakeGitHub, konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    github_server.tokens["ghs_job"] = None  # a job token: GET /user answers 403
    monkeypatch.setenv("KONFIG_TEST_TOKEN", "ghs_job")
    body = tmp_path / "drift.md"
    body.write_text("## Konfig: drift in 1 stack\n")
    common = ["--repo", REPO, "--api-url", github_server.url, "--token-env", "KONFIG_TEST_TOKEN"]

    # The token may not ask who it is: it writes as github-actions[bot] (GITHUB_TOKEN),
    # so the next run finds the issue by that author, as the PR comment is found.
    opened = konfig("issue", *common, "--body-file", str(body))
    assert opened.code == 0, opened.err
    assert "issue created" in opened.err
    assert "(as github-actions[bot], from GITHUB_TOKEN fallback)" in opened.err
    body.write_text("## Konfig: drift in 2 stacks\n")
    updated = konfig("issue", *common, "--body-file", str(body))
    assert updated.code == 0 and "issue updated" in updated.err
    closed = konfig("issue", *common, "--resolved", "--comment", "No drift any more.")
    assert closed.code == 0 and "issue closed" in closed.err
    (issue,) = github_server.issues_of(REPO)
    assert (issue.state, issue.author) == ("closed", "github-actions[bot]")
    assert issue.body.endswith("drift in 2 stacks\n")

    # A GitHub App token names its login: issues of github-actions[bot] are not its own.
    author = ["--author", "konfig-app[bot]"]
    app = konfig("issue", *common, *author, "--body-file", str(body))
    assert app.code == 0 and "(as konfig-app[bot], from given)" in app.err
    assert len(github_server.issues_of(REPO)) == 2

    both = konfig("issue", *common, *author, "--resolved", "--body-file", str(body))
    assert both.code == 2 and "--body-file" in both.err
    assert os.environ.get("KONFIG_TEST_TOKEN") == "ghs_job"
