"""The Spec of a stack: the compiled ``resources`` list, validated and canonical.

A resource is ``{id, type, attributes, dependsOn, extensions}``:

- ``type: Kubernetes`` (the default): ``attributes`` is the manifest and
  ``id = apiVersion:Kind:namespace:name`` (no namespace segment for cluster-scoped
  kinds);
- ``type: Terraform``: ``id = <namespace>/<provider>:<resource type>:<name>``,
  ``attributes`` the resource's arguments and ``extensions.provider`` the provider
  (``source``, ``version``, ``config``: docs/terraform.md).

A string attribute may refer to a Terraform resource's attribute
(``${konfig:<id>.<attribute>}``, :mod:`konfig.outputs`): the referenced id is added to
the resource's ``dependsOn`` (the implicit edge: what is referred to is applied first).
Specs are sorted by id and dumped as canonical YAML so that compiling twice gives
identical bytes and goldens and diffs are stable.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from konfig import outputs
from konfig.ids import (
    ResourceIdError,
    TerraformAddress,
    is_terraform_id,
    parse_terraform_id,
    resource_id,
)

RESOURCE_TYPE = "Kubernetes"
TERRAFORM = "Terraform"
RESOURCE_TYPES = (RESOURCE_TYPE, TERRAFORM)


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
    def is_terraform(self) -> bool:
        return self.type == TERRAFORM

    @property
    def terraform(self) -> TerraformAddress:
        """The Terraform resource's address (its id parsed); only for ``type: Terraform``."""
        return parse_terraform_id(self.id)

    @property
    def api_version(self) -> str:
        if self.is_terraform:
            return ""
        return str(self.attributes.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        if self.is_terraform:
            return ""
        return str(self.attributes.get("kind", ""))

    @property
    def name(self) -> str:
        """The object's name (a Terraform resource's: the last segment of its id)."""
        if self.is_terraform:
            return self.id.rpartition(":")[2]
        return str((self.attributes.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> str | None:
        if self.is_terraform:
            return None
        ns = (self.attributes.get("metadata") or {}).get("namespace")
        return str(ns) if ns else None

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def to_dict(self) -> dict[str, Any]:
        from konfig.repo.yamlio import canonical  # (its module loads PyYAML: not at start)

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
        from konfig.repo.yamlio import dump_yaml

        return dump_yaml(self.to_dict())

    def digest(self) -> str:
        """A stable digest of the Spec's content (sha256 of its canonical JSON)."""
        data = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode()).hexdigest()

    def by_id(self) -> dict[str, Resource]:
        return {r.id: r for r in self.resources}

    def kubernetes(self) -> tuple[Resource, ...]:
        return tuple(r for r in self.resources if not r.is_terraform)

    def terraform(self) -> tuple[Resource, ...]:
        return tuple(r for r in self.resources if r.is_terraform)


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
        kind = str(item.get("type") or RESOURCE_TYPE)
        if kind not in RESOURCE_TYPES:
            raise SpecError(
                f"resources[{index}] ({item.get('id')}): unknown type {kind!r}; "
                f"expected one of {', '.join(RESOURCE_TYPES)}"
            )
        if kind == TERRAFORM:
            try:
                parse_terraform_id(str(item.get("id") or ""))
            except ResourceIdError as exc:
                raise SpecError(f"resources[{index}]: {exc.message}") from None
        elif is_terraform_id(str(item.get("id") or "")):
            raise SpecError(
                f"resources[{index}]: {item.get('id')!r} is a Terraform id: set `type: Terraform`"
            )
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
                type=kind,
                attributes=dict(attributes),
                depends_on=tuple(sorted(set(depends) | set(outputs.targets(attributes)))),
                extensions=dict(extensions),
            )
        )
    resources.sort(key=lambda r: r.id)
    return Spec(tuple(resources))


def spec_from_dict(data: Mapping[str, Any]) -> Spec:
    """A Spec back from its own :meth:`Spec.to_dict` (what the compile cache stores):
    that form was checked when the Spec was made, and its ``dependsOn`` already holds
    the references, so nothing is validated or searched again. KeyError or TypeError
    when ``data`` is not such a form."""
    return Spec(
        tuple(
            Resource(
                id=item["id"],
                type=item["type"],
                attributes=item["attributes"],
                depends_on=tuple(item["dependsOn"]),
                extensions=item["extensions"],
            )
            for item in data["resources"]
        )
    )


def load_spec(data: Any) -> Spec:
    """Read a Spec back from its dict form (a parsed spec.yaml or golden file)."""
    return spec_from_output(data)
