"""The Spec of a stack: the compiled ``resources`` list, validated and canonical.

A resource is ``{id, type, attributes, dependsOn, extensions}`` with
``id = apiVersion:Kind:namespace:name`` (no namespace segment for cluster-scoped
kinds). Specs are sorted by id and dumped as canonical YAML so that compiling twice
gives identical bytes and goldens and diffs are stable.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from konfig.ids import resource_id
from konfig.repo.yamlio import canonical, dump_yaml

RESOURCE_TYPE = "Kubernetes"


class SpecError(ValueError):
    """The compiled output is not a valid Spec."""


@dataclass(frozen=True)
class Resource:
    id: str
    attributes: dict[str, Any]
    depends_on: tuple[str, ...] = ()
    extensions: dict[str, Any] = field(default_factory=dict)
    type: str = RESOURCE_TYPE

    @property
    def api_version(self) -> str:
        return str(self.attributes.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        return str(self.attributes.get("kind", ""))

    @property
    def name(self) -> str:
        return str((self.attributes.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> str | None:
        ns = (self.attributes.get("metadata") or {}).get("namespace")
        return str(ns) if ns else None

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "attributes": canonical(self.attributes),
            "dependsOn": list(self.depends_on),
            "extensions": canonical(self.extensions),
        }


@dataclass(frozen=True)
class Spec:
    resources: tuple[Resource, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"resources": [r.to_dict() for r in self.resources]}

    def to_yaml(self) -> str:
        return dump_yaml(self.to_dict())

    def digest(self) -> str:
        """A stable digest of the Spec's content (sha256 of its canonical JSON)."""
        data = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode()).hexdigest()

    def by_id(self) -> dict[str, Resource]:
        return {r.id: r for r in self.resources}


def spec_from_output(output: Any, *, key: str = "resources") -> Spec:
    """Build a Spec from compiled KCL output (a mapping holding ``resources``)."""
    if not isinstance(output, Mapping) or key not in output:
        raise SpecError(
            f"the compiled output has no `{key}` list: the stack's entry files must end with "
            "the render entry (konfig.yaml `renderEntry`) that turns model instances into "
            "resources"
        )
    items = output[key]
    if items is None:
        items = []
    if not isinstance(items, list):
        raise SpecError(f"`{key}` must be a list, got {type(items).__name__}")
    return spec_from_items(items)


def spec_from_items(items: Iterable[Any]) -> Spec:
    resources: list[Resource] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise SpecError(f"resources[{index}] must be a mapping, got {type(item).__name__}")
        attributes = item.get("attributes")
        if not isinstance(attributes, Mapping):
            raise SpecError(f"resources[{index}] has no `attributes` mapping")
        rid = item.get("id") or resource_id(attributes)
        depends = item.get("dependsOn") or []
        if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
            raise SpecError(f"{rid}: `dependsOn` must be a list of resource ids")
        extensions = item.get("extensions") or {}
        if not isinstance(extensions, Mapping):
            raise SpecError(f"{rid}: `extensions` must be a mapping")
        resources.append(
            Resource(
                id=str(rid),
                type=str(item.get("type") or RESOURCE_TYPE),
                attributes=dict(attributes),
                depends_on=tuple(sorted(set(depends))),
                extensions=dict(extensions),
            )
        )
    resources.sort(key=lambda r: r.id)
    return Spec(tuple(resources))


def load_spec(data: Any) -> Spec:
    """Read a Spec back from its dict form (a parsed spec.yaml or golden file)."""
    return spec_from_output(data)
