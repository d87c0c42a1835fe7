"""Line numbers of keys in a YAML file, so findings can point at the offending line."""

from __future__ import annotations

from typing import Any

import yaml

KeyPath = tuple[str | int, ...]


def key_lines(text: str) -> dict[KeyPath, int]:
    """Map each mapping key / sequence item path to its 1-based line (``{}`` if unparsable)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return lines


def _walk(node: Any, path: KeyPath, lines: dict[KeyPath, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = (*path, str(key.value))
            lines.setdefault(sub, key.start_mark.line + 1)
            _walk(value, sub, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            sub = (*path, index)
            lines.setdefault(sub, item.start_mark.line + 1)
            _walk(item, sub, lines)


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of ``path``, or of its nearest ancestor that has one."""
    for cut in range(len(path), 0, -1):
        hit = lines.get(path[:cut])
        if hit is not None:
            return hit
    return None
