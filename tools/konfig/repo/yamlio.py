"""YAML reading and canonical writing.

Reading reports syntax errors with file and line, and a mapping that sets a key twice
is one of them (PyYAML would keep the last value and drop the first without a word, so
``kubernetes:`` written twice in a stack.yaml silently chose a cluster). Writing is
canonical: mapping keys sorted at every level (except where a caller fixes the order),
block style, UTF-8, so the same data always yields the same bytes.
"""

from __future__ import annotations

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
    """Dump already-ordered data as block YAML (keys are kept in the given order)."""
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=4096,
    )
