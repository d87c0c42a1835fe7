"""YAML reading and canonical writing.

Reading reports syntax errors with file and line, and a mapping that sets a key twice
is one of them (PyYAML would keep the last value and drop the first without a word, so
``kubernetes:`` written twice in a stack.yaml silently chose a cluster). Writing is
canonical: mapping keys sorted at every level (except where a caller fixes the order),
block style, UTF-8, so the same data always yields the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from konfig.errors import ConfigError


class _Dumper(yaml.SafeDumper):
    """Safe dumper that indents block sequences under their key and never aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_representer)


def relpath(path: Path, root: Path | None) -> str:
    if root is None:
        return str(path)
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


# libyaml's parser (when PyYAML was built with it) with PyYAML's own safe constructor and
# resolver: the same data, about ten times faster, which matters when a monorepo has
# thousands of stack.yaml files. Errors are re-parsed in pure Python so their messages
# and line numbers do not depend on how PyYAML was built.
class _UniqueKeys:
    """A constructor mixin: a mapping that sets a key twice is a ConstructorError at the
    second key (``<<`` merge keys, which YAML lets a mapping override, are exempt)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
                try:
                    line = first.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:
                    continue  # unhashable: the constructor itself says so
                if line != key_node.start_mark.line + 1:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"duplicate key `{key}` (first at line {line})",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _SlowLoader(_UniqueKeys, yaml.SafeLoader):
    pass


class _FastLoader(_UniqueKeys, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def load_documents(text: str) -> list[Any]:
    """Every document of a YAML stream, as ``yaml.safe_load_all`` reads them, with
    libyaml's parser when PyYAML has it (vendored CRD files are 70 KB each: the pure
    Python parser took a second of each `konfig check`); ``yaml.YAMLError`` as it
    raises. No bounds: for files the caller only searches (check's CRD catalog)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return list(yaml.load_all(text, Loader=loader))  # a safe loader: safe


# Bounds for what a YAML document may become once loaded. PyYAML builds an alias as a
# reference to the anchored value, so a "billion laughs" document loads in a millisecond,
# but whatever walks the data afterwards (validation, JSON, canonical()) meets every
# reference again: 9 levels of 9 aliases are 387 million strings. Aliases are fine;
# what they add beyond the values written out is bounded, as are nesting and size.
MAX_ALIAS_EXPANSION = 100_000
MAX_DEPTH = 100
MAX_FILE_BYTES = 8 << 20


def load_yaml_text(text: str, *, file: str) -> Any:
    """Parse YAML; ConfigError (file, line) for bad syntax or a document that expands
    past the bounds above through aliases, refers to itself, or nests too deep."""
    try:
        data = yaml.load(text, Loader=_FastLoader)  # CSafeLoader: safe
    except yaml.YAMLError:
        data = _load_slowly(text, file)
    _check_bounds(data, text, file)
    return data


def _load_slowly(text: str, file: str) -> Any:
    try:
        return yaml.load(text, Loader=_SlowLoader)  # a SafeLoader: safe
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"invalid YAML: {problem}", file=file, line=line) from exc


