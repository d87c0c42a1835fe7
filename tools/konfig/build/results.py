"""The result cache: a stack's `konfig test` or `konfig check` result, reused while
nothing it depends on changed.

A result's key is a sha256 over its kind (``test`` or ``check``) and every input of
that result, which its caller names (:func:`result_key`): always the stack's compile
cache key (:mod:`konfig.build.cache`: konfig's own files, kcl-lib, the stack's
options and the blob ids of every file its compile reads, its directory included,
so its ``stack.yaml``, its ``ci-test/`` files and the sources the findings point
into) and the digest of the Spec the result was computed from; then what the kind
adds (the golden's bytes; konfig.yaml, the kinds and CRDs the repository and the
other Specs define, the policies' sources, the schema package's version).

Entries live beside the compile cache's, in ``.cache/konfig/compile/<key[:2]>/<key>.json``
(``{"key", "kind", "stack", "result"}``), so the folder CI carries from one push to
the next carries them too (docs/speed.md). The two key spaces never meet: a result
key hashes its kind first. An entry that cannot be read, of another kind or key, is
a miss. Only what a run worked out itself is stored; what may not come out the same
next time (a worker that died, a policy that did not evaluate) is not stored.
The entries are trusted as konfig wrote them: who may write them is docs/security.md,
"The compile cache across pushes".
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from konfig.build.cache import COMPILE_DIR
from konfig.repo.files import WriteError, WriteScope, atomic_write_text

# a Spec, a test result and a check result per stack and generation (the prune's count)
ENTRIES_PER_STACK = 3


def result_key(kind: str, inputs: Mapping[str, Any]) -> str:
    """sha256 of ``kind`` and ``inputs`` (JSON values: strings, numbers, lists, None)."""
    text = json.dumps([kind, inputs], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@cache
def library_versions() -> tuple[tuple[str, str], ...]:
    """Python's version and those of the libraries the rules run with (the bundled
    Kubernetes schemas, the validator, the YAML parser, the graph library): konfig's
    own files are in the compile key already."""
    from importlib.metadata import PackageNotFoundError, version

    found = [("python", sys.version)]
    for name in LIBRARIES:
        try:
            found.append((name, version(name)))
        except PackageNotFoundError:
            found.append((name, "-"))
    return tuple(found)


LIBRARIES = ("kubernetes-validate", "jsonschema", "referencing", "PyYAML", "networkx")


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: Path) -> str | None:
    """sha256 of a file's bytes; None when it does not exist, "unreadable" otherwise."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    except OSError:
        return "unreadable"


class ResultCache:
    """Results of one ``kind`` by key, under ``<state>/compile``."""

    def __init__(self, state: Path, kind: str) -> None:
        self.dir = state / COMPILE_DIR
        self.kind = kind
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str, stack_path: str) -> Any | None:
        """The stored result, or None (missing, unreadable, another key, kind or stack)."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if (
            not isinstance(data, dict)
            or data.get("key") != key
            or data.get("kind") != self.kind
            or data.get("stack") != stack_path
            or "result" not in data
        ):
            self.misses += 1
            return None
        self.hits += 1
        return data["result"]

    def put(self, key: str, stack_path: str, result: Any) -> None:
        payload = {"key": key, "kind": self.kind, "stack": stack_path, "result": result}
        try:
            atomic_write_text(
                self._path(key),
                json.dumps(payload, separators=(",", ":")),
                scope=WriteScope.cache(self.dir),
            )
        except (WriteError, OSError):
            pass  # a cache that cannot be written only costs the next run the work
