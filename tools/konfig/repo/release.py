"""Which Konfig release a repository runs, and which of its files are the release's.

A repository made by ``konfig init`` holds two kinds of files:

- **the team's**: ``base/``, ``appops/``, ``kcl.mod``, ``konfig.yaml``, ``.sops.yaml``,
  ``.terraform.lock.hcl`` (the provider hashes the team trusts) and the CODEOWNERS files
  made from the projects' owners (:data:`TEAM`): the models, the stacks and the
  settings; an upgrade never touches them;
- **the release's**: every other file of the template (the tools under ``tools/konfig``,
  the actions and the workflows, ``pyproject.toml``, ``constraints.txt``, ``hack/``'s
  scripts, the docs, the README and the Makefile): vendored at one konfig version.

``.konfig/release.json`` (:data:`RECORD`) records that version and the sha256 of each
release file as it was written, so ``konfig upgrade`` tells a file the team changed
since (kept, and reported) from one it may replace. A repository made before the record
existed (konfig 0.1.0) is read against the manifest of that release the package ships
(``konfig/data/releases/<version>.json``, the same record for the template at the
commit the release names).

The changes between releases are ``CHANGELOG.md``'s sections, one ``## <version>``
heading each, newest first (:func:`changelog_since`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from konfig.errors import KonfigError
from konfig.repo.files import WriteScope, atomic_write_text
from konfig.repo.template import TemplateSource, content, template_paths

RECORD = ".konfig/release.json"
# The team's files: never written by an upgrade. A path ending in "/" is a folder.
TEAM = (
    "base/",
    "appops/",
    "kcl.mod",
    "konfig.yaml",
    ".sops.yaml",
    ".terraform.lock.hcl",  # the provider packages the team trusts (docs/terraform.md)
    ".github/CODEOWNERS",  # konfig gen codeowners, from the projects' owners
    ".gitea/CODEOWNERS",
)
# The manifests of the releases made before repositories recorded their release.
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "releases"
CHANGELOG = "CHANGELOG.md"
_HEADING = re.compile(r"^## +(\d+\.\d+\.\d+)\b.*$", re.MULTILINE)


class ReleaseError(KonfigError):
    """The release record cannot be read."""


@dataclass(frozen=True)
class Release:
    """A konfig version and the digests of its files in a repository."""

    version: str
    files: dict[str, str]  # path -> sha256 of the content written
    origin: str  # where it was read: the record's path, or the shipped manifest's


def is_team_file(path: str) -> bool:
    return any(path.startswith(t) if t.endswith("/") else path == t for t in TEAM)


def release_paths(template_files: list[str]) -> list[str]:
    """The release's files among the files ``konfig init`` copies."""
    return sorted(p for p in template_files if not is_team_file(p))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def release_content(template: TemplateSource) -> dict[str, tuple[bytes, int]]:
    """The release's files as ``konfig init`` and ``konfig upgrade`` write them from
    ``template``: path -> (bytes, permission bits)."""
    return {
        rel: (content(template, rel), (template.root / rel).stat().st_mode & 0o777)
        for rel in release_paths(template_paths(template.files))
    }


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def record_text(version: str, files: dict[str, str]) -> str:
    """The record's content (sorted, one file a line: a reviewable diff)."""
    data = {
        "konfig": version,
        "note": "written by konfig init and konfig upgrade; "
        "the files here are the release's, the others the team's",
        "files": dict(sorted(files.items())),
    }
    return json.dumps(data, indent=2) + "\n"


def write_record(root: Path, version: str, files: dict[str, tuple[bytes, int]]) -> None:
    """Record that ``root`` runs ``version``, whose files (:func:`release_content`) are
    ``files``."""
    text = record_text(version, {rel: digest(data) for rel, (data, _) in files.items()})
    atomic_write_text(root / RECORD, text, scope=WriteScope.repository(root), mode=0o644)


def _parse(text: str, origin: str) -> Release:
    try:
        data = json.loads(text)
        version = data["konfig"]
        files = data["files"]
        version_key(version)
    except (ValueError, KeyError, TypeError) as exc:
        raise ReleaseError(
            f"{origin}: not a release record ({exc})",
            hint=f"restore it from git (git checkout -- {RECORD})",
        ) from None
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        raise ReleaseError(f"{origin}: 'files' must map each path to its sha256")
    return Release(str(version), dict(files), origin)


def read_record(root: Path) -> Release | None:
    """The repository's record, or None when it has none."""
    path = root / RECORD
    if not path.is_file():
        return None
    return _parse(path.read_text(encoding="utf-8"), RECORD)


def shipped(version: str | None = None) -> Release | None:
    """The manifest the package ships for ``version`` (None: the oldest one)."""
    if not SHIPPED.is_dir():
        return None
    known = sorted(SHIPPED.glob("*.json"), key=lambda p: version_key(p.stem))
    for path in known:
        if version is None or path.stem == version:
            return _parse(path.read_text(encoding="utf-8"), f"konfig/data/releases/{path.name}")
    return None


def changelog_since(text: str, old: str, new: str) -> list[tuple[str, str]]:
    """The changelog's sections after ``old`` up to ``new``, newest first:
    (version, its text without the heading)."""
    marks = list(_HEADING.finditer(text))
    sections: list[tuple[str, str]] = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        version = mark.group(1)
        if version_key(old) < version_key(version) <= version_key(new):
            sections.append((version, text[mark.end() : end].strip()))
    return sections