def read_text(path: Path, *, root: Path | None = None) -> str:
    """A configuration file's text; ConfigError when it is unreadable, too large for a
    configuration file or not UTF-8."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(
                f"is larger than {MAX_FILE_BYTES >> 20} MiB; a configuration file is not",
                file=relpath(path, root),
            )
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=relpath(path, root)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"is not UTF-8 text (byte {exc.start}: {exc.reason})", file=relpath(path, root)
        ) from exc
    return text


def load_yaml_file(path: Path, *, root: Path | None = None) -> Any:
    text = read_text(path, root=root)
    # the relative name (a realpath per call) is only worked out for an error
    try:
        data = yaml.load(text, Loader=_FastLoader)  # CSafeLoader: safe
    except yaml.YAMLError:
        return load_yaml_text(text, file=relpath(path, root))
    if isinstance(data, dict | list):
        _check_bounds(data, text, lambda: relpath(path, root))
    return data


def _children(value: Any) -> Any:
    return value.values() if isinstance(value, dict) else value


def _measure(data: Any) -> tuple[int, int, int, bool]:
    """(values after expanding aliases, values as written, nesting depth, refers to
    itself), without expanding anything: each mapping and list is visited once."""
    sizes: dict[int, tuple[int, int]] = {}  # id -> (expanded values, depth)
    entered: set[int] = set()
    written = 0
    work: list[tuple[Any, bool]] = [(data, False)]
    while work:
        value, leaving = work.pop()
        if not isinstance(value, dict | list):
            continue
        key = id(value)
        if leaving:
            expanded, depth = 1, 0
            for child in _children(value):
                if isinstance(child, dict | list):
                    child_size, child_depth = sizes[id(child)]
                    expanded += child_size
                    depth = max(depth, child_depth)
                else:
                    expanded += 1
            sizes[key] = (expanded, depth + 1)
            entered.discard(key)
            continue
        if key in sizes:
            continue
        if key in entered:
            return 0, 0, 0, True
        entered.add(key)
        work.append((value, True))
        written += 1
        for child in _children(value):
            if isinstance(child, dict | list):
                if id(child) in entered:
                    return 0, 0, 0, True
                work.append((child, False))
            else:
                written += 1
    if not isinstance(data, dict | list):
        return 1, 1, 0, False
    expanded, depth = sizes[id(data)]
    return expanded, written, depth, False


def _first_alias_line(text: str) -> int | None:
    try:
        for event in yaml.parse(text, Loader=_FastLoader):
            if isinstance(event, yaml.AliasEvent) and event.start_mark is not None:
                return int(event.start_mark.line) + 1
    except yaml.YAMLError:
        return None
    return None


def _check_bounds(data: Any, text: str, file: str | Callable[[], str]) -> None:
    if not isinstance(data, dict | list):
        return
    if "*" not in text and len(text) <= MAX_DEPTH:
        return  # no alias, and too short to nest that deep: nothing to measure
    expanded, written, depth, cyclic = _measure(data)
    if not cyclic and expanded - written <= MAX_ALIAS_EXPANSION and depth <= MAX_DEPTH:
        return
    if callable(file):
        file = file()  # the relative name (a realpath) only for an error
    if cyclic:
        raise ConfigError(
            "a YAML alias refers to a value that contains it (the data would be endless)",
            file=file,
            line=_first_alias_line(text),
            hint="write the value out instead of the alias",
        )
    if expanded - written > MAX_ALIAS_EXPANSION:
        raise ConfigError(
            f"YAML aliases expand this document to {expanded:,} values from {written:,} "
            f"written out (at most {MAX_ALIAS_EXPANSION:,} more are allowed)",
            file=file,
            line=_first_alias_line(text),
            hint="use fewer nested aliases (&anchor / *alias) or write the values out",
        )
    if depth > MAX_DEPTH:
        raise ConfigError(f"YAML nests deeper than {MAX_DEPTH} levels", file=file)


def canonical(data: Any) -> Any:
    """Return ``data`` with every mapping's keys sorted, recursively."""
    if isinstance(data, dict):
        return {k: canonical(data[k]) for k in sorted(data, key=str)}
    if isinstance(data, list):
        return [canonical(v) for v in data]
    return data


def dump_yaml(data: Any) -> str:
    """Dump already-ordered data as block YAML (keys are kept in the given order).

    The same bytes as PyYAML's emitter with :class:`_Dumper` (which it falls back to):
    that emitter is pure Python (libyaml's cannot indent sequences under their key) and
    rendering the Specs of thousands of stacks was a good part of compiling them."""
    if type(data) is dict or type(data) is list:
        try:
            return _Block().document(data)
        except _Slow:
            pass
    return _dump_slowly(data)


def _dump_slowly(data: Any) -> str:
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=_WIDTH,
    )


# --- the block emitter -------------------------------------------------------------
#
# What PyYAML writes for the JSON-like data of a Spec, decided per scalar by PyYAML
# itself: each distinct string's form (plain, quoted, literal) is PyYAML's rendering of
# it in a one-key document, remembered; the layout around the scalars (mappings,
# sequences indented under their key, ``{}`` and ``[]`` for empty ones) is fixed. What
# the remembered forms cannot tell (a line long enough to wrap, a key PyYAML writes as
# ``? key``, a literal that keeps trailing line breaks, any type but dict, list, str,
# int, float, bool and None, nesting deeper than MAX_DEPTH) sends the whole document
# to PyYAML. tools/tests/repo/test_yamlio.py compares the two on generated data.

_WIDTH = 4096
_LINE_MAX = _WIDTH - 96  # a line this long might wrap: PyYAML decides
# plain, as a key and as a value, without asking PyYAML (what its resolver reads as a
# bool or null aside): the names and most values of a Kubernetes object, resource ids
# and images (a colon is an indicator only before a space or at the end)
_SIMPLE = re.compile(r"[A-Za-z](?:[A-Za-z0-9_./:-]{0,99}[A-Za-z0-9_./-])?\Z")
_WORDS = frozenset(
    {
        *("yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"),
        *("true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL"),
    }
)
_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_KEPT = 50_000  # remembered forms of each kind; past it, forget them all


class _Slow(Exception):
    """A document the block emitter leaves to PyYAML."""


_keys: dict[str, str] = {}
_values: dict[str, str] = {}  # a one-line form
_floats: dict[str, str] = {}
_literals: dict[tuple[str, int], tuple[str, list[str]]] = {}


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _KEPT:
        memo.clear()
    memo[key] = value


