import json
from pathlib import Path

import git
import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder


@pytest.fixture
def repo(repo_builder: RepoBuilder) -> RepoBuilder:
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod")
    repo_builder.stack("shopfront", "dev")
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "base")
    return repo_builder


def test_json_output(repo: RepoBuilder, konfig: KonfigRunner) -> None:
    repo.write("appops/shop/dev/main.k", "import base.pkg.models.frontend\n")
    (repo.root / "appops/shop/prod/stack.yaml").unlink()
    git_commit(repo.root, "edit")
    result = konfig("changed", "--base", "HEAD~1", "--json", cwd=repo.root)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["stacks"] == [
        {"path": "appops/shop/dev", "reasons": ["appops/shop/dev/main.k changed"],
         "production": False}
    ]  # fmt: skip
    assert data["deleted_stacks"] == ["appops/shop/prod"]
    assert data["projects"] == ["appops/shop"]
    assert len(data["base"]) == 40 and len(data["head"]) == 40


def test_production_like_stacks(repo: RepoBuilder, konfig: KonfigRunner) -> None:
    """stack.yaml's `production` decides; without it, the productionStacks patterns."""
    repo.stack("shop", "eu-live", stack_yaml="name: eu-live\nproduction: true\n")
    repo.stack("shop", "prod-canary", stack_yaml="name: prod-canary\nproduction: false\n")
    repo.stack("shopfront", "prod-eu")
    repo.write("kcl.mod", (repo.root / "kcl.mod").read_text() + "\n")  # every stack
    git_commit(repo.root, "edit")
    result = konfig("changed", "--base", "HEAD~1", "--json", cwd=repo.root)
    assert result.code == 0, result.err
    production = {s["path"]: s["production"] for s in json.loads(result.out)["stacks"]}
    assert production == {
        "appops/shop/dev": False,
        "appops/shop/eu-live": True,  # stack.yaml says so
        "appops/shop/prod": True,  # the default pattern appops/*/**/prod
        "appops/shop/prod-canary": False,  # stack.yaml says no
        "appops/shopfront/dev": False,
        "appops/shopfront/prod-eu": True,  # appops/*/**/prod-*
    }
    repo.write("konfig.yaml", "productionStacks: [appops/shopfront/*]\n")
    git_commit(repo.root, "only shopfront is production")
    result = konfig("changed", "--base", "HEAD~1", "--json", cwd=repo.root)
    production = {s["path"]: s["production"] for s in json.loads(result.out)["stacks"]}
    assert [p for p, yes in sorted(production.items()) if yes] == [
        "appops/shop/eu-live",
        "appops/shopfront/dev",
        "appops/shopfront/prod-eu",
    ]


