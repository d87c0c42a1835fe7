"""Placeholders for what differs between stacks only because the stacks differ.

Each object change is described without the parts that differ from stack to stack only
because the stacks differ: the object's namespace, the project and the stack name are
replaced by placeholders (``{namespace}``, ``{project}``, ``{stack}``) wherever they
appear as a whole token (between characters that are not letters or digits) in the
object's name, in field paths and in string values. So
``spec.template.spec.containers[name=shop].image`` in project ``shop`` and
``...containers[name=cart].image`` in project ``cart`` are the same path
(:mod:`konfig.report.grouping` groups by it). :func:`display` writes a placeholder back
as the one value it has everywhere, else as ``{name}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

PLACEHOLDERS = ("namespace", "project", "stack")
# Inside konfig placeholders are written with control characters, so a value
# that literally contains "{project}" can never be mistaken for one.
_OPEN, _CLOSE = "\x00", "\x01"
MARKER = re.compile(f"{_OPEN}([a-z]+){_CLOSE}")


def marker(name: str) -> str:
    return f"{_OPEN}{name}{_CLOSE}"


def usable(value: str) -> bool:
    # Short or numeric tokens would match too much ("1", "a").
    return len(value) >= 2 and not value.isdigit()


@lru_cache(maxsize=4096)
def _pattern(
    pairs: tuple[tuple[str, str], ...],
) -> tuple[re.Pattern[str], dict[str, str]] | None:
    if not pairs:
        return None
    lookup: dict[str, str] = {}
    for name, value in pairs:  # in PLACEHOLDERS order: the first name of a value wins
        lookup.setdefault(value, name)
    alternatives = "|".join(re.escape(v) for v in sorted(lookup, key=lambda v: (-len(v), v)))
    return re.compile(f"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])"), lookup


class Normaliser:
    """Replaces one object's stack-specific tokens by placeholders."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self.pairs = tuple((k, tokens[k]) for k in PLACEHOLDERS if k in tokens)

    def text(self, value: str, skip: frozenset[str] = frozenset()) -> str:
        pairs = self.pairs if not skip else tuple(p for p in self.pairs if p[0] not in skip)
        compiled = _pattern(pairs)
        if compiled is None:
            return value
        pattern, lookup = compiled
        return pattern.sub(lambda m: marker(lookup[m.group(0)]), value)


class Literals:
    """Which placeholders must not be applied to a string, because the same string
    occurs in stacks where that placeholder has different values: then it is a
    literal, not derived from the stack (``konfig.dev/lib2`` is no ``{stack}`` in the
    ``dev`` stacks when the ``prod`` stacks have it too)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[Any, ...], dict[str, set[str]]] = {}

    def add(self, key: tuple[Any, ...], tokens: Mapping[str, str]) -> None:
        values = self.seen.setdefault(key, {})
        for name, value in tokens.items():
            values.setdefault(name, set()).add(value)

    def skip(self, key: tuple[Any, ...]) -> frozenset[str]:
        return frozenset(n for n, v in self.seen.get(key, {}).items() if len(v) > 1)


def freeze(value: Any) -> Any:
    """A hashable form of a field value (values are JSON: dicts and lists only empty)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def thaw(value: Any, original: Any) -> Any:
    return original if isinstance(original, (dict, list)) else value


def display(text: str, uniform: Mapping[str, str]) -> str:
    return MARKER.sub(lambda m: uniform.get(m.group(1), "{" + m.group(1) + "}"), text)


def display_value(value: Any, uniform: Mapping[str, str]) -> Any:
    return display(value, uniform) if isinstance(value, str) else value
