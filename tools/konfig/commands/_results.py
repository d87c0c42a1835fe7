"""Printing what ``konfig apply`` and ``konfig destroy`` do: progress, plans, results."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

import click

from konfig.commands._console import echo_json, error, info
from konfig.engine.lock import LeaseState
from konfig.engine.plan import StackPlan
from konfig.engine.stackrun import SUMMARY, Event, StackResult
from konfig.errors import EXIT_FINDINGS, EXIT_OK, KonfigError, UsageError
from konfig.report.previews import Preview, StackPreview, render_text

DEFAULT_TIMEOUT = 300.0
DEFAULT_LOCK_TIMEOUT = 300.0


class Printer:
    """Thread-safe progress lines on stderr, per-object results on stdout."""

    def __init__(self, *, quiet: bool, prefix: bool) -> None:
        self.quiet = quiet
        self.prefix = prefix
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        head = f"[{event.stack}] " if self.prefix else ""
        with self._lock:
            if event.kind == "object" and event.result is not None:
                click.echo(f"{head}  {event.message}")
            else:
                info(f"{head}{event.message}")

    def plan(self, plan: StackPlan) -> None:
        """One stack's plan, as apply --yes shows it under the lock."""
        if not self.quiet:
            text = render_text(Preview.of([StackPreview(plan.path, plan=plan)]))
            with self._lock:
                click.echo(text, nl=False)

    def lock_wait(self, path: str, state: LeaseState) -> None:
        if not self.quiet:
            info(f"[{path}] waiting for the stack's lock, held by {state.holder!r}")


def show_plans(plans: Sequence[StackPreview]) -> None:
    """The plans to confirm, on stdout (coloured on a terminal)."""
    click.echo(render_text(Preview.of(list(plans)), color=sys.stdout.isatty()), nl=False)


def confirm(what: str, *, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(
            f"refusing to {what} without confirmation: stdin is not a terminal",
            hint="review the plan above and pass --yes",
        )
    if not click.confirm(f"Do you want to {what}?", default=False, err=True):
        raise KonfigError(f"{what}: cancelled, nothing was changed")


def result_json(result: StackResult) -> dict[str, Any]:
    return {
        "path": result.path,
        "ok": result.ok,
        "error": result.error,
        "counts": result.counts(),
        "seconds": round(result.seconds, 3),
        "objects": [
            {"id": r.id, "phase": r.phase, "outcome": r.outcome, "message": r.message}
            for r in result.objects
        ],
        "inventory": None
        if result.inventory is None
        else {
            "name": result.inventory.name,
            "applysetId": result.inventory.applyset_id,
            "commit": result.inventory.commit,
            "specDigest": result.inventory.spec_digest,
            "members": len(result.inventory.members),
        },
    }


def finish(verb: str, results: Sequence[StackResult], *, as_json: bool) -> int:
    """Print the outcome of an apply or destroy and return its exit code."""
    ok = all(r.ok for r in results)
    if as_json:
        echo_json({"ok": ok, "stacks": [result_json(r) for r in results]})
    elif ok:
        click.echo(summary_line(verb, results))
    else:
        report_failures(verb.lower(), results)
    return EXIT_OK if ok else EXIT_FINDINGS


def summary_line(verb: str, results: Sequence[StackResult]) -> str:
    totals = dict.fromkeys(SUMMARY, 0)
    for r in results:
        for key, n in r.counts().items():
            if key in totals:
                totals[key] += n
    return f"{verb} complete: " + ", ".join(f"{n} {key}" for key, n in totals.items())


def report_failures(verb: str, results: Sequence[StackResult]) -> None:
    failed = [r for r in results if not r.ok]
    error(f"{verb} failed for {len(failed)} of {len(results)} stacks:")
    for r in failed:
        click.echo(f"  {r.error or r.path}", err=True)
        for o in r.objects:
            if o.outcome in ("failed", "skipped"):
                click.echo(f"    {o.id}: {o.message}", err=True)
