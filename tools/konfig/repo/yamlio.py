"""YAML reading and canonical writing.

Reading reports syntax errors with file and line. Writing is canonical: mapping keys
sorted at every level (except where a caller fixes the order), block style, UTF-8,
so the same data always yields the same bytes.
"""

from __future__ import annotations

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
_FastLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_text(text: str, *, file: str) -> Any:
    try:
        return yaml.load(text, Loader=_FastLoader)  # CSafeLoader: safe
    except yaml.YAMLError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"invalid YAML: {problem}", file=file, line=line) from exc


def load_yaml_file(path: Path, *, root: Path | None = None) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=relpath(path, root)) from exc
    try:
        return yaml.load(text, Loader=_FastLoader)  # CSafeLoader: safe
    except yaml.YAMLError:
        # the relative name (a realpath per call) is only worked out for the error
        return load_yaml_text(text, file=relpath(path, root))


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
