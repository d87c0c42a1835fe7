"""`konfig pr --wait-run`: the privileged half, started when the unprivileged run is
requested, waits for that run's artifacts (docs/security.md, "The first comment: who
may post what")."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fixtures.github_server import FakeGitHub, artifact_zip, github_outputs
from fixtures.repos import KonfigRunner

REPO = "acme/config"
HEAD = "a" * 40


def args(server: FakeGitHub, *extra: str) -> list[str]:
    return ["pr", "--repo", REPO, "--head-sha", HEAD, "--api-url", server.url, *extra]


@pytest.fixture
def output(github_server: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    github_server.tokens["tok"] = "gitea-actions"
    monkeypatch.setenv("GITHUB_TOKEN", "tok")
    path = tmp_path / "github_output"
    path.write_text("", encoding="utf-8")
    monkeypatch.setenv("GITHUB_OUTPUT", str(path))
    return path


def test_waits_until_the_run_has_uploaded_the_artifact(
    github_server: FakeGitHub, konfig: KonfigRunner, output: Path
) -> None:
    github_server.heads[(REPO, 12)] = HEAD
    github_server.runs[(REPO, 7)] = ("in_progress", [])
    done = threading.Event()

    def upload_after_the_first_poll() -> None:
        # the run uploads only once konfig has seen it without the artifact
        while not done.is_set():
            if any(r.path.endswith("/runs/7/artifacts") for r in github_server.requests):
                github_server.runs[(REPO, 7)] = ("in_progress", ["konfig-offline"])
                return
            done.wait(0.05)

    uploader = threading.Thread(target=upload_after_the_first_poll)
    uploader.start()
    try:
        res = konfig(
            *args(github_server, "--wait-run", "7", "--wait-artifact", "konfig-offline"),
            "--github-output",
        )
    finally:
        done.set()
        uploader.join()
    assert res.code == 0, res.err
    found = github_outputs(output)
    assert found["found"] == "true" and found["number"] == "12"
    assert found["waited"] == "ready"
    # the run still working: the first comment is this job's to post
    assert found["run-ended"] == "false"
    assert "run 7 uploaded konfig-offline" in res.err
    polls = [r for r in github_server.requests if r.path.endswith("/actions/runs/7/artifacts")]
    assert len(polls) >= 2  # it did wait


def test_a_run_that_ended_without_the_artifact_ends_the_wait(
    github_server: FakeGitHub, konfig: KonfigRunner, output: Path
) -> None:
    github_server.heads[(REPO, 12)] = HEAD
    github_server.runs[(REPO, 7)] = ("completed", ["konfig-verify-0"])
    res = konfig(
        *args(
            github_server,
            "--wait-run",
            "7",
            "--wait-artifact",
            "konfig-specs-0",
            "--wait-artifact",
            "konfig-verify-0",
        ),
        "--github-output",
    )
    assert res.code == 0, res.err
    assert github_outputs(output)["waited"] == "ended"
    assert github_outputs(output)["run-ended"] == "true"
    assert "run 7 ended without konfig-specs-0" in res.err


def test_artifacts_found_after_the_run_completed_say_it_ended(
    github_server: FakeGitHub, konfig: KonfigRunner, output: Path
) -> None:
    """Every artifact there, but the run has completed too (the wait looked late): the
    completed run's own workflow (preview-cluster.yml) writes the comment then, and the
    requested one must know it to leave that comment alone."""
    github_server.heads[(REPO, 12)] = HEAD
    github_server.runs[(REPO, 7)] = ("completed", ["konfig-offline-0", "konfig-offline-3"])
    res = konfig(
        *args(
            github_server,
            "--wait-run",
            "7",
            "--wait-artifact",
            "konfig-offline-0",
            "--wait-artifact",
            "konfig-offline-3",
        ),
        "--github-output",
    )
    assert res.code == 0, res.err
    found = github_outputs(output)
    assert (found["waited"], found["run-ended"]) == ("ready", "true")


def test_a_run_that_never_uploads_times_out(
    github_server: FakeGitHub, konfig: KonfigRunner, output: Path
) -> None:
    github_server.heads[(REPO, 12)] = HEAD
    github_server.runs[(REPO, 7)] = ("waiting", [])  # e.g. a fork's, not approved yet
    res = konfig(
        *args(github_server, "--wait-run", "7", "--wait-artifact", "konfig-offline"),
        "--wait-timeout",
        "0.6",
        "--github-output",
    )
    assert res.code == 0, res.err
    assert github_outputs(output)["waited"] == "timeout"
    assert github_outputs(output)["run-ended"] == "false"
    assert "run 7 is still waiting after" in res.err


def test_no_pull_request_at_the_head_waits_for_nothing(
    github_server: FakeGitHub, konfig: KonfigRunner, output: Path
) -> None:
    github_server.heads[(REPO, 12)] = "b" * 40  # pushed to since
    github_server.runs[(REPO, 7)] = ("in_progress", [])
    res = konfig(
        *args(github_server, "--wait-run", "7", "--wait-artifact", "konfig-offline"),
        "--github-output",
    )
    assert res.code == 1, res.err
    assert github_outputs(output) == {"found": "false"}
    assert not [r for r in github_server.requests if "/actions/runs/" in r.path]


def test_wait_run_needs_an_artifact(github_server: FakeGitHub, konfig: KonfigRunner) -> None:
    res = konfig(*args(github_server, "--wait-run", "7"))
    assert res.code == 2
    assert "--wait-run and --wait-artifact go together" in res.err


def test_downloads_the_artifacts_once_ready_without_sending_the_token_elsewhere(
    github_server: FakeGitHub, konfig: KonfigRunner, output: Path, tmp_path: Path
) -> None:
    """The wait step downloads what it waited for (no download-artifact step, a node
    process and the runner's fetch of that action): each artifact unpacked in a folder of
    its own; the archive comes through a redirect to another host, which never gets the
    token."""
    github_server.heads[(REPO, 12)] = HEAD
    github_server.runs[(REPO, 7)] = ("in_progress", ["konfig-specs-0", "konfig-verify-0"])
    github_server.artifact_zips[(REPO, "konfig-specs-0")] = artifact_zip(
        {"appops/shop/dev/spec.yaml": b"resources: []\n"}
    )
    github_server.artifact_zips[(REPO, "konfig-verify-0")] = artifact_zip(
        {"compile.json": b"{}", "test.json": b"{}", "junit.xml": b"<testsuites/>"}
    )
    into = tmp_path / "shard"
    res = konfig(
        *args(github_server, "--wait-run", "7", "--wait-artifact", "konfig-verify-0"),
        "--download", "konfig-specs-0", "--download", "konfig-verify-0",
        "--download", "konfig-preview-0", "--download-dir", str(into), "--github-output",
    )  # fmt: skip
    assert res.code == 0, res.err
    found = github_outputs(output)
    assert found["waited"] == "ready"
    assert found["downloaded"] == "konfig-specs-0 konfig-verify-0"
    files = sorted(p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file())
    assert files == [
        "konfig-specs-0/appops/shop/dev/spec.yaml",
        "konfig-verify-0/compile.json",
        "konfig-verify-0/junit.xml",
        "konfig-verify-0/test.json",
    ]
    assert "run 7 has no artifact konfig-preview-0" in res.err
    assert github_server.blob_auth == ["", ""]  # the archive's host never saw the token


def test_a_hostile_archive_is_refused(
    github_server: FakeGitHub, konfig: KonfigRunner, output: Path, tmp_path: Path
) -> None:
    github_server.heads[(REPO, 12)] = HEAD
    github_server.runs[(REPO, 7)] = ("completed", ["konfig-offline"])
    github_server.artifact_zips[(REPO, "konfig-offline")] = artifact_zip(
        {"offline-preview.json": b"{}", "../../escaped": b"x"}
    )
    into = tmp_path / "offline"
    res = konfig(
        *args(github_server, "--wait-run", "7", "--wait-artifact", "konfig-offline"),
        "--download", "konfig-offline", "--download-dir", str(into), "--github-output",
    )  # fmt: skip
    # refused, nothing of it kept, the wait's answer still given (the comment then says
    # the offline preview is missing)
    assert res.code == 0 and "'../../escaped' is not a path inside it" in res.err, res.err
    assert not (tmp_path / "escaped").exists() and not (into.parent.parent / "escaped").exists()
    assert not (into / "konfig-offline").exists()
    found = github_outputs(output)
    assert found["found"] == "true" and found["waited"] == "ready" and found["downloaded"] == ""
    lone = konfig(*args(github_server, "--download", "konfig-offline"))
    assert lone.code == 2 and "--download goes with --download-dir" in lone.err
