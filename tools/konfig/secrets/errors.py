"""The one error type of the secrets package: what failed, in which file, at which key.

Messages never carry a secret value: they name the file, the key path (in sops'
``["a"]["b"]`` notation, usable with ``sops decrypt --extract``) and the line when
there is one.
"""

from __future__ import annotations

from collections.abc import Sequence

from konfig.errors import KonfigError


def key_path(path: Sequence[str | int]) -> str:
    """``["a"]["b"][0]``: sops' notation for a place in a file (``sops decrypt --extract``)."""
    return "".join(f"[{p}]" if isinstance(p, int) else f'["{p}"]' for p in path)


class SecretsError(KonfigError):
    """An encrypted file, a key or a reference that cannot be used: exit 1."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        key: str | None = None,
        line: int | None = None,
        hint: str | None = None,
        rule: str | None = None,
    ) -> None:
        where = ""
        if file:
            where = file if line is None else f"{file}:{line}"
        if key:
            where = f"{where} (key {key})" if where else f"key {key}"
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.file = file
        self.key = key
        self.line = line
        self.rule = rule  # the named rule a refusal is (``secrets/link``), when one
