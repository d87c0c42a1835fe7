"""Kubernetes OpenAPI (JSON schema) definitions to :class:`SchemaDef` records.

kubernetes-validate bundles the Kubernetes OpenAPI as JSON schema, one folder per
version (``kubernetes-json-schema/v1.32.0-local-strict/_definitions.json``, every
definition under ``$defs`` and references written ``#/$defs/<name>``). A definition
name like ``io.k8s.api.apps.v1.Deployment`` becomes schema ``Deployment`` in package
``api.apps.v1``. Only the kinds of the requested group/versions are generated, plus
every definition they reference (transitively).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from konfig.errors import KonfigError
from konfig.gen.model import (
    ANY,
    OBJECT,
    DictOf,
    Field,
    KType,
    ListOf,
    Literals,
    Package,
    Prim,
    Ref,
    SchemaDef,
    Union,
)

_PREFIX = "io.k8s."
_REF = re.compile(r"^(?:[^#]*)#/(?:\$defs|definitions)/(?P<name>.+)$")


class GenError(KonfigError):
    """The generator's input is unusable (unknown version, bad reference, bad CRD)."""


def kubernetes_definitions_path(version: str) -> Path:
    """The bundled strict definitions of a Kubernetes version like ``1.32``."""
    import kubernetes_validate

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    full = version if version.count(".") == 2 else f"{version}.0"
    path = base / f"v{full}-local-strict" / "_definitions.json"
    if not path.is_file():
        known = sorted(p.name for p in base.glob("v*-local-strict"))
        raise GenError(
            f"kubernetes-validate has no schemas for Kubernetes {version}",
            hint=f"available: {', '.join(known)}",
        )
    return path


def load_definitions(path: Path) -> dict[str, Any]:
    """The definitions of a JSON schema / OpenAPI file (``$defs`` or ``definitions``)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    defs = data.get("$defs") or data.get("definitions")
    if not isinstance(defs, dict):
        raise GenError(f"{path}: no `$defs` or `definitions` object")
    return defs


def package_of(definition: str) -> Package:
    """``io.k8s.api.apps.v1.Deployment`` -> ``("api", "apps", "v1")``."""
    name = definition.removeprefix(_PREFIX)
    return tuple(sanitize_segment(s) for s in name.split(".")[:-1])


def sanitize_segment(segment: str) -> str:
    """A KCL package path segment: letters, digits and ``_``."""
    return re.sub(r"[^0-9A-Za-z_]", "_", segment)


def kinds_of(defs: Mapping[str, Any], groups: Iterable[str]) -> list[str]:
    """Definitions that are kinds of the given ``group/version``s (``v1`` is the core group).

    List kinds and kinds without object metadata (``DeleteOptions``, ``WatchEvent``, ...)
    are left out: stacks never declare them.
    """
    wanted = set(groups)
    found = []
    for name, schema in defs.items():
        props = schema.get("properties") or {}
        if "metadata" not in props or name.endswith("List"):
            continue
        if not str(props["metadata"].get("$ref", "")).endswith("v1.ObjectMeta"):
            continue
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            group_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            if group_version in wanted:
                found.append(name)
    return sorted(set(found))


def ref_name(ref: str) -> str:
    match = _REF.match(ref)
    if not match:
        raise GenError(f"unsupported $ref {ref!r} (expected #/$defs/<name>)")
    return match.group("name")


def _json_types(schema: Mapping[str, Any]) -> list[str]:
    raw = schema.get("type")
    types = raw if isinstance(raw, list) else [raw] if raw else []
    return [t for t in types if t != "null"]


_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


class _Converter:
    """Walks definitions from the roots, collecting every schema it has to generate."""

    def __init__(self, defs: Mapping[str, Any], source: str) -> None:
        self.defs = defs
        self.source = source
        self.needed: dict[str, None] = {}
        self.queue: list[str] = []

    def ref(self, name: str) -> KType:
        if name not in self.defs:
            raise GenError(f"{self.source}: reference to unknown definition {name!r}")
        schema = self.defs[name]
        if not schema.get("properties"):
            return self.type_of(schema)  # a primitive: Quantity, IntOrString, Time, ...
        if name not in self.needed:
            self.needed[name] = None
            self.queue.append(name)
        return Ref(package_of(name), name.rsplit(".", 1)[-1])

    def type_of(self, schema: Mapping[str, Any]) -> KType:
        if "$ref" in schema:
            return self.ref(ref_name(str(schema["$ref"])))
        for key in ("oneOf", "anyOf"):
            if key in schema:
                options = _unique(self.type_of(s) for s in schema[key])
                return options[0] if len(options) == 1 else Union(tuple(options))
        if "allOf" in schema and len(schema["allOf"]) == 1:
            return self.type_of(schema["allOf"][0])
        types = _json_types(schema)
        enum = [v for v in schema.get("enum") or [] if v is not None]
        if enum and all(isinstance(v, str | int | float | bool) for v in enum):
            return Literals(tuple(enum))
        if len(types) > 1:
            return Union(tuple(_unique(self.type_of({**schema, "type": t}) for t in types)))
        kind = types[0] if types else None
        if kind in _SCALARS:
            return Prim(_SCALARS[kind])
        if kind == "array":
            items = schema.get("items")
            return ListOf(self.type_of(items) if isinstance(items, dict) else ANY)
        if kind == "object" or (kind is None and "additionalProperties" in schema):
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return DictOf(self.type_of(extra))
            return OBJECT
        return ANY

    def schema_def(self, name: str, *, root: bool) -> SchemaDef:
        schema = self.defs[name]
        required = set(schema.get("required") or [])
        gvk = schema.get("x-kubernetes-group-version-kind") or []
        fields = []
        for prop in sorted(schema.get("properties") or {}):
            if root and prop == "status":
                continue  # observed state: stacks never set it
            spec = schema["properties"][prop]
            ftype = self.type_of(spec)
            default = spec.get("default")
            is_required = prop in required
            if root and len(gvk) == 1 and prop in ("apiVersion", "kind"):
                g = gvk[0]
                value = (
                    g["kind"]
                    if prop == "kind"
                    else (f"{g['group']}/{g['version']}" if g["group"] else g["version"])
                )
                ftype, default, is_required = Literals((value,)), value, True
            fields.append(
                Field(prop, ftype, is_required, str(spec.get("description") or ""), default)
            )
        short = name.rsplit(".", 1)[-1]
        return SchemaDef(
            package=package_of(name),
            name=short,
            doc=str(schema.get("description") or ""),
            fields=tuple(fields),
            source=self.source,
            file=f"{short.lower()}.k",
        )


def _unique(types: Iterable[KType]) -> list[KType]:
    seen: dict[KType, None] = {}
    for t in types:
        for option in t.options if isinstance(t, Union) else (t,):
            seen.setdefault(option, None)
    return list(seen)


def schemas_from_definitions(
    defs: Mapping[str, Any], roots: Iterable[str], *, source: str
) -> list[SchemaDef]:
    """The roots (kinds) and every definition they reference, as SchemaDefs, sorted."""
    conv = _Converter(defs, source)
    root_set = sorted(set(roots))
    out: dict[str, SchemaDef] = {}
    for name in root_set:
        if name not in defs:
            raise GenError(f"{source}: unknown definition {name!r}")
        conv.needed[name] = None
        out[name] = conv.schema_def(name, root=True)
    while conv.queue:
        name = conv.queue.pop()
        if name not in out:
            out[name] = conv.schema_def(name, root=False)
    return [out[k] for k in sorted(out)]
