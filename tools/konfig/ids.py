"""Resource ids: ``apiVersion:Kind[:namespace]:name``, the one type and parser.

A Spec names each resource by its id (no namespace segment for cluster-scoped kinds);
the inventory records its members by id; the plan and the engine address objects by
the :class:`ObjectRef` parsed from one. :func:`resource_id` is the id a manifest should
have; :func:`parse_id` reads one back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from konfig.errors import KonfigError

FORMAT = "apiVersion:Kind[:namespace]:name"


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
    """Parse a resource id.

    ``namespaced`` None: the id alone decides (three segments: cluster-scoped, four:
    namespaced; anything else raises :class:`ResourceIdError`). When the caller knows
    the kind's scope (from the API server), a cluster-scoped name may contain ``:``
    (``ClusterRole`` ``system:controller:foo``) and is read whole.
    """
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
