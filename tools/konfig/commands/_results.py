"""Printing what ``konfig apply`` and ``konfig destroy`` do: progress, plans, results."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import click

from konfig.commands._console import echo_json, error, use_color
from konfig.engine.stackrun import StackResult
from konfig.errors import EXIT_FINDINGS, EXIT_OK, KonfigError, UsageError
from konfig.pipeline.previewing import Preview, StackPreview
from konfig.report.previews import render_text
from konfig.report.progress import summary_lines
from konfig.words import plural

DEFAULT_TIMEOUT = 300.0
DEFAULT_LOCK_TIMEOUT = 300.0


def show_plans(plans: Sequence[StackPreview]) -> None:
    """The plans to confirm, on stdout (coloured on a terminal)."""
    click.echo(render_text(Preview.of(list(plans)), color=use_color(sys.stdout)), nl=False)


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


def result_json(
    result: StackResult, context: str | None = None, identity: str | None = None
) -> dict[str, Any]:
    return {
        "path": result.path,
        "context": context,
        "identity": identity,
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
            "appliedBy": result.inventory.applied_by or None,
            "approvedBy": list(result.inventory.approved_by),
            "approvedChange": result.inventory.approved_change or None,
            "approvedOverrides": [o.to_json() for o in result.inventory.approved_overrides],
        },
    }


def finish(
    verb: str,
    results: Sequence[StackResult],
    *,
    as_json: bool,
    contexts: dict[str, str] | None = None,
    reviews: Mapping[str, dict[str, Any]] | None = None,
    identities: dict[str, str | None] | None = None,
) -> int:
    """Print the outcome of an apply or destroy (per cluster when there are several) and
    return its exit code; ``reviews``: each stack's comparison with the reviewed change
    (its ``review`` in the JSON); ``identities``: the user each stack's requests
    impersonate (konfig.yaml ``identities``; None: the kubeconfig's own)."""
    ok = all(r.ok for r in results)
    if as_json:
        stacks = []
        for r in results:
            item = result_json(r, (contexts or {}).get(r.path), (identities or {}).get(r.path))
            if reviews and r.path in reviews:
                item["review"] = reviews[r.path]
            stacks.append(item)
        echo_json({"ok": ok, "stacks": stacks})
    elif ok:
        for line in summary_lines(verb, results, contexts or {}):
            click.echo(line)
    else:
        report_failures(verb.lower(), results)
    return EXIT_OK if ok else EXIT_FINDINGS


def report_failures(verb: str, results: Sequence[StackResult]) -> None:
    failed = [r for r in results if not r.ok]
    error(f"{verb} failed for {len(failed)} of {plural(len(results), 'stack')}:")
    for r in failed:
        click.echo(f"  {r.error or r.path}", err=True)
        for o in r.objects:
            if o.outcome in ("failed", "skipped"):
                click.echo(f"    {o.id}: {o.message}", err=True)
