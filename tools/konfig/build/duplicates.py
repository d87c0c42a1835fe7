"""``spec/duplicate-id``: two resources of one Spec with the same id.

Apply would write one object twice, the second silently winning, so compile refuses the
Spec. This module finds the first such id and the places in the stack's own entry files
that name the object (plain data); :mod:`konfig.build.compiler` turns it into the
compile error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from konfig.spec import Spec

RULE = "spec/duplicate-id"


@dataclass(frozen=True)
class DuplicateId:
    """``count`` resources share ``id``; ``places``: (file, line) naming the object."""

    id: str
    count: int
    places: tuple[tuple[str, int], ...]


def first_duplicate(spec: Spec, files: Sequence[str], root: Path) -> DuplicateId | None:
    """The first id that more than one resource of ``spec`` has, with the first two
    places in ``files`` (the render entry, last, aside) that mention its name."""
    seen: set[str] = set()
    for resource in spec.resources:
        if resource.id not in seen:
            seen.add(resource.id)
            continue
        count = sum(1 for r in spec.resources if r.id == resource.id)
        own = files[:-1] if len(files) > 1 else files
        return DuplicateId(resource.id, count, tuple(mentions(own, root, resource.name)[:2]))
    return None


def mentions(files: Sequence[str], root: Path, name: str) -> list[tuple[str, int]]:
    """(file relative to ``root``, line) of each line of ``files`` holding ``name`` as a
    string literal."""
    needles = (f'"{name}"', f"'{name}'")
    found: list[tuple[str, int]] = []
    for file in files:
        try:
            lines = Path(file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        found.extend(
            (relative(file, root), number)
            for number, text in enumerate(lines, 1)
            if any(n in text for n in needles)
        )
    return found


def relative(path: str, root: Path) -> str:
    """``path`` relative to ``root`` in POSIX form, or as given when outside it."""
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path