def _key_form(key: str) -> str:
    if _SIMPLE.match(key) and key not in _WORDS:
        return key
    found = _keys.get(key)
    if found is None:
        text = _dump_slowly({key: None})
        if text.startswith("? ") or not text.endswith(": null\n") or len(text.splitlines()) != 1:
            raise _Slow
        found = text[: -len(": null\n")]
        _remember(_keys, key, found)
    return found


def _one_line(data: Any) -> str | None:
    """PyYAML's form of a value written after ``a:``; None when not one line."""
    text = _dump_slowly({"a": data})
    if text.startswith("a: ") and text.endswith("\n") and len(text.splitlines()) == 1:
        return text[3:-1]
    return None


class _Block:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.depth = 0

    def document(self, data: dict[str, Any] | list[Any]) -> str:
        if not data:
            return "{}\n" if type(data) is dict else "[]\n"
        if isinstance(data, dict):
            self.mapping(data, 0, "")
        else:
            self.sequence(data, 0, "")
        return "".join(self.out)

    def mapping(self, data: dict[Any, Any], indent: int, lead: str) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Slow
        pad = " " * indent
        for key, value in data.items():
            if type(key) is not str:
                raise _Slow
            self.node(value, indent, f"{lead}{_key_form(key)}:")
            lead = pad
        self.depth -= 1

    def sequence(self, items: list[Any], indent: int, lead: str) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Slow
        pad = " " * indent
        for item in items:
            kind = type(item)
            if kind is dict and item:
                self.mapping(item, indent + 2, f"{lead}- ")
            elif kind is list and item:
                self.sequence(item, indent + 2, f"{lead}- ")
            else:
                self.scalar(item, indent, f"{lead}-")
            lead = pad
        self.depth -= 1

    def node(self, value: Any, indent: int, head: str) -> None:
        """A mapping's value at ``indent`` (the mapping's), after ``head`` (``key:``)."""
        kind = type(value)
        if kind is dict and value:
            self.out.append(head + "\n")
            self.mapping(value, indent + 2, " " * (indent + 2))
        elif kind is list and value:
            self.out.append(head + "\n")
            self.sequence(value, indent + 2, " " * (indent + 2))
        else:
            self.scalar(value, indent, head)

    def scalar(self, value: Any, indent: int, head: str) -> None:
        """A scalar (or an empty collection) after ``head``; a literal's lines are
        indented by ``indent + 2``."""
        kind = type(value)
        if kind is str:
            if _SIMPLE.match(value) and value not in _WORDS:
                form = value
            else:
                found = _values.get(value)
                if found is None:
                    if "\n" in value:
                        self.literal(value, indent + 2, head)
                        return
                    one = _one_line(value)
                    if one is None:
                        raise _Slow
                    _remember(_values, value, one)
                    found = one
                form = found
        elif value is None:
            form = "null"
        elif kind is bool:
            form = "true" if value else "false"
        elif kind is int:
            form = str(value)
        elif kind is float:
            text = repr(value)
            found = _floats.get(text)
            if found is None:
                found = _one_line(value)
                if found is None:
                    raise _Slow
                _remember(_floats, text, found)
            form = found
        elif kind is dict and not value:
            form = "{}"
        elif kind is list and not value:
            form = "[]"
        else:
            raise _Slow
        line = f"{head} {form}\n"
        if len(line) > _LINE_MAX:
            raise _Slow
        self.out.append(line)

    def literal(self, value: str, indent: int, head: str) -> None:
        """A string of several lines: PyYAML's form of it with its lines at ``indent``
        (a literal block ``|``, or one double-quoted line)."""
        key = (value, indent)
        found = _literals.get(key)
        if found is None:
            if _BREAKS.search(value):
                raise _Slow  # line breaks YAML (or str.splitlines) counts besides \n
            one = _one_line(value)
            if one is not None:  # PyYAML quotes it instead: the same at any indent
                _remember(_values, value, one)
                self.scalar(value, indent - 2, head)
                return
            nested: Any = value
            for _ in range(indent // 2):
                nested = {"a": nested}
            lines = _dump_slowly(nested).splitlines(keepends=True)
            mark = indent - 2
            at = next(
                (i for i, line in enumerate(lines) if line.startswith(" " * mark + "a: |")),
                None,
            )
            if at is None or at != indent // 2 - 1:
                raise _Slow
            header = lines[at][mark + 2 :].rstrip("\n")
            if header.endswith("+"):
                raise _Slow  # kept line breaks: PyYAML ends the document with `...`
            found = (header, lines[at + 1 :])
            _remember(_literals, key, found)
        header, body = found
        first = f"{head}{header}\n"
        if len(first) > _LINE_MAX or any(len(line) > _LINE_MAX for line in body):
            raise _Slow
        self.out.append(first)
        self.out.extend(body)
