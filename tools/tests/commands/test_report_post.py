"""``konfig report --post``: render and post Konfig's comment in one process."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.github_server import FakeGitHub
from fixtures.repos import KonfigRunner

REPO = "acme/config"
MARK = "<!-- konfig:preview -->"
HEAD = "b" * 40


def report(server: FakeGitHub, out: Path, *extra: str, sha: str = HEAD) -> list[str]:
    return [
        "report",
        "--expect",
        "changed,preview",
        "--sha",
        sha,
        "--pr",
        "12",
        "--out",
        str(out),
        "--post",
        "--repo",
        REPO,
        "--api-url",
        server.url,
        *extra,
    ]


def test_post_writes_the_rendered_body_while_sha_is_the_head(
    github_server: FakeGitHub,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    github_server.tokens["tok"] = "konfig-bot"
    monkeypatch.setenv("GITHUB_TOKEN", "tok")
    github_server.heads[(REPO, 12)] = HEAD
    out = tmp_path / "comment.md"
    first = konfig(*report(github_server, out))
    assert first.code == 0, first.err
    assert "comment created" in first.err
    rendered = out.read_text(encoding="utf-8")
    assert "missing" in rendered  # no results given: the report says so
    [stored] = github_server.comments_on(REPO, 12)
    assert stored.body.startswith(MARK) and rendered.strip() in stored.body
    # the same body again: nothing written; another head's report: not written
    writes = len(github_server.writes)
    again = konfig(*report(github_server, out))
    assert again.code == 0 and "comment unchanged" in again.err
    stale = konfig(*report(github_server, tmp_path / "stale.md", sha="a" * 40))
    assert stale.code == 0 and "not written" in stale.err, stale.err
    assert len(github_server.writes) == writes
    # what `konfig comment` would post from the file is what --post posted
    github_server.heads[(REPO, 12)] = HEAD
    same = konfig(
        "comment", "--repo", REPO, "--pr", "12", "--body-file", str(out),
        "--api-url", github_server.url, "--head-sha", HEAD,
    )  # fmt: skip
    assert same.code == 0 and "comment unchanged" in same.err, same.err


def test_post_options_go_together(
    github_server: FakeGitHub, konfig: KonfigRunner, tmp_path: Path
) -> None:
    out = tmp_path / "comment.md"
    base = ["report", "--expect", "changed", "--sha", HEAD, "--out", str(out)]
    no_repo = konfig(*base, "--pr", "12", "--post")
    assert no_repo.code == 2 and "--post needs --repo and --pr" in no_repo.err
    no_pr = konfig(*base, "--post", "--repo", REPO)
    assert no_pr.code == 2 and "--post needs --repo and --pr" in no_pr.err
    alone = konfig(*base, "--repo", REPO)
    assert alone.code == 2 and "go with --post" in alone.err
    as_json = konfig(*base, "--pr", "12", "--post", "--repo", REPO, "--json")
    assert as_json.code == 2 and "not with --json" in as_json.err
    assert github_server.requests == [] and not out.exists()
