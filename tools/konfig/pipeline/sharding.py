"""How many CI shards a change set gets, and which shard each stack goes to.

The count follows the work: enough shards for about ``stacks_per_shard`` stacks each,
at least one, at most ``max_shards`` and the length of the workflow's static matrix.
A stack's shard is chosen by rendezvous hashing (highest random weight) of its path:
each stack goes to the shard whose ``blake2b(index, path)`` is highest among the
shards in use. So a stack lands in the same shard on every push while the count
stays, whatever else the pull request adds or drops (the shard's caches keep helping),
and when the count changes only the stacks the new shard wins move (about 1/n of
them), never a reshuffle of every stack as contiguous slices of a sorted list would.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from konfig.repo.settings import DEFAULT_MAX_SHARDS, DEFAULT_STACKS_PER_SHARD

# A static matrix is written out in the workflow; more jobs than this is a typo.
MAX_SHARDS = 256


@dataclass(frozen=True)
class ShardPolicy:
    """konfig.yaml's ``sharding`` (docs/contracts/konfig.md)."""

    stacks_per_shard: int = DEFAULT_STACKS_PER_SHARD
    max_shards: int = DEFAULT_MAX_SHARDS


def shard_count(stacks: int, slots: int, policy: ShardPolicy) -> int:
    """Shards to use for ``stacks`` stacks when the matrix has ``slots`` jobs."""
    if slots < 1:
        raise ValueError(f"a matrix of {slots} jobs")
    wanted = -(-stacks // max(1, policy.stacks_per_shard))  # ceiling
    return max(1, min(wanted, policy.max_shards, slots))


def _weight(index: int, stack: str) -> bytes:
    return hashlib.blake2b(f"{index}\0{stack}".encode(), digest_size=8).digest()


def shard_of(stack: str, count: int) -> int:
    """The shard (0..count-1) of ``stack`` among ``count`` shards."""
    return max(range(count), key=lambda i: _weight(i, stack))


def assign(stacks: Iterable[str], count: int) -> list[list[str]]:
    """``count`` lists of stacks (each sorted), every stack in :func:`shard_of`'s."""
    out: list[list[str]] = [[] for _ in range(count)]
    for stack in sorted(dict.fromkeys(stacks)):
        out[shard_of(stack, count)].append(stack)
    return out


@dataclass(frozen=True)
class Slot:
    """One job of a static matrix: shard ``index`` of ``slots``, under ``policy``."""

    index: int
    slots: int
    policy: ShardPolicy = ShardPolicy()

    def pick(self, stacks: Iterable[str], deleted: Iterable[str]) -> tuple[list[str], list[str]]:
        """This shard's stacks, and the deleted stacks (all in shard 0). Every process
        that picks from the same change set gets a part of one partition, the one
        ``konfig matrix --shards`` prints."""
        if not 0 <= self.index < self.slots:
            raise ValueError(f"shard {self.index} of {self.slots}")
        unique = list(dict.fromkeys(stacks))
        count = shard_count(len(unique), self.slots, self.policy)
        if self.index >= count:
            mine: list[str] = []
        else:
            mine = [s for s in sorted(unique) if shard_of(s, count) == self.index]
        gone = sorted(dict.fromkeys(deleted)) if self.index == 0 else []
        return mine, gone


def parse_slot(text: str, policy: ShardPolicy) -> Slot:
    """``I/N`` (0-based, e.g. ``0/8``) as a :class:`Slot`; ValueError saying what is wrong."""
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match:
        raise ValueError(f"{text!r}: expected I/N, e.g. 0/8")
    index, count = int(match[1]), int(match[2])
    if not 1 <= count <= MAX_SHARDS or index >= count:
        raise ValueError(f"{text}: I must be below N, and N between 1 and {MAX_SHARDS}")
    return Slot(index, count, policy)
