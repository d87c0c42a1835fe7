"""Secret masking: the one place that decides what a reader may never see.

Every value under a Secret's ``data``/``stringData`` and every annotation that carries
a serialised object (``kubectl.kubernetes.io/last-applied-configuration`` and the
like) is replaced by a mask before anything is diffed or rendered (kubectl
``pkg/cmd/diff/diff.go`` Masker): ``***``, or ``*** (before)`` / ``*** (after)`` so a
reviewer still sees that a key changed (:func:`mask_pair`). Free text (a server
message, a rendered report) is scrubbed of every known secret value, raw and encoded
(:func:`secret_values`, :func:`scrub`); a Secret's YAML diff from an input file is
masked line by line (:func:`mask_secret_diff`), a field change of a change list by
:func:`mask_field`. A Terraform resource's values are masked where OpenTofu's plan marks
them sensitive (its ``before_sensitive``/``after_sensitive`` trees: the plan JSON holds
the values in clear) and where an argument is write-only (:func:`mask_sensitive`).
Pure functions on plain data.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Mapping
from typing import Any

import yaml

MASK = "***"
MASK_BEFORE = "*** (before)"
MASK_AFTER = "*** (after)"

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_MISSING = object()


def is_secret(obj: Mapping[str, Any] | None) -> bool:
    return bool(obj) and obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1"  # type: ignore[union-attr]


def _looks_serialized(value: Any) -> bool:
    """An annotation value that is a serialised object (JSON or YAML with apiVersion/kind)."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    if not text:
        return False
    parsed: Any
    try:
        parsed = json.loads(text)
    except ValueError:
        if "\n" not in text or ":" not in text:
            return False
        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError:
            return False
    return isinstance(parsed, dict) and ("apiVersion" in parsed or "kind" in parsed)


