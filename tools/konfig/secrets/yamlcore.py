"""YAML as sops reads it: the core schema of YAML 1.2 as Go's yaml.v3 resolves plain scalars.

The MAC of a SOPS file covers the values that stay in plain text (keys ending in
``_unencrypted``), so Konfig must type them exactly as the ``sops`` binary does:
``yes``/``on`` stay strings, ``0o17`` and ``0x1F`` are integers, there are no
timestamps and no sexagesimal numbers (all of which PyYAML's YAML 1.1 resolver gets
differently). Duplicate keys and non-string keys are refused, as sops refuses them.

Nodes keep their line numbers so errors can point at the line of a key.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

import yaml

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
TIMESTAMP = "tag:yaml.org,2002:timestamp"
MAP = "tag:yaml.org,2002:map"
SEQ = "tag:yaml.org,2002:seq"

_WORDS: dict[str, tuple[str, Any]] = {
    **dict.fromkeys(("true", "True", "TRUE"), (BOOL, True)),
    **dict.fromkeys(("false", "False", "FALSE"), (BOOL, False)),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), (NULL, None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), (FLOAT, math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), (FLOAT, math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), (FLOAT, -math.inf)),
}
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INT64 = (-(2**63), 2**64 - 1)  # signed, then unsigned 64-bit as Go parses them
_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64) (then ParseUint): a base prefix, or a leading 0 for octal."""
    sign, body = (text[0], text[1:]) if text[:1] in "+-" else ("", text)
    base = 10
    if body[:2] in ("0x", "0X"):
        base, body = 16, body[2:]
    elif body[:2] in ("0o", "0O"):
        base, body = 8, body[2:]
    elif body[:2] in ("0b", "0B"):
        base, body = 2, body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, body = 8, body[1:]
    if not body or any(c not in _DIGITS[base] for c in body):
        return None
    value = int(body, base) * (-1 if sign == "-" else 1)
    return value if _INT64[0] <= value <= _INT64[1] else None


class GoTime(str):
    """A YAML timestamp as sops holds it: the text Go's time.MarshalText gives
    (RFC 3339 with nanoseconds, trailing zeros dropped, ``Z`` for UTC)."""

    __slots__ = ()


_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}))"
    r"|(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?))?$"
)


def _go_time(text: str) -> GoTime | None:
    """yaml.v3's timestamp forms (RFC 3339 with short fields, a space-separated form
    without zone, a date), as Go re-prints them; None when ``text`` is none of them."""
    match = _TIMESTAMP.match(text)
    if not match:
        return None
    g = match.groups()
    year, month, day = int(g[0]), int(g[1]), int(g[2])
    if g[3] is not None:
        clock, fraction, zone = g[3:6], g[6] or "", g[7]
    elif g[8] is not None:
        clock, fraction, zone = g[8:11], g[11] or "", "Z"
    else:
        clock, fraction, zone = ("0", "0", "0"), "", "Z"
    hour, minute, second = (int(c) for c in clock)
    try:
        datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None
    if zone != "Z" and (int(zone[1:3]) > 23 or int(zone[4:6]) > 59):
        return None
    if zone in ("+00:00", "-00:00"):
        zone = "Z"
    nanos = fraction.ljust(9, "0").rstrip("0")
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
    return GoTime(f"{text}{'.' + nanos if nanos else ''}{zone}")


def resolve_plain(text: str) -> tuple[str, Any]:
    """The tag and value yaml.v3 gives an unquoted scalar."""
    if text in _WORDS:
        return _WORDS[text]
    first = text[0]
    if first == ".":
        if _FLOAT.match(text):
            return FLOAT, float(text)
    elif first in "+-0123456789":
        moment = _go_time(text)
        if moment is not None:
            return TIMESTAMP, moment
        plain = text.replace("_", "")
        value = _go_int(plain)
        if value is not None:
            return INT, value
        if _FLOAT.match(plain):
            return FLOAT, float(plain)
    return STR, text


def go_float(value: float) -> str:
    """strconv.FormatFloat(value, 'f', -1, 64): shortest digits, never an exponent."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = format(Decimal(repr(value)).normalize(), "f")
    return "-0" if text == "0" and math.copysign(1.0, value) < 0 else text


class _Loader(yaml.SafeLoader):
    pass


class LoadError(Exception):
    """Invalid YAML, or YAML sops would refuse; ``line`` is 1-based when known."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def compose(text: str) -> yaml.Node | None:
    """The node tree of a single-document YAML text (None when empty)."""
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.composer.ComposerError as exc:
        if "expected a single document" in str(exc):
            mark = exc.problem_mark
            raise LoadError(
                "holds several YAML documents; Konfig reads one document per file",
                mark.line + 1 if mark else None,
            ) from exc
        raise _load_error(exc) from exc
    except yaml.YAMLError as exc:
        raise _load_error(exc) from exc
    return node


def _load_error(exc: yaml.YAMLError) -> LoadError:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return LoadError(f"invalid YAML: {problem}", mark.line + 1 if mark else None)


