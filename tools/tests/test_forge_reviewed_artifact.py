"""A reviewed record out of the comment, at merge, on the real forge (docs/review.md, "A
record too long for the comment"): which run may hold it is asked of Gitea.

Two workflows of the default branch, nothing else: `pr` (the pull request's own run) and
`preview-cluster.yml`, started by `workflow_run` when `pr` completed, as the privileged
half is. Konfig's comment then names one run or the other: the pull request's own run
is refused before any artifact is looked at (it could upload a `konfig-reviewed` of its
own), and the privileged run without the artifact (expired, deleted) is refused too;
both exit 1 with a record without stacks (apply then counts every change as not the
reviewed one). The bytes and the hostile archive: commands/test_reviewed_artifact.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from fixtures.forge import Forge
from fixtures.repos import KonfigRunner
from kubeutil import unique
from test_forge_fanout import _git

from konfig.forge.runs import of_privileged_preview, run_from_json

pytestmark = [pytest.mark.forge, pytest.mark.timeout(1200)]
MARK = "<!-- konfig:preview -->"

PR = """\
name: pr
on: [pull_request]
jobs:
  verify:
    runs-on: ubuntu-latest
    steps:
      - run: echo the pull request's own run
"""

PRIVILEGED = """\
name: preview-cluster
on:
  workflow_run:
    workflows: [pr]
    types: [completed]
jobs:
  report:
    runs-on: ubuntu-latest
    steps:
      - run: echo the privileged run
"""


def test_only_the_privileged_runs_artifact_counts_at_merge_on_gitea(
    forge: Forge, konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from konfig.engine.digest import change_digest
    from konfig.engine.plan import StackPlan
    from konfig.pipeline.reviewed import Reviewed, reference_to

    work = tmp_path / "repo"
    (work / ".github/workflows").mkdir(parents=True)
    (work / ".github/workflows/pr.yml").write_text(PR)
    (work / ".github/workflows/preview-cluster.yml").write_text(PRIVILEGED)
    _git("init", "-q", "-b", "main", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "workflows", cwd=work)
    repo = forge.import_repo(unique("refrun"), work, lambda *a, cwd: _git(*a, cwd=cwd))
    forge.request(
        "POST",
        f"/repos/{repo}/contents/change.txt",
        {"content": base64.b64encode(b"x\n").decode(), "message": "c", "new_branch": "topic"},
    )
    pull = forge.request(
        "POST", f"/repos/{repo}/pulls", {"head": "topic", "base": "main", "title": "t"}
    )
    number, head = int(pull["number"]), str(pull["head"]["sha"])

    own = forge.wait_run(repo, workflow="pr.yml", head_sha=head, event="pull_request", timeout=600)

    def privileged() -> dict[str, Any] | None:
        runs = [r for r in forge.runs(repo, event="workflow_run") if r.get("status") == "completed"]
        return runs[0] if runs else None

    started = forge.wait("the workflow_run run", privileged, timeout=600, interval=2)
    # how Gitea names each run, as konfig reads it
    own_run, its_run = run_from_json(own), run_from_json(started)
    assert own_run is not None and its_run is not None
    assert of_privileged_preview(its_run, repo=repo, branch="main"), started
    assert not of_privileged_preview(own_run, repo=repo, branch="main"), own

    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    record = Reviewed(
        {
            "appops/shop/prod": change_digest(
                StackPlan("appops/shop/prod", None, False, None, None, None, ())
            )
        },
        pr=number,
    )
    body = tmp_path / "body.md"

    def reviewed_at(run_id: int) -> tuple[int, str, dict[str, Any]]:
        ref = reference_to(record, run_id)
        body.write_text(f"{MARK}\n## Konfig preview\n\n{ref.hidden()}\n", encoding="utf-8")
        posted = konfig(
            "comment", "--repo", repo, "--pr", str(number), "--body-file", str(body),
            "--api-url", forge.api_url,
        )  # fmt: skip
        assert posted.code == 0, posted.err
        out = tmp_path / "reviewed.json"
        res = konfig(
            "reviewed", "--repo", repo, "--commit", sha, "--out", str(out),
            "--api-url", forge.api_url,
        )  # fmt: skip
        return res.code, res.err, json.loads(out.read_text(encoding="utf-8"))

    forge.request("POST", f"/repos/{repo}/pulls/{number}/merge", {"Do": "merge"})
    sha = str(forge.get(f"/repos/{repo}/pulls/{number}")["merge_commit_sha"])

    code, err, written = reviewed_at(int(own["id"]))  # the pull request's own run
    assert code == 1, err
    assert f"run {own['id']}, not a run of preview-cluster.yml or preview-requested.yml" in err
    assert written["pr"] == number and written["stacks"] == {}

    code, err, written = reviewed_at(int(started["id"]))  # the privileged run, no artifact
    assert code == 1, err
    assert f"artifact konfig-reviewed of run {started['id']} is not there" in err
    assert written["pr"] == number and written["stacks"] == {}
