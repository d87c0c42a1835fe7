"""Drift: where the live object differs from what Konfig's last apply wrote.

Konfig applies with server-side apply under the field manager ``konfig``, so the
API server records, per object, exactly which fields Konfig set (the
``managedFields`` entry of manager ``konfig``, operation ``Apply``, as a
``fieldsV1`` tree). When anyone else changes one of those fields to another value
(``kubectl scale``/``edit``/``patch``, a client-side ``kubectl apply``, a
controller), the server moves the field's ownership to that manager; when anyone
removes it, it disappears from Konfig's entry. So:

    drift = the fields Konfig owned right after its last apply
            minus the fields Konfig owns on the live object now

The inventory records the first set per member (:mod:`konfig.engine.inventory`, data key
``appliedFields``); the second is on every live object. That is exactly what the
next apply would set back, needs no compile and stores no value (nothing secret,
nothing large). Objects deleted out of band or re-created by someone else (another
UID) are drifted as a whole. What drift does **not** cover, by design: fields
someone *added* that Konfig never set (an apply leaves them alone too, server-side
apply merges), and a change made under the field manager ``konfig`` itself.

Pure functions on plain dicts; the caller lists or gets the live objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from konfig.engine.diff import list_item_labels, normalize, segment
from konfig.masking import MASK, is_secret, mask_pair

FIELD_MANAGER = "konfig"

DriftState = Literal["in_sync", "drifted", "deleted", "recreated", "unknown"]
FINISHED = "a Job that ran to completion and removed itself (ttlSecondsAfterFinished)"
DRIFTED_STATES: frozenset[str] = frozenset({"drifted", "deleted", "recreated"})

FieldSet = dict[str, Any]  # a managedFields ``fieldsV1`` tree


@dataclass(frozen=True)
class DriftedField:
    """One field Konfig set that someone else changed (``live``) or removed."""

    path: str  # readable, in the notation of preview's field paths
    live: Any  # the live value (masked for Secrets); None when removed
    removed: bool
    keys: tuple[str, ...] = field(default=(), compare=False)  # the fieldsV1 path

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "live": self.live, "removed": self.removed}


@dataclass(frozen=True)
class ObjectDrift:
    id: str
    state: DriftState
    fields: tuple[DriftedField, ...] = ()
    message: str = ""

    @property
    def drifted(self) -> bool:
        return self.state in DRIFTED_STATES

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "message": self.message,
            "fields": [f.to_dict() for f in self.fields],
        }


def owned_fields(obj: Mapping[str, Any] | None) -> FieldSet | None:
    """Konfig's ``fieldsV1`` on ``obj`` (manager ``konfig``, operation Apply), if any."""
    if not obj:
        return None
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if (
            isinstance(entry, Mapping)
            and entry.get("manager") == FIELD_MANAGER
            and entry.get("operation") == "Apply"
            and not entry.get("subresource")
            and isinstance(entry.get("fieldsV1"), Mapping)
        ):
            return dict(entry["fieldsV1"])
    return None


def missing(recorded: Mapping[str, Any], live: Mapping[str, Any] | None) -> Iterator[list[str]]:
    """Paths (lists of fieldsV1 keys) in ``recorded`` that ``live`` lacks: each field
    (leaf) on its own, a list item (``k:``/``v:``/``i:``) as a whole when it is gone;
    ``"."`` (the element itself) is reported as its parent."""
    for key in sorted(recorded):
        sub = recorded[key]
        have = None if live is None else live.get(key)
        if isinstance(have, Mapping):
            if isinstance(sub, Mapping) and sub:
                for rest in missing(sub, have):
                    yield [key, *rest]
            continue
        if key == ".":
            yield []
        elif key[:2] in ("k:", "v:", "i:") or not (isinstance(sub, Mapping) and sub):
            yield [key]
        else:
            for rest in missing(sub, None):
                yield [key, *rest]


def _parse_key(key: str) -> tuple[str, Any]:
    prefix, _, rest = key.partition(":")
    if prefix in ("k", "v"):
        try:
            return prefix, json.loads(rest)
        except ValueError:
            return prefix, rest
    if prefix == "i":
        try:
            return prefix, int(rest)
        except ValueError:
            return prefix, rest
    return prefix, rest


_ABSENT = object()


