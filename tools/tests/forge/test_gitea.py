"""``konfig comment`` against Gitea's real API (the local forge), like the fake GitHub.

Gitea serves the REST subset the client uses under ``/api/v1``: the token's identity
(``GET /user``), a pull request's head, an issue's comments, create and edit. Unlike
GitHub (30 a page by default, at most 100, ``Link`` headers), Gitea answers an issue's
comments all at once and ignores ``page``/``limit`` there; the test puts more comments
before Konfig's than one page of either forge holds (Gitea's list page size is 50), so
a client that stopped after one page would miss it. Link-header pagination itself is
tested against the fake GitHub (tools/tests/forge/test_client.py): Gitea 1.26's
handler for this list (``routers/api/v1/repo/issue_comment.go``) has no paging to follow.
Which write requests were sent is counted in Gitea's router log: an unchanged body
sends none.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from fixtures.forge import Forge
from fixtures.repos import CliResult, KonfigRunner
from kubeutil import unique

pytestmark = pytest.mark.forge
MARK = "<!-- konfig:preview -->"


def _pull_request(fg: Forge) -> tuple[str, int, str]:
    """A fresh repository with one open pull request: (repo, number, head sha)."""
    name = unique("comments")
    fg.request("POST", "/user/repos", {"name": name, "auto_init": True, "default_branch": "main"})
    repo = f"{fg.admin}/{name}"
    fg.request(
        "POST",
        f"/repos/{repo}/contents/change.txt",
        {
            "content": base64.b64encode(b"a change\n").decode(),
            "message": "a change",
            "new_branch": "topic",
        },
    )
    pr = fg.request("POST", f"/repos/{repo}/pulls", {"head": "topic", "base": "main", "title": "t"})
    return repo, int(pr["number"]), str(pr["head"]["sha"])


def _comment(
    konfig: KonfigRunner, fg: Forge, repo: str, number: int, body: Path, *extra: str
) -> CliResult:
    return konfig(
        "comment",
        "--repo",
        repo,
        "--pr",
        str(number),
        "--body-file",
        str(body),
        "--api-url",
        fg.api_url,
        *extra,
    )


def test_create_update_unchanged_and_pagination_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, number, head = _pull_request(forge)
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    comments_path = f"/repos/{repo}/issues/{number}/comments"

    # Another user writes more than a page of comments, some of them quoting Konfig's
    # marker: none of these may be taken for Konfig's comment.
    other = forge.create_user(unique("talker"))
    for i in range(55):
        text = f"{MARK}\nquoted {i}" if i % 10 == 0 else f"comment {i}"
        forge.request("POST", comments_path, {"body": text}, token=other)

    def writes() -> dict[str, int]:
        """The write requests Gitea has served on this pull request's comments."""
        return {
            "POST": forge.requests_served("POST", comments_path),
            "PATCH": forge.requests_served("PATCH", f"/repos/{repo}/issues/comments/{mine_id}"),
        }

    mine_id = 0
    before = writes()
    assert before["POST"] == 55

    body = tmp_path / "body.md"
    body.write_text("## Konfig preview\n\nfirst\n", encoding="utf-8")
    created = _comment(konfig, forge, repo, number, body)
    assert created.code == 0, created.err
    assert "comment created" in created.err
    assert f"(as {forge.admin}, from GET /user)" in created.err
    every = forge.paged(comments_path)
    assert len(every) == 56
    mine = [c for c in every if c["user"]["login"] == forge.admin]
    assert [c["body"] for c in mine] == [f"{MARK}\n## Konfig preview\n\nfirst\n"]
    assert every[-1]["id"] == mine[0]["id"]  # the 56th: beyond any first page
    mine_id = mine[0]["id"]
    assert writes() == {"POST": 56, "PATCH": 0}

    # Update in place: found after the others, edited, nothing new posted.
    body.write_text("## Konfig preview\n\nsecond\n", encoding="utf-8")
    updated = _comment(konfig, forge, repo, number, body, "--head-sha", head)
    assert updated.code == 0, updated.err
    assert "comment updated" in updated.err
    again = forge.get(f"/repos/{repo}/issues/comments/{mine[0]['id']}")
    assert again["body"] == f"{MARK}\n## Konfig preview\n\nsecond\n"
    assert len(forge.paged(comments_path)) == 56
    assert writes() == {"POST": 56, "PATCH": 1}

    # Unchanged: no write request at all (Gitea's router log counts them).
    unchanged = _comment(konfig, forge, repo, number, body)
    assert unchanged.code == 0 and "comment unchanged" in unchanged.err
    assert writes() == {"POST": 56, "PATCH": 1}
    after = forge.get(f"/repos/{repo}/issues/comments/{mine[0]['id']}")
    assert after["updated_at"] == again["updated_at"]

    # A run that a newer push overtook writes nothing.
    body.write_text("## Konfig preview\n\nstale\n", encoding="utf-8")
    stale = _comment(konfig, forge, repo, number, body, "--head-sha", "0" * 40)
    assert stale.code == 0 and "not written" in stale.err and head in stale.err
    assert forge.get(f"/repos/{repo}/issues/comments/{mine[0]['id']}")["body"].endswith("second\n")
    assert writes() == {"POST": 56, "PATCH": 1}


def test_gitea_errors_are_clear(
    forge: Forge,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = tmp_path / "body.md"
    body.write_text("x\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_TOKEN", "not-a-token")
    denied = _comment(konfig, forge, f"{forge.admin}/nothing", 1, body)
    assert denied.code == 1 and "HTTP 401" in denied.err, denied.err
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    missing = _comment(konfig, forge, f"{forge.admin}/{unique('absent')}", 1, body)
    assert missing.code == 1 and "HTTP 404" in missing.err and "--repo" in missing.err
