"""Where in a stack's sources a Spec resource comes from, as well as we can tell.

Findings on a compiled Spec have no source position of their own. An object a stack
reads from a YAML file of its directory (``yaml.decode_all(file.read(...))``, as vendor
manifests come) is found there by kind, name and namespace: the finding points at the
line of its ``metadata.name`` (items of a ``List`` document too). Otherwise it points at
the stack's ``main.k``, at the first line that mentions the resource's name as a string
literal (the project's shared ``base/*.k`` files are searched next), else at the file
alone.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from konfig.repo.layout import KCL_YAML, MAIN, STACK_FILE, Stack
from konfig.spec import Resource

# an object of a YAML file: (kind, name, namespace) -> line of its metadata.name
_Placed = dict[tuple[str, str, str | None], int]
_NOT_MANIFESTS = {STACK_FILE, KCL_YAML}
_MAX_BYTES = 8 * 1024 * 1024  # larger files are not searched (the finding names main.k)


@cache
def _lines(path: Path) -> tuple[str, ...]:
    try:
        return tuple(path.read_text(encoding="utf-8").splitlines())
    except (OSError, UnicodeDecodeError):
        return ()


def stack_file(root: Path, stack: Stack) -> str:
    main = f"{stack.path}/{MAIN}"
    return main if (root / main).is_file() else f"{stack.path}/{STACK_FILE}"


def locate(root: Path, stack: Stack, resource: Resource | None) -> tuple[str, int | None]:
    default = stack_file(root, stack)
    if resource is None or not resource.name:
        return default, None
    found = _in_yaml(root, stack, resource)
    if found is not None:
        return found
    needle = f'"{resource.name}"'
    candidates = [root / stack.path / MAIN]
    base = root / stack.project_path / "base"
    if base.is_dir():
        candidates.extend(sorted(p for p in base.glob("*.k") if not p.name.endswith("_test.k")))
    for path in candidates:
        for number, line in enumerate(_lines(path), 1):
            if needle in line:
                return path.relative_to(root).as_posix(), number
    return default, None


def _in_yaml(root: Path, stack: Stack, resource: Resource) -> tuple[str, int] | None:
    """The YAML file of the stack's directory (not its ci-test/) and the line where
    ``resource`` is declared, if one declares it."""
    key = (resource.kind, resource.name, resource.namespace)
    top = root / stack.path
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "ci-test")
        for name in sorted(filenames):
            if not name.endswith((".yaml", ".yml")) or (
                name in _NOT_MANIFESTS and dirpath == str(top)
            ):
                continue
            path = Path(dirpath) / name
            if path.is_symlink():
                continue  # a stack's own files only
            line = _objects(path).get(key)
            if line is not None:
                return path.relative_to(root).as_posix(), line
    return None


@cache
def _objects(path: Path) -> _Placed:
    """The objects a YAML file declares (List items included), with their lines."""
    try:
        if path.stat().st_size > _MAX_BYTES:
            return {}
        text = path.read_text(encoding="utf-8")
        if "kind" not in text:
            return {}
        docs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    found: _Placed = {}
    for doc in docs:
        _place(doc, found)
        items = _child(doc, "items")
        if isinstance(items, yaml.SequenceNode):
            for item in items.value:
                _place(item, found)
    return found


def _child(node: Any, key: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def _place(node: Any, found: _Placed) -> None:
    kind, meta = _child(node, "kind"), _child(node, "metadata")
    name, namespace = _child(meta, "name"), _child(meta, "namespace")
    if isinstance(kind, yaml.ScalarNode) and isinstance(name, yaml.ScalarNode):
        ns = namespace.value if isinstance(namespace, yaml.ScalarNode) else None
        found.setdefault((str(kind.value), str(name.value), ns or None), name.start_mark.line + 1)


def clear_cache() -> None:
    _lines.cache_clear()
    _objects.cache_clear()
