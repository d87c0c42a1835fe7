"""Promotion order: a stack applies only after others are applied and healthy.

A stack's ``stack.yaml`` may say::

    promotion:
      after: [appops/webshop/dev]   # stacks that must be applied first
      soak: 10m                     # and then run this long (s, m, h; default 0)

A stack is **held** while one of its ``after`` stacks

1. is pending itself (never applied, or behind the commit being applied: the change
   reaches it too), or is held itself: a merge that changes dev and prod applies dev,
   and prod waits for a later run, never the same one;
2. was last applied less than ``soak`` ago (its inventory's ``applied_at``; an apply
   records it only once every object was healthy, so "applied" means "applied and
   healthy").

A held stack is left out of what apply-on-merge applies (``konfig pending`` lists it
under ``held`` with the stack it waits for and, for a soak, until when) and ``konfig
apply`` refuses it (``promotion/held``, nothing written); the apply workflow runs again
on a schedule and applies it once the condition holds.

Pure: the caller passes the pending stacks, the inventories and the time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from konfig.engine.inventory import Inventory
from konfig.errors import ConfigError, KonfigError
from konfig.pipeline.connections import Connections
from konfig.repo.layout import STACK_FILE, Repository, Stack

HELD_RULE = "promotion/held"
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


@dataclass(frozen=True)
class Promotion:
    after: tuple[str, ...]
    soak: timedelta = timedelta(0)


@dataclass(frozen=True)
class Hold:
    """``stack`` waits for ``waiting_for``: ``reason``; ``until`` when a soak ends (None:
    until ``waiting_for`` is applied)."""

    stack: str
    waiting_for: str
    reason: str
    until: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.stack,
            "after": self.waiting_for,
            "reason": self.reason,
            "until": _iso(self.until) if self.until else None,
        }

    def message(self) -> str:
        when = f" until {_iso(self.until)}" if self.until else ""
        return f"{self.stack} is held{when}: {self.reason}"


def parse_duration(text: str, *, file: str = "stack.yaml") -> timedelta:
    """``10m``, ``1h30m``, ``45s``, ``0``: a ConfigError for anything else."""
    text = text.strip()
    if text == "0":
        return timedelta(0)
    match = _DURATION.match(text)
    if match is None or not any(match.groups()):
        raise ConfigError(
            f"promotion.soak {text!r} is not a duration",
            file=file,
            hint="write it like 10m, 1h30m or 45s",
        )
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


def promotion_of(raw: Mapping[str, Any], *, file: str) -> Promotion | None:
    """The ``promotion`` of a stack.yaml's data (already checked against its contract)."""
    data = raw.get("promotion")
    if not isinstance(data, dict):
        return None
    after = tuple(str(a).strip("/") for a in data.get("after") or ())
    soak = parse_duration(str(data.get("soak", "0")), file=file)
    return Promotion(after, soak) if after else None


def holds(
    candidates: Sequence[str],
    promotions: Mapping[str, Promotion],
    pending: Iterable[str],
    inventories: Mapping[str, Inventory | None],
    now: datetime,
) -> dict[str, Hold]:
    """Which of ``candidates`` (stacks about to be applied) are held, and why.
    ``pending``: every stack behind the commit being applied (candidates included)."""
    behind = set(pending) | set(candidates)
    held: dict[str, Hold] = {}
    changed = True
    while changed:  # a stack held makes the stacks after it held: to a fixed point
        changed = False
        for stack in candidates:
            if stack in held or stack not in promotions:
                continue
            found = _hold(stack, promotions[stack], behind, held, inventories, now)
            if found is not None:
                held[stack] = found
                changed = True
    return held


def _hold(
    stack: str,
    promotion: Promotion,
    behind: set[str],
    held: Mapping[str, Hold],
    inventories: Mapping[str, Inventory | None],
    now: datetime,
) -> Hold | None:
    soak = _words(promotion.soak)
    for first in promotion.after:
        if first in held:
            return Hold(stack, first, f"{first} is held itself ({held[first].reason})")
        if first in behind:
            return Hold(
                stack,
                first,
                f"promotion.after {first}, which is not applied at this commit yet: it is "
                f"applied first, then this stack{soak} in a later run",
            )
        inv = inventories.get(first)
        if inv is None or not inv.commit:
            return Hold(stack, first, f"promotion.after {first}, which was never applied")
        applied = _parse_time(inv.applied_at)
        if applied is None:
            return Hold(stack, first, f"promotion.after {first}, whose apply time is unknown")
        if applied + promotion.soak > now:
            return Hold(
                stack,
                first,
                f"promotion.after {first} (applied and healthy at {_iso(applied)}){soak}",
                until=applied + promotion.soak,
            )
    return None


def _words(soak: timedelta) -> str:
    if not soak:
        return ""
    return f", soaking {int(soak.total_seconds())}s"


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def promotions(stacks: Iterable[Stack]) -> dict[str, Promotion]:
    """Every stack's promotion, by path (stacks without one left out)."""
    out = {}
    for stack in stacks:
        found = promotion_of(stack.raw, file=f"{stack.path}/{STACK_FILE}")
        if found is not None:
            out[stack.path] = found
    return out


def refuse_held(
    repo: Repository, selected: Sequence[Stack], conns: Connections, now: datetime | None = None
) -> None:
    """``konfig apply``'s promotion rule: a KonfigError naming every held stack of
    ``selected`` (nothing is applied), before any write. Stacks applied together are
    not applied yet: the later of two in one run is held."""
    wanted = promotions(selected)
    if not wanted:
        return
    # git and the change detection: only when a selected stack has a promotion order
    from konfig.detect.behind import pending_stacks
    from konfig.pipeline.inventories import read_inventories

    found = read_inventories(repo, conns)
    firsts = sorted({a for p in wanted.values() for a in p.after} & {s.path for s in repo.stacks})
    behind = pending_stacks(repo.root, "HEAD", firsts, found.by_stack).stack_paths
    held = holds(
        [s.path for s in selected],
        wanted,
        behind,
        found.by_stack,
        now or datetime.now(UTC),
    )
    if held:
        lines = [h.message() for h in held.values()]
        raise KonfigError(
            f"{HELD_RULE}: nothing was applied: " + "; ".join(lines),
            hint="apply the stacks of `promotion.after` first and let them soak; the apply "
            "workflow's scheduled run applies held stacks when their time comes "
            "(`konfig pending` says until when)",
        )
