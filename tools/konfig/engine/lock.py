"""One apply per stack at a time: a ``coordination.k8s.io/v1`` Lease per stack.

The Lease in ``konfig-system`` named as the stack's inventory
(:func:`~konfig.engine.inventory.inventory_name`) says who holds the stack. The lock
is taken and kept with server-side apply only:

* **take a free lease**: apply ``holderIdentity`` with a field manager unique to
  the holder and ``force=False``. When two appliers race, the API server owns the
  tie-break: the second gets a 409 conflict (the field belongs to the first
  manager with another value) and waits;
* **take over a stale lease** (``renewTime + leaseDurationSeconds`` in the past, the
  holder died): apply with ``force=True`` and the observed ``resourceVersion`` as
  a precondition, so only one of several waiters wins;
* **renew** in a background thread every third of the duration; a renewal that
  conflicts means someone took the lease over: :attr:`StackLock.lost` is set and
  the apply stops at its next step;
* **release**: delete the Lease with a UID precondition if we still hold it.

A second apply waits up to its timeout, reporting the holder, then fails naming
the holder and when the lease expires.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from konfig.engine.inventory import NAMESPACE, inventory_name, stack_path_of
from konfig.engine.inventory_store import KubeApi, ensure_namespace
from konfig.errors import KonfigError

LEASE_API_VERSION = "coordination.k8s.io/v1"
LEASE_KIND = "Lease"
DEFAULT_DURATION = 60
MANAGER_PREFIX = "konfig-lock"


class LockError(KonfigError):
    """The stack is locked by another apply, or our lock was lost."""


@dataclass(frozen=True)
class LeaseState:
    holder: str
    acquired: str
    renewed: datetime | None
    duration: int
    resource_version: str
    uid: str
    transitions: int

    def expires_at(self) -> datetime | None:
        if self.renewed is None:
            return None
        return datetime.fromtimestamp(self.renewed.timestamp() + self.duration, UTC)

    def expired(self, now: datetime) -> bool:
        expires = self.expires_at()
        return not self.holder or expires is None or expires <= now


def default_identity() -> str:
    """``user@host pid N <random>``: unique per process, readable in an error."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:8]}"


