"""One stack's apply, prune or destroy: its options, events, result and running state.

Plain data shared by :mod:`~konfig.engine.applier`, :mod:`~konfig.engine.pruner`,
:mod:`~konfig.engine.destroyer` and :mod:`~konfig.engine.waiter`: what the caller
chooses (:class:`ApplyOptions`), what it is told while the stack runs (:class:`Event`
through an :data:`EventSink`), what it gets back (:class:`StackResult`), and the
mutable :class:`StackRun` the engine keeps meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from konfig.engine import inventory
from konfig.engine.drift import owned_fields
from konfig.engine.guards import DangerGuard
from konfig.engine.inventory import Inventory
from konfig.engine.kube import Kube, KubeError
from konfig.engine.plan import Change
from konfig.errors import KonfigError
from konfig.ids import ObjectRef
from konfig.masking import scrub

Outcome = Literal[
    "created", "updated", "replaced", "deleted", "unchanged", "failed", "skipped", "kept"
]

Phase = Literal["apply", "prune", "destroy"]


SUMMARY = ("created", "updated", "replaced", "deleted", "unchanged")


@dataclass(frozen=True)
class ApplyOptions:
    concurrency: int = 5
    timeout: float = 300.0  # per health wait (one level, or one deletion wave)
    wait: bool = True
    replace_on_immutable: bool = False  # the stack's stack.yaml `apply: {replaceOnImmutable}`
    commit: str = ""
    dirty: bool = False  # the Spec comes from uncommitted changes on top of ``commit``
    # each update sent with the resourceVersion the plan read, a precondition the server
    # checks (the merge-time apply of a reviewed change: nothing slips in between)
    preconditions: bool = False
    # recorded with the inventory when the apply completes (konfig apply --reviewed):
    # status, digest, reviewedDigest, pr
    review: Mapping[str, Any] | None = None
    # who approved the change applied (`konfig apply --approvals`), for the audit record
    approved_by: tuple[str, ...] = ()
    approved_change: str = ""
    approved_overrides: tuple[inventory.ApprovedOverride, ...] = ()  # with their reasons
    poll: float = 1.0
    attempts: int = 4
    backoff: float = 0.5
    # danger/confirm: konfig.yaml `dangers` and the confirmations given (None: no guard)
    dangers: DangerGuard | None = None
    kubernetes_version: str | None = None  # the declared one (dangers of class deprecated)


@dataclass(frozen=True)
class ObjectResult:
    id: str
    outcome: Outcome
    message: str = ""
    phase: Phase = "apply"


@dataclass(frozen=True)
class Event:
    stack: str
    kind: Literal["level", "object", "wait", "prune", "inventory"]
    message: str
    result: ObjectResult | None = None


EventSink = Callable[[Event], None]


@dataclass(frozen=True)
class StackResult:
    path: str
    ok: bool
    objects: tuple[ObjectResult, ...] = ()
    error: str | None = None
    inventory: Inventory | None = None
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys((*SUMMARY, "failed", "skipped", "kept"), 0)
        for r in self.objects:
            out[r.outcome] += 1
        return out

    def failures(self) -> list[ObjectResult]:
        return [r for r in self.objects if r.outcome in ("failed", "skipped")]


@dataclass
class StackRun:
    """Mutable state of one stack's apply or destroy."""

    kube: Kube
    path: str
    options: ApplyOptions
    emit: EventSink
    lost: threading.Event | None
    results: dict[str, ObjectResult] = field(default_factory=dict)
    uids: dict[str, str] = field(default_factory=dict)
    exists: dict[str, bool] = field(default_factory=dict)
    unreachable: KubeError | None = None
    secrets: set[str] = field(default_factory=set)
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)  # last object per id
    # set when the caller is told to stop (SIGTERM, SIGINT): requests in flight finish,
    # nothing new starts, the inventory records what exists
    stop: threading.Event | None = None
    # Konfig's managed fields on each object right after this run wrote (or kept) it
    owned: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Jobs that remove themselves and were seen complete (or gone): id -> manifest digest
    finished: dict[str, str] = field(default_factory=dict)

    def stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def pause(self, seconds: float) -> bool:
        """Sleep ``seconds``; True (at once) when told to stop meanwhile."""
        if self.stop is None:
            time.sleep(seconds)
            return False
        return self.stop.wait(seconds)

    def saw(self, resource_id: str, obj: Mapping[str, Any] | None) -> None:
        """The object as this run left it: for the health wait, and its Konfig fields."""
        if obj is None:
            return
        self.seen[resource_id] = dict(obj)
        fields = owned_fields(obj)
        if fields is not None:
            self.owned[resource_id] = fields

    def record(self, result: ObjectResult) -> None:
        if self.secrets:
            # Server messages may quote values: never let a Secret's value through.
            result = ObjectResult(
                result.id, result.outcome, scrub(result.message, self.secrets), result.phase
            )
        self.results[result.id] = result
        self.emit(Event(self.path, "object", result.message, result))

    def check_lock(self) -> None:
        if self.lost is not None and self.lost.is_set():
            raise KonfigError(
                f"{self.path}: lost the stack's lock (Lease) during the apply; stopped",
                hint="another apply took it over after our renewals failed; re-run",
            )


def uid_of(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


def where(ref: ObjectRef) -> str:
    return ref.describe()


def ref_of(change: Change) -> ObjectRef:
    return ObjectRef(change.api_version, change.kind, change.namespace, change.name)


def set_id_of(path: str) -> str:
    return inventory.applyset_id(inventory.inventory_name(path))


def unreachable_message(path: str, error: KubeError) -> str:
    return (
        f"{path}: stopped: {error.message}. The inventory still lists every object this "
        "stack may own (the union written before applying); re-run the apply once the "
        "API server is back and it converges"
    )


INTERRUPTED = "not done: konfig was stopped (SIGTERM or SIGINT) before it got there"


def interrupted_message(path: str, done: int, total: int) -> str:
    return (
        f"{path}: stopped by a signal with {done} of {total} objects done; the "
        "inventory records what exists (the commit is recorded only by a complete run) "
        "and the lock is released: run the command again to finish"
    )


def summary_error(run: StackRun, ok: bool) -> str | None:
    if ok:
        return None
    if run.unreachable is not None:
        return unreachable_message(run.path, run.unreachable)
    if run.stopping():
        done = sum(1 for r in run.results.values() if r.outcome in SUMMARY)
        return interrupted_message(run.path, done, len(run.results))
    failed = [r for r in run.results.values() if r.outcome == "failed"]
    skipped = [r for r in run.results.values() if r.outcome == "skipped"]
    return f"{run.path}: {len(failed)} failed, {len(skipped)} skipped"
