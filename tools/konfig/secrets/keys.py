"""age keys through pyrage: identities (secret keys) and recipients (public keys).

An identity file is the one ``age-keygen`` writes and ``SOPS_AGE_KEY`` /
``SOPS_AGE_KEY_FILE`` hold: one ``AGE-SECRET-KEY-1...`` per line, ``#`` comments and
blank lines ignored. Only X25519 keys are read (sops' SSH and plugin identities are
not). Nothing here reads the environment: the CLI reads it and hands the text in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyrage

from konfig.secrets.errors import SecretsError

SECRET_KEY_PREFIX = "AGE-SECRET-KEY-1"
RECIPIENT_PREFIX = "age1"


def parse_recipient(text: str, *, where: str) -> str:
    """A checked age recipient (``age1...``), or an error naming ``where`` it came from."""
    value = text.strip()
    if not value.startswith(RECIPIENT_PREFIX):
        raise SecretsError(
            f"{value!r} is not an age recipient (an X25519 public key starting with age1)",
            file=where,
        )
    try:
        pyrage.x25519.Recipient.from_str(value)
    except pyrage.RecipientError as exc:
        raise SecretsError(f"{value!r} is not a valid age recipient: {exc}", file=where) from exc
    return value


class AgeDecryptError(Exception):
    def __init__(self, reason: str, *, no_match: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.no_match = no_match


@dataclass(frozen=True)
class Keyring:
    """The age identities Konfig may decrypt with, and where they came from.

    ``source`` names the origin for messages (e.g. ``SOPS_AGE_KEY_FILE=/path``), never
    the key itself. ``recipients`` are the public keys of the identities, so a message
    can say which recipients the keyring holds when no stanza of a file matches.
    """

    identities: tuple[pyrage.x25519.Identity, ...]
    recipients: tuple[str, ...]
    source: str

    @classmethod
    def from_text(cls, text: str, *, source: str) -> Keyring:
        identities: list[pyrage.x25519.Identity] = []
        recipients: list[str] = []
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if not line.startswith(SECRET_KEY_PREFIX):
                # never echo the line: it may be a mangled secret key
                raise SecretsError(
                    f"line {number} is not an age secret key (expected {SECRET_KEY_PREFIX}...)",
                    file=source,
                    hint="age-keygen writes such a file; SSH and plugin identities are not read",
                )
            try:
                identity = pyrage.x25519.Identity.from_str(line)
            except pyrage.IdentityError as exc:
                raise SecretsError(
                    f"line {number} is not a valid age secret key ({exc})", file=source
                ) from exc
            identities.append(identity)
            recipients.append(str(identity.to_public()))
        if not identities:
            raise SecretsError("holds no age secret key", file=source)
        return cls(tuple(identities), tuple(recipients), source)

    @classmethod
    def generate(cls, *, source: str = "generated key") -> tuple[Keyring, str]:
        """A new keyring of one fresh identity, and that identity's text for a key file."""
        identity = pyrage.x25519.Identity.generate()
        text = identity_file_text(identity)
        return cls((identity,), (str(identity.to_public()),), source), text

    def decrypt(self, armored: bytes) -> bytes:
        """The plaintext of an age message for one of our identities.

        Raises AgeDecryptError, whose ``no_match`` tells a message for other recipients
        from a damaged one.
        """
        try:
            return pyrage.decrypt(armored, list(self.identities))
        except pyrage.DecryptError as exc:
            reason = str(exc)
            raise AgeDecryptError(reason, no_match="no matching keys" in reason.lower()) from exc


def identity_file_text(identity: pyrage.x25519.Identity) -> str:
    """The text ``age-keygen`` would write for ``identity``."""
    return f"# public key: {identity.to_public()}\n{identity}\n"


def encrypt_to(plaintext: bytes, recipients: Sequence[str]) -> bytes:
    """An ASCII-armored age message for every recipient (as sops stores data keys)."""
    parsed = [pyrage.x25519.Recipient.from_str(r) for r in recipients]
    return pyrage.encrypt(plaintext, parsed, armored=True)
