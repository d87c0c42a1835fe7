from pathlib import Path

import pytest
from fixtures.repos import RepoBuilder

from konfig.errors import UsageError
from konfig.repo.layout import (
    discover,
    find_root,
    is_within,
    parse_stack_address,
    resolve_stacks,
)


def test_discovers_projects_and_stacks(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod")
    repo_builder.stack("blog", "dev")
    repo = discover(repo_builder.root)
    assert [p.name for p in repo.projects] == ["blog", "shop"]
    assert [s.path for s in repo.stacks] == [
        "appops/blog/dev",
        "appops/shop/dev",
        "appops/shop/prod",
    ]
    assert repo.stacks[1].short == "shop/dev"
    assert repo.problems == ()


def test_name_mismatch_is_a_problem_with_line(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("shop", "dev", stack_yaml="description: x\nname: development\n")
    repo = discover(repo_builder.root)
    assert repo.stacks == ()
    (problem,) = repo.problems
    assert problem.rule == "stack-name"
    assert problem.file == "appops/shop/dev/stack.yaml"
    assert problem.line == 2
    assert "'development'" in problem.message and "'dev'" in problem.message


def test_missing_name_is_a_problem(repo_builder: RepoBuilder) -> None:
    repo_builder.project("shop", yaml_text="description: no name\n")
    repo_builder.stack("shop", "dev")
    repo = discover(repo_builder.root)
    assert repo.stacks == ()
    assert [p.rule for p in repo.problems] == ["project-name"]


def test_broken_yaml_is_a_problem_with_line(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("shop", "dev", stack_yaml="name: dev\nkubernetes: [unclosed\n")
    (problem,) = discover(repo_builder.root).problems
    assert problem.rule == "stack-yaml"
    assert problem.file == "appops/shop/dev/stack.yaml"
    assert problem.line is not None and problem.line >= 2


def test_stack_outside_project(repo_builder: RepoBuilder) -> None:
    repo_builder.write("appops/loose/stack.yaml", "name: loose\n")
    repo_builder.write("appops/loose/main.k", "a = 1\n")
    repo = discover(repo_builder.root)
    assert repo.stacks == ()
    assert [p.rule for p in repo.problems] == ["stack-outside-project"]
    assert repo.problems[0].file == "appops/loose/stack.yaml"


def test_nested_project(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("outer", "dev")
    repo_builder.write("appops/outer/inner/project.yaml", "name: inner\n")
    repo = discover(repo_builder.root)
    assert [p.name for p in repo.projects] == ["outer"]
    assert [p.rule for p in repo.problems] == ["project-nested"]


def test_nested_stack(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("shop", "dev")
    repo_builder.write("appops/shop/dev/sub/stack.yaml", "name: sub\n")
    repo = discover(repo_builder.root)
    assert [s.path for s in repo.stacks] == ["appops/shop/dev"]
    assert [p.rule for p in repo.problems] == ["stack-nested"]


def test_one_bad_stack_does_not_hide_others(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "bad", stack_yaml="name: other\n")
    repo = discover(repo_builder.root)
    assert [s.path for s in repo.stacks] == ["appops/shop/dev"]
    assert len(repo.problems) == 1


def test_resolve_both_address_forms(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("shop", "dev")
    repo = discover(repo_builder.root)
    assert resolve_stacks(repo, ["appops/shop/dev"]) == resolve_stacks(repo, ["shop/dev/"])
    with pytest.raises(UsageError, match="unknown stack 'shop/prod'"):
        resolve_stacks(repo, ["shop/prod"])


def test_parse_stack_address_reads_forms_and_refuses_the_outside(
    repo_builder: RepoBuilder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo_builder.stack("shop", "dev")
    root = repo_builder.root
    monkeypatch.chdir(root)
    assert parse_stack_address(root, "shop/dev/").candidates == ("shop/dev", "appops/shop/dev")
    assert parse_stack_address(root, "appops/shop/dev").candidates[0] == "appops/shop/dev"
    assert parse_stack_address(root, "appops/x/../shop/dev").candidates == ("appops/shop/dev",)
    assert parse_stack_address(root, str(root / "appops/shop/dev")).candidates == (
        "appops/shop/dev",
    )
    (root / "appops/shop/out").symlink_to(tmp_path)
    for address, why in [
        ("../x", "`..` climbs out of it"),
        ("/etc", "/etc is not in"),
        ("shop/out", "a symbolic link on the way leads to"),
        ("appops/shop/out/dev", "a symbolic link on the way leads to"),
    ]:
        with pytest.raises(UsageError, match="outside the repository") as caught:
            parse_stack_address(root, address)
        assert why in caught.value.message
    with pytest.raises(UsageError, match="empty stack address"):
        parse_stack_address(root, "/")


def test_resolve_does_not_match_by_prefix(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("a", "dev")
    repo_builder.stack("ab", "dev")
    repo = discover(repo_builder.root)
    assert resolve_stacks(repo, ["a/dev"])[0].path == "appops/a/dev"
    with pytest.raises(UsageError):
        resolve_stacks(repo, ["a/de"])


def test_find_root_walks_up(repo_builder: RepoBuilder) -> None:
    deep = repo_builder.stack("shop", "dev") / "ci-test"
    assert find_root(deep) == repo_builder.root.resolve()


def test_find_root_outside_repository(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no kcl\.mod"):
        find_root(tmp_path)


@pytest.mark.parametrize(
    ("path", "parent", "expected"),
    [
        ("appops/a/dev", "appops/a", True),
        ("appops/a", "appops/a", True),
        ("appops/ab/dev", "appops/a", False),
        ("appops/a b/dev", "appops/a b", True),
        ("appops", "appops/a", False),
    ],
)
def test_is_within_matches_components(path: str, parent: str, expected: bool) -> None:
    assert is_within(path, parent) is expected
