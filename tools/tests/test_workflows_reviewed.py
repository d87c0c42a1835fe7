"""The workflows of the merge-applies-reviewed issue (27): preview-cluster.yml sets
``konfig/reviewed`` after every live preview and owners.yml after every preview and
review, stale.yml marks stale previews on
every push to the default branch (nothing else), and apply.yml's release (a dispatch
with a stack and a digest) and its report of a change that was not the reviewed one.
The steps' shell scripts run here with the values a runner gives."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_workflows import _jobs, _triggers

from konfig.pipeline.reviewed import ARTIFACT


def _step(workflow: str, job: str, name: str) -> dict[str, object]:
    (step,) = [s for s in _jobs(workflow)[job]["steps"] if s.get("name") == name]
    return dict(step)


def test_owners_sets_konfig_reviewed_after_previews_and_reviews() -> None:
    assert _triggers("owners.yml")["workflow_run"]["workflows"] == ["preview", "review"]
    step = _step(
        "owners.yml", "owners", "Is the head approved as previewed now? Set konfig/reviewed"
    )
    run = str(step["run"])
    assert "konfig --root config approved" in run and '--main "origin/$DEFAULT_BRANCH"' in run
    assert '--head "$HEAD_SHA"' in run and "--post" in run


@pytest.mark.parametrize(
    ("workflow", "writer", "number"),
    [
        # the requested run: its one job wrote the head's last comment (one shard of
        # work, or no stack affected)
        ("preview-requested.yml", "small", "${{ needs.small.outputs.number }}"),
        # the completed run: the fan-out's report, or a fork's offline comment
        ("preview-cluster.yml", "report", "${{ needs.pull-request.outputs.number }}"),
    ],
)
def test_the_live_preview_run_sets_konfig_reviewed_once_its_report_wrote_the_record(
    workflow: str, writer: str, number: str
) -> None:
    """owners.yml cannot run after the privileged half (its runs name the default
    branch's commit): each privileged workflow's own `reviewed` job sets the status,
    after the job that wrote the head's last comment, with owners.yml's command, the
    statuses token and the pull request as data only, never beside the preview
    credentials."""
    jobs = _jobs(workflow)
    job = jobs["reviewed"]
    # after the head's last comment, as the danger labels
    assert (job["needs"], job["if"]) == (jobs["dangers"]["needs"], jobs["dangers"]["if"])
    assert "!cancelled()" in job["if"]
    assert job["permissions"] == {
        "contents": "write",  # Gitea files statuses under Code
        "pull-requests": "read",
        "statuses": "write",
        "actions": "read",  # a record too long for the comment: the writer's artifact
    }
    assert "environment" not in job and "secrets." not in json.dumps(job)
    checkouts = [st["with"] for st in job["steps"] if "actions/checkout@" in st.get("uses", "")]
    assert checkouts == [
        {"path": ".konfig-tools", "persist-credentials": False},
        {
            "ref": "${{ github.event.workflow_run.head_sha }}",
            "path": "config",
            "fetch-depth": 0,
            "persist-credentials": False,
        },
    ]
    name = "Is the head approved as previewed now? Set konfig/reviewed"
    step = _step(workflow, "reviewed", name)
    owners = _step("owners.yml", "owners", name)
    assert step["run"] == owners["run"]  # one command, two places
    env = dict(step["env"])  # type: ignore[call-overload]
    assert env["NUMBER"] == number
    assert env["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert {k: v for k, v in env.items() if k != "NUMBER"} == {
        k: v
        for k, v in dict(owners["env"]).items()  # type: ignore[call-overload]
        if k != "NUMBER"
    }
    # the job that writes the comment (and may hold the preview credentials) sets no status
    held = jobs[writer]["permissions"]
    assert "statuses" not in held and held.get("contents") == "read", writer
    # and uploads the record when it is out of the comment, under the name the reference
    # gives, from the folder its `konfig report` wrote it to (docs/review.md)
    steps = jobs[writer]["steps"]
    (report,) = [i for i, s in enumerate(steps) if "konfig report --results" in s.get("run", "")]
    assert '--reviewed-artifact "$RUNNER_TEMP/reviewed"' in steps[report]["run"]
    assert '--run-id "$RUN_ID"' in steps[report]["run"]
    assert steps[report]["env"]["RUN_ID"] == "${{ github.run_id }}"  # this run's
    (upload,) = [i for i, s in enumerate(steps) if (s.get("with") or {}).get("name") == ARTIFACT]
    assert steps[upload]["uses"].startswith("actions/upload-artifact@")
    assert steps[upload]["with"]["path"] == "${{ runner.temp }}/reviewed"
    assert steps[upload]["with"]["if-no-files-found"] == "ignore"
    assert "retention-days" not in steps[upload]["with"]  # kept until the merge
    assert report < upload
    posts = [i for i, s in enumerate(steps) if s.get("uses") == "./.konfig-tools/actions/comment"]
    assert all(upload < i for i in posts)  # uploaded before a comment names it


@pytest.mark.parametrize(
    ("workflow", "job"),
    [
        ("apply.yml", "apply"),
        ("apply.yml", "publish"),
        ("owners.yml", "owners"),
        ("stale.yml", "stale"),
        ("merge-queue.yml", "reviewed"),
    ],
)
def test_every_reader_of_the_record_may_read_the_preview_runs_artifacts(
    workflow: str, job: str
) -> None:
    assert _jobs(workflow)[job]["permissions"]["actions"] == "read"


@pytest.mark.parametrize(
    ("job", "name"),
    [
        ("apply", "The reviewed change of the merged pull request"),
        ("publish", "The reviewed rendered folders of the merged pull request"),
    ],
)
def test_a_record_that_is_not_the_reviewed_one_blocks_and_does_not_stop_the_apply(
    tmp_path: Path, job: str, name: str
) -> None:
    """`konfig reviewed` exits 1 when the record out of the comment is not the reviewed
    one and writes a record without stacks: the step goes on (apply counts every change
    as not the reviewed one); any other failure stops it."""
    step = _step("apply.yml", job, name)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "konfig"  # stands for konfig: only its exit code matters here

    def run(code: int) -> tuple[int, str]:
        fake.write_text(f'#!/bin/sh\necho konfig "$@"\nexit {code}\n')
        fake.chmod(0o755)
        out = tmp_path / "out"
        out.write_text("")
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "GITHUB_OUTPUT": str(out)}
        env |= {"RUNNER_TEMP": str(tmp_path), "REPOSITORY": "acme/config", "COMMIT": "c" * 40}
        done = subprocess.run(
            ["bash", "-e", "-c", str(step["run"])], env=env, capture_output=True, text=True
        )
        return done.returncode, out.read_text()

    for code in (0, 1):
        got, out = run(code)
        assert got == 0 and f"file={tmp_path}/reviewed.json" in out, (code, got, out)
    for code in (2, 3):
        got, out = run(code)
        assert got == code and "file=" not in out


def test_stale_runs_on_pushes_to_main_with_the_default_branch_guard() -> None:
    assert _triggers("stale.yml") == {"push": {"branches": ["main"]}}
    (job,) = _jobs("stale.yml").values()
    (apply_guard,) = {s["run"] for s in _jobs("apply.yml")["apply"]["steps"][:1]}
    assert job["steps"][0]["name"] == "Refuse any ref but the default branch"
    assert (
        job["steps"][0]["run"].replace("stale.yml", "apply.yml").split("\n")[0]
        == (apply_guard.split("\n")[0])
    )
    run = job["steps"][-1]["run"]
    assert 'konfig stale --repo "$REPOSITORY" --before "$BEFORE" --after "$AFTER"' in run
    assert "secrets." not in json.dumps(job)


def test_a_release_dispatch_applies_one_stack_at_a_digest(tmp_path: Path) -> None:
    step = _step("apply.yml", "apply", "The stack to release, and its digest")
    assert step["if"] == "github.event_name == 'workflow_dispatch' && inputs.stack != ''"

    def run(stack: str, digest: str) -> tuple[int, str]:
        out = tmp_path / "out"
        out.write_text("")
        env = {"PATH": os.environ["PATH"], "STACK": stack, "DIGEST": digest}
        env["GITHUB_OUTPUT"] = str(out)
        done = subprocess.run(
            ["bash", "-e", "-c", str(step["run"])], env=env, capture_output=True, text=True
        )
        return done.returncode, out.read_text() + done.stdout

    digest = "ab" * 32
    code, out = run("appops/shop/prod", digest)
    assert code == 0, out
    assert 'stacks=["appops/shop/prod"]' in out and f"release=appops/shop/prod={digest}" in out
    code, out = run('x"; evil', digest)  # a name is data, quoted as JSON, not code
    assert code == 0 and 'stacks=["x\\"; evil"]' in out
    for bad in ("", "abc", digest + "0", "G" * 64):
        code, out = run("appops/shop/prod", bad)
        assert code == 1 and "64 hex digits" in out
    apply = _step_uses(_jobs("apply.yml")["apply"]["steps"], "./actions/apply")
    assert apply["with"]["release"] == "${{ steps.release.outputs.release }}"
    tell = _step("apply.yml", "apply", "Tell the merged pull request and the deploy issue")
    assert "--marker konfig:blocked" in str(tell["run"])


def _step_uses(steps: list[dict[str, object]], uses: str) -> dict[str, dict[str, str]]:
    (step,) = [s for s in steps if s.get("uses") == uses]
    return step  # type: ignore[return-value]


def test_the_merge_queue_commit_gets_the_pull_requests_status(tmp_path: Path) -> None:
    assert _triggers("merge-queue.yml") == {"merge_group": None}
    (job,) = _jobs("merge-queue.yml").values()
    first = job["steps"][0]
    out = tmp_path / "out"

    def run(ref: str) -> tuple[int, str]:
        out.write_text("")
        env = {"PATH": os.environ["PATH"], "HEAD_REF": ref, "GITHUB_OUTPUT": str(out)}
        done = subprocess.run(
            ["bash", "-e", "-c", first["run"]], env=env, capture_output=True, text=True
        )
        return done.returncode, out.read_text() + done.stdout

    assert run("refs/heads/gh-readonly-queue/main/pr-12-" + "a" * 40) == (0, "number=12\n")
    for bad in ("refs/heads/main", "gh-readonly-queue/main/pr-12-x; rm -rf /", ""):
        code, text = run(bad)
        assert code == 1 and "not a merge queue branch" in text
    last = job["steps"][-1]["run"]
    assert '--main "$BASE_SHA" --post --status-sha "$QUEUE_SHA"' in last
    # konfig asks the forge for the head (no GitHub-only client: the script runs on Gitea
    # in forge/test_reviewed_gitea.py)
    assert "--pr-head" in last and "gh " not in last
    assert "secrets." not in json.dumps(job)
