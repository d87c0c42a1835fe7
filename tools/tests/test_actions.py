"""The composite actions' shell steps, run for real.

A small runner executes each ``run:`` step of an ``action.yml`` the way the GitHub
runner does (``bash -e -o pipefail``, ``env:`` evaluated, ``$GITHUB_OUTPUT`` and
``$GITHUB_STEP_SUMMARY`` files, step outputs feeding later steps and the action's
outputs). ``uses:`` steps (setup-python, upload-artifact) are GitHub's own and are
skipped. The expressions the actions use are a small subset: context lookups
(``inputs.x``, ``steps.id.outputs.y``, ``github.x``, ``runner.temp``), ``||``, and
``!= ''`` comparisons; anything else fails the test loudly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.github_server import FakeGitHub
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import AUTHOR, RepoBuilder
from kubeutil import unique

ROOT = Path(__file__).resolve().parents[2]
ACTIONS = ROOT / "actions"
BIN = Path(sys.executable).parent

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class ActionRun:
    code: int
    outputs: dict[str, str]
    summary: str
    log: str
    # bytes each step wrote to $GITHUB_OUTPUT, by step index
    output_bytes: dict[int, int] = field(default_factory=dict)
    # the largest value a step's `env:` took from the inputs and outputs (bytes)
    largest_env: int = 0


def _lookup(path: str, context: Mapping[str, Any]) -> Any:
    value: Any = context
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return ""
        value = value[part]
    return value


def _evaluate(expr: str, context: Mapping[str, Any]) -> Any:
    expr = expr.strip()
    if "||" in expr:
        for part in expr.split("||"):
            value = _evaluate(part, context)
            if value not in ("", None, False):
                return value
        return ""
    if match := re.fullmatch(r"(.+?)\s*!=\s*''", expr):
        return _evaluate(match[1], context) != ""
    if match := re.fullmatch(r"'([^']*)'", expr):
        return match[1]
    if not re.fullmatch(r"[A-Za-z_][\w.-]*", expr):
        raise AssertionError(f"expression not supported by this test runner: {expr!r}")
    return _lookup(expr, context)


def _interpolate(text: str, context: Mapping[str, Any]) -> str:
    return _EXPR.sub(lambda m: str(_evaluate(m[1], context)), text)


def _read_outputs(path: Path) -> dict[str, str]:
    outputs: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body: list[str] = []
            i += 1
            while lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            outputs[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
        i += 1
    return outputs


def run_action(
    name: str,
    inputs: Mapping[str, str],
    tmp_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    github: Mapping[str, Any] | None = None,
) -> ActionRun:
    meta = yaml.safe_load((ACTIONS / name / "action.yml").read_text(encoding="utf-8"))
    work = tmp_path / f"runner-{name}"
    temp = work / "temp"
    temp.mkdir(parents=True, exist_ok=True)
    summary = work / "summary.md"
    context: dict[str, Any] = {
        "github": {
            "server_url": "https://github.example",
            "repository": "acme/config",
            "run_id": "7",
            "sha": "",
            "token": "",
            "api_url": "https://api.github.example",
            **(github or {}),
        },
        "runner": {"temp": str(temp)},
        "steps": {},
    }
    resolved: dict[str, str] = {}
    for key, spec in (meta.get("inputs") or {}).items():
        if key in inputs:
            resolved[key] = inputs[key]
        else:
            assert not spec.get("required"), f"{name}: required input {key} not given"
            resolved[key] = str(_interpolate(str(spec.get("default", "")), context))
    context["inputs"] = resolved
    log: list[str] = []
    code = 0
    output_bytes: dict[int, int] = {}
    largest_env = 0
    for index, step in enumerate(meta["runs"]["steps"]):
        if "uses" in step:
            continue
        if "if" in step and not _evaluate(
            str(step["if"]).removeprefix("${{").removesuffix("}}"), context
        ):
            continue
        output_file = work / f"output-{index}"
        output_file.touch()
        step_env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "GITHUB_OUTPUT": str(output_file),
            "GITHUB_STEP_SUMMARY": str(summary),
            "RUNNER_TEMP": str(temp),
            **(env or {}),
        }
        for key, value in (step.get("env") or {}).items():
            step_env[key] = _interpolate(str(value), context)
            largest_env = max(largest_env, len(step_env[key].encode()))
        assert "${{" not in step["run"], f"{name}: expression in run:"
        cwd = _interpolate(str(step.get("working-directory", ".")), context)
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step["run"]],
            cwd=cwd,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        log.append(proc.stdout + proc.stderr)
        output_bytes[index] = output_file.stat().st_size
        if "id" in step:
            context["steps"][step["id"]] = {"outputs": _read_outputs(output_file)}
        if proc.returncode != 0:
            code = proc.returncode
            break
    outputs = {
        key: str(_interpolate(str(spec["value"]), context))
        for key, spec in (meta.get("outputs") or {}).items()
    }
    text = summary.read_text(encoding="utf-8") if summary.exists() else ""
    return ActionRun(code, outputs, text, "".join(log), output_bytes, largest_env)


BROKEN = 'import base.pkg.models.frontend\n\napp: frontend.Server {\n    replicas = "two"\n}\n'


@pytest.fixture
def config_repo(repo_builder: RepoBuilder) -> tuple[RepoBuilder, str]:
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack("alpha", "dev")
    repo_builder.stack("beta", "dev")
    git_init(repo_builder.root)
    base = git_commit(repo_builder.root, "base")
    return repo_builder, base


def test_changed_stacks_outputs_json(config_repo: tuple[RepoBuilder, str], tmp_path: Path) -> None:
    repo, base = config_repo
    repo.write("appops/alpha/dev/extra.yaml", "x: 1\n")
    repo.stack("my app", "dev")
    head = git_commit(repo.root, "change")
    result = run_action(
        "changed-stacks",
        {"config-path": str(repo.root), "base": base, "head": head, "shards": "3"},
        tmp_path,
    )
    assert result.code == 0, result.log
    stacks = json.loads(Path(result.outputs["stacks-file"]).read_text())
    assert stacks == ["appops/alpha/dev", "appops/my app/dev"]
    assert json.loads(Path(result.outputs["deleted-stacks-file"]).read_text()) == []
    assert result.outputs["stack-count"] == "2" and result.outputs["deleted-count"] == "0"
    assert result.outputs["has-changes"] == "true"
    # Two stacks, the default sharding (ten a shard): one shard of the three has work.
    # The output: each shard's counts; the lists in the shards file.
    assert json.loads(result.outputs["shards"]) == [
        {"index": 0, "stacks": 2, "deleted": 0},
        {"index": 1, "stacks": 0, "deleted": 0},
        {"index": 2, "stacks": 0, "deleted": 0},
    ]
    shards = json.loads(Path(result.outputs["shards-file"]).read_text())
    assert [json.loads(c["stacks"]) for c in shards] == [
        ["appops/alpha/dev", "appops/my app/dev"],
        [],
        [],
    ]
    assert [json.loads(c["deleted"]) for c in shards] == [[], [], []]
    assert result.outputs["used-shards"] == "1"
    changed_file = json.loads(result.outputs["changed-file"])
    assert json.loads(Path(changed_file).read_text())["stacks"][0]["path"] == "appops/alpha/dev"


def test_compile_test_check_reports_and_fails(
    config_repo: tuple[RepoBuilder, str], tmp_path: Path
) -> None:
    repo, _ = config_repo
    repo.stack("broken", "dev", main=BROKEN)
    stacks = json.dumps(["appops/alpha/dev", "appops/broken/dev"])
    inputs = {"config-path": str(repo.root), "stacks": stacks}
    failing = run_action("compile-test-check", inputs, tmp_path)
    assert failing.code == 1
    assert failing.outputs["ok"] == "false"
    results = Path(json.loads(failing.outputs["results-dir"]))
    compiled = json.loads((results / "compile.json").read_text())
    assert [c["ok"] for c in compiled] == [True, False]
    assert {p.name for p in results.iterdir()} >= {"compile.json", "test.json", "check.json"}
    lenient = run_action(
        "compile-test-check", {**inputs, "fail-on-findings": "false"}, tmp_path / "again"
    )
    assert lenient.code == 0 and lenient.outputs["ok"] == "false"
    empty = run_action("compile-test-check", {**inputs, "stacks": "[]"}, tmp_path / "none")
    assert empty.code == 0 and empty.outputs["ok"] == "true"


# What Linux lets one argument or environment variable hold (MAX_ARG_STRLEN).
ONE_VARIABLE = 128 * 1024


@pytest.mark.slow  # 10,000 stacks written and committed: about 1 min of CPU
def test_ten_thousand_stacks_travel_as_files_never_in_an_output_input_or_argument_list(
    tmp_path: Path,
) -> None:
    """A base-model change affecting 10,000 stacks (a repository of hack/gen_monorepo.py),
    through the real changed-stacks and apply actions' steps and the real konfig: the
    change set, the stacks to apply and the deleted stacks travel as files; no output but
    the shard matrix (each stack once, split over the shards) grows with the stacks, no
    step gets an environment variable of more than a few hundred bytes, and konfig apply
    gets the 10,000 stacks through --stacks-file (it selects every one of them, then
    stops at the kubeconfig, which has none of their clusters). Before: `stacks` (about
    220 KB here) in $GITHUB_OUTPUT, and the apply step's STACKS variable and konfig's
    argument list held every path: more than Linux lets one variable hold (the runner
    could not start the step) and than GitHub keeps of a job's outputs at 50,000."""
    from fixtures.monorepo import load_generator

    gen = load_generator()
    made = gen.generate(tmp_path / "repo", projects=3000, stacks_per_project=3.3334, seed=42)
    root = made.root
    assert made.stacks == 10_000
    base = _git(root, "rev-parse", "HEAD")
    model = root / "base/pkg/models/frontend/container.k"
    old = 'cpuLimit = "250m", memoryLimit = "256Mi"}'
    assert old in model.read_text(encoding="utf-8")
    model.write_text(
        model.read_text(encoding="utf-8").replace(old, 'cpuLimit = "500m", memoryLimit = "512Mi"}'),
        encoding="utf-8",
    )
    _git(root, "commit", "-qam", "frontend: larger small limits")
    head = _git(root, "rev-parse", "HEAD")

    changed = run_action(
        "changed-stacks",
        {"config-path": str(root), "base": base, "head": head, "shards": "8"},
        tmp_path / "changed",
    )
    assert changed.code == 0, changed.log
    assert changed.outputs["stack-count"] == "10000", changed.outputs
    listed = json.loads(Path(changed.outputs["stacks-file"]).read_text(encoding="utf-8"))
    assert len(listed) == 10_000 and listed[0].startswith("appops/p")
    the_old_output = len(json.dumps(listed))
    assert the_old_output > ONE_VARIABLE  # what `stacks` was, in one output
    [konfig_step, matrix_step] = sorted(changed.output_bytes)
    assert changed.output_bytes[konfig_step] < 1024, changed.output_bytes  # counts only
    # the shard matrix: each shard's counts only (it held every stack, about 0.96 MB in
    # UTF-16 against GitHub's 1 MB of outputs a job); the lists in the shards file
    assert changed.output_bytes[matrix_step] < 1024, changed.output_bytes
    sizes = json.loads(changed.outputs["shards"])
    assert [s["index"] for s in sizes] == list(range(8))
    assert sum(s["stacks"] for s in sizes) == 10_000
    whole = json.loads(Path(changed.outputs["shards-file"]).read_text(encoding="utf-8"))
    assert [len(json.loads(s["stacks"])) for s in whole] == [s["stacks"] for s in sizes]
    assert changed.largest_env < 1024

    # preview.yml's verify shards: each computes its own stacks from the same commits
    # (its step run as the runner would, konfig on PATH), and together they are the
    # change set, each stack once, each shard's count the one of the output
    [job_step] = [
        s for s in _workflow_jobs("preview.yml")["verify"]["steps"] if s.get("id") == "stacks"
    ]
    picked: list[str] = []
    for shard in sizes:
        out = tmp_path / f"shard-{shard['index']}.out"
        out.write_text("")
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "HOME": str(tmp_path),
            "GITHUB_OUTPUT": str(out),
            "RUNNER_TEMP": str(tmp_path / f"runner-{shard['index']}"),
            "BASE_SHA": base,
            "HEAD_SHA": head,
            "SHARD": str(shard["index"]),
            "SHARDS": job_step["env"]["SHARDS"],
            "COUNT": str(shard["stacks"]),
        }
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", job_step["run"]],
            cwd=root, env=env, capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        [line] = [x for x in out.read_text().splitlines() if x.startswith("stacks=")]
        mine = json.loads(line.removeprefix("stacks="))
        assert mine == json.loads(whole[shard["index"]]["stacks"])
        assert len(line) < ONE_VARIABLE  # one shard's list: one step output, one input
        picked += mine
    assert sorted(picked) == sorted(listed)

    # apply.yml: the pending stacks as files, to the apply action, to konfig apply
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: elsewhere, context: {cluster: c, user: u}}]\n",
        encoding="utf-8",
    )
    applied = run_action(
        "apply",
        {
            "config-path": str(root),
            "stacks-file": changed.outputs["stacks-file"],
            "deleted-stacks-file": changed.outputs["deleted-stacks-file"],
            "kubeconfig": str(kubeconfig),
            "commit": head,
        },
        tmp_path / "apply",
    )
    assert applied.largest_env < 1024
    # konfig apply ran with the 10,000 stacks of the file: it refuses them all at the
    # kubeconfig (no context `admin`), before compiling or writing anything, naming five
    # of them and how many more (not 10,000 paths in one line)
    assert applied.code != 0
    refused = [line for line in applied.log.splitlines() if "has no context 'admin'" in line]
    assert len(refused) == 1, applied.log[-3000:]
    assert refused[0].startswith("error: appops/p0000/dev, appops/p0000/prod, ")
    assert " and 9,995 more: kubeconfig " in refused[0] and len(refused[0]) < 1024, refused


