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


TERRAFORM_STACK = """name: prod
terraform:
  providers:
    postgresql:
      settings: {sslmode: disable}
      environment: {host: SHOP_PROD_PGHOST}
"""


def test_list_terraform_names_the_stacks_opentofu_takes_part_in(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    """What actions/setup asks with `tofu: auto`: of the given stacks (or every stack),
    the ones whose stack.yaml has a terraform section, however the YAML is written."""
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod", stack_yaml=TERRAFORM_STACK)
    # flow style: a `terraform:` at the start of a line is not what makes it one
    repo_builder.stack("db", "prod", stack_yaml="{name: prod, terraform: {providers: {}}}\n")
    every = konfig("list", "--terraform", "--json", cwd=repo_builder.root)
    assert every.code == 0, every.err
    assert [s["path"] for s in json.loads(every.out)] == ["appops/db/prod", "appops/shop/prod"]

    shard = konfig(
        "list", "--terraform", "--json", "--", "shop/dev", "appops/shop/prod", cwd=repo_builder.root
    )
    assert shard.code == 0, shard.err
    assert json.loads(shard.out) == [
        {"project": "shop", "stack": "prod", "path": "appops/shop/prod"}
    ]
    none = konfig("list", "--terraform", "--json", "shop/dev", cwd=repo_builder.root)
    assert (none.code, json.loads(none.out)) == (0, [])
    text = konfig("list", "--terraform", cwd=repo_builder.root)
    assert text.out.split() == ["db/prod", "appops/db/prod", "shop/prod", "appops/shop/prod"]


def test_list_of_named_stacks(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod")
    named = konfig("list", "--json", "appops/shop/prod", cwd=repo_builder.root)
    assert named.code == 0, named.err
    assert [s["path"] for s in json.loads(named.out)] == ["appops/shop/prod"]
    unknown = konfig("list", "--terraform", "shop/qa", cwd=repo_builder.root)
    assert unknown.code == 2
    assert "unknown stack 'shop/qa'" in unknown.err and unknown.out == ""


def test_list_terraform_with_a_layout_problem_elsewhere_still_answers(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    repo_builder.stack("shop", "prod", stack_yaml=TERRAFORM_STACK)
    repo_builder.stack("shop", "bad", stack_yaml="name: nope\n")
    result = konfig("list", "--terraform", "--json", "shop/prod", cwd=repo_builder.root)
    assert result.code == 1
    assert "appops/shop/bad/stack.yaml:1: name 'nope' does not match" in result.err
    assert [s["path"] for s in json.loads(result.out)] == ["appops/shop/prod"]
