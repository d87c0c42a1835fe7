from __future__ import annotations

import pytest
from fixtures.rawstacks import app_resources, raw_stack
from fixtures.repos import KonfigRunner, RepoBuilder


def _repo(builder: RepoBuilder) -> None:
    raw_stack(builder, "shop", "dev", app_resources("web", "shop-dev"))
    raw_stack(builder, "shop", "prod", app_resources("web", "shop-prod", image="nginx"))


def test_text_output_and_exit_code(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    _repo(repo_builder)
    result = konfig("check", cwd=repo_builder.root)
    assert result.code == 1
    assert (
        "appops/shop/prod/main.k:" in result.out
        and "container 'web' image 'nginx' has no tag (it means :latest)" in result.out
        and "[policy/image-tag]" in result.out
        and "[policy/prod-monitoring]" in result.out  # the prod Server has no monitoring
    )
    assert "checked 2 stack(s): 4 error(s), 0 warning(s)" in result.err
    assert konfig("check", "shop/dev", cwd=repo_builder.root).code == 0


def test_github_format_is_the_default_in_github_actions(
    repo_builder: RepoBuilder, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo(repo_builder)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = konfig("check", "shop/prod", cwd=repo_builder.root)
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines and all(
        line.startswith("::error file=appops/shop/prod/main.k,line=") for line in lines
    )
    assert any(",title=policy/image-tag::" in line for line in lines)
    # an explicit format wins
    text = konfig("check", "shop/prod", "--format", "text", cwd=repo_builder.root)
    assert not text.out.startswith("::")


def test_files_mode_checks_only_affected_stacks(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _repo(repo_builder)
    root = repo_builder.root
    assert konfig("check", "--files", "appops/shop/dev/main.k", cwd=root).code == 0
    assert konfig("check", "--files", "appops/shop/prod/stack.yaml", cwd=root).code == 1
    # base/ affects every stack
    assert konfig("check", "--files", "base/pkg/policies/rules.k", cwd=root).code == 1
    assert konfig("check", "--files", "README.md", cwd=root).code == 0


def test_unknown_stack_is_a_usage_error(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    _repo(repo_builder)
    result = konfig("check", "shop/staging", cwd=repo_builder.root)
    assert result.code == 2
    assert "unknown stack 'shop/staging'" in result.err


def test_no_policies_flag(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    _repo(repo_builder)
    assert konfig("check", "--no-policies", cwd=repo_builder.root).code == 0


def test_changed_from_checks_only_what_changed(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    from fixtures.monorepo import git_commit, git_init

    _repo(repo_builder)
    root = repo_builder.root
    git_init(root)
    git_commit(root, "two stacks; prod has an untagged image")
    # nothing changed since HEAD: nothing to check, the broken prod stack included
    result = konfig("check", "--changed-from", "HEAD", cwd=root)
    assert result.code == 0
    assert "checked 0 stack(s)" in result.err
    # a change in dev checks dev only
    raw_stack(repo_builder, "shop", "dev", app_resources("web", "shop-dev", replicas=2))
    assert konfig("check", "--changed-from", "HEAD", cwd=root).code == 0
    # a change in prod brings its finding back
    raw_stack(repo_builder, "shop", "prod", app_resources("web", "shop-prod", image="nginx:1"))
    raw_stack(repo_builder, "shop", "prod", app_resources("web", "shop-prod", image="nginx"))
    repo_builder.write("appops/shop/prod/notes.md", "changed\n")
    changed = konfig("check", "--changed-from", "HEAD", "--format", "json", cwd=root)
    assert changed.code == 1
    assert '"policy/image-tag"' in changed.out
    assert konfig("check", "--changed-from", "HEAD", "shop/dev", cwd=root).code == 2


def test_files_mode_in_git_uses_the_import_graph(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    from fixtures.monorepo import git_commit, git_init

    _repo(repo_builder)  # raw stacks: they import no model
    root = repo_builder.root
    git_init(root)
    git_commit(root, "two stacks; prod has an untagged image")
    model = next(p for p in sorted((root / "base/pkg/models").rglob("*.k")))
    rel = model.relative_to(root).as_posix()
    # a model no stack imports affects no stack (the simple mapping would check all)
    assert konfig("check", "--files", rel, cwd=root).code == 0
    assert konfig("check", "--files", "appops/shop/dev/main.k", cwd=root).code == 0
    assert konfig("check", "--files", "appops/shop/prod/main.k", cwd=root).code == 1
    # policies are evaluated against every stack: a policy change checks them all
    assert konfig("check", "--files", "base/pkg/policies/rules.k", cwd=root).code == 1
