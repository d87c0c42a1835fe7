"""Signals: what a terminal or CI sends to stop konfig, and what konfig does then.

A cancelled CI job gets SIGINT, then SIGTERM a few seconds later, then SIGKILL (GitHub
Actions waits 7.5 s and 2.5 s); ``timeout``, systemd and Kubernetes send SIGTERM. By
default Python dies of SIGTERM on the spot: no ``finally`` runs, so temporary files
stay, compile workers are orphaned and a stack's Lease stays held until it expires.

* :func:`terminate_as_interrupt` (the whole run of the CLI): SIGTERM is raised in the
  main thread as :class:`Terminated`, a ``KeyboardInterrupt``, as SIGINT already is: every
  ``finally`` and context manager runs (temporary files are removed, the compile
  worker pool stops its processes) and the CLI exits 143 (130 for SIGINT).
* :func:`graceful` (around applying or destroying): the first SIGINT or SIGTERM only
  sets an event the engine checks before each step; requests in flight finish, nothing
  new starts, each stack's inventory records what exists, its Lease is released, and
  the results are printed; a running OpenTofu gets SIGINT, its own graceful stop (it
  finishes the operations in flight, writes its state and releases its state lock; the
  stack's Kubernetes objects are then not applied). A second signal is raised in the
  main thread as outside the block: a stack applied in the main thread stops where it
  is (its Lease is released, and its inventory still lists every object it may own:
  the union written before applying), stacks on other threads finish their step, and
  nothing is printed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like SIGINT's KeyboardInterrupt."""


def exit_code(exc: KeyboardInterrupt) -> int:
    return EXIT_SIGTERM if isinstance(exc, Terminated) else EXIT_SIGINT


def _raise_terminated(_signum: int, _frame: FrameType | None) -> None:
    raise Terminated()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM becomes :class:`Terminated` in the main thread while the block runs."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class Stop:
    """Set by the first SIGINT or SIGTERM inside :func:`graceful`."""

    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    @property
    def exit_code(self) -> int:
        return EXIT_SIGTERM if self.signum == signal.SIGTERM else EXIT_SIGINT


def _say(text: str) -> None:
    # straight to the file descriptor: a handler may run while the main thread is in
    # the middle of writing to sys.stderr (its buffer is not reentrant)
    try:
        os.write(2, text.encode("utf-8", "replace"))
    except OSError:
        pass


@contextmanager
def graceful(what: str) -> Iterator[Stop]:
    """The first SIGINT/SIGTERM sets the returned :class:`Stop`; a second one raises
    (:class:`Terminated` or KeyboardInterrupt) as outside the block."""
    stop = Stop()
    if not _in_main_thread():
        yield stop
        return

    def handle(signum: int, _frame: FrameType | None) -> None:
        if stop.requested:
            if signum == signal.SIGTERM:
                raise Terminated()
            raise KeyboardInterrupt()
        stop.signum = signum
        stop.event.set()
        _say(
            f"konfig: {signal.Signals(signum).name} received: stopping {what}: requests in "
            "flight finish, nothing new starts, each stack's inventory records what exists "
            "and its lock is released (send it again to stop at once)\n"
        )
        forwarded = _forward_to_tofu()
        if forwarded:
            _say(
                f"konfig: OpenTofu ({forwarded} running) was sent SIGINT: it finishes the "
                "operations in flight, starts no new one, writes its state and releases "
                "its lock\n"
            )

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _forward_to_tofu() -> int:
    """Pass the stop on to the OpenTofu processes running (each in a session of its own,
    so a terminal's Ctrl-C or a CI's SIGTERM to konfig does not reach them): SIGINT is
    OpenTofu's graceful stop. How many were running (none when the Terraform runtime
    was never loaded)."""
    # no import in a signal handler: only a run that loaded the runner has tofu to stop
    runner = sys.modules.get("konfig.tofu.runner")
    if runner is None:
        return 0
    forwarded: int = runner.forward_signal(signal.SIGINT)
    return forwarded


def stopped(stop: Stop, code: int) -> int:
    """The exit code of a command that ran inside :func:`graceful`: 130/143 when a signal
    stopped it (said on stderr after the results), else ``code``."""
    if not stop.requested:
        return code
    _say(f"konfig: stopped by {stop.name}\n")
    return stop.exit_code
