"""The plaintext side of an encrypted file: what an editor shows (as ``sops decrypt``
prints it) and the document read back to encrypt (as sops reads it). The encryption
itself is :mod:`konfig.secrets.sopsfile`'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from konfig.secrets import yamlcore
from konfig.secrets.errors import SecretsError
from konfig.secrets.sopsfile import METADATA_KEY


def load_plaintext(text: str, *, name: str) -> dict[str, Any]:
    """A plaintext document to encrypt, read as sops reads it (one YAML mapping).

    Comments are refused: Konfig does not write them into encrypted files, and would
    otherwise drop them silently.
    """
    comment = yamlcore.has_comments(text)
    if comment is not None:
        raise SecretsError(
            "has a YAML comment, which Konfig cannot keep in an encrypted file",
            file=name,
            line=comment,
            hint="remove the comment (put notes in a README beside the file), or edit the "
            "file with the sops CLI, which encrypts comments",
        )
    try:
        node = yamlcore.compose(text)
        document = {} if node is None else yamlcore.construct(node)
    except yamlcore.LoadError as exc:
        raise SecretsError(exc.message, file=name, line=exc.line) from exc
    if not isinstance(document, dict):
        raise SecretsError("is not a YAML mapping of keys to values", file=name)
    if METADATA_KEY in document:
        raise SecretsError("is already encrypted (it has `sops` metadata)", file=name)
    return document


def dump_plaintext(data: Mapping[str, Any]) -> str:
    """Plaintext YAML for an editor (as ``sops decrypt`` prints it)."""
    return yamlcore.dump(dict(data)) if data else "{}\n"
