"""`konfig pr --own-artifact / --base-artifact`: which earlier run's artifacts the
unprivileged run takes (issue 33 item 2): its own pull request's previous run for its
compile cache, a push to the base branch at the base commit for the base-side Specs
(docs/security.md, "The compile cache across pushes"). Against the fake GitHub; the
same lookups on Gitea run in the forge e2e (tools/tests/test_forge_incremental.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixtures.github_server import FakeGitHub, artifact_zip, github_outputs
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner

REPO = "acme/config"
BASE = "0" * 40  # the fake's base commit of every pull request
WORKFLOW = ".github/workflows/preview.yml"


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The pull request's checkout (konfig runs in it): a first push, a push that changed
    its workflow (to upload forged cache entries, say), and the head, which changed it
    back. Each commit by name."""
    root = tmp_path / "checkout"
    root.mkdir()
    git_init(root)
    (root / "kcl.mod").write_text('[package]\nname = "config"\n', encoding="utf-8")
    (root / ".github" / "workflows").mkdir(parents=True)
    honest = "on: pull_request\njobs: {}\n"
    (root / WORKFLOW).write_text(honest, encoding="utf-8")
    first = git_commit(root, "first push")
    (root / WORKFLOW).write_text(honest + "# upload anything\n", encoding="utf-8")
    forged = git_commit(root, "the workflow changed")
    (root / WORKFLOW).write_text(honest, encoding="utf-8")
    (root / "README").write_text("x\n", encoding="utf-8")
    head = git_commit(root, "changed back")
    monkeypatch.chdir(root)
    return {"first": first, "forged": forged, "head": head}


