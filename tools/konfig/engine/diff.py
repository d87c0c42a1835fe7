"""Comparing a planned object with the live one: noise removal, masking, field diff.

Pure functions on plain dicts. The plan compares the server's ``dryRun=All``
server-side-apply result with the live object; both went through server
defaulting, so what remains after :func:`normalize` is a real change (fluxcd/pkg
``ssa/manager_diff.go``). Secret values are masked (:mod:`konfig.masking`) before
anything is diffed or rendered, so no later stage can leak them by accident.
"""

from __future__ import annotations

import base64
import copy
import difflib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from konfig.masking import mask_pair
from konfig.repo.yamlio import canonical, dump_yaml

# Set by the server on every write; never a change a reviewer made.
_NOISE_METADATA = (
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
)


@dataclass(frozen=True)
class FieldChange:
    """One changed leaf: ``path`` like ``spec.template.spec.containers[name=web].image``."""

    path: str
    before: Any
    after: Any
    drift: bool = False  # the live value is someone else's change since Konfig's last apply

    def to_dict(self) -> dict[str, Any]:
        out = {"path": self.path, "before": self.before, "after": self.after}
        if self.drift:  # only then: the JSON of a change without drift is as before
            out["drift"] = True
        return out


def normalize(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A deep copy of ``obj`` without server-set noise, with dry-run quirks evened out."""
    if obj is None:
        return None
    out: dict[str, Any] = _tree_copy(dict(obj))
    out.pop("status", None)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for key in _NOISE_METADATA:
            meta.pop(key, None)
        for key in ("labels", "annotations"):
            if key in meta and not meta[key]:
                del meta[key]
    if out.get("kind") == "Secret" and out.get("apiVersion") == "v1":
        _fold_string_data(out)
    _default_protocols(out)
    return out


def _tree_copy(node: Any) -> Any:
    """A deep copy of a JSON-like tree (maps, lists, scalars), several times faster than
    ``copy.deepcopy``, which stays the copy for anything else."""
    if isinstance(node, dict):
        return {key: _tree_copy(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_tree_copy(value) for value in node]
    if node is None or isinstance(node, (str, int, float)):
        return node
    return copy.deepcopy(node)


def _fold_string_data(secret: dict[str, Any]) -> None:
    """``stringData`` is write-only: the server folds it into ``data`` (base64)."""
    string_data = secret.pop("stringData", None)
    if not isinstance(string_data, Mapping):
        return
    data = dict(secret.get("data") or {})
    for key, value in string_data.items():
        data[str(key)] = base64.b64encode(str(value).encode()).decode()
    secret["data"] = data


def _default_protocols(node: Any) -> None:
    """Ports without ``protocol`` default to TCP on the server (Service and Pod ports)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "ports" and isinstance(value, list):
                for port in value:
                    if (
                        isinstance(port, dict)
                        and "protocol" not in port
                        and ("containerPort" in port or "port" in port)
                    ):
                        port["protocol"] = "TCP"
            _default_protocols(value)
    elif isinstance(node, list):
        for item in node:
            _default_protocols(item)


def segment(key: str) -> str:
    """A map key as a path segment: ``.name``, or ``["a.b/c"]`` when it needs quoting."""
    if key and all(c.isalnum() or c in "_-" for c in key) and not key[0].isdigit():
        return f".{key}"
    return f"[{json.dumps(key)}]"


def list_item_labels(items: list[Any]) -> list[str] | None:
    """Path segments for the items of a list of named maps (containers, env, named
    ports, ...): ``[name=web]``; None when items are told apart by index only."""
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for field in ("name", "containerPort", "mountPath", "key", "ip"):
        values = [i.get(field) for i in items]
        if all(v is not None for v in values) and len(set(map(str, values))) == len(values):
            return [f"[{field}={v}]" for v in values]
    return None


_Segment = tuple[int, str, int]  # sort key: (0, key, 0) for a map key, (1, "", index) or
# (1, merge key, 0) for a list item; keeps document order stable and deterministic.


def _leaves(node: Any, prefix: str, key: tuple[_Segment, ...]) -> Iterator[tuple[Any, str, Any]]:
    if isinstance(node, dict):
        if not node:
            yield key, prefix, {}
        for k in sorted(node, key=str):
            yield from _leaves(node[k], prefix + segment(str(k)), (*key, (0, str(k), 0)))
    elif isinstance(node, list):
        if not node:
            yield key, prefix, []
        keys = list_item_labels(node)
        for index, item in enumerate(node):
            if keys:
                yield from _leaves(item, prefix + keys[index], (*key, (1, keys[index], 0)))
            else:
                yield from _leaves(item, prefix + f"[{index}]", (*key, (1, "", index)))
    else:
        yield key, prefix, node


def leaves(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every leaf of ``obj`` by its field path (the paths of :class:`FieldChange`)."""
    return {path.lstrip("."): v for _, path, v in _leaves(dict(obj or {}), "", ())}


def field_changes(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> tuple[FieldChange, ...]:
    """Changed leaves between two (normalised, masked) objects, in document order."""
    b = {path: (k, v) for k, path, v in _leaves(dict(before or {}), "", ())}
    a = {path: (k, v) for k, path, v in _leaves(dict(after or {}), "", ())}
    order = {path: k for path, (k, _) in (b | a).items()}
    out: list[FieldChange] = []
    for path in sorted(order, key=lambda p: order[p]):
        bv = b[path][1] if path in b else None
        av = a[path][1] if path in a else None
        if path in b and path in a and bv == av:
            continue
        out.append(FieldChange(path.lstrip("."), bv, av))
    return tuple(out)


def unified_diff(
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    *,
    name: str,
    context: int = 3,
    sides: tuple[str, str] = ("live", "planned"),
) -> str:
    """A unified diff of two (normalised, masked) objects as canonical YAML; ``sides``
    label its two files (``live/<name>``, ``planned/<name>``)."""
    b = dump_yaml(canonical(dict(before))).splitlines(keepends=True) if before is not None else []
    a = dump_yaml(canonical(dict(after))).splitlines(keepends=True) if after is not None else []
    lines = difflib.unified_diff(
        b, a, fromfile=f"{sides[0]}/{name}", tofile=f"{sides[1]}/{name}", n=context
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass(frozen=True)
class Comparison:
    """The masked, normalised view of one object's change."""

    fields: tuple[FieldChange, ...]
    diff: str

    @property
    def changed(self) -> bool:
        return bool(self.fields)


def compare(
    live: Mapping[str, Any] | None,
    planned: Mapping[str, Any] | None,
    *,
    name: str,
    sides: tuple[str, str] = ("live", "planned"),
) -> Comparison:
    """Normalise, mask, then diff ``live`` (before) against ``planned`` (after)."""
    before, after = mask_pair(normalize(live), normalize(planned))
    if before == after:  # most objects of a plan: no leaf can differ
        return Comparison((), "")
    fields = field_changes(before, after)
    return Comparison(fields, unified_diff(before, after, name=name, sides=sides) if fields else "")
