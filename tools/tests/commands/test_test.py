from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fixtures.rawstacks import app_resources, raw_stack
from fixtures.repos import KonfigRunner, RepoBuilder

GOLDEN = "ci-test/stdout.golden.yaml"


def _two_stacks(repo_builder: RepoBuilder) -> tuple[str, str]:
    dev = raw_stack(repo_builder, "shop", "dev", app_resources("web", "shop-dev"))
    prod = raw_stack(repo_builder, "shop", "prod", app_resources("web", "shop-prod", replicas=2))
    return dev, prod


def _unit_package(repo_builder: RepoBuilder, where: str) -> None:
    repo_builder.write(f"{where}/double.k", "double = lambda x: int -> int { x * 2 }\n")
    repo_builder.write(
        f"{where}/double_test.k",
        "test_double = lambda {\n    assert double(2) == 4\n}\n\n"
        'test_wrong = lambda {\n    assert double(2) == 5, "double(2) should be 5"\n}\n',
    )


def test_missing_golden_fails_with_update_hint_and_writes_nothing(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    dev, _ = _two_stacks(repo_builder)
    result = konfig("test", "--no-unit", cwd=repo_builder.root)
    assert result.code == 1
    assert f"FAIL {dev}: no golden file {dev}/{GOLDEN}" in result.out
    assert f"konfig test --update {dev}" in result.out
    assert not list(repo_builder.root.glob("appops/*/*/ci-test/*.golden.yaml"))


def test_update_then_pass_then_mismatch_with_diff(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    dev, prod = _two_stacks(repo_builder)
    root = repo_builder.root
    created = konfig("test", "--update", "--no-unit", cwd=root)
    assert created.code == 0, created.out + created.err
    assert f"created {dev}/{GOLDEN}" in created.out
    assert f"created {prod}/{GOLDEN}" in created.out

    passed = konfig("test", "--no-unit", cwd=root)
    assert passed.code == 0, passed.out
    assert f"ok   {dev}" in passed.out

    # the golden says 3 replicas; the stack compiles to 2
    golden = root / prod / GOLDEN
    golden.write_text(golden.read_text().replace("replicas: 2", "replicas: 3"))
    before = golden.read_text()
    failed = konfig("test", "shop/prod", "--no-unit", cwd=root)
    assert failed.code == 1
    assert "--- golden: apps/v1:Deployment:shop-prod:web" in failed.out
    assert "-    replicas: 3" in failed.out
    assert "+    replicas: 2" in failed.out
    assert dev not in failed.out  # only the named stack ran
    assert golden.read_text() == before

    updated = konfig("test", "--update", "--no-unit", cwd=root)
    assert updated.code == 0
    assert f"updated {prod}/{GOLDEN} (apps/v1:Deployment:shop-prod:web)" in updated.out
    assert f"unchanged {dev}/{GOLDEN}" in updated.out
    assert konfig("test", "--no-unit", cwd=root).code == 0


def test_unit_tests_report_each_case_and_write_junit(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    dev, _ = _two_stacks(repo_builder)
    _unit_package(repo_builder, "appops/shop/base/lib")
    root = repo_builder.root
    assert konfig("test", "--update", "--no-unit", cwd=root).code == 0
    report = tmp_path / "out" / "junit.xml"
    result = konfig("test", "shop/dev", "--junit", str(report), cwd=root)
    assert result.code == 1
    assert (
        "FAIL appops/shop/base/lib::test_wrong: appops/shop/base/lib/double_test.k:6: "
        "EvaluationError: double(2) should be 5" in result.out
    )
    assert "KCL unit tests: 1/2 passed" in result.err

    suites = ET.fromstring(report.read_text())
    assert suites.get("tests") == "3"
    assert suites.get("failures") == "1"
    cases = {(c.get("classname"), c.get("name")): c for c in suites.iter("testcase")}
    assert set(cases) == {
        ("golden", dev),
        ("appops/shop/base/lib", "test_double"),
        ("appops/shop/base/lib", "test_wrong"),
    }
    wrong = cases[("appops/shop/base/lib", "test_wrong")]
    failure = wrong.find("failure")
    assert failure is not None
    assert failure.get("message") == "EvaluationError: double(2) should be 5"
    assert wrong.get("file") == "appops/shop/base/lib/double_test.k"
    assert cases[("appops/shop/base/lib", "test_double")].find("failure") is None


def test_json_output(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    dev, prod = _two_stacks(repo_builder)
    root = repo_builder.root
    konfig("test", "--update", "--no-unit", cwd=root)
    (root / dev / GOLDEN).unlink()
    result = konfig("test", "--json", "--no-unit", cwd=root)
    assert result.code == 1
    data = json.loads(result.out)
    assert data["ok"] is False
    assert [(s["path"], s["status"]) for s in data["stacks"]] == [
        (dev, "missing"),
        (prod, "passed"),
    ]


def test_compile_error_fails_with_location(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    dev, _ = _two_stacks(repo_builder)
    repo_builder.write(f"{dev}/main.k", "resources = [\n    undefined_thing\n]\n")
    result = konfig("test", "shop/dev", "--no-unit", cwd=repo_builder.root)
    assert result.code == 1
    assert f"FAIL {dev}: compile failed" in result.out
    assert f"{dev}/main.k:2:5" in result.out


def test_files_mode_picks_the_affected_stacks(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    dev, prod = _two_stacks(repo_builder)
    root = repo_builder.root
    konfig("test", "--update", "--no-unit", cwd=root)
    result = konfig("test", "--files", "--no-unit", f"{prod}/main.k", "README.md", cwd=root)
    assert result.code == 0
    assert f"ok   {prod}" in result.out
    assert dev not in result.out
    # a project-level file affects every stack of the project
    both = konfig("test", "--files", "--no-unit", "appops/shop/project.yaml", cwd=root)
    assert f"ok   {dev}" in both.out and f"ok   {prod}" in both.out
    # nothing affected: nothing to do
    none = konfig("test", "--files", "--no-unit", "README.md", cwd=root)
    assert none.code == 0
    assert none.out == ""


def test_stacks_and_all_together_is_a_usage_error(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _two_stacks(repo_builder)
    assert konfig("test", "--all", "shop/dev", cwd=repo_builder.root).code == 2


def test_unit_test_scope_follows_the_selection(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _, prod = _two_stacks(repo_builder)
    _unit_package(repo_builder, f"{prod}/lib")
    root = repo_builder.root
    konfig("test", "--update", "--no-unit", cwd=root)
    # the failing package lives in prod: testing dev alone does not run it
    assert konfig("test", "shop/dev", cwd=root).code == 0
    assert konfig("test", "--files", "README.md", cwd=root).code == 0
    in_prod = konfig("test", "--files", f"{prod}/lib/double.k", cwd=root)
    assert in_prod.code == 1
    assert f"FAIL {prod}/lib::test_wrong" in in_prod.out


def test_unit_package_that_does_not_compile_is_one_failure_with_location(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _, prod = _two_stacks(repo_builder)
    root = repo_builder.root
    konfig("test", "--update", "--no-unit", cwd=root)
    repo_builder.write(f"{prod}/lib/broken_test.k", "test_x = lambda {\n    assert nope == 1\n}\n")
    result = konfig("test", "shop/prod", "--json", cwd=root)
    assert result.code == 1
    units = json.loads(result.out)["unitTests"]
    assert [(u["name"], u["passed"], u["file"], u["line"]) for u in units] == [
        ("<compile>", False, f"{prod}/lib/broken_test.k", 2)
    ]
    assert "name 'nope' is not defined" in units[0]["message"]


def test_github_actions_gets_annotations_for_failures(
    repo_builder: RepoBuilder, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev, prod = _two_stacks(repo_builder)
    _unit_package(repo_builder, f"{prod}/lib")
    root = repo_builder.root
    konfig("test", "--update", "--no-unit", cwd=root)
    golden = root / dev / GOLDEN
    golden.write_text(golden.read_text().replace("replicas: 1", "replicas: 4"))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = konfig("test", cwd=root)
    assert result.code == 1
    annotations = [line for line in result.out.splitlines() if line.startswith("::")]
    assert annotations == [
        f"::error file={dev}/{GOLDEN},line=2,title=golden/mismatch::{dev}/{GOLDEN}: "
        "compiled output differs from the golden (1 changed); see the diff in the log, "
        f"or run `konfig test --update {dev}`",
        f"::error file={prod}/lib/double_test.k,line=6,title=kcl-test/failed::"
        f"{prod}/lib::test_wrong: EvaluationError: double(2) should be 5",
    ]
