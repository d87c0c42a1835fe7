import json
from pathlib import Path

import yaml
from fixtures.repos import KonfigRunner, RepoBuilder

BROKEN_MAIN = (
    "import base.pkg.models.frontend\n\napp = frontend.Server {\n"
    '    name = "broken"\n    image = "nginx:1"\n    replicas = "two"\n}\n'
)


def _three_stacks(repo: RepoBuilder) -> None:
    repo.stack("alpha", "dev")
    repo.stack("broken", "dev", main=BROKEN_MAIN)
    repo.stack("gamma", "dev")


def test_broken_stack_does_not_stop_others(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    _three_stacks(repo_builder)
    out = tmp_path / "out"
    result = konfig("compile", "--all", "-j", "2", "--out", str(out), cwd=repo_builder.root)
    assert result.code == 1
    assert "appops/broken/dev/main.k:6:5" in result.err
    assert "expected int, got str(two)" in result.err
    assert (out / "appops/alpha/dev/spec.yaml").is_file()
    assert (out / "appops/gamma/dev/spec.yaml").is_file()
    assert not (out / "appops/broken/dev").exists()
    assert "compiled 2/3 stacks" in result.err


def test_json_summary(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    _three_stacks(repo_builder)
    result = konfig("compile", "--all", "--json", "-j", "1", cwd=repo_builder.root)
    assert result.code == 1
    summary = json.loads(result.out)
    assert [s["path"] for s in summary] == [
        "appops/alpha/dev",
        "appops/broken/dev",
        "appops/gamma/dev",
    ]
    assert [s["ok"] for s in summary] == [True, False, True]
    assert summary[0]["resources"] == 3 and summary[0]["error"] is None
    error = summary[1]["error"]
    assert (error["file"], error["line"], error["column"]) == ("appops/broken/dev/main.k", 6, 5)


def test_single_stack_to_stdout(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    repo_builder.stack("alpha", "dev")
    result = konfig("compile", "alpha/dev", cwd=repo_builder.root)
    assert result.code == 0
    spec = yaml.safe_load(result.out)
    assert [r["id"] for r in spec["resources"]] == [
        "apps/v1:Deployment:alpha-dev:alpha",
        "v1:Namespace:alpha-dev",
        "v1:Service:alpha-dev:alpha",
    ]


def test_output_is_byte_identical_across_runs(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    repo_builder.stack("alpha", "dev")
    repo_builder.stack("gamma", "prod")
    first, second = tmp_path / "1", tmp_path / "2"
    assert konfig("compile", "--all", "-o", str(first), cwd=repo_builder.root).code == 0
    assert konfig("compile", "--all", "-j", "2", "-o", str(second), cwd=repo_builder.root).code == 0
    files = sorted(p.relative_to(first) for p in first.rglob("spec.yaml"))
    assert len(files) == 2
    for rel in files:
        assert (first / rel).read_bytes() == (second / rel).read_bytes()


def test_usage_errors_exit_2(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    repo_builder.stack("alpha", "dev")
    assert konfig("compile", cwd=repo_builder.root).code == 2
    unknown = konfig("compile", "alpha/nope", cwd=repo_builder.root)
    assert unknown.code == 2 and "unknown stack 'alpha/nope'" in unknown.err
    assert konfig("compile", "--all", "alpha/dev", cwd=repo_builder.root).code == 2
    assert konfig("compile", "--bogus", cwd=repo_builder.root).code == 2


DUPLICATE_MAIN = """\
import base.pkg.models.frontend

a = frontend.Manifests {manifests = [{apiVersion = "v1", kind = "ConfigMap", metadata = {name = "same", namespace = "n"}, data = {k = "1"}}]}
b = frontend.Manifests {manifests = [{apiVersion = "v1", kind = "ConfigMap", metadata = {name = "same", namespace = "n"}, data = {k = "2"}}]}
"""  # noqa: E501


def test_a_duplicate_resource_id_is_refused_at_both_places(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    repo_builder.stack("dup", "dev", main=DUPLICATE_MAIN)
    repo_builder.stack("alpha", "dev")
    root = repo_builder.root
    for args in (("compile", "dup/dev"), ("compile", "--all", "-j", "1")):
        result = konfig(*args, cwd=root)
        assert result.code == 1, args
        assert "appops/dup/dev/main.k:3: 2 resources have the id 'v1:ConfigMap:n:same'" in (
            result.err
        )
        assert "appops/dup/dev/main.k:4: also named here" in result.err
        assert "[spec/duplicate-id]" in result.err
    checked = konfig("check", "dup/dev", cwd=root)
    assert checked.code == 1
    assert "appops/dup/dev/main.k:3: error:" in checked.out
    assert "[spec/duplicate-id]" in checked.out
