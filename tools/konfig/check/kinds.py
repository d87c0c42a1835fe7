"""Which kinds exist and which are namespaced: built-in kinds and CRDs found in the repo.

Built-in scope comes from :mod:`konfig.ids` (the table of the cluster-scoped kinds);
every other kind is namespaced unless a CRD says otherwise. CustomResourceDefinitions
are found in YAML files under ``base/`` and ``appops/`` (goldens included, so a CRD
rendered by another stack counts) and in the Specs being checked; their ``spec.scope``
decides.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from konfig.ids import CRD_GROUP, CRD_KIND, builtin_namespaced, group_of
from konfig.repo.yamlio import load_documents
from konfig.spec import Resource

SEARCH_DIRS = ("base", "appops")


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
        return builtin_namespaced(api_version, kind) is not False


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
                    docs = load_documents(text)
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
