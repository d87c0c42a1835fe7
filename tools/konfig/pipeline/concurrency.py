"""Running independent pieces of work at once (stacks, most of all)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")


def run_concurrently(items: Sequence[_T], fn: Callable[[_T], _R], workers: int) -> list[_R]:
    """``fn`` of every item on up to ``workers`` threads; results in the items' order.

    One item, or one worker, runs in the calling thread.
    """
    if workers <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))
