"""Digests of konfig's own source, so that a cache made by other code is never reused.

A cache keyed on a list of "the modules that matter" serves stale data the day another
module starts to matter (the YAML writer was missing from the compile cache's list): the
digest covers every file of the installed package instead.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def package_digest(seed: str) -> str:
    """sha256 of ``seed`` and of every file of the installed konfig package (read once
    per process)."""
    return hashlib.sha256(f"{seed}\0{_installed()}".encode()).hexdigest()


@cache
def _installed() -> str:
    return files_digest(PACKAGE)


def files_digest(package: Path) -> str:
    """sha256 of every file under ``package``: path and content, in a fixed order,
    ``__pycache__`` aside."""
    h = hashlib.sha256()
    for directory, subdirs, files in os.walk(package):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            path = Path(directory) / name
            h.update(b"\0" + path.relative_to(package).as_posix().encode() + b"\0")
            try:
                h.update(path.read_bytes())
            except OSError:
                h.update(b"unreadable")
    return h.hexdigest()
