"""Showing stacks that apply (or are destroyed) at the same time, so a person can follow.

- On a terminal (and not in CI): one live region per running stack (what it is doing
  now and its latest lines), redrawn in place; each stack's complete block is printed
  above the regions the moment the stack finishes.
- Otherwise (a pipe, a file, ``CI`` set): nothing is interleaved. Each stack's lines
  are kept and printed as one complete block when the stack finishes; every 30 seconds
  a "still running" line on stderr says which stacks are at what.

The blocks are rendered by :mod:`konfig.report.progress` (every line names its object).
Colour follows ``NO_COLOR`` and the terminal (rich).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

import click

from konfig.commands._console import info, out_console
from konfig.engine.lock import LeaseState
from konfig.engine.plan import StackPlan
from konfig.engine.stackrun import Event, StackResult
from konfig.pipeline.previewing import Preview, StackPreview
from konfig.report.previews import render_text
from konfig.report.progress import StackLog, block
from konfig.words import plural

if TYPE_CHECKING:  # rich takes a tenth of a second to import: only a live region pays it
    from rich.console import Console, RenderableType
    from rich.live import Live

HEARTBEAT = 30.0
LIVE_LINES = 3  # the latest lines shown under each running stack


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def live_wanted() -> bool:
    """Live regions only on an interactive terminal, never in CI."""
    return sys.stdout.isatty() and not in_ci() and os.environ.get("TERM", "") != "dumb"


class StackProgress:
    """The engine's event sink for many stacks at once, and their per-stack output."""

    def __init__(
        self,
        verb: str,
        *,
        quiet: bool = False,
        live: bool | None = None,
        contexts: dict[str, str] | None = None,
        heartbeat: float = HEARTBEAT,
        echo: Callable[[str], None] | None = None,
        console: Console | None = None,
    ) -> None:
        self.verb = verb
        self.quiet = quiet
        self.live_mode = (live_wanted() if live is None else live) and not quiet
        self.contexts = contexts or {}
        self.heartbeat = heartbeat
        self._echo = echo or (lambda text: click.echo(text, nl=False))
        self._console = console
        self._lock = threading.RLock()
        self._logs: dict[str, StackLog] = {}
        self._started: dict[str, float] = {}
        self._running: list[str] = []
        self._live: Live | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> StackProgress:
        if self.quiet:
            return self
        if self.live_mode:
            from rich.live import Live

            self._live = Live(
                self,
                console=self._console or out_console(),
                refresh_per_second=4,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
        elif self.heartbeat > 0:
            self._ticker = threading.Thread(target=self._beat, name="konfig-heartbeat", daemon=True)
            self._ticker.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._ticker is not None:
            self._ticker.join(timeout=1)

    # --- what the engine and the flows call ------------------------------------------

    def start(self, path: str) -> None:
        with self._lock:
            self._log(path)
            self._started[path] = time.monotonic()
            self._running.append(path)

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        with self._lock:
            self._log(event.stack).add(event)

    def plan(self, plan: StackPlan) -> None:
        """One stack's plan, as apply --yes shows it under the lock: part of its block."""
        if self.quiet:
            return
        text = render_text(Preview.of([StackPreview(plan.path, plan=plan)]), summary=False)
        with self._lock:
            self._log(plan.path).add_text(text)

    def lock_wait(self, path: str, state: LeaseState) -> None:
        if self.quiet:
            return
        message = f"waiting for the stack's lock, held by {state.holder!r}"
        with self._lock:
            log = self._log(path)
            log.lines.append(f"  {message}")
            log.activity = message
        if not self.live_mode:
            info(f"{path}: {message}")  # a wait is worth saying at once

    def finish(self, result: StackResult) -> None:
        with self._lock:
            log = self._log(result.path)
            if result.path in self._running:
                self._running.remove(result.path)
            if self.quiet:
                return
            text = block(self.verb, log, result)
            if self._live is not None:
                from rich.text import Text

                self._live.console.print(Text(text.rstrip("\n")), highlight=False)
            else:
                self._echo(text)

    # --- rendering -------------------------------------------------------------------

    def _log(self, path: str) -> StackLog:
        log = self._logs.get(path)
        if log is None:
            log = self._logs[path] = StackLog(path, self.contexts.get(path))
        return log

    def __rich__(self) -> RenderableType:
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.text import Text

        with self._lock:
            parts: list[RenderableType] = []
            for path in self._running:
                log = self._logs[path]
                where = f" ({log.context})" if log.context else ""
                seconds = time.monotonic() - self._started.get(path, time.monotonic())
                parts.append(
                    Spinner("dots", text=Text(f"{path}{where}: {log.activity} ({seconds:.0f} s)"))
                )
                for line in log.lines[-LIVE_LINES:]:
                    parts.append(Text("    " + line.strip(), style="dim"))
            return Group(*parts)

    def status_line(self) -> str:
        """``still applying 2 stacks: appops/a (level 2/3: 5 objects, 41 s), ...``"""
        with self._lock:
            now = time.monotonic()
            items = [
                f"{p} ({self._logs[p].activity}, {now - self._started.get(p, now):.0f} s)"
                for p in self._running
            ]
        word = {"apply": "applying", "destroy": "destroying"}.get(self.verb, self.verb)
        return f"still {word} {plural(len(items), 'stack')}: " + "; ".join(items)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            with self._lock:
                busy = bool(self._running)
            if busy:
                info(self.status_line())
