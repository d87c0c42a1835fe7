"""Which stacks apply-on-merge applies: real git repositories, inventories as data."""

from __future__ import annotations

import json

import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import RepoBuilder

from konfig.commands.matrix import chunks
from konfig.detect.behind import pending_stacks
from konfig.engine.inventory import Inventory, applyset_id, inventory_name


def inv(path: str, commit: str) -> Inventory:
    name = inventory_name(path)
    return Inventory(path, (), commit, "digest", applyset_id(name), name=name)


@pytest.fixture
def history(repo_builder: RepoBuilder) -> tuple[RepoBuilder, list[str]]:
    repo = repo_builder
    repo.write(".gitignore", "/.cache/\n")
    repo.stack("a", "dev")
    repo.stack("b", "dev")
    repo.stack("gone", "dev")
    git_init(repo.root)
    first = git_commit(repo.root, "first")
    repo.write("appops/a/dev/extra.yaml", "x: 1\n")
    second = git_commit(repo.root, "change a")
    repo.write("appops/b/dev/extra.yaml", "x: 1\n")
    third = git_commit(repo.root, "change b")
    return repo, [first, second, third]


STACKS = ["appops/a/dev", "appops/b/dev"]


def test_only_stacks_changed_since_their_applied_commit(
    history: tuple[RepoBuilder, list[str]],
) -> None:
    repo, (first, second, third) = history
    # a was applied at `second` (after its change), b at `first`: only b is behind.
    result = pending_stacks(
        repo.root,
        "HEAD",
        STACKS,
        {"appops/a/dev": inv("appops/a/dev", second), "appops/b/dev": inv("appops/b/dev", first)},
    )
    assert result.head == third
    assert result.stack_paths == ["appops/b/dev"]
    assert result.stacks[0].reasons[0].startswith(f"since applied commit {first[:12]}: ")
    assert "appops/b/dev/extra.yaml" in result.stacks[0].reasons[0]
    assert result.up_to_date == ("appops/a/dev",)


def test_skipped_runs_are_caught_up(history: tuple[RepoBuilder, list[str]]) -> None:
    # Both applied at `first`; the runs for `second` were skipped: both are pending.
    repo, (first, _, _) = history
    result = pending_stacks(repo.root, "HEAD", STACKS, {p: inv(p, first) for p in STACKS})
    assert result.stack_paths == STACKS


def test_never_applied_unfinished_and_foreign_commits(
    history: tuple[RepoBuilder, list[str]],
) -> None:
    repo, (_, _, third) = history
    result = pending_stacks(
        repo.root,
        "HEAD",
        [*STACKS, "appops/gone/dev"],
        {
            "appops/a/dev": None,
            "appops/b/dev": inv("appops/b/dev", ""),
            "appops/gone/dev": inv("appops/gone/dev", "ab" * 20),
        },
    )
    reasons = {s.path: s.reasons[0] for s in result.stacks}
    assert reasons["appops/a/dev"].startswith("never applied")
    assert "records no applied commit" in reasons["appops/b/dev"]
    assert "is not in this repository's history" in reasons["appops/gone/dev"]
    up = pending_stacks(repo.root, "HEAD", STACKS, {p: inv(p, third) for p in STACKS})
    assert up.stacks == () and up.up_to_date == tuple(STACKS)


def test_only_inventories_this_repository_applied_are_deleted_stacks(
    history: tuple[RepoBuilder, list[str]],
) -> None:
    repo, (first, _, third) = history
    found = [
        *(inv(p, third) for p in STACKS),
        inv("appops/gone/dev", first),  # ours, still present at HEAD: not deleted
    ]
    (repo.root / "appops/gone/dev/stack.yaml").unlink()
    removed = git_commit(repo.root, "remove gone/dev")
    result = pending_stacks(
        repo.root,
        "HEAD",
        STACKS,
        {p: inv(p, removed) for p in STACKS},
        [
            *found,
            inv("appops/other-repo/prod", "cd" * 20),  # another repository's commit
            inv("appops/never/finished", ""),  # no commit recorded
            inv("appops/a/dev-old", first),  # our commit, but it never had that stack
        ],
    )
    assert result.deleted_stacks == ("appops/gone/dev",)
    assert result.foreign == ("appops/a/dev-old", "appops/never/finished", "appops/other-repo/prod")
    assert result.to_json()["deleted_stacks"] == ["appops/gone/dev"]
    assert result.projects == ["appops/gone"]


def test_matrix_chunks_are_balanced_and_keep_order() -> None:
    stacks = [f"appops/p/s{i:02d}" for i in range(10)]
    out = chunks(list(reversed(stacks)), 4)
    assert [c["index"] for c in out] == [0, 1, 2, 3]
    parts = [json.loads(c["stacks"]) for c in out]
    assert [len(p) for p in parts] == [3, 3, 2, 2]
    assert [s for p in parts for s in p] == stacks
    assert chunks([], 4) == []
    assert chunks([], 4, keep_one=True) == [{"index": 0, "stacks": "[]"}]
    assert len(chunks(["a with space", "b"], 16)) == 2
