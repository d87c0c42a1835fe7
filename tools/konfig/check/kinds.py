"""Which kinds exist and which are namespaced: built-in kinds and CRDs found in the repo.

Built-in scope comes from a table of the cluster-scoped kinds of Kubernetes 1.32
(``kubectl api-resources --namespaced=false``); every other built-in kind that has a
schema is namespaced. CustomResourceDefinitions are found in YAML files under
``base/`` and ``appops/`` (goldens included, so a CRD rendered by another stack
counts) and in the Specs being checked; their ``spec.scope`` decides.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from konfig.spec import Resource

# (group, kind) of the cluster-scoped built-in kinds; group "" is the core group.
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

CRD_KIND = "CustomResourceDefinition"
CRD_GROUP = "apiextensions.k8s.io"
SEARCH_DIRS = ("base", "appops")


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


@dataclass(frozen=True)
class CustomKind:
    group: str
    kind: str
    versions: tuple[str, ...]
    namespaced: bool
    source: str  # file, or "<stack>: <resource id>"
    schemas: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass
class KindCatalog:
    """The custom kinds the repository defines, by (group, kind)."""

    custom: dict[tuple[str, str], CustomKind] = field(default_factory=dict)

    def add_crd(self, manifest: Any, source: str) -> None:
        if not isinstance(manifest, dict) or manifest.get("kind") != CRD_KIND:
            return
        if group_of(str(manifest.get("apiVersion", ""))) != CRD_GROUP:
            return
        spec = manifest.get("spec")
        if not isinstance(spec, dict):
            return
        names = spec.get("names")
        kind = names.get("kind") if isinstance(names, dict) else None
        group = spec.get("group")
        if not isinstance(kind, str) or not isinstance(group, str):
            return
        versions: list[str] = []
        schemas: dict[str, Any] = {}
        for v in spec.get("versions") or []:
            if isinstance(v, dict) and isinstance(v.get("name"), str):
                versions.append(v["name"])
                holder = v.get("schema")
                schema = holder.get("openAPIV3Schema") if isinstance(holder, dict) else None
                if isinstance(schema, dict):
                    schemas[v["name"]] = schema
        self.custom.setdefault(
            (group, kind),
            CustomKind(
                group,
                kind,
                tuple(versions),
                spec.get("scope", "Namespaced") != "Cluster",
                source,
                schemas,
            ),
        )

    def add_resources(self, resources: Iterable[Resource], source: str) -> None:
        for r in resources:
            self.add_crd(r.attributes, f"{source}: {r.id}")

    def lookup(self, api_version: str, kind: str) -> CustomKind | None:
        return self.custom.get((group_of(api_version), kind))

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        custom = self.lookup(api_version, kind)
        if custom is not None:
            return custom.namespaced
        return (group_of(api_version), kind) not in CLUSTER_SCOPED


def scan_repository(root: Path) -> KindCatalog:
    """CRDs in YAML files under base/ and appops/ (cheap: only files that mention them)."""
    catalog = KindCatalog()
    for top in SEARCH_DIRS:
        start = root / top
        if not start.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if not name.endswith((".yaml", ".yml")):
                    continue
                path = Path(dirpath) / name
                try:
                    text = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                if CRD_KIND not in text:
                    continue
                rel = path.relative_to(root).as_posix()
                try:
                    docs = list(yaml.safe_load_all(text))
                except yaml.YAMLError:
                    continue
                for doc in docs:
                    catalog.add_crd(doc, rel)
                    # a compiled Spec (a golden) holds manifests under resources[].attributes
                    if isinstance(doc, dict) and isinstance(doc.get("resources"), list):
                        for item in doc["resources"]:
                            if isinstance(item, dict):
                                catalog.add_crd(item.get("attributes"), rel)
    return catalog
