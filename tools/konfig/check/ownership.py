"""Ownership across stacks: every object belongs to exactly one stack.

- ``ownership/shared-object``: two stacks that target the same cluster declare the same
  object id. Applying either would take the object from the other (or, with Konfig's
  guards, fail at merge): reported in the pull request, at each stack's own file and
  line, naming the other stack and where it declares the object.

The rule needs only ids, so the stacks a command did not compile contribute the ids
their golden file records (``ci-test/stdout.golden.yaml``, which `konfig test` keeps
equal to the compiled output): :class:`Declared` holds a stack's ids and where each is
declared, whatever the source. :func:`shared_objects` is the one place that decides
what clashes; ``konfig apply`` refuses the same clashes before planning.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from konfig.check.findings import Finding

RULE = "ownership/shared-object"

# Where a stack declares an object: (file, line); the line may be unknown.
Locator = Callable[[str], tuple[str, int | None]]


@dataclass(frozen=True)
class Declared:
    """The object ids one stack declares, for the cluster it targets."""

    stack: str  # the stack path
    target: Hashable  # which cluster: stacks on different clusters never clash
    ids: frozenset[str]
    where: Locator  # id -> (file, line)


@dataclass(frozen=True)
class Shared:
    """An object id two stacks declare for the same cluster."""

    id: str
    stacks: tuple[str, str]  # in the order given


def shared_objects(declared: Iterable[tuple[str, Hashable, Iterable[str]]]) -> list[Shared]:
    """Every (id, pair of stacks) that declare the same object on the same target.

    ``declared`` holds ``(stack path, target, ids)``; each clash is listed once, the
    stacks in the order given.
    """
    seen: dict[tuple[Hashable, str], list[str]] = {}
    for stack, target, ids in declared:
        for rid in ids:
            holders = seen.setdefault((target, rid), [])
            if stack not in holders:
                holders.append(stack)
    found: list[Shared] = []
    for (_, rid), holders in seen.items():
        for i, first in enumerate(holders):
            found.extend(Shared(rid, (first, second)) for second in holders[i + 1 :])
    return sorted(found, key=lambda s: (s.stacks, s.id))


def check_ownership(declared: Sequence[Declared], selected: Iterable[str]) -> list[Finding]:
    """A finding per selected stack and object it shares with another stack, at the
    selected stack's own file and line; the message names the other stack's file."""
    by_stack = {d.stack: d for d in declared}
    wanted = set(selected)
    findings: list[Finding] = []
    for shared in shared_objects((d.stack, d.target, d.ids) for d in declared):
        for mine, other in (shared.stacks, shared.stacks[::-1]):
            if mine not in wanted:
                continue
            file, line = by_stack[mine].where(shared.id)
            other_file, other_line = by_stack[other].where(shared.id)
            there = f"{other_file}:{other_line}" if other_line else other_file
            findings.append(
                Finding(
                    RULE,
                    f"{shared.id} is also declared by {other} ({there}): an object belongs to "
                    "exactly one stack, so applying either would take it from the other; "
                    "remove it from one of the two stacks",
                    file,
                    line,
                    stack=mine,
                    resource=shared.id,
                )
            )
    return findings
