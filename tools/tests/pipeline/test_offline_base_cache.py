"""``konfig preview --offline --base-cache DIR``: the base side never takes an entry of
``.cache/konfig``, where CI restores the pull request's own earlier run's compile cache
(docs/security.md, "The compile cache across pushes"). Real git, the real KCL compiler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import git
import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder

DEV = "appops/shop/dev"
DEPLOYMENT = "apps/v1:Deployment:shop-dev:shop"


@pytest.fixture
def shop(repo_builder: RepoBuilder) -> RepoBuilder:
    """main with shop/dev and shop/prod; a branch `pr` giving shop/dev a new image."""
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod")
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "base")
    return repo_builder


def _pr(shop: RepoBuilder) -> None:
    git.Repo(shop.root).git.checkout("-q", "-b", "pr")
    main = SIMPLE_MAIN.format(name="shop", namespace="shop-dev")
    shop.write(f"{DEV}/main.k", main.replace("nginx:1.27.3", "nginx:1.27.4"))
    git_commit(shop.root, "pr: a new image")


def _entries(root: Path) -> dict[Path, dict[str, Any]]:
    found = (root / ".cache" / "konfig" / "compile").glob("*/*.json")
    return {p: json.loads(p.read_text(encoding="utf-8")) for p in found}


def _dev_action(konfig: KonfigRunner, root: Path, *args: str) -> str:
    res = konfig("preview", "--offline", "--base", "main", "--format", "json", *args, cwd=root)
    assert res.code in (0, 1), res.err
    stack = next(s for s in json.loads(res.out)["stacks"] if s["path"] == DEV)
    return str({c["id"]: c for c in stack["changes"]}[DEPLOYMENT]["action"])


def _forge_base_entry(root: Path) -> None:
    """What a pull request's earlier run can upload as its compile cache: the entry of
    shop/dev's BASE key (every input of the key is public) holding the MERGE's Spec."""
    entries = _entries(root)
    dev = {p: e for p, e in entries.items() if e["stack"] == DEV}
    base = [p for p, e in dev.items() if "nginx:1.27.3" in e["yaml"]]
    merge = [e for e in dev.values() if "nginx:1.27.4" in e["yaml"]]
    assert len(base) == 1 and len(merge) == 1, sorted(map(str, dev))
    forged = {**merge[0], "key": dev[base[0]]["key"]}
    base[0].write_text(json.dumps(forged), encoding="utf-8")


def test_the_base_side_never_takes_an_entry_of_the_repositorys_cache(
    shop: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    root = shop.root
    assert konfig("compile", "--all", cwd=root).code == 0  # the base side's keys
    _pr(shop)
    # the merge side's entry (its base side in a cache of its own)
    assert _dev_action(konfig, root, "--base-cache", str(tmp_path / "first")) == "update"
    _forge_base_entry(root)
    # The threat: with one cache for both sides the forged entry hides the change.
    assert _dev_action(konfig, root) == "unchanged"
    # With the base side's own cache (what the workflows pass): compiled, the change shows;
    # and again from that cache, warm now.
    trusted = tmp_path / "base-cache"
    assert _dev_action(konfig, root, "--base-cache", str(trusted)) == "update"
    warm = {p.stem for p in trusted.glob("compile/*/*.json")}
    assert len(warm) == 1  # shop/dev at the base (shop/prod is not affected)
    assert _dev_action(konfig, root, "--base-cache", str(trusted)) == "update"
    assert {p.stem for p in trusted.glob("compile/*/*.json")} == warm


def test_the_merge_side_still_takes_the_repositorys_cache(
    shop: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    """The pull request's own side keeps its cache: a second run compiles nothing new."""
    root = shop.root
    _pr(shop)
    assert _dev_action(konfig, root, "--base-cache", str(tmp_path / "a")) == "update"
    before = set(_entries(root))
    assert len(before) == 1  # shop/dev at the merge
    stamp = {p: p.stat().st_mtime_ns for p in before}
    assert _dev_action(konfig, root, "--base-cache", str(tmp_path / "b")) == "update"
    assert {p: p.stat().st_mtime_ns for p in _entries(root)} == stamp


def test_base_cache_is_an_offline_option_and_lies_outside_the_repository(
    shop: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    root = shop.root
    _pr(shop)
    res = konfig("preview", DEV, "--base-cache", str(tmp_path / "x"), cwd=root)
    assert res.code == 2 and "--base-cache" in res.err and "--offline" in res.err
    for inside in (root / ".cache" / "base", root):
        res = konfig(
            "preview", "--offline", "--base", "main", "--base-cache", str(inside), cwd=root
        )
        assert res.code == 2, res.err
        assert "lies inside the repository" in res.err and "RUNNER_TEMP" in res.err
