"""Compose the generator: inputs (definitions, CRDs) to files, and staleness checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from konfig.gen.crd import schemas_from_crd
from konfig.gen.model import GeneratedFiles, SchemaDef
from konfig.gen.openapi import kinds_of, schemas_from_definitions
from konfig.gen.render import HEADER, render_files

# The API groups the base models build resources from.
DEFAULT_GROUPS: tuple[str, ...] = (
    "v1",
    "apps/v1",
    "batch/v1",
    "networking.k8s.io/v1",
    "autoscaling/v2",
    "policy/v1",
    "rbac.authorization.k8s.io/v1",
)


def generate(
    definitions: Mapping[str, Any] | None,
    *,
    groups: Sequence[str] = DEFAULT_GROUPS,
    crds: Sequence[tuple[str, Mapping[str, Any]]] = (),
    import_prefix: str,
    source: str,
) -> GeneratedFiles:
    """KCL files for the kinds of ``groups`` in ``definitions`` and for every CRD.

    ``crds`` are ``(source name, parsed CRD)`` pairs; ``import_prefix`` is the KCL
    package path of the output directory (``base.pkg.k8s``).
    """
    schemas: list[SchemaDef] = []
    if definitions is not None:
        roots = kinds_of(definitions, groups)
        schemas.extend(schemas_from_definitions(definitions, roots, source=source))
    for name, crd in crds:
        schemas.extend(schemas_from_crd(crd, source=name))
    return render_files(schemas, import_prefix=import_prefix)


@dataclass(frozen=True)
class Staleness:
    """How the files on disk differ from what the generator produces."""

    missing: tuple[str, ...]
    changed: tuple[str, ...]
    extra: tuple[str, ...]  # generated files on disk the generator no longer produces

    @property
    def stale(self) -> bool:
        return bool(self.missing or self.changed or self.extra)


def generated_on_disk(out: Path) -> list[str]:
    """Files under ``out`` that carry the generator's header (hand-written ones are kept)."""
    if not out.is_dir():
        return []
    found = []
    for path in sorted(out.rglob("*.k")):
        with path.open(encoding="utf-8") as handle:
            head = handle.read(400)
        if HEADER in head:
            found.append(path.relative_to(out).as_posix())
    return found


def compare(files: GeneratedFiles, out: Path) -> Staleness:
    missing, changed = [], []
    for rel, text in sorted(files.items()):
        path = out / rel
        if not path.is_file():
            missing.append(rel)
        elif path.read_text(encoding="utf-8") != text:
            changed.append(rel)
    extra = [rel for rel in generated_on_disk(out) if rel not in files]
    return Staleness(tuple(missing), tuple(changed), tuple(extra))