def mask_pair(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Copies of ``before``/``after`` with every secret value replaced by a mask.

    A Secret's ``data``/``stringData`` values and annotations holding a serialised
    object become ``***`` when equal on both sides (or present on one side only) and
    ``*** (before)`` / ``*** (after)`` when they differ, so a change stays visible.
    """
    b = copy.deepcopy(dict(before)) if before is not None else None
    a = copy.deepcopy(dict(after)) if after is not None else None
    secret = is_secret(b) or is_secret(a)
    if secret:
        for section in ("data", "stringData"):
            _mask_section(b, a, (section,))
    _mask_section(b, a, ("metadata", "annotations"), only=annotation_is_sensitive)
    return b, a


def annotation_is_sensitive(key: str, values: list[Any]) -> bool:
    return key == LAST_APPLIED or any(_looks_serialized(v) for v in values)


def _dig(obj: dict[str, Any] | None, path: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = obj
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node if isinstance(node, dict) else None


def _mask_section(
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    path: tuple[str, ...],
    *,
    only: Any = None,
) -> None:
    b = _dig(before, path)
    a = _dig(after, path)
    keys = set(b or {}) | set(a or {})
    for key in keys:
        bv = (b or {}).get(key, _MISSING)
        av = (a or {}).get(key, _MISSING)
        if only is not None and not only(key, [v for v in (bv, av) if v is not _MISSING]):
            continue
        changed = bv is not _MISSING and av is not _MISSING and bv != av
        if b is not None and bv is not _MISSING:
            b[key] = MASK_BEFORE if changed else MASK
        if a is not None and av is not _MISSING:
            a[key] = MASK_AFTER if changed else MASK
    # A Secret section that is not a mapping (malformed) must not leak either.
    for obj in (before, after):
        if obj is None or len(path) != 1:
            continue
        value = obj.get(path[0])
        if value is not None and not isinstance(value, dict):
            obj[path[0]] = MASK


def secret_values(obj: Mapping[str, Any] | None) -> set[str]:
    """Every secret string an object carries (raw and decoded), to scrub free text with."""
    found: set[str] = set()
    if not obj:
        return found
    if is_secret(obj):
        for section in ("data", "stringData"):
            values = obj.get(section)
            if not isinstance(values, Mapping):
                continue
            for value in values.values():
                text = str(value)
                found.add(text)
                if section == "data":
                    try:
                        found.add(base64.b64decode(text, validate=True).decode())
                    except (ValueError, UnicodeDecodeError):
                        pass
                else:
                    found.add(base64.b64encode(text.encode()).decode())
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if isinstance(annotations, Mapping):
        for key, value in annotations.items():
            if annotation_is_sensitive(str(key), [value]):
                found.add(str(value))
    return {v for v in found if len(v) >= 4}


def scrub(text: str, secrets: set[str]) -> str:
    """Replace any secret value that slipped into free text (e.g. a server message)."""
    for value in sorted(secrets, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return text


_ANNOTATION = re.compile(r'^metadata\.annotations(?:\.([A-Za-z0-9_-]+)|\[("(?:[^"\\]|\\.)*")\])$')


def mask_field(api_version: str, kind: str, path: str, before: Any, after: Any) -> tuple[Any, Any]:
    """``before``/``after`` of one changed field (``docs/preview-json.md`` paths), masked
    as :func:`mask_pair` masks the objects: a Secret's ``data``/``stringData`` values and
    annotations that hold a serialised object. Absent (``None``) stays absent.

    Defence in depth for field lists read from a file: a faulty or older producer must
    not make the report show a Secret value.
    """
    secret = kind == "Secret" and api_version == "v1"
    sections = ("data.", "data[", "stringData.", "stringData[")
    sensitive = secret and (path in ("data", "stringData") or path.startswith(sections))
    if not sensitive:
        match = _ANNOTATION.match(path)
        if match is None:
            return before, after
        key = match.group(1) or json.loads(match.group(2))
        values = [v for v in (before, after) if v is not None]
        if not annotation_is_sensitive(str(key), values):
            return before, after
    changed = before is not None and after is not None and before != after
    return (
        None if before is None else (MASK_BEFORE if changed else MASK),
        None if after is None else (MASK_AFTER if changed else MASK),
    )


def mask_secret_diff(diff: str) -> str:
    """Mask every value under ``data:``/``stringData:`` in a Secret's YAML diff.

    Defence in depth: the preview already masks, but the report must never carry a
    Secret value even if an input was produced by a faulty or older tool.
    """
    out = []
    inside: int | None = None  # indentation of the data/stringData key
    for line in diff.splitlines(keepends=True):
        if line.startswith(("---", "+++", "@@")):
            inside = None
            out.append(line)
            continue
        body = line[1:] if line[:1] in "+- " else line
        stripped = body.lstrip(" ")
        indent = len(body) - len(stripped)
        if inside is not None and stripped.strip() and indent <= inside:
            inside = None
        if inside is None:
            if re.match(r"^(data|stringData):\s*$", stripped.rstrip("\n")):
                inside = indent
            elif re.match(r"^(data|stringData):\s*\S", stripped):
                key = stripped.split(":", 1)[0]
                line = f"{line[:1]}{' ' * indent}{key}: {MASK}\n"
            out.append(line)
            continue
        match = re.match(r"^(\s*)([^:]+):(\s*)(.*?)(\n?)$", body)
        if match and match.group(4) and not match.group(4).strip("'\"").startswith(MASK):
            line = f"{line[:1]}{match.group(1)}{match.group(2)}: {MASK}{match.group(5)}"
        elif not match and stripped.strip():
            # a continuation line of a multi-line scalar: drop its content entirely
            line = f"{line[:1]}{' ' * indent}{MASK}\n"
        out.append(line)
    return "".join(out)


WRITE_ONLY = "(write-only)"


def _sensitive_at(tree: Any, key: Any) -> Any:
    if tree is True:
        return True
    if isinstance(tree, Mapping):
        return tree.get(key, False)
    if isinstance(tree, list) and isinstance(key, int) and key < len(tree):
        return tree[key]
    return False


def _mask_tree(value: Any, tree: Any, mask: str) -> Any:
    """``value`` with every leaf ``tree`` marks (``True``) replaced by ``mask``."""
    if tree is True and not isinstance(value, Mapping | list):
        return None if value is None else mask
    if isinstance(value, Mapping):
        return {k: _mask_tree(v, _sensitive_at(tree, k), mask) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_tree(v, _sensitive_at(tree, i), mask) for i, v in enumerate(value)]
    return value


def mask_sensitive(
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    before_sensitive: Any,
    after_sensitive: Any,
    *,
    write_only: tuple[str, ...] = (),
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A Terraform resource's values with every sensitive leaf masked (``***``, or
    ``*** (before)``/``*** (after)`` when the value changed); a write-only argument
    (OpenTofu never knows its value) shows as ``(write-only)`` when created and is left
    out when compared."""
    b = _mask_tree(before, before_sensitive, MASK) if before is not None else None
    a = _mask_tree(after, after_sensitive, MASK) if after is not None else None
    if b is not None and a is not None:
        b, a = _mark_changes(b, a, before, after)
    for name in write_only:
        # never known to OpenTofu: shown on a create, left out of a comparison (its
        # version argument says when the value changes)
        if isinstance(b, dict):
            b.pop(name, None)
            if isinstance(a, dict):
                a.pop(name, None)
        elif isinstance(a, dict):
            a[name] = WRITE_ONLY
    return (dict(b) if b is not None else None), (dict(a) if a is not None else None)


def _mark_changes(b: Any, a: Any, raw_b: Any, raw_a: Any) -> tuple[Any, Any]:
    """Masked leaves whose raw values differ become ``*** (before)``/``*** (after)``."""
    if isinstance(b, Mapping) and isinstance(a, Mapping):
        ob, oa = dict(b), dict(a)
        for k in set(b) & set(a):
            ob[k], oa[k] = _mark_changes(
                b[k],
                a[k],
                raw_b.get(k) if isinstance(raw_b, Mapping) else None,
                raw_a.get(k) if isinstance(raw_a, Mapping) else None,
            )
        return ob, oa
    if isinstance(b, list) and isinstance(a, list) and len(b) == len(a):
        pairs = [
            _mark_changes(
                x,
                y,
                raw_b[i] if isinstance(raw_b, list) and i < len(raw_b) else None,
                raw_a[i] if isinstance(raw_a, list) and i < len(raw_a) else None,
            )
            for i, (x, y) in enumerate(zip(b, a, strict=True))
        ]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if b == MASK and a == MASK and raw_b != raw_a:
        return MASK_BEFORE, MASK_AFTER
    return b, a
