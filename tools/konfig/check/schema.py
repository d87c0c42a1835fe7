"""Kubernetes schema rules: every manifest against the strict OpenAPI schema.

The schemas are the ones ``kubernetes-validate`` bundles, for the Kubernetes version
in konfig.yaml (``kubernetesVersion``; the newest bundled schema not newer than it).
Strict schemas reject unknown fields, which is what catches typos. Validators are
built once per kind and cached (building one means reading a 1.3 MB definitions file).

- ``schema/invalid``: the manifest does not validate (one finding per error, with the
  field path);
- ``schema/unknown-kind``: no built-in schema and no CRD in the repository defines it;
- custom resources are validated against their CRD's ``openAPIV3Schema`` when it has one.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

from konfig.check.findings import Finding
from konfig.check.kinds import KindCatalog
from konfig.check.locate import locate
from konfig.errors import ConfigError
from konfig.repo.layout import Stack
from konfig.spec import Spec

MAX_ERRORS_PER_RESOURCE = 10
_VERSION_DIR = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-local-strict$")


def _schema_root() -> Any:
    return resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")


@cache
def schema_dir(kubernetes_version: str) -> str:
    """The bundled strict schema directory for a version like ``1.32`` (newest not newer)."""
    wanted = tuple(int(p) for p in re.findall(r"\d+", kubernetes_version)[:2])
    if len(wanted) != 2:
        raise ConfigError(
            f"kubernetesVersion {kubernetes_version!r} is not a version like 1.32",
            file="konfig.yaml",
        )
    candidates: list[tuple[tuple[int, int, int], str]] = []
    for entry in _schema_root().iterdir():
        match = _VERSION_DIR.match(entry.name)
        if match:
            version = (int(match[1]), int(match[2]), int(match[3]))
            if version[:2] <= wanted:
                candidates.append((version, entry.name))
    if not candidates:
        raise ConfigError(
            f"kubernetes-validate bundles no schema for Kubernetes {kubernetes_version}",
            file="konfig.yaml",
        )
    return max(candidates)[1]


@cache
def _definitions(directory: str) -> Any:
    path = _schema_root().joinpath(directory, "_definitions.json")
    return json.loads(path.read_text(encoding="utf-8"))


@cache
def builtin_validator(directory: str, api_version: str, kind: str) -> Any | None:
    """A cached validator for a built-in kind, or None when there is no schema for it."""
    # rbac.authorization.k8s.io/v1 -> rbac-v1, apps/v1 -> apps-v1, v1 -> v1
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = _schema_root().joinpath(directory, f"{kind.lower()}-{api}.json")
    if not path.is_file():
        return None
    schema = json.loads(path.read_text(encoding="utf-8"))
    # the schema's own `kind` enum must match exactly (file names are lower-cased)
    kinds = schema.get("properties", {}).get("kind", {}).get("enum")
    if kinds and kind not in kinds:
        return None
    registry: Registry = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(_definitions(directory)) @ registry
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def _path(error: jsonschema.ValidationError) -> str:
    parts = ""
    for p in error.absolute_path:
        parts += f"[{p}]" if isinstance(p, int) else (f".{p}" if parts else str(p))
    return parts or "(top level)"


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return str(error.message).replace(
            "Additional properties are not allowed", "unknown field(s)"
        )
    return str(error.message)


def check_schema(
    root: Path, stack: Stack, spec: Spec, kinds: KindCatalog, kubernetes_version: str
) -> list[Finding]:
    directory = schema_dir(kubernetes_version)
    findings: list[Finding] = []
    for r in spec.resources:
        if not r.api_version or not r.kind:
            continue  # spec/invalid-resource reports it
        validator = builtin_validator(directory, r.api_version, r.kind)
        custom = kinds.lookup(r.api_version, r.kind)
        source = "Kubernetes " + kubernetes_version
        if validator is None and custom is not None:
            version = r.api_version.rpartition("/")[2]
            if custom.versions and version not in custom.versions:
                file, line = locate(root, stack, r)
                findings.append(
                    Finding(
                        "schema/unknown-kind",
                        f"{r.id}: the CRD for {r.kind} ({custom.source}) serves versions "
                        f"{', '.join(custom.versions)}, not {version}",
                        file,
                        line,
                        stack=stack.path,
                        resource=r.id,
                    )
                )
                continue
            schema = custom.schemas.get(version)
            if schema is None:
                continue
            validator = jsonschema.validators.Draft7Validator(schema)
            source = f"the CRD in {custom.source}"
        if validator is None:
            file, line = locate(root, stack, r)
            findings.append(
                Finding(
                    "schema/unknown-kind",
                    f"{r.id}: Kubernetes {kubernetes_version} has no kind {r.kind} in "
                    f"{r.api_version}, and no CustomResourceDefinition for it is in the "
                    "repository: fix apiVersion/kind, or add the CRD (YAML under base/ or "
                    "appops/, or a CRD resource in a stack)",
                    file,
                    line,
                    stack=stack.path,
                    resource=r.id,
                )
            )
            continue
        errors = sorted(validator.iter_errors(r.attributes), key=lambda e: list(e.absolute_path))
        for error in errors[:MAX_ERRORS_PER_RESOURCE]:
            file, line = locate(root, stack, r)
            findings.append(
                Finding(
                    "schema/invalid",
                    f"{r.id}: {_path(error)}: {_message(error)} (schema of {source})",
                    file,
                    line,
                    stack=stack.path,
                    resource=r.id,
                )
            )
    return findings
