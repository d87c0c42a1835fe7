"""``konfig reviewed`` against Gitea's real API when Konfig's comment carries a reference
to a record out of it (docs/review.md, "A record too long for the comment"): the run it
names is asked of the forge, and a record that cannot be fetched from the privileged
preview run is refused (exit 1, a record without stacks: apply then counts every change
as not the reviewed one). The decisions on runs and bytes are in
commands/test_reviewed_artifact.py and forge/test_runs.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from fixtures.forge import Forge
from fixtures.repos import KonfigRunner
from kubeutil import unique

pytestmark = pytest.mark.forge
MARK = "<!-- konfig:preview -->"


def test_a_reference_to_a_run_the_forge_does_not_have_is_refused_at_merge_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from konfig.engine.digest import change_digest
    from konfig.engine.plan import StackPlan
    from konfig.pipeline.reviewed import Reviewed, reference_to

    name = unique("refrecord")
    forge.request(
        "POST", "/user/repos", {"name": name, "auto_init": True, "default_branch": "main"}
    )
    repo = f"{forge.admin}/{name}"
    forge.request(
        "POST",
        f"/repos/{repo}/contents/change.txt",
        {
            "content": base64.b64encode(b"a change\n").decode(),
            "message": "a change",
            "new_branch": "topic",
        },
    )
    pr = forge.request(
        "POST", f"/repos/{repo}/pulls", {"head": "topic", "base": "main", "title": "t"}
    )
    number = int(pr["number"])
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    record = Reviewed(
        {
            "appops/shop/prod": change_digest(
                StackPlan("appops/shop/prod", None, False, None, None, None, ())
            )
        },
        pr=number,
    )
    ref = reference_to(record, 987654321)  # no such run on this forge (expired, deleted)
    body = tmp_path / "body.md"
    body.write_text(f"{MARK}\n## Konfig preview\n\n{ref.hidden()}\n", encoding="utf-8")
    res = konfig(
        "comment", "--repo", repo, "--pr", str(number), "--body-file", str(body),
        "--api-url", forge.api_url,
    )  # fmt: skip
    assert res.code == 0, res.err
    forge.request("POST", f"/repos/{repo}/pulls/{number}/merge", {"Do": "merge"})
    sha = str(forge.get(f"/repos/{repo}/pulls/{number}")["merge_commit_sha"])

    out = tmp_path / "reviewed.json"
    res = konfig(
        "reviewed", "--repo", repo, "--commit", sha, "--out", str(out), "--api-url", forge.api_url
    )
    assert res.code == 1, (res.code, res.err)
    assert "cannot read artifact konfig-reviewed of run 987654321" in res.err
    assert "not the reviewed change" in res.err
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["pr"] == number and written["stacks"] == {}
    assert "cannot read artifact konfig-reviewed" in written["refused"], written  # apply says it
