"""Digests of konfig's own source, so that a cache made by other code is never reused.

A cache keyed on a list of "the modules that matter" serves stale data the day another
module starts to matter (the YAML writer was missing from the compile cache's list): the
digest covers every file of the installed package instead. Reading the whole package
costs a tenth of a warm command, so with a cache folder each file's digest is remembered
by its stat (:mod:`konfig.repo.statmemo`: size, times and inode; any edit moves its change
time) and only files whose stat changed are read again.
"""

from __future__ import annotations

import hashlib
import os
import sys
from functools import cache
from pathlib import Path

from konfig import __version__
from konfig.repo.statmemo import MISSING, StatMemo

PACKAGE = Path(__file__).resolve().parent
MEMO_FILE = "package.json"
# Folders of the package that are data no command's output depends on: the repository
# template a built package carries for `konfig init` (konfig.repo.template), a copy of
# the whole template, which would otherwise double the files read at every start.
NOT_CODE = frozenset({"data/template"})


def package_digest(seed: str, state: Path | None = None) -> str:
    """sha256 of ``seed`` and of every file of the installed konfig package (worked out
    once per process; ``state``: konfig's cache folder, where file digests are kept)."""
    return hashlib.sha256(f"{seed}\0{_installed(state)}".encode()).hexdigest()


@cache
def _installed(state: Path | None) -> str:
    memo = None
    if state is not None:
        memo = StatMemo(state / MEMO_FILE, f"{PACKAGE}\0{sys.version}")
    found = files_digest(PACKAGE, memo)
    if memo is not None:
        memo.save()
    return found


def files_digest(package: Path, memo: StatMemo | None = None) -> str:
    """sha256 of every file under ``package``: path and content, in a fixed order,
    ``__pycache__`` and :data:`NOT_CODE` aside. ``memo`` remembers each file's content
    digest by its stat."""
    h = hashlib.sha256()
    top = str(package)
    for directory, subdirs, files in os.walk(top):
        # strings, not path objects: this runs for every file of konfig in every command
        prefix = directory[len(top) + 1 :] + "/" if directory != top else ""
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__" and prefix + d not in NOT_CODE)
        for name in sorted(files):
            path = f"{directory}/{name}"
            rel = prefix + name
            h.update(b"\0" + rel.encode() + b"\0")
            h.update(_file_digest(path, rel, memo).encode())
    return h.hexdigest()


def _file_digest(path: str, rel: str, memo: StatMemo | None) -> str:
    try:
        st = os.stat(path)  # noqa: PTH116
        if memo is not None:
            known = memo.get(rel, st)
            if known is not MISSING:
                return str(known)
        with open(path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return "unreadable"
    if memo is not None:
        memo.put(rel, st, digest)
    return digest


@cache
def settings_memo(state: Path) -> StatMemo:
    """The memo of parsed settings files under ``state`` (konfig's cache folder), one
    per process, seeded with konfig's fingerprint (the rules that check the files)."""
    return StatMemo(state / "settings.json", package_digest(__version__, state))
