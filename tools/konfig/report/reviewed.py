"""The lines of the sticky comment about reviews (docs/review.md): what changed since the
last preview a reviewer saw, and that the base branch made the preview stale.

:func:`carried_body` is what ``konfig comment`` writes in place of the comment it
replaces: the new body, with the earlier heads' change digests carried in its hidden
record (:func:`konfig.pipeline.reviewed.carry`) and one line naming the stacks whose
digest changed (their reviews no longer hold) and how many kept theirs. The comment it
replaces is read as hostile input: an unreadable record there is dropped, said so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from konfig.errors import UsageError
from konfig.pipeline.reviewed import (
    Carried,
    Reviewed,
    carry,
    find_hidden,
    find_reference,
    hidden,
    read_reviewed,
    trim,
    with_record,
)
from konfig.report.budget import COMMENT_LIMIT, chars

CHANGED_TAG = "konfig:changed-since-review"
STALE_TAG = "konfig:stale"
_SHOWN = 10  # stacks named in one line; the rest counted


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(f"`{p}`" for p in paths[:_SHOWN])
    more = len(paths) - _SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def changed_line(carried: Carried) -> str | None:
    """One line for a preview that replaced another: which stacks' change digests
    changed (their reviews no longer hold) and how many kept theirs; None for the first
    preview."""
    if carried.since is None:
        return None
    since = f"`{carried.since[:12]}`"
    kept = len(carried.kept)
    keeps = f"{kept} stack{'s' if kept != 1 else ''} unchanged, reviews kept"
    if not carried.changed:
        return f"<!-- {CHANGED_TAG} -->\n> ✅ Unchanged since the last review ({since}): {keeps}."
    return (
        f"<!-- {CHANGED_TAG} -->\n> 🔁 **Changed since the last review** ({since}): "
        f"{_listed(carried.changed)}; approvals of earlier commits no longer count for "
        f"them. {keeps}."
    )


def stale_line(commit: str, stacks: Sequence[str], *, branch: str = "main") -> str:
    """The line ``konfig stale`` adds: the base branch moved and changed these stacks."""
    return (
        f"<!-- {STALE_TAG} {commit} -->\n> ⏳ **Stale**: {branch}@`{commit[:12]}` changed "
        f"{_listed(stacks)} since this preview's base: update the branch and preview again "
        "before merging."
    )


def insert_line(body: str, line: str) -> str:
    """``body`` with ``line`` after its title (the first ``#`` heading; else first),
    a blank line around it."""
    lines = body.split("\n")
    at = next((i + 1 for i, text in enumerate(lines) if text.startswith("#")), 0)
    after = [""] if at < len(lines) and lines[at] != "" else []
    return "\n".join([*lines[:at], "", line, *after, *lines[at:]])


@dataclass(frozen=True)
class Body:
    """The body ``konfig comment`` writes, how its record compares with the one it
    replaces, and a warning to show (an unreadable earlier record)."""

    text: str
    carried: Carried | None
    warning: str | None = None


def carried_body(previous: str | None, body: str, *, limit: int = COMMENT_LIMIT) -> Body:
    """``body`` with the history of ``previous``'s hidden record carried over and the
    line of :func:`changed_line`; ``body`` as is when neither holds a record. The oldest
    heads are dropped until it fits ``limit``. A body whose record is out of the comment
    (a reference to an artifact, fixed by its sha256) is written as it is: nothing is
    carried into it (docs/review.md)."""
    if find_reference(body) is not None:
        return Body(body, None)
    new_has, old_has = find_hidden(body), bool(previous) and find_hidden(previous or "")
    if not new_has and not old_has:
        return Body(body, None)
    new = read_reviewed(body, where="the comment body") if new_has else Reviewed()
    old, warning = None, None
    if old_has and previous is not None:
        try:
            old = read_reviewed(previous, where="the comment it replaces")
        except UsageError as exc:
            warning = f"{exc}: its earlier heads are not carried over"
    carried = carry(old, new)
    record = carried.reviewed
    line = changed_line(carried) if new_has else None
    base = insert_line(body, line) if line else body
    while True:
        if new_has:
            text = with_record(base, record)
        elif record.history:
            text = base.rstrip("\n") + "\n\n" + hidden(record) + "\n"
        else:
            text = base
        shorter = trim(record) if chars(text) > limit else None
        if shorter is None:
            return Body(text, replace(carried, reviewed=record), warning)
        record = shorter


BLOCKED_MARKER = "konfig:blocked"


def render_unreviewed(
    applies: Sequence[Mapping[str, Any]], *, sha: str, run_url: str | None = None
) -> str | None:
    """What the merged pull request and the deploy issue are told when a stack's change
    at merge was not the reviewed one (``konfig apply --json``'s ``review``, checked
    against its contract): per stack, what differs and why, and the one way to release
    a blocked one. None when every stack was the reviewed change."""
    items = [
        s
        for doc in applies
        for s in doc.get("stacks") or []
        if (s.get("review") or {}).get("status") in ("changed", "unreviewed")
    ]
    if not items:
        return None
    blocked = [s for s in items if s["review"]["blocked"]]
    head = (
        f"## Konfig apply of `{sha[:12]}`: {len(blocked)} stack"
        f"{'s' if len(blocked) != 1 else ''} not applied, not the reviewed change"
        if blocked
        else f"## Konfig apply of `{sha[:12]}`: applied, changed since the review"
    )
    out = [f"<!-- {BLOCKED_MARKER} -->", head, ""]
    for s in items:
        review = s["review"]
        path, digest = s["path"], str(review["digest"])
        pr = review.get("pr")
        reviewed = (
            f"reviewed in #{pr}: digest `{str(review['reviewedDigest'])[:12]}`"
            if review["reviewedDigest"]
            else (
                f"no reviewed preview of it in #{pr}"
                if pr
                else "no reviewed preview: a direct push to main"
            )
        )
        verdict = (
            "**not applied**" if review["blocked"] else "applied anyway (onReviewedChanged: apply)"
        )
        out += [f"### `{path}`: {verdict}", "", f"- {reviewed}; now: digest `{digest[:12]}`"]
        diffs = list(review.get("differences") or [])
        out += [f"- now: {d}" for d in diffs[:20]]
        if len(diffs) > 20:
            out.append(f"- … and {len(diffs) - 20} more")
        out += [f"- because {b}" for b in (review.get("because") or [])[:10]]
        if review["blocked"]:
            out += [
                "",
                "To release it as it is now: run the `apply` workflow by hand from main "
                f"(workflow_dispatch) with `stack: {path}` and `digest: {digest}` (only "
                "someone allowed to run workflows can); it applies only while the change "
                "digest is still that one. Or preview the change in a new pull request.",
            ]
        out.append("")
    if run_url:
        out.append(f"[The apply run]({run_url})")
    return "\n".join(out).rstrip("\n") + "\n"