def _step(node: Any, key: str) -> tuple[str, Any]:
    """One fieldsV1 key applied to a live node: (readable segment, child or _ABSENT)."""
    prefix, value = _parse_key(key)
    if prefix == "f":
        child = node.get(value, _ABSENT) if isinstance(node, Mapping) else _ABSENT
        return segment(str(value)), child
    items = node if isinstance(node, list) else []
    index: int | None = None
    if prefix == "k" and isinstance(value, Mapping):
        for i, item in enumerate(items):
            if isinstance(item, Mapping) and all(item.get(k) == v for k, v in value.items()):
                index = i
                break
        fallback = "[" + ",".join(f"{k}={v}" for k, v in value.items()) + "]"
    elif prefix == "v":
        for i, item in enumerate(items):
            if item == value:
                index = i
                break
        fallback = f"[{json.dumps(value)}]"
    elif prefix == "i" and isinstance(value, int):
        index = value if 0 <= value < len(items) else None
        fallback = f"[{value}]"
    else:
        return f"[{key}]", _ABSENT
    if index is None:
        return fallback, _ABSENT
    labels = list_item_labels(items)
    return (labels[index] if labels else f"[{index}]"), items[index]


def describe_path(obj: Mapping[str, Any] | None, keys: list[str]) -> tuple[str, Any]:
    """The readable path of fieldsV1 ``keys`` and the value there (``_ABSENT`` if none)."""
    node: Any = obj if obj is not None else _ABSENT
    label = ""
    for key in keys:
        if key == ".":
            continue
        part, node = _step(node if node is not _ABSENT else None, key)
        label += part
    return label.lstrip("."), node


def drifted_fields(
    recorded: Mapping[str, Any], live: Mapping[str, Any]
) -> tuple[DriftedField, ...]:
    """Fields in ``recorded`` that Konfig no longer owns on ``live``, with live values.

    Values are read from the normalised, masked live object, so a Secret's data
    never appears.
    """
    now = owned_fields(live)
    view, _ = mask_pair(normalize(live), None)
    out: list[DriftedField] = []
    seen: set[str] = set()
    for keys in missing(recorded, now):
        path, value = describe_path(view, keys)
        if not path or path in seen:
            continue
        seen.add(path)
        removed = value is _ABSENT
        if is_secret(live) and path.split(".")[0].split("[")[0] in ("data", "stringData"):
            value = MASK if not removed else None
        out.append(DriftedField(path, None if removed else value, removed, tuple(keys)))
    return tuple(out)


def value_at(manifest: Mapping[str, Any] | None, keys: tuple[str, ...] | list[str]) -> Any:
    """The value a manifest sets at a fieldsV1 path (masked for a Secret's data); None
    when it sets none."""
    view, _ = mask_pair(normalize(manifest), None)
    _, value = describe_path(view, list(keys))
    if value is _ABSENT:
        return None
    if is_secret(manifest) and keys and keys[0] in ("f:data", "f:stringData"):
        return MASK
    return value


def object_drift(
    resource_id: str,
    recorded: Mapping[str, Any] | None,
    recorded_uid: str,
    live: Mapping[str, Any] | None,
    *,
    finished: bool = False,
) -> ObjectDrift:
    """How one inventory member's live object differs from Konfig's last apply
    (``finished``: a Job that ran to completion and removed itself, whose absence is
    no drift)."""
    if live is None and finished:
        return ObjectDrift(resource_id, "in_sync", message=FINISHED)
    if live is None:
        return ObjectDrift(resource_id, "deleted", message="deleted outside Konfig")
    uid = str((live.get("metadata") or {}).get("uid") or "")
    if recorded_uid and uid and uid != recorded_uid:
        return ObjectDrift(
            resource_id,
            "recreated",
            message=f"re-created outside Konfig (UID {uid}, applied {recorded_uid})",
        )
    if recorded is None:
        return ObjectDrift(
            resource_id,
            "unknown",
            message="the inventory records no applied fields for it (applied by an older "
            "Konfig, or the apply did not finish); the next apply records them",
        )
    fields = drifted_fields(recorded, live)
    if not fields:
        return ObjectDrift(resource_id, "in_sync")
    n = len(fields)
    return ObjectDrift(
        resource_id,
        "drifted",
        fields,
        f"{n} field{'s' if n != 1 else ''} changed outside Konfig since the last apply",
    )


def is_drift_path(path: str, drift_paths: frozenset[str] | set[str]) -> bool:
    """Whether a preview field path lies at or under (or above) a drifted field."""
    for d in drift_paths:
        if (
            path == d
            or path.startswith((d + ".", d + "["))
            or d.startswith((path + ".", path + "["))
        ):
            return True
    return False
