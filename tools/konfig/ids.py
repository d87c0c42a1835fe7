"""Resource ids, the one type and parser for each runtime.

- **Kubernetes**: ``apiVersion:Kind[:namespace]:name`` (no namespace segment for
  cluster-scoped kinds). The plan and the engine address objects by the
  :class:`ObjectRef` parsed from one. :func:`resource_id` is the id a manifest should
  have; :func:`parse_id` reads one back.
- **Terraform** (OpenTofu): ``<namespace>/<provider>:<resource type>:<name>``, e.g.
  ``cyrilgdn/postgresql:postgresql_role:storefront``: the provider's registry address
  without its host, the resource type and the resource's name in the stack's
  configuration. :func:`parse_terraform_id` reads one into a :class:`TerraformAddress`.

The two never mix up: a Kubernetes kind is CamelCase, a Terraform resource type is
lower case with an underscore (``postgresql_role``). A Spec names each resource by its
id, the inventory records its members by id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from konfig.errors import KonfigError

FORMAT = "apiVersion:Kind[:namespace]:name"
TERRAFORM_FORMAT = "<namespace>/<provider>:<resource type>:<name>"

# Terraform: provider namespace and type as in a registry address, a resource type
# (lower case, an underscore after the provider's prefix) and a resource name (an
# OpenTofu identifier: a letter or underscore, then letters, digits, `_` and `-`).
_TF_PROVIDER = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
_TF_TYPE = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
_TF_NAME = r"[A-Za-z_][A-Za-z0-9_-]*"
_TERRAFORM_ID = re.compile(rf"^({_TF_PROVIDER})/({_TF_PROVIDER}):({_TF_TYPE}):({_TF_NAME})$")
# what a Terraform id looks like at first sight (to tell it from a Kubernetes one)
_TERRAFORM_SHAPE = re.compile(rf"^[^:/]+/[^:/]+:{_TF_TYPE}:")


class ResourceIdError(KonfigError):
    """A string that is not a resource id."""


@dataclass(frozen=True, order=True)
class ObjectRef:
    """Where an object lives: apiVersion, kind, namespace (None: cluster-scoped), name."""

    api_version: str
    kind: str
    namespace: str | None
    name: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def group_kind(self) -> str:
        """``Kind.group`` as kubectl writes it; core kinds are just ``Kind``."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def id(self) -> str:
        return format_id(self.api_version, self.kind, self.namespace, self.name)

    def describe(self) -> str:
        """``Kind name in namespace ns (apiVersion)``: how messages name the object."""
        return describe(self.api_version, self.kind, self.name, self.namespace)


def describe(api_version: str, kind: str, name: str, namespace: str | None) -> str:
    where = f" in namespace {namespace}" if namespace else ""
    return f"{kind} {name}{where} ({api_version})"


def format_id(api_version: str, kind: str, namespace: str | None, name: str) -> str:
    return ":".join([api_version, kind, *([namespace] if namespace else []), name])


def resource_id(attributes: Mapping[str, Any]) -> str:
    """The id a manifest should have: ``apiVersion:Kind[:namespace]:name``."""
    meta = attributes.get("metadata") or {}
    return format_id(
        str(attributes.get("apiVersion", "")),
        str(attributes.get("kind", "")),
        str(meta["namespace"]) if meta.get("namespace") else None,
        str(meta.get("name", "")),
    )


def parse_id(resource_id: str, *, namespaced: bool | None = None) -> ObjectRef:
    """Parse a Kubernetes resource id (a Terraform id raises :class:`ResourceIdError`).

    ``namespaced`` None: the id alone decides (three segments: cluster-scoped, four:
    namespaced; anything else raises :class:`ResourceIdError`). When the caller knows
    the kind's scope (from the API server), a cluster-scoped name may contain ``:``
    (``ClusterRole`` ``system:controller:foo``) and is read whole.
    """
    if is_terraform_id(resource_id):
        raise ResourceIdError(
            f"{resource_id!r} is a Terraform resource id, not a Kubernetes one ({FORMAT})"
        )
    if namespaced is not None:
        api_version, _, rest = resource_id.partition(":")
        kind, _, rest = rest.partition(":")
        if namespaced:
            namespace, _, name = rest.partition(":")
            return ObjectRef(api_version, kind, namespace, name)
        return ObjectRef(api_version, kind, None, rest)
    parts = resource_id.split(":")
    if len(parts) == 3:
        api_version, kind, name = parts
        ns: str | None = None
    elif len(parts) == 4:
        api_version, kind, ns, name = parts
    else:
        raise ResourceIdError(f"malformed resource id {resource_id!r}: expected {FORMAT}")
    if not api_version or not kind or not name or ns == "":
        raise ResourceIdError(f"malformed resource id {resource_id!r}: expected {FORMAT}")
    return ObjectRef(api_version, kind, ns, name)


@dataclass(frozen=True, order=True)
class TerraformAddress:
    """A Terraform resource of a stack: provider namespace and type, resource type, name."""

    namespace: str
    provider: str
    type: str
    name: str

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.provider}:{self.type}:{self.name}"

    @property
    def address(self) -> str:
        """The resource's address in the OpenTofu configuration: ``type.name``."""
        return f"{self.type}.{self.name}"

    def describe(self) -> str:
        """``postgresql_role storefront (cyrilgdn/postgresql)``: how messages name it."""
        return f"{self.type} {self.name} ({self.namespace}/{self.provider})"


def is_terraform_id(resource_id: str) -> bool:
    """Whether ``resource_id`` has the shape of a Terraform id (it may still be malformed)."""
    return bool(_TERRAFORM_SHAPE.match(resource_id))


def parse_terraform_id(resource_id: str) -> TerraformAddress:
    """Parse ``<namespace>/<provider>:<resource type>:<name>``; ResourceIdError otherwise."""
    match = _TERRAFORM_ID.match(resource_id)
    if match is None:
        raise ResourceIdError(
            f"malformed Terraform resource id {resource_id!r}: expected {TERRAFORM_FORMAT} "
            "(e.g. cyrilgdn/postgresql:postgresql_role:shop; the name is a letter or '_' "
            "followed by letters, digits, '_' or '-')"
        )
    return TerraformAddress(*match.groups())
