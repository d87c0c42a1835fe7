"""The GitHub module against a real HTTP server speaking the GitHub REST subset."""

from __future__ import annotations

import pytest
import requests
from fixtures.github_server import FakeGitHub

from konfig.errors import KonfigError
from konfig.forge.client import Comment, GitHub, GitHubError
from konfig.forge.sticky import find_own_comment, upsert_comment, with_marker
from konfig.report.budget import COMMENT_LIMIT

REPO = "acme/config"
ME = "konfig-bot"
MARK = "<!-- konfig:preview -->"


def client(server: FakeGitHub, token: str = "t0k") -> GitHub:
    server.tokens.setdefault(token, ME)
    return GitHub(token, api_url=server.url, throttle=False, retries=0)


def test_with_marker_adds_the_line_once() -> None:
    body = with_marker("hello", "konfig:preview")
    assert body == f"{MARK}\nhello"
    assert with_marker(body, "konfig:preview") == body


def test_find_own_comment_needs_marker_line_and_author() -> None:
    comments = [
        Comment(1, ME, "<!-- konfig:preview-staging -->\nx", ""),
        Comment(2, "other-bot", f"{MARK}\nsame marker, other author", ""),
        Comment(3, ME, f"quoting: {MARK} inline is not a marker line", ""),
        Comment(4, ME, f"{MARK}\nmine", ""),
        Comment(5, ME.upper(), f"{MARK}\nduplicate", ""),
    ]
    found, duplicates = find_own_comment(comments, marker="konfig:preview", author=ME)
    assert found is not None and found.id == 4
    assert duplicates == (5,)


def test_lists_every_page(github_server: FakeGitHub) -> None:
    for i in range(250):
        github_server.add_comment(REPO, 7, "someone", f"comment {i}")
    with client(github_server) as gh:
        comments = gh.list_comments(REPO, 7)
    assert [c.body for c in comments] == [f"comment {i}" for i in range(250)]
    pages = [r.query.get("page", ["1"])[0] for r in github_server.requests if r.method == "GET"]
    assert pages == ["1", "2", "3"]


def test_existing_comment_on_page_three_is_updated_in_place(github_server: FakeGitHub) -> None:
    for i in range(205):
        github_server.add_comment(REPO, 7, "reviewer", f"looks good {i}")
    github_server.add_comment(REPO, 7, "other-bot", f"{MARK}\nother bot's preview")
    mine = github_server.add_comment(REPO, 7, ME, f"{MARK}\nold preview")
    with client(github_server) as gh:
        result = upsert_comment(gh, REPO, 7, "new preview")
    assert result.action == "updated"
    assert result.comment.id == mine.id
    assert mine.body == f"{MARK}\nnew preview"
    assert [c.body for c in github_server.comments_on(REPO, 7) if c.author == "other-bot"] == [
        f"{MARK}\nother bot's preview"
    ]
    writes = github_server.writes
    assert [(w.method, w.path) for w in writes] == [
        ("PATCH", f"/api/v3/repos/{REPO}/issues/comments/{mine.id}")
    ]


def test_unchanged_body_sends_no_write(github_server: FakeGitHub) -> None:
    github_server.add_comment(REPO, 7, ME, f"{MARK}\nsame\n")
    with client(github_server) as gh:
        result = upsert_comment(gh, REPO, 7, "same")
    assert result.action == "unchanged"
    assert github_server.writes == []


def test_creates_when_only_other_bots_comment(github_server: FakeGitHub) -> None:
    github_server.add_comment(REPO, 7, "other-bot", f"{MARK}\nsimilar")
    with client(github_server) as gh:
        result = upsert_comment(gh, REPO, 7, "fresh")
    assert result.action == "created"
    assert [(c.author, c.body) for c in github_server.comments_on(REPO, 7)] == [
        ("other-bot", f"{MARK}\nsimilar"),
        (ME, f"{MARK}\nfresh"),
    ]
    assert [w.method for w in github_server.writes] == ["POST"]


def test_integration_token_falls_back_to_github_actions_bot(github_server: FakeGitHub) -> None:
    github_server.tokens["ghs_integration"] = None  # GET /user: 403, like GITHUB_TOKEN
    gh = GitHub("ghs_integration", api_url=github_server.url, throttle=False, retries=0)
    github_server.add_comment(REPO, 7, "someone", f"{MARK}\nquoted by a human")
    github_server.add_comment(REPO, 7, "github-actions[bot]", f"{MARK}\nold")
    result = upsert_comment(gh, REPO, 7, "new")
    assert (result.action, result.author, result.author_source) == (
        "updated",
        "github-actions[bot]",
        "GITHUB_TOKEN fallback",
    )
    assert [c.body for c in github_server.comments_on(REPO, 7)] == [
        f"{MARK}\nquoted by a human",
        f"{MARK}\nnew",
    ]
    given = upsert_comment(gh, REPO, 7, "newer", author="github-actions[bot]")
    assert (given.action, given.author_source) == ("updated", "given")