def _micro_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def lease_state(obj: dict[str, Any]) -> LeaseState:
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    return LeaseState(
        holder=str(spec.get("holderIdentity") or ""),
        acquired=str(spec.get("acquireTime") or ""),
        renewed=_parse_time(spec.get("renewTime")),
        duration=int(spec.get("leaseDurationSeconds") or DEFAULT_DURATION),
        resource_version=str(meta.get("resourceVersion") or ""),
        uid=str(meta.get("uid") or ""),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


def is_conflict(exc: BaseException) -> bool:
    """A 409 from the API server, however engine/kube reports it."""
    for attr in ("status", "code"):
        if getattr(exc, attr, None) == 409:
            return True
    failure = getattr(exc, "failure", None)
    return failure is not None and getattr(failure, "status", None) == 409


class StackLock:
    """The Lease of one stack; use as a context manager around an apply."""

    def __init__(
        self,
        kube: KubeApi,
        stack: str | Any,
        *,
        identity: str | None = None,
        duration: int = DEFAULT_DURATION,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube = kube
        self.stack_path = stack_path_of(stack)
        self.name = inventory_name(stack)
        self.identity = identity or default_identity()
        self.duration = duration
        self.clock = clock
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = False
        self._acquire_time = ""

    @property
    def field_manager(self) -> str:
        # Field manager names are limited to 128 bytes; the identity is unique per process.
        return f"{MANAGER_PREFIX}/{self.identity}"[:128]

    def _manifest(
        self, *, renew: datetime, transitions: int, resource_version: str | None
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": self.name,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "konfig"},
            "annotations": {"konfig.io/stack": self.stack_path},
        }
        if resource_version:
            meta["resourceVersion"] = resource_version
        return {
            "apiVersion": LEASE_API_VERSION,
            "kind": LEASE_KIND,
            "metadata": meta,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.duration,
                "acquireTime": self._acquire_time or _micro_time(renew),
                "renewTime": _micro_time(renew),
                "leaseTransitions": transitions,
            },
        }

    def read(self) -> LeaseState | None:
        obj = self.kube.get(LEASE_API_VERSION, LEASE_KIND, self.name, NAMESPACE)
        return None if obj is None else lease_state(obj)

    def try_acquire(self) -> LeaseState | None:
        """One attempt. Returns None when we hold the lease, else the current holder."""
        state = self.read()
        now = self.clock()
        try:
            if state is None:
                self._acquire_time = _micro_time(now)
                self.kube.apply(
                    self._manifest(renew=now, transitions=0, resource_version=None),
                    dry_run=False,
                    force=False,
                    field_manager=self.field_manager,
                )
            elif state.holder == self.identity:
                self._acquire_time = state.acquired
            elif state.expired(now):
                self._acquire_time = _micro_time(now)
                self.kube.apply(
                    self._manifest(
                        renew=now,
                        transitions=state.transitions + 1,
                        resource_version=state.resource_version,
                    ),
                    dry_run=False,
                    force=True,
                    field_manager=self.field_manager,
                )
            else:
                return state
        except Exception as exc:
            if is_conflict(exc):
                # Someone else won the race: report whoever holds it now.
                return self.read() or state
            raise
        self._held = True
        return None

    def acquire(
        self,
        timeout: float,
        *,
        poll: float = 1.0,
        on_wait: Callable[[LeaseState], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """Take the lease, waiting up to ``timeout`` seconds (or until ``stop`` is set);
        start renewing it."""
        ensure_namespace(self.kube)
        deadline = time.monotonic() + timeout
        reported = ""
        while True:
            holder = self.try_acquire()
            if holder is None:
                break
            if on_wait is not None and holder.holder != reported:
                on_wait(holder)
                reported = holder.holder
            if time.monotonic() >= deadline:
                expires = holder.expires_at()
                raise LockError(
                    f"stack {self.stack_path} is locked by another apply: Lease "
                    f"{NAMESPACE}/{self.name} is held by {holder.holder!r} since "
                    f"{holder.acquired or 'unknown'}"
                    + (f", expires {_micro_time(expires)} unless renewed" if expires else ""),
                    hint=f"wait for it to finish and re-run (or raise --lock-timeout, waited "
                    f"{timeout:g}s); if that apply died, its lease expires after "
                    f"{holder.duration}s",
                )
            pause = min(poll, max(0.05, deadline - time.monotonic()))
            if stop is None:
                time.sleep(pause)
            elif stop.wait(pause):
                raise LockError(
                    f"stack {self.stack_path}: stopped by a signal while waiting for its lock "
                    f"(held by {holder.holder!r}); nothing was written"
                )
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._renew_loop, name=f"lease {self.name}", daemon=True
        )
        self._thread.start()

    def renew(self) -> None:
        state = self.read()
        if state is None or state.holder != self.identity:
            raise LockError(
                f"lost the lock of {self.stack_path}: Lease {NAMESPACE}/{self.name} is now "
                f"held by {state.holder if state else 'nobody'!r}"
            )
        self.kube.apply(
            self._manifest(
                renew=self.clock(),
                transitions=state.transitions,
                resource_version=state.resource_version,
            ),
            dry_run=False,
            force=False,
            field_manager=self.field_manager,
        )

    def _renew_loop(self) -> None:
        interval = max(0.2, self.duration / 3)
        last_ok = time.monotonic()
        while not self._stop.wait(interval):
            try:
                self.renew()
                last_ok = time.monotonic()
            except LockError:
                self.lost.set()
                return
            except Exception as exc:
                if is_conflict(exc):
                    # resourceVersion moved under us: re-read and try again at once
                    try:
                        self.renew()
                        last_ok = time.monotonic()
                        continue
                    except Exception:
                        pass
                if time.monotonic() - last_ok >= self.duration:
                    self.lost.set()
                    return

    def release(self) -> None:
        """Stop renewing and delete the lease if we still hold it. Never raises."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if not self._held:
            return
        self._held = False
        try:
            state = self.read()
            if state is not None and state.holder == self.identity:
                self.kube.delete(
                    LEASE_API_VERSION,
                    LEASE_KIND,
                    self.name,
                    NAMESPACE,
                    uid=state.uid or None,
                    propagation="Background",
                )
        except Exception:
            # An unreleased lease expires after its duration; nothing is lost.
            pass

    def __enter__(self) -> StackLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
