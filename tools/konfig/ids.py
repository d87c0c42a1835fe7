"""Resource ids, the one type and parser for each runtime.

- **Kubernetes**: ``apiVersion:Kind[:namespace]:name`` (no namespace segment for
  cluster-scoped kinds). The plan and the engine address objects by the
  :class:`ObjectRef` parsed from one. :func:`resource_id` is the id a manifest should
  have; :func:`parse_id` reads one back. A name may hold ``:`` (RBAC names are path
  segments: ``system:auth-delegator``, a Role ``app:leader-election``), so the id alone
  does not say where the namespace ends: the kind's scope does. :func:`parse_id` knows
  the scope of every built-in kind (:data:`CLUSTER_SCOPED`, :data:`BUILTIN_GROUPS`),
  takes the caller's knowledge of the others (a CRD's ``spec.scope``, the API server's
  discovery) through ``scope``, and otherwise relies on what a custom resource's name
  may be (an RFC 1123 subdomain: no ``:``). A namespace never holds ``:``.
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
from collections.abc import Callable, Iterable, Mapping
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


# (group, kind) of the cluster-scoped built-in kinds of Kubernetes 1.33 (`kubectl
# api-resources --namespaced=false`); group "" is the core group. Every other kind of a
# built-in group (BUILTIN_GROUPS) is namespaced. tools/tests/test_ids.py checks both
# against the API server's discovery.
CLUSTER_SCOPED: frozenset[tuple[str, str]] = frozenset(
    {
        ("", "ComponentStatus"),
        ("", "Namespace"),
        ("", "Node"),
        ("", "PersistentVolume"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("authentication.k8s.io", "SelfSubjectReview"),
        ("authentication.k8s.io", "TokenReview"),
        ("authorization.k8s.io", "SelfSubjectAccessReview"),
        ("authorization.k8s.io", "SelfSubjectRulesReview"),
        ("authorization.k8s.io", "SubjectAccessReview"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
        ("certificates.k8s.io", "ClusterTrustBundle"),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
        ("internal.apiserver.k8s.io", "StorageVersion"),
        ("networking.k8s.io", "IngressClass"),
        ("networking.k8s.io", "IPAddress"),
        ("networking.k8s.io", "ServiceCIDR"),
        ("node.k8s.io", "RuntimeClass"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("resource.k8s.io", "DeviceClass"),
        ("resource.k8s.io", "ResourceSlice"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "CSINode"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "VolumeAttachment"),
        ("storage.k8s.io", "VolumeAttributesClass"),
        ("storagemigration.k8s.io", "StorageVersionMigration"),
    }
)
# The API groups Kubernetes itself serves (a kind of any other group is a custom one).
BUILTIN_GROUPS: frozenset[str] = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)

# What a caller knows of a kind's scope: (apiVersion, kind) -> namespaced, None unknown.
ScopeOf = Callable[[str, str], bool | None]

CRD_KIND = "CustomResourceDefinition"
CRD_GROUP = "apiextensions.k8s.io"


def group_of(api_version: str) -> str:
    """The API group of ``apiVersion`` (``""`` for the core group's ``v1``)."""
    return api_version.rpartition("/")[0]


def builtin_namespaced(api_version: str, kind: str) -> bool | None:
    """Whether a built-in kind is namespaced; None for a kind of another group."""
    group = group_of(api_version)
    if group not in BUILTIN_GROUPS or (not group and api_version != "v1"):
        return None
    return (group, kind) not in CLUSTER_SCOPED


def crd_scopes(manifests: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], bool]:
    """(group, kind) -> namespaced, from the CustomResourceDefinitions among
    ``manifests`` (their ``spec.scope``)."""
    found: dict[tuple[str, str], bool] = {}
    for m in manifests:
        if m.get("kind") != CRD_KIND or group_of(str(m.get("apiVersion", ""))) != CRD_GROUP:
            continue
        spec = m.get("spec")
        if not isinstance(spec, Mapping):
            continue
        names = spec.get("names")
        kind = names.get("kind") if isinstance(names, Mapping) else None
        group = spec.get("group")
        if isinstance(kind, str) and isinstance(group, str):
            found[(group, kind)] = spec.get("scope", "Namespaced") != "Cluster"
    return found


def scope_from(known: Mapping[tuple[str, str], bool]) -> ScopeOf:
    """A :data:`ScopeOf` that answers from ``known`` ((group, kind) -> namespaced)."""

    def scope(api_version: str, kind: str) -> bool | None:
        return known.get((group_of(api_version), kind))

    return scope


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


def parse_id(
    resource_id: str, *, namespaced: bool | None = None, scope: ScopeOf | None = None
) -> ObjectRef:
    """Parse a Kubernetes resource id (a Terraform id raises :class:`ResourceIdError`).

    Where the namespace segment is depends on the kind's scope, taken from, in order:
    ``namespaced`` (the caller knows it), ``scope`` (e.g. the API server's discovery, or
    the CRDs of a Spec: :func:`crd_scopes`), the built-in kinds' table. For a kind of
    unknown scope (a custom resource, whose name cannot hold ``:``) the segments decide:
    one after the kind, cluster-scoped; two, namespace and name; more, malformed.
    """
    if is_terraform_id(resource_id):
        raise ResourceIdError(
            f"{resource_id!r} is a Terraform resource id, not a Kubernetes one ({FORMAT})"
        )
    api_version, _, rest = resource_id.partition(":")
    kind, _, rest = rest.partition(":")
    if not api_version or not kind or not rest:
        raise ResourceIdError(f"malformed resource id {resource_id!r}: expected {FORMAT}")
    if namespaced is None and scope is not None:
        namespaced = scope(api_version, kind)
    if namespaced is None:
        namespaced = builtin_namespaced(api_version, kind)
    if namespaced is None:
        parts = rest.split(":")
        if len(parts) > 2:
            raise ResourceIdError(
                f"malformed resource id {resource_id!r}: expected {FORMAT} (the name of a "
                f"{kind}, a kind of unknown scope, cannot hold ':')"
            )
        namespaced = len(parts) == 2
    if not namespaced:
        return ObjectRef(api_version, kind, None, rest)
    namespace, _, name = rest.partition(":")
    if not namespace or not name:
        raise ResourceIdError(
            f"malformed resource id {resource_id!r}: expected {FORMAT} ({kind} is "
            "namespaced: apiVersion:Kind:namespace:name)"
        )
    return ObjectRef(api_version, kind, namespace, name)


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
