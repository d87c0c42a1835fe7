"""konfig's cache folder is never part of the repository: a pull request that commits a
file there (``git add -f`` past .gitignore) would plant what konfig trusts (a compiled
Spec under its key, the import graph, a document found valid) in every run on its
checkout. Every command that reads the repository refuses, check, preview and apply
alike, with the file, the rule and how to fix it."""

from __future__ import annotations

import subprocess

import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder


@pytest.fixture
def repo(repo_builder: RepoBuilder) -> RepoBuilder:
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod")
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "base")
    return repo_builder


def _commit_into_cache(repo: RepoBuilder, rel: str, text: str) -> None:
    repo.write(rel, text)
    subprocess.run(["git", "add", "-f", rel], cwd=repo.root, check=True)
    git_commit(repo.root, "a file in the cache folder")


@pytest.mark.parametrize(
    "args",
    [
        ("changed", "--base", "HEAD~1"),
        ("compile", "appops/shop/dev"),
        ("check", "appops/shop/dev"),
        ("test", "appops/shop/dev"),
        ("preview", "--offline", "--base", "HEAD~1", "--head", "HEAD"),
        ("apply", "appops/shop/dev", "--yes"),
    ],
)
def test_a_tracked_cache_file_is_refused(
    repo: RepoBuilder, konfig: KonfigRunner, args: tuple[str, ...]
) -> None:
    # what a forged import graph would look like; its content does not matter
    _commit_into_cache(repo, ".cache/konfig/imports.json", '{"forged": true}\n')
    result = konfig(*args, cwd=repo.root)
    assert result.code == 1, (result.code, result.out, result.err)
    assert ".cache/konfig/imports.json: refused (repo/tracked-cache)" in result.err
    assert "git rm -r --cached .cache/konfig" in result.err


def test_the_message_counts_every_tracked_file(repo: RepoBuilder, konfig: KonfigRunner) -> None:
    for name in ("a", "b", "c", "d"):
        repo.write(f".cache/konfig/contracts/{name}", "")
    subprocess.run(["git", "add", "-f", ".cache"], cwd=repo.root, check=True)
    git_commit(repo.root, "memo entries")
    result = konfig("compile", "appops/shop/dev", cwd=repo.root)
    assert result.code == 1
    assert "git tracks 4 file(s)" in result.err
    assert "and 1 more" in result.err


def test_an_untracked_cache_is_konfigs_own(repo: RepoBuilder, konfig: KonfigRunner) -> None:
    """The cache konfig writes itself (ignored, untracked) is used as before."""
    first = konfig("compile", "appops/shop/dev", cwd=repo.root)
    assert first.code == 0, first.err
    assert (repo.root / ".cache/konfig").is_dir()
    again = konfig("compile", "appops/shop/dev", cwd=repo.root)
    assert again.code == 0, again.err
    assert "tracked-cache" not in again.err
