"""Checks over the repository's encrypted files and the Secrets of compiled stacks.

Used by ``konfig secrets check`` and by ``konfig check`` (rules ``secrets/*``):

- ``secrets/not-encrypted`` — a ``*.enc.yaml`` file without sops metadata;
- ``secrets/malformed`` — a file sops would not read (bad YAML, metadata, types);
- ``secrets/plaintext-value`` — a value the file's rule encrypts, left in plain text;
- ``secrets/recipients`` — the file is not encrypted for exactly the recipients
  ``.sops.yaml`` names for it (someone removed would still decrypt, or someone added
  cannot): ``konfig secrets rotate FILE``;
- ``secrets/decrypt`` — with a key of one of its recipients, the file does not
  decrypt or its MAC does not match (tampered, damaged);
- ``secrets/wrong-key`` — a key was given, and it is a recipient of none of the files
  checked: nothing could be verified (a key per environment opens some files and
  leaves the others unverified, which is not a problem);
- ``secrets/link`` — the file is a link that leaves its folder (to another stack's
  file): nothing else is checked, and no hint to rotate it (that would re-encrypt the
  other file's values for this folder's recipients);
- ``secrets/plaintext-secret`` — a compiled v1 Secret carries ``data``/``stringData``
  in plain text: move the values to an encrypted file and reference them.

Without a key, everything but decryption is still checked; :attr:`Report.not_verified`
lists the files no key was given for.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from konfig.secrets import sopsfile
from konfig.secrets.errors import SecretsError, key_path
from konfig.secrets.keys import Keyring
from konfig.secrets.refs import key_refs, plaintext_keys, resolves_outside
from konfig.secrets.rules import RULES_FILE, Rules
from konfig.spec import Spec

ENCRYPTED_SUFFIXES = (".enc.yaml", ".enc.yml")
_SKIP_DIRS = {".git", ".cache", ".venv", "node_modules", "__pycache__", ".mypy_cache"}


@dataclass(frozen=True)
class Problem:
    rule: str  # secrets/<name>
    message: str
    file: str | None = None
    line: int | None = None
    stack: str | None = None
    resource: str | None = None


@dataclass(frozen=True)
class Report:
    files: tuple[str, ...]  # every encrypted file looked at
    problems: tuple[Problem, ...]
    verified: tuple[str, ...] = ()  # decrypted with the MAC checked
    not_verified: tuple[str, ...] = field(default=())  # no key given for these


def encrypted_files(root: Path) -> list[str]:
    """Repository-relative paths of every ``*.enc.yaml`` file (sorted)."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in files:
            if name.endswith(ENCRYPTED_SUFFIXES):
                found.append(Path(folder, name).relative_to(root).as_posix())
    return sorted(found)


def audit_files(
    root: Path,
    files: Sequence[str],
    *,
    rules: Rules | None,
    keyring: Keyring | None,
) -> Report:
    problems: list[Problem] = []
    verified: list[str] = []
    not_verified: list[str] = []
    recipients: dict[str, tuple[str, ...]] = {}
    for rel in files:
        outside = resolves_outside(root, rel, posixpath.dirname(rel))
        if outside is not None:
            problems.append(
                Problem(
                    "secrets/link",
                    f"resolves to {outside} (a link): a folder's encrypted files must be its "
                    f"own; replace the link by a file encrypted for this folder's recipients "
                    f"(konfig secrets encrypt {rel}); never rotate it through the link, which "
                    f"would re-encrypt {outside} for them",
                    rel,
                )
            )
            continue
        try:
            file = sopsfile.read(root / rel, name=rel)
        except SecretsError as exc:
            rule = "secrets/not-encrypted" if "has no `sops` metadata" in exc.message else None
            problems.append(Problem(rule or "secrets/malformed", _bare(exc, rel), rel, exc.line))
            continue
        for leaf in file.plaintext_leaves():
            problems.append(
                Problem(
                    "secrets/plaintext-value",
                    f"{key_path(leaf.path)} is in plain text; the file's rule "
                    f"encrypts it (konfig secrets edit {rel} re-encrypts it)",
                    rel,
                    leaf.line,
                )
            )
        problems.extend(_recipients(file, rel, rules))
        recipients[rel] = tuple(file.recipients)
        if keyring is None or not set(keyring.recipients) & set(file.recipients):
            not_verified.append(rel)
            continue
        try:
            sopsfile.decrypt(file, keyring)
        except SecretsError as exc:
            problems.append(Problem("secrets/decrypt", _bare(exc, rel), rel, exc.line))
        else:
            verified.append(rel)
    if keyring is not None and not_verified and not verified:
        problems.extend(_wrong_key(keyring, rel, recipients[rel]) for rel in not_verified)
    return Report(tuple(files), tuple(problems), tuple(verified), tuple(not_verified))


def _wrong_key(keyring: Keyring, rel: str, recipients: Sequence[str]) -> Problem:
    held = ", ".join(keyring.recipients)
    return Problem(
        "secrets/wrong-key",
        f"the key in {keyring.source} (recipient {held}) opens none of the encrypted files "
        f"checked: this one is encrypted for {', '.join(recipients) or 'no age recipient'}; "
        f"give the key of one of its recipients in {keyring.source}, or no key to skip "
        "decryption",
        rel,
    )


def _recipients(file: sopsfile.SopsFile, rel: str, rules: Rules | None) -> list[Problem]:
    if rules is None:
        return [
            Problem(
                "secrets/recipients",
                f"the repository has no {RULES_FILE} naming who may decrypt this file",
                rel,
            )
        ]
    try:
        rule = rules.for_file(rel)
    except SecretsError as exc:
        return [Problem("secrets/recipients", _bare(exc, rel), rel)]
    have, want = set(file.recipients), set(rule.recipients)
    if have == want:
        return []
    parts = []
    if want - have:
        parts.append(f"not encrypted for {', '.join(sorted(want - have))}")
    if have - want:
        parts.append(f"still encrypted for {', '.join(sorted(have - want))}")
    return [
        Problem(
            "secrets/recipients",
            f"{'; '.join(parts)} ({RULES_FILE} line {rule.line}): re-encrypt it with "
            f"konfig secrets rotate {rel}",
            rel,
        )
    ]


def _bare(exc: SecretsError, rel: str) -> str:
    """The message without its ``file:line`` prefix (the problem carries both)."""
    message = str(exc.message)
    for prefix in (f"{rel}:{exc.line}: ", f"{rel}: "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def audit_specs(specs: Mapping[str, Spec]) -> list[Problem]:
    """Plain-text Secret data in compiled stacks (``stack path -> Spec``)."""
    problems: list[Problem] = []
    for stack, spec in specs.items():
        for resource in spec.resources:
            keys = plaintext_keys(resource.attributes)
            if keys:
                problems.append(
                    Problem(
                        "secrets/plaintext-secret",
                        f"Secret {resource.name!r} holds {', '.join(keys)} in plain text: "
                        "move the values to an encrypted file and reference them "
                        "(fromFile/keys, see docs/secrets.md)",
                        stack=stack,
                        resource=resource.id,
                    )
                )
    return problems


def referenced(specs: Iterable[Spec]) -> list[str]:
    """Every encrypted file the Specs reference (repository-relative), sorted."""
    files = {
        item.ref.file
        for spec in specs
        for resource in spec.resources
        for item in key_refs(resource.id, resource.extensions)
    }
    return sorted(files)
