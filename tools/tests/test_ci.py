"""The tools' CI (``.github/workflows/tools.yml``) fits a repository like a user's: it
runs only when the tools, the actions, the workflows or ``hack/`` change, with the Go
that ``hack/`` needs, and on a runner without ``../shared`` it runs every other test
and says why it skipped the rest."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "tools.yml"
GO_VERSION = ROOT / "hack" / ".go-version"
# The Go modules hack/ builds from the Go module proxy (its scripts' pins).
PINNED = {
    "hack/tofu": ("TOFU_MODULE", "TOFU_VERSION"),
    "hack/forge": ("GITEA_MODULE", "GITEA_VERSION"),
}


def _workflow() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _triggers() -> dict[str, Any]:
    data = _workflow()
    on = data.get("on", data.get(True))  # YAML 1.1 reads the key `on` as true
    assert isinstance(on, dict)
    return on


def glob_match(pattern: str, path: str) -> bool:
    """GitHub's filter pattern: ``**`` any characters, ``*`` any but ``/``."""
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            regex += ".*"
            i += 2
        elif pattern[i] == "*":
            regex += "[^/]*"
            i += 1
        else:
            regex += re.escape(pattern[i])
            i += 1
    return re.fullmatch(regex, path) is not None


def runs_on(paths: list[str], changed: str) -> bool:
    return any(glob_match(p, changed) for p in paths)


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [f for f in out.split("\0") if f]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def _go_line(gomod: str) -> str:
    found = re.search(r"^go\s+(\S+)", gomod, re.MULTILINE)
    assert found, "a go.mod without a go line"
    return found.group(1)


def test_the_pattern_matcher_reads_globs_as_github_does() -> None:
    assert glob_match("tools/**", "tools/konfig/cli.py")
    assert glob_match("hack/**", "hack/cluster")
    assert not glob_match("hack/*", "hack/cluster.d/etcd/go.mod")
    assert glob_match("Makefile", "Makefile")
    assert not glob_match("tools/**", "appops/tools/dev/main.k")


def test_tools_ci_runs_only_when_the_tools_actions_workflows_or_hack_change() -> None:
    on = _triggers()
    pull, push = on["pull_request"]["paths"], on["push"]["paths"]
    assert pull == push
    assert on["push"]["branches"] == ["main"]
    tracked = _tracked()
    for path in tracked:
        tool = path.startswith(("tools/", "actions/", ".github/workflows/", "hack/", ".ci/"))
        tool = tool or path in ("pyproject.toml", "constraints.txt", "setup.py", "Makefile")
        assert runs_on(pull, path) == tool, path
    # a configuration-only pull request: none of its files starts the tools' CI
    config = [p for p in tracked if p.startswith(("appops/", "base/"))]
    config += ["konfig.yaml", ".sops.yaml", "kcl.mod", "docs/apply.md"]
    assert config and not any(runs_on(pull, p) for p in config)


def test_go_is_the_version_hack_needs() -> None:
    (step,) = [
        s
        for s in _workflow()["jobs"]["test"]["steps"]
        if str(s.get("uses", "")).startswith("actions/setup-go@")
    ]
    assert step["with"] == {"go-version-file": "hack/.go-version"}
    wanted = GO_VERSION.read_text(encoding="utf-8").strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", wanted), wanted
    # every go.mod under hack/ ...
    needs = {str(p.relative_to(ROOT)): _go_line(p.read_text()) for p in ROOT.glob("hack/**/go.mod")}
    # ... and the modules hack/'s scripts build from the proxy, as their go.mod says
    go = shutil.which("go")
    assert go, "Go is needed to build what hack/ builds (README, Quickstart)"
    for script, (module_name, version_name) in PINNED.items():
        text = (ROOT / script).read_text(encoding="utf-8")
        module = re.search(rf'^{module_name} = "([^"]+)"', text, re.MULTILINE)
        version = re.search(rf'^{version_name} = "([^"]+)"', text, re.MULTILINE)
        assert module and version, script
        got = subprocess.run(
            [go, "mod", "download", "-json", f"{module.group(1)}@{version.group(1)}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "GOFLAGS": "-mod=mod"},
        )
        gomod = Path(json.loads(got.stdout)["GoMod"]).read_text(encoding="utf-8")
        needs[f"{module.group(1)}@{version.group(1)}"] = _go_line(gomod)
    assert needs
    highest = max(needs.values(), key=_version)
    assert _version(wanted) == _version(highest), (wanted, needs)
    # and the README says the same
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"Go ≥ {wanted}" in readme


def test_a_runner_without_shared_runs_the_other_tests_and_says_why() -> None:
    steps = _workflow()["jobs"]["test"]["steps"]
    names = [s.get("name") for s in steps]
    probe = steps[names.index("sources beside the checkout")]
    assert "../shared/terraform" in probe["run"] and "../shared/forge" in probe["run"]
    assert "::notice title=tofu and forge tests skipped::" in probe["run"]
    full = steps[names.index("make test")]
    hosted = steps[names.index("make test-hosted (without the tofu and forge tests)")]
    assert (full["if"], full["run"]) == ("steps.shared.outputs.present == 'true'", "make test")
    assert (hosted["if"], hosted["run"]) == (
        "steps.shared.outputs.present != 'true'",
        "make test-hosted",
    )
    make = subprocess.run(
        ["make", "-n", "test-hosted"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert 'pytest -m "not tofu and not forge"' in make
    assert "hack/tofu build" not in make and "hack/forge build" not in make


@pytest.mark.parametrize("name", ["preview.yml", "preview-requested.yml", "preview-cluster.yml"])
def test_a_configuration_pull_request_runs_the_preview(name: str) -> None:
    data = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text(encoding="utf-8"))
    on = data.get("on", data.get(True))
    assert isinstance(on, dict)
    trigger = on.get("pull_request") or on.get("workflow_run")
    assert trigger is not None
    assert "paths" not in (trigger or {})
