from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.github_server import FakeGitHub
from fixtures.repos import KonfigRunner

REPO = "acme/config"
MARK = "<!-- konfig:preview -->"


@pytest.fixture
def body(tmp_path: Path) -> Path:
    path = tmp_path / "body.md"
    path.write_text("## Konfig preview\n\nno changes\n", encoding="utf-8")
    return path


def args(server: FakeGitHub, body: Path, *extra: str) -> list[str]:
    base = ["comment", "--repo", REPO, "--pr", "12", "--body-file", str(body)]
    return [*base, "--api-url", server.url, *extra]


def test_create_then_update_then_unchanged(
    github_server: FakeGitHub,
    konfig: KonfigRunner,
    body: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    github_server.tokens["tok"] = "konfig-bot"
    monkeypatch.setenv("GITHUB_TOKEN", "tok")
    first = konfig(*args(github_server, body))
    assert first.code == 0, first.err
    assert "comment created" in first.err
    [stored] = github_server.comments_on(REPO, 12)
    assert stored.body == f"{MARK}\n## Konfig preview\n\nno changes\n"

    body.write_text("## Konfig preview\n\n1 to create\n", encoding="utf-8")
    second = konfig(*args(github_server, body))
    assert second.code == 0 and "comment updated" in second.err
    assert [c.body for c in github_server.comments_on(REPO, 12)] == [
        f"{MARK}\n## Konfig preview\n\n1 to create\n"
    ]

    writes_before = len(github_server.writes)
    third = konfig(*args(github_server, body))
    assert third.code == 0 and "comment unchanged" in third.err
    assert len(github_server.writes) == writes_before


def test_actions_token_without_get_user_falls_back_to_github_actions_bot(
    github_server: FakeGitHub,
    konfig: KonfigRunner,
    body: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    github_server.tokens["ghs_x"] = None  # GET /user answers 403, like GITHUB_TOKEN
    monkeypatch.setenv("BOT_TOKEN", "ghs_x")
    github_server.add_comment(REPO, 12, "other-bot", f"{MARK}\nnot ours")
    ours = github_server.add_comment(REPO, 12, "github-actions[bot]", f"{MARK}\nold")
    ok = konfig(*args(github_server, body, "--token-env", "BOT_TOKEN"))
    assert ok.code == 0, ok.err
    assert "comment updated" in ok.err and "GITHUB_TOKEN fallback" in ok.err
    assert ours.body.endswith("no changes\n")
    assert github_server.comments_on(REPO, 12)[0].body == f"{MARK}\nnot ours"


def test_head_sha_keeps_a_stale_run_from_writing(
    github_server: FakeGitHub,
    konfig: KonfigRunner,
    body: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    github_server.tokens["tok"] = "konfig-bot"
    monkeypatch.setenv("GITHUB_TOKEN", "tok")
    github_server.heads[(REPO, 12)] = "b" * 40
    stale = konfig(*args(github_server, body, "--head-sha", "a" * 40))
    assert stale.code == 0, stale.err
    assert "not written" in stale.err and "b" * 40 in stale.err
    assert github_server.writes == [] and github_server.comments_on(REPO, 12) == []
    current = konfig(*args(github_server, body, "--head-sha", "b" * 40))
    assert current.code == 0 and "comment created" in current.err
    gone = konfig(*args(github_server, body), "--pr", "13", "--head-sha", "c" * 40)
    assert gone.code == 1 and "/pulls/13" in gone.err


def test_missing_token_is_usage_error(
    github_server: FakeGitHub, konfig: KonfigRunner, body: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    result = konfig(*args(github_server, body))
    assert result.code == 2
    assert "no GitHub token in $GITHUB_TOKEN" in result.err
    assert github_server.requests == []


def test_too_long_body_never_reaches_github(
    github_server: FakeGitHub,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    github_server.tokens["tok"] = "konfig-bot"
    monkeypatch.setenv("GITHUB_TOKEN", "tok")
    big = tmp_path / "big.md"
    big.write_text("x" * 70_000, encoding="utf-8")
    result = konfig(*args(github_server, big))
    assert result.code == 1
    assert "70024 characters" in result.err and "konfig report" in result.err
    assert github_server.requests == []


def test_bad_repo_and_missing_file(
    github_server: FakeGitHub, konfig: KonfigRunner, tmp_path: Path
) -> None:
    bad = konfig("comment", "--repo", "nope", "--pr", "1", "--body-file", str(tmp_path / "x"))
    assert bad.code == 2 and "OWNER/NAME" in bad.err
    missing = konfig(
        "comment", "--repo", REPO, "--pr", "1", "--body-file", str(tmp_path / "absent.md")
    )
    assert missing.code == 2 and "no such file" in missing.err


def test_an_emoji_body_is_counted_as_github_counts_it(
    github_server: FakeGitHub,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """40,000 emoji are 40,000 code points but 80,000 UTF-16 units: GitHub refuses them."""
    github_server.tokens["tok"] = "konfig-bot"
    monkeypatch.setenv("GITHUB_TOKEN", "tok")
    big = tmp_path / "emoji.md"
    big.write_text("\U0001f600" * 40_000, encoding="utf-8")
    result = konfig(*args(github_server, big))
    assert result.code == 1
    assert "80024 characters" in result.err and "an emoji as two" in result.err
    assert github_server.requests == []