def line_of(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


Path = tuple[str | int, ...]


def construct(node: yaml.Node, lines: dict[Path, int] | None = None, path: Path = ()) -> Any:
    """Plain data (dict, list, str, int, float, bool, None) from a node, sops' way.

    ``lines`` (when given) receives the 1-based line of every key and list item, by
    path (mapping keys and list indices).
    """
    if lines is not None and path:
        lines.setdefault(path, line_of(node))
    if isinstance(node, yaml.MappingNode):
        if node.tag not in (MAP, "!"):
            raise LoadError(f"unsupported YAML tag {node.tag}", line_of(node))
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = construct(key_node)
            if key_node.tag == "tag:yaml.org,2002:merge" or (
                isinstance(key_node, yaml.ScalarNode)
                and key_node.value == "<<"
                and not key_node.style
            ):
                raise LoadError("YAML merge keys (<<) are not supported", line_of(key_node))
            if not isinstance(key, str):
                raise LoadError(
                    f"key {key!r} is not a string; SOPS files take string keys only (quote it)",
                    line_of(key_node),
                )
            if key in out:
                raise LoadError(f"duplicate key {key!r}", line_of(key_node))
            if lines is not None:
                lines[(*path, key)] = line_of(key_node)
            out[key] = construct(value_node, lines, (*path, key))
        return out
    if isinstance(node, yaml.SequenceNode):
        if node.tag not in (SEQ, "!"):
            raise LoadError(f"unsupported YAML tag {node.tag}", line_of(node))
        return [construct(item, lines, (*path, i)) for i, item in enumerate(node.value)]
    assert isinstance(node, yaml.ScalarNode)
    return _scalar(node)


def _scalar(node: yaml.ScalarNode) -> Any:
    text = node.value
    explicit = getattr(node, "explicit_tag", False)
    if not explicit:
        if node.style:  # quoted or block scalar: always a string
            return text
        return resolve_plain(text)[1]
    if node.tag in (STR, "!"):
        return text
    tag, value = resolve_plain(text)
    wanted = {INT: (INT,), FLOAT: (FLOAT, INT), BOOL: (BOOL,), NULL: (NULL,)}.get(node.tag)
    if wanted is None:
        raise LoadError(f"unsupported YAML tag {node.tag}", line_of(node))
    if tag not in wanted:
        raise LoadError(f"cannot read {text!r} as {node.tag.rsplit(':', 1)[-1]}", line_of(node))
    return float(value) if node.tag == FLOAT else value


def _resolve(loader: yaml.SafeLoader, kind: type, value: Any, implicit: Any) -> str:
    """Replaces PyYAML's YAML 1.1 implicit resolution of plain scalars."""
    if kind is yaml.ScalarNode and implicit[0]:
        return resolve_plain(value)[0]
    return str(yaml.SafeLoader.resolve(loader, kind, value, implicit))  # type: ignore[no-untyped-call]


def _compose_scalar_node(loader: Any, anchor: Any) -> yaml.ScalarNode:
    event = loader.peek_event()
    node: yaml.ScalarNode = yaml.composer.Composer.compose_scalar_node(loader, anchor)
    node.explicit_tag = event.tag is not None  # type: ignore[attr-defined]
    return node


_Loader.resolve = _resolve  # type: ignore[assignment,method-assign]
_Loader.compose_scalar_node = _compose_scalar_node  # type: ignore[assignment,method-assign]


# --- writing -----------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block style, sequences indented under their key, no aliases, lines unwrapped."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar(STR, data, style="|")
    if data and resolve_plain(data)[0] != STR:
        # sops would read the plain form as a number, a bool or null: quote it
        return dumper.represent_scalar(STR, data, style="'")
    return dumper.represent_scalar(STR, data)


def _represent_float(dumper: yaml.SafeDumper, data: float) -> yaml.ScalarNode:
    if math.isnan(data):
        text = ".nan"
    elif math.isinf(data):
        text = ".inf" if data > 0 else "-.inf"
    else:
        text = repr(data)
    return dumper.represent_scalar(FLOAT, text)


def _represent_time(dumper: yaml.SafeDumper, data: GoTime) -> yaml.ScalarNode:
    return dumper.represent_scalar(TIMESTAMP, str(data))


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(GoTime, _represent_time)
_Dumper.add_representer(float, _represent_float)


def dump(data: Any) -> str:
    text: str = yaml.dump(
        data,
        Dumper=_Dumper,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        indent=2,
        width=2**31 - 1,
    )
    return text


def has_comments(text: str) -> int | None:
    """The 1-based line of the first YAML comment in ``text``, or None.

    A ``#`` counts when it is outside every scalar and starts the line or follows
    whitespace (YAML's rule for comments).
    """
    spans: list[tuple[int, int]] = []
    try:
        for token in yaml.scan(text, Loader=_Loader):
            if isinstance(token, yaml.ScalarToken):
                spans.append((token.start_mark.index, token.end_mark.index))
    except yaml.YAMLError:
        return None  # the parser reports the syntax error itself
    masked = list(text)
    for start, end in spans:
        masked[start:end] = " " * (end - start)
    flat = "".join(masked)
    for match in re.finditer("#", flat):
        i = match.start()
        if i == 0 or flat[i - 1] in " \t\n":
            return flat.count("\n", 0, i) + 1
    return None