def _workflow_jobs(name: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text(encoding="utf-8"))
    return dict(data["jobs"])


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, **AUTHOR, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


LEAKY_MAIN = """\
import base.pkg.models.frontend
import file

leak: frontend.Manifests {
    manifests = [{
        apiVersion = "v1"
        kind = "ConfigMap"
        metadata = {name = "leak", namespace = "leak"}
        data = {
            key = file.read_env("SOPS_AGE_KEY") or "unset"
            env = file.read_env("KONFIG_PREVIEW_TERRAFORM_ENV") or "unset"
            home = file.read_env("HOME") or "unset"
        }
    }]
}
"""


def test_compile_test_check_gives_the_stacks_kcl_a_scrubbed_environment(
    config_repo: tuple[RepoBuilder, str], tmp_path: Path
) -> None:
    """Issue 26: the job that runs a pull request's KCL holds no secret, and konfig runs
    there with nothing of the job's environment: a canary set in the step's environment
    reaches neither the Spec nor any result. The Specs land under specs/ for the
    privileged preview (`konfig preview --specs`)."""
    repo, _ = config_repo
    repo.stack("leaky", "dev", main=LEAKY_MAIN)
    canary = "AGE-SECRET-KEY-1" + "CANARY" * 8
    tf_canary = '{"PGPASSWORD": "tf-canary-4711"}'
    run = run_action(
        "compile-test-check",
        {
            "config-path": str(repo.root),
            "stacks": json.dumps(["appops/leaky/dev"]),
            "fail-on-findings": "false",
        },
        tmp_path,
        env={"SOPS_AGE_KEY": canary, "KONFIG_PREVIEW_TERRAFORM_ENV": tf_canary},
    )
    assert run.code == 0, run.log
    results = Path(json.loads(run.outputs["results-dir"]))
    specs = Path(json.loads(run.outputs["specs-dir"]))
    assert specs == results / "specs"
    spec = (specs / "appops/leaky/dev/spec.yaml").read_text()
    assert "key: unset" in spec and "env: unset" in spec, spec
    assert str(Path.home()) not in spec  # an empty HOME of its own
    every = "".join(p.read_text(errors="replace") for p in results.rglob("*") if p.is_file())
    assert canary not in every and "tf-canary-4711" not in every
    assert canary not in run.log


