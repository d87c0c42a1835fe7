"""The per-stack Lease against the real control plane."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
from kubeutil import make_stack

from konfig.engine.kube import Kube
from konfig.engine.lock import LEASE_API_VERSION, LEASE_KIND, LockError, StackLock, lease_state

pytestmark = pytest.mark.cluster


def lease(kube: Kube, lock: StackLock) -> dict | None:  # type: ignore[type-arg]
    return kube.get(LEASE_API_VERSION, LEASE_KIND, lock.name, "konfig-system")


def test_second_holder_waits_then_fails_naming_the_holder(kube: Kube) -> None:
    stack = make_stack()
    first = StackLock(kube, stack, identity="ci run 1")
    second = StackLock(kube, stack, identity="ci run 2")
    first.acquire(5)
    try:
        live = lease(kube, first)
        assert live is not None
        assert live["spec"]["holderIdentity"] == "ci run 1"
        seen: list[str] = []
        started = time.monotonic()
        with pytest.raises(LockError) as err:
            second.acquire(1.5, poll=0.2, on_wait=lambda s: seen.append(s.holder))
        assert time.monotonic() - started >= 1.5
        assert seen == ["ci run 1"]
        message = str(err.value)
        assert "is locked by another apply" in message
        assert "'ci run 1'" in message
        assert first.name in message
    finally:
        first.release()
    assert lease(kube, first) is None
    second.acquire(5)
    assert lease_state(lease(kube, second) or {}).holder == "ci run 2"
    second.release()


def test_waiter_gets_the_lock_when_the_holder_releases(kube: Kube) -> None:
    stack = make_stack()
    first = StackLock(kube, stack, identity="one")
    first.acquire(5)
    timer = threading.Timer(1.0, first.release)
    timer.start()
    second = StackLock(kube, stack, identity="two")
    second.acquire(15, poll=0.2)
    try:
        assert lease_state(lease(kube, second) or {}).holder == "two"
    finally:
        second.release()
        timer.join()


def test_stale_lease_is_taken_over_after_its_duration(kube: Kube) -> None:
    stack = make_stack()
    dead = StackLock(kube, stack, identity="crashed", duration=2)
    dead.acquire(5)
    # simulate a crash: renewals stop, nothing is released
    dead._stop.set()
    assert dead._thread is not None
    dead._thread.join()
    heir = StackLock(kube, stack, identity="heir", duration=30)
    started = time.monotonic()
    heir.acquire(20, poll=0.2)
    try:
        assert time.monotonic() - started < 15
        state = lease_state(lease(kube, heir) or {})
        assert state.holder == "heir"
        assert state.transitions == 1
        # the crashed holder's renewal now fails: it learns it lost the lock
        with pytest.raises(LockError, match="lost the lock"):
            dead.renew()
    finally:
        heir.release()


def test_renewal_keeps_a_live_lease_from_expiring(kube: Kube) -> None:
    stack = make_stack()
    holder = StackLock(kube, stack, identity="busy", duration=2)
    holder.acquire(5)
    try:
        first = lease_state(lease(kube, holder) or {}).renewed
        time.sleep(2.5)
        state = lease_state(lease(kube, holder) or {})
        assert state.renewed is not None and first is not None and state.renewed > first
        assert not state.expired(datetime.now(UTC))
        with pytest.raises(LockError):
            StackLock(kube, stack, identity="other", duration=2).acquire(0.5, poll=0.1)
        assert not holder.lost.is_set()
    finally:
        holder.release()


def _race(kube: Kube) -> None:
    stack = make_stack()
    locks = [StackLock(kube, stack, identity=f"racer {i}") for i in range(4)]
    barrier = threading.Barrier(len(locks))
    results: dict[int, object] = {}

    def go(i: int) -> None:
        barrier.wait()
        results[i] = locks[i].try_acquire()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(locks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, r in results.items() if r is None]
    assert len(winners) == 1, results
    holder = lease_state(lease(kube, locks[0]) or {}).holder
    assert holder == f"racer {winners[0]}"
    for i, r in results.items():
        if i != winners[0]:
            assert getattr(r, "holder", None) == holder
    locks[winners[0]].release()


def test_racing_acquirers_exactly_one_wins(kube: Kube) -> None:
    for _ in range(3):
        _race(kube)
