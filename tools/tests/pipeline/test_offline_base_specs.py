"""``konfig preview --offline --base-specs DIR``: the base side's Specs from a cache a
trusted run of the default branch wrote (``konfig compile --all --out DIR``), read as
hostile data; the stacks it lacks are compiled at the base as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import git
import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder

DEV, PROD, BLOG = "appops/shop/dev", "appops/shop/prod", "appops/blog/dev"


@pytest.fixture
def repo(repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path) -> RepoBuilder:
    """main with three stacks, its Specs in tmp_path/base-specs (as main's run leaves
    them), and a branch `pr` changing the image of shop/dev and shop/prod."""
    for project, stack in (("shop", "dev"), ("shop", "prod"), ("blog", "dev")):
        repo_builder.stack(project, stack)
    repo_builder.write(".gitignore", "/.cache/\n")
    root = repo_builder.root
    git_init(root)
    git_commit(root, "base")
    out = tmp_path / "base-specs"
    res = konfig("compile", "--all", "--out", str(out), cwd=root)
    assert res.code == 0, res.err
    git.Repo(root).git.checkout("-q", "-b", "pr")
    for path, ns in ((DEV, "shop-dev"), (PROD, "shop-prod")):
        main = SIMPLE_MAIN.format(name="shop", namespace=ns).replace("nginx:1.27.3", "nginx:1.27.4")
        repo_builder.write(f"{path}/main.k", main)
    git_commit(root, "pr: a new image")
    shutil.rmtree(root / ".cache", ignore_errors=True)
    return repo_builder


def offline(konfig: KonfigRunner, root: Path, *args: str) -> Any:
    return konfig("preview", "--offline", "--base", "main", "--format", "json", *args, cwd=root)


def entries(root: Path) -> set[Path]:
    return set((root / ".cache" / "konfig" / "compile").glob("*/*.json"))


def test_the_base_side_comes_from_the_cache_and_equals_compiling_it(
    repo: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    root = repo.root
    compiled = offline(konfig, root, "--no-cache")
    assert compiled.code == 0, compiled.err
    cached = offline(konfig, root, "--base-specs", str(tmp_path / "base-specs"))
    assert cached.code == 0, cached.err
    assert json.loads(cached.out) == json.loads(compiled.out)
    assert json.loads(cached.out)["counts"]["update"] == 2
    # only the merge side was compiled (2 stacks), none of the base side
    assert len(entries(root)) == 2

    # a stack the cache lacks is compiled at the base, with the same result
    shutil.rmtree(root / ".cache")
    shutil.rmtree(tmp_path / "base-specs" / PROD)
    partial = offline(konfig, root, "--base-specs", str(tmp_path / "base-specs"))
    assert partial.code == 0, partial.err
    assert json.loads(partial.out) == json.loads(compiled.out)
    assert len(entries(root)) == 3


def test_a_tampered_cache_is_refused_and_what_is_not_needed_is_not_read(
    repo: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    root = repo.root
    specs = tmp_path / "base-specs"
    # a stack the pull request does not affect: never read, so never refused
    (specs / BLOG / "spec.yaml").write_text("not: [a, spec")
    (specs / "notes.txt").write_text("anything")
    ok = offline(konfig, root, "--base-specs", str(specs))
    assert ok.code == 0, ok.err

    spec_file = specs / DEV / "spec.yaml"
    spec_file.write_text(spec_file.read_text().replace("type: Kubernetes", "type: Shell", 1))
    refused = offline(konfig, root, "--base-specs", str(specs))
    assert refused.code == 1, refused.out + refused.err
    assert f"{specs.as_posix()}/{DEV}/spec.yaml:" in refused.err and "Shell" in refused.err
    assert refused.out == ""

    # a link on the way to a file is refused too (it could show another file)
    shutil.rmtree(specs / DEV)
    (specs / DEV).symlink_to(specs / PROD)
    linked = offline(konfig, root, "--base-specs", str(specs))
    assert linked.code == 1 and "is a link, not a folder" in linked.err, linked.err


def test_base_specs_is_an_option_of_offline(repo: RepoBuilder, konfig: KonfigRunner) -> None:
    res = konfig("preview", "--base-specs", "x", DEV, cwd=repo.root)
    assert res.code == 2 and "--base-specs" in res.err and "--offline" in res.err, res.err
