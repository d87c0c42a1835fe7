"""CustomResourceDefinition YAML to :class:`SchemaDef` records.

Each served version's ``schema.openAPIV3Schema`` becomes schema ``<Kind>`` in package
``crd.<group>.<version>`` (dots and dashes of the group become ``_``), its nested
objects become schemas named after their path (``<Kind>Spec``, ``<Kind>SpecPortsItem``)
in the same file, and ``metadata`` is the generated Kubernetes ``ObjectMeta``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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
from konfig.gen.openapi import GenError, package_of, sanitize_segment

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


def _pascal(text: str) -> str:
    parts = re.split(r"[^0-9A-Za-z]+", text)
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


class _CrdConverter:
    def __init__(self, package: Package, kind: str, source: str) -> None:
        self.package = package
        self.kind = kind
        self.source = source
        self.schemas: list[SchemaDef] = []
        self.names: set[str] = set()

    def _name(self, wanted: str) -> str:
        name, n = wanted, 2
        while name in self.names:
            name, n = f"{wanted}{n}", n + 1
        self.names.add(name)
        return name

    def type_of(self, schema: Mapping[str, Any], path: str) -> KType:
        if schema.get("x-kubernetes-int-or-string"):
            return Union((Prim("int"), Prim("str")))
        for key in ("oneOf", "anyOf"):
            options = [self.type_of(s, path) for s in schema.get(key) or [] if s.get("type")]
            if options and not schema.get("type"):
                unique = list(dict.fromkeys(options))
                return unique[0] if len(unique) == 1 else Union(tuple(unique))
        enum = [v for v in schema.get("enum") or [] if v is not None]
        if enum and all(isinstance(v, str | int | float | bool) for v in enum):
            return Literals(tuple(enum))
        kind = schema.get("type")
        if kind in _SCALARS:
            return Prim(_SCALARS[str(kind)])
        if kind == "array":
            items = schema.get("items")
            return ListOf(self.type_of(items, f"{path}Item") if isinstance(items, dict) else ANY)
        if kind == "object" or "properties" in schema:
            if schema.get("properties"):
                return Ref(self.package, self.object(schema, path, root=False))
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return DictOf(self.type_of(extra, f"{path}Value"))
            return OBJECT
        return ANY

    def object(self, schema: Mapping[str, Any], path: str, *, root: bool) -> str:
        name = self._name(path)
        required = set(schema.get("required") or [])
        fields = []
        for prop in sorted(schema.get("properties") or {}):
            if root and prop == "status":
                continue
            spec = schema["properties"][prop]
            if root and prop == "metadata":
                ftype: KType = Ref(package_of(OBJECT_META), "ObjectMeta")
            else:
                ftype = self.type_of(spec, f"{path}{_pascal(prop)}")
            fields.append(
                Field(
                    prop,
                    ftype,
                    prop in required,
                    str(spec.get("description") or ""),
                    spec.get("default"),
                )
            )
        if root:
            fields = [f for f in fields if f.name not in ("apiVersion", "kind")]
            fields[:0] = [
                Field("apiVersion", Literals((self.api_version,)), True, "", self.api_version),
                Field("kind", Literals((self.kind,)), True, "", self.kind),
            ]
        self.schemas.append(
            SchemaDef(
                package=self.package,
                name=name,
                doc=str(schema.get("description") or ""),
                fields=tuple(fields),
                source=self.source,
                file=f"{self.kind.lower()}.k",
            )
        )
        return name

    api_version = ""


def schemas_from_crd(crd: Mapping[str, Any], *, source: str) -> list[SchemaDef]:
    """SchemaDefs for every version of a CustomResourceDefinition that carries a schema."""
    if crd.get("kind") != "CustomResourceDefinition":
        raise GenError(f"{source}: not a CustomResourceDefinition (kind {crd.get('kind')!r})")
    spec = crd.get("spec") or {}
    group = spec.get("group")
    kind = (spec.get("names") or {}).get("kind")
    if not group or not kind:
        raise GenError(f"{source}: a CRD needs spec.group and spec.names.kind")
    out: list[SchemaDef] = []
    for version in spec.get("versions") or []:
        schema = ((version.get("schema") or {}).get("openAPIV3Schema")) or None
        if not isinstance(schema, dict):
            continue
        name = str(version.get("name"))
        package = ("crd", sanitize_segment(group), sanitize_segment(name))
        conv = _CrdConverter(package, str(kind), source)
        conv.api_version = f"{group}/{name}"
        conv.object(schema, str(kind), root=True)
        out.extend(conv.schemas)
    if not out:
        raise GenError(f"{source}: no version of {kind} has spec.versions[].schema.openAPIV3Schema")
    return out
