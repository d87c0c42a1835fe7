"""One apply or destroy per stack at a time: the work runs under the stack's Lease."""

from __future__ import annotations

import threading
from collections.abc import Callable

from konfig.engine.kube import Kube
from konfig.engine.lock import LeaseState, StackLock
from konfig.engine.stackrun import StackResult
from konfig.errors import KonfigError
from konfig.repo.layout import Stack

# Told while another holder keeps the Lease: the stack's path and the Lease as read.
LockWait = Callable[[str, LeaseState], None]


def run_locked(
    kube: Kube,
    stack: Stack,
    work: Callable[[StackLock], StackResult],
    *,
    lock_timeout: float,
    lease_duration: int,
    on_wait: LockWait | None = None,
    stop: threading.Event | None = None,
) -> StackResult:
    """``work(lock)`` while holding the stack's Lease; any KonfigError (the lock not
    acquired in ``lock_timeout`` seconds, or ``stop`` set while waiting for it, included)
    becomes a failed result. The Lease is released however ``work`` ends."""
    lock = StackLock(kube, stack, duration=lease_duration)
    try:
        lock.acquire(
            lock_timeout,
            on_wait=(lambda s: on_wait(stack.path, s)) if on_wait else None,
            stop=stop,
        )
    except KonfigError as exc:
        return StackResult(stack.path, False, (), str(exc))
    try:
        return work(lock)
    except KonfigError as exc:
        return StackResult(stack.path, False, (), str(exc))
    finally:
        lock.release()
