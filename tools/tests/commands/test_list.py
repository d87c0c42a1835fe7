import json
from pathlib import Path

from fixtures.repos import KonfigRunner, RepoBuilder


def test_list_json(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod")
    result = konfig("list", "--json", cwd=repo_builder.root / "appops" / "shop")
    assert result.code == 0
    assert json.loads(result.out) == [
        {"project": "shop", "stack": "dev", "path": "appops/shop/dev"},
        {"project": "shop", "stack": "prod", "path": "appops/shop/prod"},
    ]


def test_list_reports_problems_and_exits_1(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "bad", stack_yaml="name: nope\n")
    result = konfig("list", cwd=repo_builder.root)
    assert result.code == 1
    assert "appops/shop/bad/stack.yaml:1: name 'nope' does not match" in result.err
    assert "appops/shop/dev" in result.out


def test_outside_repository_is_usage_error(tmp_path: Path, konfig: KonfigRunner) -> None:
    result = konfig("list", cwd=tmp_path)
    assert result.code == 2
    assert "not inside a Konfig repository" in result.err