def test_github_output_is_heredoc_json(
    repo: RepoBuilder, konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write("appops/shopfront/dev/config.json", "{}\n")
    git_commit(repo.root, "edit")
    out = tmp_path / "github_output"
    out.write_text("earlier=1\n")
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    result = konfig("changed", "--base", "HEAD~1", "--github-output", cwd=repo.root)
    assert result.code == 0, result.err
    assert "appops/shopfront/dev\n  - appops/shopfront/dev/config.json changed" in result.out
    lines = out.read_text().splitlines()
    assert lines[0] == "earlier=1"
    outputs: dict[str, str] = {}
    i = 1
    while i < len(lines):
        name, _, delimiter = lines[i].partition("<<")
        end = lines.index(delimiter, i + 1)
        outputs[name] = "\n".join(lines[i + 1 : end])
        i = end + 1
    # counts, never the lists (10,000 paths are more than an output may hold: --json)
    assert outputs == {
        "has-changes": "true",
        "stack-count": "1",
        "deleted-count": "0",
        "project-count": "1",
    }


def test_no_changes(repo: RepoBuilder, konfig: KonfigRunner) -> None:
    result = konfig("changed", "--base", "HEAD", cwd=repo.root)
    assert result.code == 0
    assert result.out == "no stacks affected\n"


def test_usage_errors(
    repo: RepoBuilder, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = konfig("changed", "--base", "origin/nope", cwd=repo.root)
    assert result.code == 2
    assert "unknown git revision 'origin/nope'" in result.err
    assert "fetch-depth" in result.err
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    result = konfig("changed", "--base", "HEAD", "--github-output", cwd=repo.root)
    assert result.code == 2
    assert "--github-output needs $GITHUB_OUTPUT" in result.err


def test_not_a_git_repository(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    repo_builder.stack("shop", "dev")
    result = konfig("changed", "--base", "main", cwd=repo_builder.root)
    assert result.code == 2
    assert "not inside a git repository" in result.err


def test_compile_changed_from_uses_the_work_tree(repo: RepoBuilder, konfig: KonfigRunner) -> None:
    repo.write("appops/shopfront/dev/main.k", (repo.root / "appops/shop/dev/main.k").read_text())
    result = konfig("compile", "--changed-from", "HEAD", "--json", cwd=repo.root)
    assert result.code == 0, result.err
    assert [r["path"] for r in json.loads(result.out)] == ["appops/shopfront/dev"]
    clean = konfig("compile", "--changed-from", "main", "--json", cwd=repo.root)
    assert [r["path"] for r in json.loads(clean.out)] == ["appops/shopfront/dev"]
    both = konfig("compile", "--all", "--changed-from", "HEAD", cwd=repo.root)
    assert both.code == 2


def test_compile_changed_from_nothing(repo: RepoBuilder, konfig: KonfigRunner) -> None:
    result = konfig("compile", "--changed-from", "HEAD", cwd=repo.root)
    assert result.code == 0
    assert "no stacks affected since HEAD" in result.err


def _clone(repo: RepoBuilder, dest: Path) -> Path:
    """A clone as a newcomer makes one: origin/HEAD names origin's default branch."""
    git.Repo.clone_from(repo.root, dest)
    with git.Repo(dest).config_writer() as config:
        config.set_value("user", "name", "Konfig Test")
        config.set_value("user", "email", "test@konfig.invalid")
    return dest


def test_without_base_compares_with_the_default_branch(
    repo: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    clone = _clone(repo, tmp_path / "clone")
    clone_git = git.Repo(clone)
    clone_git.git.checkout("-q", "-b", "feature")
    (clone / "appops/shop/dev/main.k").write_text("import base.pkg.models.frontend\n")
    clone_git.git.commit("-q", "-am", "edit")
    result = konfig("changed", "--json", cwd=clone)
    assert result.code == 0, result.err
    assert "comparing with origin/main (the default branch of origin)" in result.err
    data = json.loads(result.out)
    assert data["base"] == clone_git.commit("origin/main").hexsha
    assert [s["path"] for s in data["stacks"]] == ["appops/shop/dev"]
    assert "uncommitted" not in result.err


def test_says_when_uncommitted_changes_are_left_out(
    repo: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    clone = _clone(repo, tmp_path / "clone")
    (clone / "appops/shopfront/dev/main.k").write_text("import base.pkg.models.frontend\n")
    (clone / "appops/shop/qa").mkdir()
    (clone / "appops/shop/qa/stack.yaml").write_text("name: qa\n")
    result = konfig("changed", cwd=clone)
    assert result.code == 0, result.err
    assert "no stacks affected" in result.out
    assert (
        "not included: uncommitted changes to appops/shop/qa/ and 1 more "
        "(konfig changed compares commits" in result.err
    )
    # --head names a commit: the work tree is not what was asked about
    named = konfig("changed", "--head", "main", cwd=clone)
    assert named.code == 0 and "uncommitted" not in named.err


def test_without_base_and_without_a_remote_says_what_to_pass(
    repo: RepoBuilder, konfig: KonfigRunner
) -> None:
    result = konfig("changed", cwd=repo.root)
    assert result.code == 2
    assert "no branch to compare with" in result.err
    assert "pass --base REF" in result.err
