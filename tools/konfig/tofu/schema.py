"""Provider schemas: what ``konfig check`` validates Terraform resources against.

``tofu providers schema -json`` needs OpenTofu, the provider binary and an initialised
working directory; ``konfig check`` runs without them (in CI before anything is built, on
a laptop), so the schema of each provider the platform offers is bundled, trimmed to what
a check needs, in ``konfig/data/terraform/<host>-<namespace>-<type>-<version>.json``.
:func:`trim` makes that file from OpenTofu's output (``hack/provider_schema.py`` writes
it; a ``tofu`` test checks the bundled file against the real provider). Pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from konfig import outputs

FORMAT = 1


def file_name(source: str, version: str) -> str:
    return f"{source.replace('/', '-')}-{version}.json"


def _block(block: Mapping[str, Any]) -> dict[str, Any]:
    attributes = {}
    for name, attr in sorted((block.get("attributes") or {}).items()):
        kept = {"type": attr.get("type")}
        for flag in ("required", "optional", "computed", "sensitive", "write_only", "deprecated"):
            if attr.get(flag):
                kept[flag] = True
        attributes[name] = kept
    blocks = {
        name: {
            "nesting_mode": b.get("nesting_mode"),
            "min_items": b.get("min_items", 0),
            "max_items": b.get("max_items", 0),
            "block": _block(b.get("block") or {}),
        }
        for name, b in sorted((block.get("block_types") or {}).items())
    }
    return {"attributes": attributes, "block_types": blocks}


def trim(schemas: Mapping[str, Any], source: str, version: str) -> dict[str, Any]:
    """The bundled form of one provider from ``tofu providers schema -json``."""
    provider = (schemas.get("provider_schemas") or {}).get(source)
    if not isinstance(provider, Mapping):
        raise KeyError(
            f"{source} is not in the schemas ({sorted(schemas.get('provider_schemas') or {})})"
        )
    return {
        "format": FORMAT,
        "source": source,
        "version": version,
        "provider": _block((provider.get("provider") or {}).get("block") or {}),
        "resources": {
            name: _block(body.get("block") or {})
            for name, body in sorted((provider.get("resource_schemas") or {}).items())
        },
    }


@cache
def bundled(source: str, version: str) -> dict[str, Any] | None:
    """The bundled schema of a provider version; None when Konfig has none."""
    path = resources.files("konfig").joinpath("data", "terraform", file_name(source, version))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, OSError):
        return None
    return data if isinstance(data, dict) else None


def _type_ok(expected: Any, value: Any) -> bool:
    if isinstance(value, str) and outputs.PREFIX in value:
        return True  # a reference: its value is known only when OpenTofu resolves it
    if expected == "string":
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "bool":
        return isinstance(value, bool)
    if isinstance(expected, list) and expected:
        kind = expected[0]
        if kind in ("list", "set"):
            return isinstance(value, list) and all(_type_ok(expected[1], v) for v in value)
        if kind == "map":
            return isinstance(value, Mapping) and all(
                _type_ok(expected[1], v) for v in value.values()
            )
        if kind == "object":
            return isinstance(value, Mapping)
    return True  # dynamic and the rest: OpenTofu checks at plan


def _describe(expected: Any) -> str:
    if isinstance(expected, list):
        return (
            f"{expected[0]} of {_describe(expected[1])}" if len(expected) > 1 else str(expected[0])
        )
    return str(expected)


def problems(block: Mapping[str, Any], attributes: Mapping[str, Any], where: str = "") -> list[str]:
    """What is wrong with ``attributes`` for a (trimmed) schema block, in words."""
    out: list[str] = []
    known = block.get("attributes") or {}
    nested = block.get("block_types") or {}
    for name in sorted(attributes):
        path = f"{where}{name}"
        value = attributes[name]
        if name in ("depends_on", "lifecycle", "provider", "count", "for_each"):
            out.append(f"{path}: a meta-argument Konfig sets itself (use dependsOn)")
        elif name in known:
            attr = known[name]
            if attr.get("computed") and not (attr.get("optional") or attr.get("required")):
                out.append(f"{path}: read-only (computed by the provider), cannot be set")
            elif attr.get("write_only"):
                out.append(
                    f"{path}: a write-only argument takes a secret: set it through "
                    "extensions.writeOnly, never as an attribute"
                )
            elif value is not None and not _type_ok(attr.get("type"), value):
                out.append(f"{path}: expected {_describe(attr.get('type'))}, got {value!r}")
        elif name in nested:
            sub = nested[name]
            items = value if isinstance(value, list) else [value]
            for index, item in enumerate(items):
                if isinstance(item, Mapping):
                    out += problems(sub.get("block") or {}, item, f"{path}[{index}].")
                else:
                    out.append(f"{path}[{index}]: expected a block (a mapping)")
            if sub.get("max_items") and len(items) > sub["max_items"]:
                out.append(f"{path}: at most {sub['max_items']} block(s)")
        else:
            choices = sorted(
                n for n, a in known.items() if a.get("optional") or a.get("required")
            ) + sorted(nested)
            out.append(f"{path}: unknown argument (known: {', '.join(choices)})")
    for name, attr in sorted(known.items()):
        if attr.get("required") and name not in attributes:
            out.append(f"{where}{name}: required argument is missing")
    for name, sub in sorted(nested.items()):
        if sub.get("min_items") and name not in attributes:
            out.append(f"{where}{name}: required block is missing")
    return out
