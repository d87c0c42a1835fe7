"""``konfig reviewed`` at merge with a record out of the comment
(:func:`konfig.commands._reviewed.referenced_record`): the artifact the comment's
reference names is taken only from the privileged preview run, and only with the bytes
named. The forge's answers are scripted (Gitea's JSON for the repository, the run, its
artifacts and the archive's bytes): no forge run can be made to upload an artifact
outside a workflow; the workflows that upload it are in test_workflows_reviewed.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.github_server import artifact_zip

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fleet import Fleet, set_image

from konfig.commands._reviewed import comment_record
from konfig.errors import UsageError
from konfig.forge.client import GitHub, GitHubError
from konfig.pipeline.reviewed import (
    ARTIFACT,
    RECORD_FILE,
    find_reference,
    record_bytes,
)
from konfig.report import comment, pull_request

REPO = "acme/config"
PRIVILEGED, OWN = 31, 30  # the privileged run; the pull request's own run


class Forge:
    """Gitea's answers: the repository, two runs (the privileged preview-cluster.yml
    run on main, the pull request's own preview.yml run) and their artifacts."""

    def __init__(self, artifacts: dict[int, dict[str, bytes]]) -> None:
        self.artifacts = artifacts  # run -> artifact name -> zip
        self.runs = {
            PRIVILEGED: {"event": "workflow_run", "path": "preview-cluster.yml@refs/heads/main"},
            OWN: {"event": "pull_request", "path": "preview.yml@refs/pull/7/head"},
        }

    def get_json(self, path: str, what: str, parameters: dict[str, Any] | None = None) -> Any:
        if path == f"/repos/{REPO}":
            return {"full_name": REPO, "default_branch": "main"}
        parts = path.split("/")
        run = int(parts[6])
        if run not in self.runs:
            raise GitHubError(f"GET {path} answered 404")
        if path.endswith("/artifacts"):
            names = self.artifacts.get(run, {})
            listed = [{"id": run * 100 + i, "name": n} for i, n in enumerate(sorted(names))]
            return {"total_count": len(listed), "artifacts": listed}
        return {"id": run, "status": "completed", "head_branch": "main", **self.runs[run]}

    def download_artifact(self, repo: str, artifact_id: int, *, limit: int) -> bytes:
        run, index = divmod(artifact_id, 100)
        return self.artifacts[run][sorted(self.artifacts[run])[index]]


@pytest.fixture(scope="module")
def big() -> tuple[str, bytes]:
    """A 400-stack preview's comment (its record out of it) and the record's bytes."""
    fleet = Fleet(
        100, envs=("dev", "staging", "prod", "qa"), edits=[set_image("x:2")], reviews=True
    )
    inputs = pull_request.Inputs(previews=[fleet.preview()], changed=fleet.changed())
    report = pull_request.build(inputs, sha="a" * 40, pr=7, run_id=str(PRIVILEGED))
    body = comment.render(report).text
    assert find_reference(body) is not None
    return body, record_bytes(report.reviewed)


def read(forge: Forge, body: str, number: int = 7) -> Any:
    client: GitHub = forge  # type: ignore[assignment]  # the scripted answers
    return comment_record(client, REPO, body, where="pull request #7's comment", number=number)


def test_the_privileged_runs_artifact_with_the_named_bytes_is_the_record(
    big: tuple[str, bytes],
) -> None:
    body, data = big
    record = read(Forge({PRIVILEGED: {ARTIFACT: artifact_zip({RECORD_FILE: data})}}), body)
    assert len(record.stacks) == 400 and record.pr == 7


def test_an_artifact_of_the_pull_requests_own_run_is_refused(big: tuple[str, bytes]) -> None:
    """The pull request's run can upload a `konfig-reviewed` of its own (with the very
    bytes, even): a comment naming that run is refused."""
    body, data = big
    own = body.replace(f"run={PRIVILEGED} ", f"run={OWN} ")
    forge = Forge({OWN: {ARTIFACT: artifact_zip({RECORD_FILE: data})}})
    with pytest.raises(UsageError, match=f"run {OWN}, not a run of preview-cluster.yml"):
        read(forge, own)


def test_a_missing_or_expired_artifact_is_refused(big: tuple[str, bytes]) -> None:
    body, _ = big
    with pytest.raises(UsageError, match="is not there \\(expired or deleted\\)"):
        read(Forge({PRIVILEGED: {"report": artifact_zip({"report.md": b"x"})}}), body)
    gone = body.replace(f"run={PRIVILEGED} ", "run=99 ")
    with pytest.raises(UsageError, match="cannot read artifact konfig-reviewed of run 99"):
        read(Forge({}), gone)


def test_other_bytes_in_the_artifact_are_refused(big: tuple[str, bytes]) -> None:
    body, data = big
    other = data.replace(b'"pr":7', b'"pr":8')
    with pytest.raises(UsageError, match=r"has sha256 .*not the reviewed record"):
        read(Forge({PRIVILEGED: {ARTIFACT: artifact_zip({RECORD_FILE: other})}}), body)
    with pytest.raises(UsageError, match=r"holds no reviewed\.json"):
        read(Forge({PRIVILEGED: {ARTIFACT: artifact_zip({"other.json": data})}}), body)
    with pytest.raises(UsageError, match="is not a path inside it"):
        read(Forge({PRIVILEGED: {ARTIFACT: artifact_zip({"../reviewed.json": data})}}), body)


def test_the_record_of_another_pull_request_is_refused(big: tuple[str, bytes]) -> None:
    body, data = big
    with pytest.raises(UsageError, match="the record of pull request #7, not #8"):
        read(Forge({PRIVILEGED: {ARTIFACT: artifact_zip({RECORD_FILE: data})}}), body, number=8)
