"""A Secret's keys whose value konfig generates: the ``generated`` extension.

A Kubernetes Secret's ``extensions.generated`` lists keys whose value konfig generates
at the first apply and keeps from the live Secret afterwards (a database password)::

    generated: [{key: password, length: 32}]

The Kubernetes engine treats them as secret keys (masked, compared once known); the
OpenTofu runtime generates their values and hands them to a write-only argument
(:mod:`konfig.tofu.values`). Neither runtime owns the extension: it lives here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from konfig.errors import KonfigError
from konfig.spec import Resource

EXT_GENERATED = "generated"
GENERATED_LENGTH = 32


class GeneratedKeyError(KonfigError):
    """A Secret's ``extensions.generated`` is not usable as written."""


@dataclass(frozen=True)
class Generated:
    """A Secret's key whose value Konfig generates at first apply."""

    key: str
    length: int = GENERATED_LENGTH


def generated_keys(resource: Resource) -> tuple[Generated, ...]:
    """A Kubernetes Secret's keys whose value Konfig generates (``extensions.generated``)."""
    raw = resource.extensions.get(EXT_GENERATED)
    if raw is None:
        return ()
    where = f"{resource.id}: `extensions.{EXT_GENERATED}`"
    if resource.api_version != "v1" or resource.kind != "Secret":
        raise GeneratedKeyError(f"{where}: only a v1 Secret can have generated values")
    if not isinstance(raw, list):
        raise GeneratedKeyError(f"{where} must be a list of {{key, length}}")
    out: list[Generated] = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("key"), str):
            raise GeneratedKeyError(f"{where}[{index}] needs `key`")
        length = entry.get("length", GENERATED_LENGTH)
        if not isinstance(length, int) or isinstance(length, bool) or not 16 <= length <= 128:
            raise GeneratedKeyError(f"{where}[{index}].length must be 16..128, got {length!r}")
        out.append(Generated(str(entry["key"]), length))
    return tuple(out)
