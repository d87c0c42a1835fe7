"""konfig.pipeline.sharding: the shard count follows the stacks, a stack keeps its shard."""

from __future__ import annotations

import pytest

from konfig.pipeline.sharding import ShardPolicy, Slot, assign, parse_slot, shard_count, shard_of

STACKS = [f"appops/p{i:05d}/dev" for i in range(10_000)]


def test_the_count_follows_the_stacks_within_its_bounds() -> None:
    policy = ShardPolicy(stacks_per_shard=10, max_shards=8)
    assert shard_count(0, 8, policy) == 1
    assert shard_count(1, 8, policy) == 1
    assert shard_count(10, 8, policy) == 1
    assert shard_count(11, 8, policy) == 2
    assert shard_count(75, 8, policy) == 8
    assert shard_count(10_000, 8, policy) == 8  # max_shards
    assert shard_count(10_000, 3, policy) == 3  # the matrix's length
    assert shard_count(10_000, 256, ShardPolicy(10, 256)) == 256
    assert shard_count(10_000, 256, ShardPolicy(100, 256)) == 100
    with pytest.raises(ValueError, match="matrix of 0"):
        shard_count(1, 0, policy)


def test_every_stack_once_and_the_shards_balanced() -> None:
    parts = assign(STACKS + STACKS[:50], 8)  # duplicates count once
    assert sorted(s for part in parts for s in part) == STACKS
    sizes = [len(p) for p in parts]
    assert min(sizes) > 0.9 * 1250 and max(sizes) < 1.1 * 1250, sizes
    assert all(part == sorted(part) for part in parts)


def test_a_stack_keeps_its_shard_whatever_else_the_change_holds() -> None:
    """Between two pushes of a pull request the other stacks change: with the same count
    each stack is where it was (contiguous slices of a sorted list move most of them)."""
    first = assign(STACKS[:5000], 8)
    second = assign(STACKS[2500:], 8)  # half the stacks gone, as many new ones
    where = {s: i for i, part in enumerate(first) for s in part}
    moved = [s for i, part in enumerate(second) for s in part if s in where and where[s] != i]
    assert moved == []


def test_a_new_count_moves_only_what_the_new_shard_takes() -> None:
    before = {s: shard_of(s, 7) for s in STACKS}
    after = {s: shard_of(s, 8) for s in STACKS}
    moved = [s for s in STACKS if before[s] != after[s]]
    # every stack that moved went to the new shard, about 1/8 of them
    assert {after[s] for s in moved} == {7}
    assert 0.10 < len(moved) / len(STACKS) < 0.15, len(moved)


def test_the_assignment_is_a_function_of_the_path_alone() -> None:
    # the same on every machine and run (no salted hash(), no order dependence)
    assert [shard_of(s, 8) for s in STACKS[:5]] == [shard_of(s, 8) for s in STACKS[:5]]
    assert assign(reversed(STACKS[:100]), 4) == assign(STACKS[:100], 4)
    assert shard_of("appops/guestbook/dev", 1) == 0


def test_a_slot_picks_its_part_of_the_matrixs_partition() -> None:
    """Each job picking its own shard (``konfig preview --offline --shard I/N``) gets
    exactly what ``konfig matrix --shards N`` gives it: a partition of the stacks."""
    policy = ShardPolicy(stacks_per_shard=10, max_shards=8)
    stacks = STACKS[:45] + STACKS[:3]  # 45 stacks: 5 shards of 8 used
    parts = assign(stacks, shard_count(45, 8, policy))
    picked = [Slot(i, 8, policy).pick(stacks, ["appops/gone/dev"]) for i in range(8)]
    assert [mine for mine, _ in picked] == [*parts, [], [], []]
    assert [gone for _, gone in picked] == [["appops/gone/dev"]] + [[]] * 7
    assert sorted(s for mine, _ in picked for s in mine) == STACKS[:45]
    with pytest.raises(ValueError, match="shard 8 of 8"):
        Slot(8, 8, policy).pick(stacks, [])


def test_parse_slot() -> None:
    policy = ShardPolicy(stacks_per_shard=5, max_shards=4)
    assert parse_slot(" 3/8 ", policy) == Slot(3, 8, policy)
    for bad, message in [("8/8", "below N"), ("0/0", "between 1"), ("x", "expected I/N")]:
        with pytest.raises(ValueError, match=message):
            parse_slot(bad, policy)