def test_comment_action_upserts(github_server: FakeGitHub, tmp_path: Path) -> None:
    github_server.tokens["ghs_actions"] = None  # like GITHUB_TOKEN: no GET /user
    body = tmp_path / "report.md"
    body.write_text("## Konfig preview\n", encoding="utf-8")
    inputs = {
        "body-file": str(body),
        "pr-number": "5",
        "repository": "acme/config",
        "token": "ghs_actions",
        "api-url": github_server.url,
    }
    first = run_action("comment", inputs, tmp_path)
    assert first.code == 0, first.log
    [stored] = github_server.comments_on("acme/config", 5)
    assert stored.author == "github-actions[bot]"
    assert stored.body == "<!-- konfig:preview -->\n## Konfig preview\n"
    again = run_action("comment", inputs, tmp_path / "again")
    assert again.code == 0 and "comment unchanged" in again.log
    assert [w.method for w in github_server.writes] == ["POST"]
    assert "ghs_actions" not in first.log + again.log


@pytest.mark.cluster
def test_preview_apply_and_since_applied_on_the_cluster(
    config_repo: tuple[RepoBuilder, str], tmp_path: Path, cluster: Cluster
) -> None:
    repo, _ = config_repo
    project = unique("p8act")
    repo.stack(project, "dev", stack_yaml="name: dev\nkubernetes:\n  context: admin\n")
    head = git_commit(repo.root, f"add {project}")
    stack = f"appops/{project}/dev"
    kubeconfig = str(cluster.kubeconfig)
    common = {"config-path": str(repo.root), "kubeconfig": kubeconfig}

    preview = run_action(
        "preview", {**common, "stacks": json.dumps([stack]), "artifact-name": ""}, tmp_path
    )
    assert preview.code == 0, preview.log
    assert preview.outputs["has-changes"] == "true"
    doc = json.loads(Path(json.loads(preview.outputs["preview-file"])).read_text())
    assert doc["kind"] == "KonfigPreview" and doc["counts"]["create"] == 3

    listed = tmp_path / "stacks.json"  # as apply.yml passes the pending stacks: a file
    listed.write_text(json.dumps([stack]), encoding="utf-8")
    applied = run_action(
        "apply",
        {**common, "stacks-file": str(listed), "commit": head, "timeout": "60"},
        tmp_path / "apply",
    )
    assert applied.code == 0, applied.log
    assert applied.outputs["ok"] == "true"
    assert applied.summary.startswith(f"## Konfig apply of `{head[:12]}`: ✅ applied")
    assert f"| `{stack}` | apply | ✅ ok | 3 |" in applied.summary

    pending = run_action(
        "changed-stacks", {**common, "since-applied": "true", "head": head}, tmp_path / "pending"
    )
    assert pending.code == 0, pending.log
    assert stack not in json.loads(Path(pending.outputs["stacks-file"]).read_text())
