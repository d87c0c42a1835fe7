"""apply.yml's publish job hands the reviewed rendered folders to ``konfig publish``
(docs/pull.md): its ``konfig publish`` step's shell is run here as the runner runs it,
with real git against a bare repository standing in for the forge (``SERVER`` a
``file://`` URL) and the record ``konfig reviewed`` would have written (``REVIEWED``, the
output of the job's ``reviewed`` step). A merge whose rendered folder is not the
reviewed one fails the job with the reason, and nothing of that stack is pushed; the
reviewed bytes are published and pushed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import yaml
from fixtures.repos import AUTHOR, KonfigRunner, RepoBuilder

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # konfig's entry point
DEPLOYMENT = "edge/shop/prod/deployment.apps_shop-prod_shop.yaml"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **AUTHOR}, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip


def _publish_job() -> dict[str, Any]:
    workflow = yaml.safe_load((ROOT / ".github/workflows/apply.yml").read_text())
    return cast("dict[str, Any]", workflow["jobs"]["publish"])


def _step(job: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in job["steps"] if s.get("name") == name)


def _run_step(
    step: dict[str, Any], checkout: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(checkout)),
        **{k: v for k, v in AUTHOR.items() if not k.startswith("GIT_COMMITTER")},
        **env,
    }
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", step["run"]], cwd=checkout, env=base,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _set_image(root: Path, image: str) -> None:
    main = root / "appops/shop/prod/main.k"
    text = main.read_text()
    old = text.split('image = "', 1)[1].split('"', 1)[0]
    main.write_text(text.replace(f'image = "{old}"', f'image = "{image}"'))


def test_the_publish_job_passes_the_reviewed_digests_and_fails_on_other_bytes(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    job = _publish_job()
    assert job["permissions"] == {
        "contents": "write",
        "pull-requests": "read",
        "actions": "read",  # a record too long for the comment is an artifact
    }
    reviewed_step = _step(job, "The reviewed rendered folders of the merged pull request")
    assert reviewed_step["if"] == "github.event_name == 'push'"
    assert "konfig reviewed" in reviewed_step["run"] and "--out" in reviewed_step["run"]
    publish = _step(job, "konfig publish")
    assert publish["env"]["REVIEWED"] == "${{ steps.reviewed.outputs.file }}"

    # the forge: a bare repository with main and the rendered branch as published
    server = tmp_path / "forge"
    bare = server / "acme/config.git"
    bare.parent.mkdir(parents=True)
    _git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(bare))
    src = repo_builder.root
    repo_builder.stack(
        "shop", "prod",
        stack_yaml="name: prod\ndelivery:\n  mode: pull\n  target:\n    cluster: edge\n",
    )  # fmt: skip
    _git(src, "init", "-q", "--initial-branch=main")
    _git(src, "add", "-A")
    _git(src, "commit", "-q", "-m", "a pull stack")
    assert konfig("publish", cwd=src).code == 0
    _git(src, "push", "-q", str(bare), "main", "rendered")
    published = _git(bare, "rev-parse", "rendered").strip()

    # the pull request's review: the folder with nginx:1.27.4 and its digest
    _set_image(src, "nginx:1.27.4")
    _git(src, "commit", "-q", "-am", "1.27.4")
    (diff,) = json.loads(konfig("publish", "--diff", "--json", cwd=src).out)["stacks"]
    record = {"schemaVersion": 1, "kind": "KonfigReviewed", "pr": 3, "stacks": {},
              "published": {"appops/shop/prod": diff["digest"]}}  # fmt: skip
    reviewed = tmp_path / "reviewed.json"
    reviewed.write_text(json.dumps(record))

    # what is merged is not what was reviewed (another commit on top)
    _set_image(src, "nginx:1.27.9")
    _git(src, "commit", "-q", "-am", "1.27.9")
    _git(src, "push", "-q", str(bare), "main")
    checkout = tmp_path / "checkout"
    _git(tmp_path, "clone", "-q", str(bare), str(checkout))
    env = {
        "TOKEN": "t0ken", "SERVER": server.as_uri(), "REPOSITORY": "acme/config",
        "REVIEWED": str(reviewed), "RUNNER_TEMP": str(tmp_path),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }  # fmt: skip
    refused = _run_step(publish, checkout, env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"not the {diff['digest']} reviewed" in refused.stderr
    assert "not published, its folder kept as it is" in refused.stderr
    assert _git(bare, "rev-parse", "rendered").strip() == published  # nothing pushed
    assert "nginx:1.27.3" in _git(bare, "show", f"rendered:{DEPLOYMENT}")

    # the merge of the reviewed change: published and pushed
    _git(src, "revert", "--no-edit", "HEAD")
    _git(src, "push", "-q", str(bare), "main")
    _git(checkout, "pull", "-q", "--ff-only")
    done = _run_step(publish, checkout, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"the reviewed rendered folder ({diff['digest']})" in done.stderr
    assert "nginx:1.27.4" in _git(bare, "show", f"rendered:{DEPLOYMENT}")
    assert "published rendered: konfig publish" in (tmp_path / "summary.md").read_text()

    # a dispatch or the schedule (no reviewed step): published as the commit renders
    _set_image(src, "nginx:1.28.0")
    _git(src, "commit", "-q", "-am", "1.28.0")
    _git(src, "push", "-q", str(bare), "main")
    _git(checkout, "pull", "-q", "--ff-only")
    assert _run_step(publish, checkout, {**env, "REVIEWED": ""}).returncode == 0
    assert "nginx:1.28.0" in _git(bare, "show", f"rendered:{DEPLOYMENT}")
