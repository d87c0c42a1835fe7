"""Values worked out from files, remembered between runs by each file's stat.

A warm ``konfig compile`` of hundreds of stacks spent a third of its time reading and
checking the same ``stack.yaml``, ``project.yaml`` and settings files again. A
:class:`StatMemo` keeps, per file, what reading it gave (plain JSON data) together with
the file's size, modification time, change time and inode; a file whose stat differs in
any of them is read again. The change time cannot be set back by hand, so an edit that
keeps the size and restores the modification time is seen too. Like git's "racily
clean" rule, nothing is remembered for a file changed in the last seconds (it may change
again within the same clock tick without its times moving).

The memo file also holds a seed (e.g. konfig's own fingerprint): a memo made by other
code or for other rules is dropped whole. A memo file that cannot be read is ignored,
one that cannot be written only costs the next run the reading.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from konfig.repo.files import WriteError, WriteScope, atomic_write_text

# a file changed this recently (ns) is not remembered: it may change again unseen
RACY_NS = 2_000_000_000
# what a miss returns (None is a value a file may well give)
MISSING: Any = object()


def settled_before() -> int:
    """Files whose modification or change time (ns) is at or after this are too fresh
    to be remembered by their stat."""
    return time.time_ns() - RACY_NS


def settled(st: os.stat_result, before: int) -> bool:
    """Whether a file with this stat may be remembered by it (see :func:`settled_before`)."""
    return max(st.st_mtime_ns, st.st_ctime_ns) < before


def stat_key(st: os.stat_result) -> list[int]:
    """What identifies a version of a file without reading it."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _plain(value: Any) -> bool:
    """Whether ``value`` survives JSON unchanged (YAML may give dates, non-string keys)."""
    if value is None or isinstance(value, str | bool | int | float):
        return True
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


class StatMemo:
    """File name -> (stat key, value), in one JSON file."""

    def __init__(self, path: Path | None, seed: str) -> None:
        self.path = path
        self.seed = seed
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        self._settled = settled_before()
        if path is None:
            return
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("seed") == seed:
            entries = data.get("files")
            if isinstance(entries, dict):
                self.entries = entries

    def get(self, name: str, st: os.stat_result) -> Any:
        """The value remembered for ``name`` at this stat, else :data:`MISSING`."""
        entry = self.entries.get(name)
        if entry is None or len(entry) != 5 or entry[:4] != stat_key(st):
            return MISSING
        return entry[4]

    def put(self, name: str, st: os.stat_result, value: Any) -> None:
        """Remember ``value`` for ``name`` at this stat (unless the file is too fresh to
        trust its stat, or the value is not plain JSON data)."""
        if not settled(st, self._settled) or not _plain(value):
            if self.entries.pop(name, None) is not None:
                self.dirty = True
            return
        self.entries[name] = [*stat_key(st), value]
        self.dirty = True

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        payload = json.dumps({"seed": self.seed, "files": self.entries}, separators=(",", ":"))
        try:
            atomic_write_text(self.path, payload, scope=WriteScope.cache(self.path.parent))
        except WriteError:
            return  # a cache that cannot be written only costs the next run the reading
        self.dirty = False