def test_head_sha_guard_reads_the_pull_request(github_server: FakeGitHub) -> None:
    github_server.heads[(REPO, 7)] = "f" * 40
    with client(github_server) as gh:
        stale = upsert_comment(gh, REPO, 7, "x", head_sha="e" * 40)
        assert (stale.action, stale.comment, stale.head) == ("stale", None, "f" * 40)
        assert github_server.writes == []
        fresh = upsert_comment(gh, REPO, 7, "x", head_sha="f" * 40)
        assert fresh.action == "created" and fresh.head == "f" * 40


def test_too_long_is_refused_before_any_request(github_server: FakeGitHub) -> None:
    with client(github_server) as gh, pytest.raises(KonfigError, match="at most 65536"):
        upsert_comment(gh, REPO, 7, "x" * COMMENT_LIMIT)
    assert github_server.requests == []


def test_fake_server_rejects_long_bodies_like_github(github_server: FakeGitHub) -> None:
    # The guard above is what keeps konfig from ever seeing this answer.
    github_server.tokens["t0k"] = ME
    answer = requests.post(
        f"{github_server.url}/repos/{REPO}/issues/7/comments",
        json={"body": "y" * (COMMENT_LIMIT + 1)},
        headers={"Authorization": "token t0k"},
        timeout=10,
    )
    assert answer.status_code == 422
    assert "maximum is 65536" in answer.text


def test_bad_token_names_request_and_fix(github_server: FakeGitHub) -> None:
    gh = GitHub("wrong", api_url=github_server.url, throttle=False, retries=0)
    with pytest.raises(GitHubError) as info:
        upsert_comment(gh, REPO, 7, "x")
    message = str(info.value)
    assert "GET /user" in message and "HTTP 401" in message and "Bad credentials" in message
    assert "GITHUB_TOKEN" in message


def test_unreachable_api_names_the_url() -> None:
    gh = GitHub("t", api_url="http://127.0.0.1:9/api/v3", throttle=False, retries=0)
    with pytest.raises(GitHubError, match=r"cannot reach the GitHub API at http://127\.0\.0\.1:9"):
        gh.list_comments(REPO, 1)


def test_two_runs_that_both_create_converge_on_the_oldest(github_server: FakeGitHub) -> None:
    # Another run found no comment either and created its own between this run's
    # search and its create (Gitea sends a failed run's workflow_run twice).
    def other_run_creates(repo: str, number: int) -> None:
        github_server.before_create = None
        github_server.add_comment(repo, number, ME, f"{MARK}\nthe other run's preview")

    github_server.before_create = other_run_creates
    with client(github_server) as gh:
        result = upsert_comment(gh, REPO, 7, "this run's preview")
    [kept] = github_server.comments_on(REPO, 7)
    assert kept.body == f"{MARK}\nthis run's preview"
    assert result.action == "updated" and result.comment is not None
    assert result.comment.id == kept.id and len(result.duplicates) == 1
    assert result.duplicates[0] != kept.id
    assert [w.method for w in github_server.writes] == ["POST", "PATCH", "DELETE"]


def test_the_run_that_created_first_deletes_the_later_copy(github_server: FakeGitHub) -> None:
    mine = github_server.add_comment(REPO, 7, ME, f"{MARK}\nold")
    later = github_server.add_comment(REPO, 7, ME, f"{MARK}\na concurrent run's copy")
    github_server.add_comment(REPO, 7, "someone", f"{MARK}\nquoted by a human")
    with client(github_server) as gh:
        result = upsert_comment(gh, REPO, 7, "new")
        again = upsert_comment(gh, REPO, 7, "new")
    assert (result.action, result.duplicates) == ("updated", (later.id,))
    assert [(c.id, c.body) for c in github_server.comments_on(REPO, 7) if c.author == ME] == [
        (mine.id, f"{MARK}\nnew")
    ]
    assert (again.action, again.duplicates) == ("unchanged", ())
    # A duplicate another run already deleted (404) is no error.
    with client(github_server) as gh:
        gh.delete_comment(REPO, later.id)


def test_reads_are_not_spaced_writes_are(github_server: FakeGitHub) -> None:
    """Every request is made one at a time; GitHub asks for a second between writes, and
    only between writes: PyGithub's default spaced reads by 0.25 s too, a second of
    each comment and wait of the pull-request round (issue 33)."""
    import time

    github_server.tokens["t0k"] = ME
    github_server.add_comment(REPO, 7, "someone", "hello")
    with GitHub("t0k", api_url=github_server.url, retries=0) as gh:
        started = time.monotonic()
        for _ in range(5):
            gh.list_comments(REPO, 7)
        reads = time.monotonic() - started  # 5 reads: >= 1.0 s when spaced by 0.25 s
        first = gh.create_comment(REPO, 7, "one")
        started = time.monotonic()
        gh.update_comment(REPO, 7, first.id, "two")
        write = time.monotonic() - started
    assert reads < 0.75, reads
    assert write >= 0.9, write
