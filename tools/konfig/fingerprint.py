"""Digests of konfig's own source, so that a cache made by other code is never reused."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def source_digest(seed: str, modules: Iterable[str]) -> str:
    """sha256 of ``seed`` and the bytes of ``modules`` (paths relative to the package;
    a module that cannot be read counts by its name)."""
    h = hashlib.sha256(seed.encode())
    for name in modules:
        try:
            h.update((PACKAGE / name).read_bytes())
        except OSError:
            h.update(name.encode())
    return h.hexdigest()