@pytest.fixture
def output(github_server: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    github_server.tokens["tok"] = None
    monkeypatch.setenv("GITHUB_TOKEN", "tok")
    path = tmp_path / "github_output"
    path.write_text("", encoding="utf-8")
    monkeypatch.setenv("GITHUB_OUTPUT", str(path))
    return path


def run(
    id: int, workflow: str, event: str, branch: str, sha: str, repo: str = REPO
) -> dict[str, Any]:
    return {
        "id": id,
        "event": event,
        "path": f".github/workflows/{workflow}",
        "head_branch": branch,
        "head_sha": sha,
        "head_repository": {"full_name": repo},
    }


def test_own_and_base_runs_are_found_and_nobody_elses(
    github_server: FakeGitHub, konfig: KonfigRunner, output: Path, history: dict[str, str]
) -> None:
    head, first, forged = history["head"], history["first"], history["forged"]
    github_server.heads[(REPO, 12)] = head  # head branch `topic` of acme/config
    cache = "konfig-verify-0"
    github_server.run_list[REPO] = [
        # newest first: a fork's pull request from a branch of the same name, with the
        # artifact; the pull request's own newest run, cancelled before its upload; its
        # run of the commit whose workflow differs (its artifact may hold anything that
        # workflow put there); the one before, with it
        run(61, "preview.yml", "pull_request", "topic", head, repo="mallory/config"),
        run(60, "preview.yml", "pull_request", "topic", head),
        run(59, "preview.yml", "pull_request", "topic", forged),
        run(58, "preview.yml", "pull_request", "topic", first),
        # at the base commit: a fork's pull request whose branch is named main, with
        # the artifact; the push to main
        run(57, "apply.yml", "pull_request", "main", BASE, repo="mallory/config"),
        run(56, "apply.yml", "push", "main", BASE),
    ]
    for id, names in {
        61: [cache],
        60: [],
        59: [cache],
        58: [cache],
        57: ["konfig-base-specs"],
    }.items():
        github_server.runs[(REPO, id)] = ("completed", names)
    github_server.runs[(REPO, 56)] = ("completed", ["konfig-base-specs"])
    res = konfig(
        "pr", "--repo", REPO, "--head-sha", head, "--api-url", github_server.url,
        "--own-artifact", f"preview.yml:{cache}",
        "--base-artifact", "apply.yml:konfig-base-specs", "--github-output",
    )  # fmt: skip
    assert res.code == 0, res.err
    got = github_outputs(output)
    assert got["own-run"] == "58" and got["base-run"] == "56"
    assert "konfig-verify-0 of an earlier preview.yml run of #12: 58" in res.err
    assert f"run of {forged[:12]}: not taken, its {WORKFLOW} is not this head's" in res.err
    # the base runs were asked for by event and commit
    asked = [r.query for r in github_server.requests if r.path.endswith("/actions/runs")]
    expected = {"event": ["push"], "head_sha": [BASE], "per_page": ["50"], "limit": ["50"]}
    assert {**expected, "page": ["1"]} in asked


def test_none_found_is_empty_and_a_bad_option_is_a_usage_error(
    github_server: FakeGitHub, konfig: KonfigRunner, output: Path, history: dict[str, str]
) -> None:
    github_server.heads[(REPO, 12)] = history["head"]
    base = ["pr", "--repo", REPO, "--head-sha", history["head"], "--api-url", github_server.url]
    res = konfig(*base, "--own-artifact", "preview.yml:x", "--github-output")
    assert res.code == 0, res.err
    assert github_outputs(output)["own-run"] == ""
    for bad in ("preview.yml", ":x", ".github/workflows/preview.yml:x"):
        res = konfig(*base, "--own-artifact", bad)
        assert res.code == 2 and "WORKFLOW:NAME" in res.err


def test_the_found_runs_artifacts_are_downloaded_as_data(
    github_server: FakeGitHub,
    konfig: KonfigRunner,
    output: Path,
    tmp_path: Path,
    history: dict[str, str],
) -> None:
    """The same step that finds the earlier runs downloads their artifacts (no
    download-artifact step per artifact: a node process and the runner's fetch of that
    action each), each unpacked as data in a folder of its own; a name whose run was not
    found is not downloaded, and one with no run to come from is a usage error."""
    github_server.heads[(REPO, 12)] = history["head"]
    github_server.run_list[REPO] = [
        run(58, "preview.yml", "pull_request", "topic", history["first"]),
        run(56, "apply.yml", "push", "main", BASE),
    ]
    github_server.runs[(REPO, 58)] = ("completed", ["konfig-verify-0"])
    github_server.runs[(REPO, 56)] = ("completed", ["konfig-base-specs"])
    entry = "compile-cache/ab/" + "ab" * 32 + ".json"
    github_server.artifact_zips[(REPO, "konfig-verify-0")] = artifact_zip({entry: b"{}"})
    github_server.artifact_zips[(REPO, "konfig-base-specs")] = artifact_zip(
        {"appops/shop/dev/spec.yaml": b"resources: []\n", "../escaped": b"x"}
    )
    into = tmp_path / "earlier"
    base = ["pr", "--repo", REPO, "--head-sha", history["head"], "--api-url", github_server.url]
    res = konfig(
        *base, "--own-artifact", "preview.yml:konfig-verify-0",
        "--base-artifact", "apply.yml:konfig-base-specs",
        "--download", "konfig-verify-0", "--download", "konfig-base-specs",
        "--download-dir", str(into), "--github-output",
    )  # fmt: skip
    assert res.code == 0, res.err
    got = github_outputs(output)
    assert got["own-run"] == "58" and got["base-run"] == "56"
    # the hostile base archive is refused whole, the other unpacked
    assert got["downloaded"] == "konfig-verify-0", res.err
    assert "'../escaped' is not a path inside it" in res.err
    files = sorted(p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file())
    assert files == [f"konfig-verify-0/{entry}"]
    assert not (tmp_path / "escaped").exists()
    assert github_server.blob_auth == ["", ""]  # the archives' host never saw the token

    github_server.runs[(REPO, 58)] = ("completed", [])  # cancelled before its upload
    none = konfig(
        *base, "--own-artifact", "preview.yml:konfig-verify-0", "--download",
        "konfig-verify-0", "--download-dir", str(tmp_path / "none"), "--github-output",
    )  # fmt: skip
    assert none.code == 0, none.err
    assert not (tmp_path / "none").exists()
    lone = konfig(*base, "--download", "konfig-verify-0", "--download-dir", str(into))
    assert lone.code == 2 and "a run to download from" in lone.err, lone.err
    # --own-artifact compares workflows in the checkout: outside one, said before the forge
    # is asked anything
    asked = len(github_server.requests)
    outside = konfig(*base, "--own-artifact", "preview.yml:konfig-verify-0", cwd=tmp_path)
    assert outside.code == 2 and "not inside a Konfig repository" in outside.err, outside.err
    assert len(github_server.requests) == asked
