"""Reading the JSON the stages print: shape checks that name what is wrong."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ReportInputError(ValueError):
    """An input document does not have the shape its producer emits."""


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise ReportInputError(what)


def line_number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def nonempty(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def stack_path(item: Any, what: str) -> str:
    """The ``path`` of one stack entry; ``what`` (e.g. "test: a stack") names it when
    the entry has none."""
    expect(isinstance(item, Mapping) and isinstance(item.get("path"), str), f"{what} needs `path`")
    return str(item["path"])
