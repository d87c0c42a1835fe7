"""The compile cache in the pull-request workflows (issue 33 item 2): the base side of
every offline preview has a compile cache of its own, outside the checkout, so no entry
a pull request wrote (its commits, its earlier runs' artifacts) stands for a base Spec
(docs/security.md, "The compile cache across pushes")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _steps() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for name, job in (doc.get("jobs") or {}).items():
            for step in job.get("steps") or []:
                found.append((path.name, name, step))
    return found


def test_every_offline_preview_compiles_its_base_side_with_a_cache_outside_the_checkout() -> None:
    offline = [(w, j, s) for w, j, s in _steps() if "konfig preview --offline" in s.get("run", "")]
    assert offline, "no workflow runs konfig preview --offline"
    for workflow, job, step in offline:
        where = f"{workflow} job {job}"
        given = re.findall(r'--base-cache "([^"]+)"', step["run"])
        assert len(given) == 1, f"{where}: the offline preview has no --base-cache"
        assert given[0].startswith("$RUNNER_TEMP/"), f"{where}: --base-cache {given[0]}"


def _jobs(workflow: str) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / workflow).read_text(encoding="utf-8"))
    return dict(doc["jobs"])


def test_the_pull_requests_own_cache_restores_its_own_side_only() -> None:
    """Each job that compiles a pull request's stacks restores the compile cache its
    previous run uploaded (`konfig pr --own-artifact`: the newest run of preview.yml for
    this pull request) into the checkout's .cache/konfig/compile, which the offline
    preview's base side never reads (--base-cache), and uploads its own for the next
    push. The base-side Specs come only from a push run of apply.yml at the base
    commit (`--base-artifact`), never from the pull request's run."""
    jobs = [job for job in _jobs("preview.yml").values() if "steps" in job]
    restoring = [
        job for job in jobs if any("--own-artifact" in s.get("run", "") for s in job["steps"])
    ]
    compiling = [
        job
        for job in jobs
        if any(s.get("uses", "").endswith("/compile-test-check") for s in job["steps"])
    ]
    assert compiling and all(any(job is r for r in restoring) for job in compiling)
    for job in restoring:
        steps = job["steps"]
        [ask] = [s for s in steps if "--own-artifact" in s.get("run", "")]
        script = ask["run"]
        own = re.search(
            r'--own-artifact "?preview\.yml:(konfig-verify-[^" ]+)"? --download "?([^" ]+)', script
        )
        assert own and own[1] == own[2], script  # downloads what it found, from that run
        assert "--base-artifact apply.yml:konfig-base-specs --download konfig-base-specs" in script
        assert '--download-dir "$RUNNER_TEMP/earlier"' in script
        assert ask.get("continue-on-error") is True  # a cache only costs compiles
        # konfig unpacks the archives as data: no download-artifact step reads them
        assert not [s for s in steps if "download-artifact" in s.get("uses", "")]
        # the base-side Specs go where only the base side reads them, the pull request's
        # own entries (by their file names only) into the checkout's cache
        assert 'mv "$RUNNER_TEMP/earlier/konfig-base-specs" "$RUNNER_TEMP/base-specs"' in script
        assert f'cache="$RUNNER_TEMP/earlier/{own[1]}/compile-cache"' in script
        assert ".cache/konfig/compile" in script and "[0-9a-f]{64}" in script
        restore = ask
        own_name = own[1].replace("$SHARD", "${{ matrix.shard }}")
        # The cache rides in the results' artifact (konfig-verify-<shard>, compile-cache/):
        # no artifact of its own, so a run of 8 shards stays at 24 artifacts, under the 30
        # Gitea lists to actions/download-artifact (which reads one page).
        at = steps.index(restore)
        [copy] = [s for s in steps[at + 1 :] if "compile-cache" in s.get("run", "")]
        uploads = [s for s in steps if "upload-artifact" in s.get("uses", "")]
        [up] = [s for s in uploads if s["with"]["name"] == own_name]
        assert steps.index(copy) < steps.index(up)
        folder = copy["run"].split('"')[1].rsplit("/", 1)[0]  # $RUNNER_TEMP/<results>
        assert (
            f"{folder}/compile-cache".replace("$RUNNER_TEMP", "${{ runner.temp }}")
            in up["with"]["path"]
        )
        assert not [s for s in uploads if "cache" in s["with"]["name"]]
        assert set(job["permissions"].values()) == {"read"}


def test_the_default_branch_uploads_its_base_side_specs_on_gitea() -> None:
    steps = _jobs("apply.yml")["base-specs"]["steps"]
    [upload] = [s for s in steps if "upload-artifact" in s.get("uses", "")]
    assert upload["with"]["name"] == "konfig-base-specs"
    assert upload["if"] == "steps.forge.outputs.scoped == 'false'"
    [compile_] = [s for s in steps if "konfig compile --all" in s.get("run", "")]
    assert "if" not in compile_  # both forges compile; GitHub saves a cache, Gitea uploads
    assert _jobs("apply.yml")["base-specs"]["if"] == "github.event_name == 'push'"
