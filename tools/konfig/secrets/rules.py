"""Who may decrypt which file: the repository's ``.sops.yaml``, read as sops reads it.

One file at the repository root, in sops' own format, so ``sops edit FILE`` run
anywhere in the repository and ``konfig secrets`` pick the same recipients::

    creation_rules:
      - path_regex: ^appops/[^/]+/prod/[^/]*\\.enc\\.yaml$
        age: age1prod...,age1ops...          # a comma-separated string or a list
      - path_regex: ^appops/[^/]+/dev/[^/]*\\.enc\\.yaml$
        age: [age1dev..., age1ops...]
        encrypted_regex: ^(password|token)$  # optional: one encryption rule

A file's path, relative to the repository root (the folder of ``.sops.yaml``), is
matched against each ``path_regex`` in order (a search, as Go's ``MatchString``); the
first match wins and a rule without ``path_regex`` matches everything. Konfig reads the
age recipients and the encryption rule of a creation rule; key groups, Shamir and the
other key types (PGP, cloud KMS, Vault) are refused with a clear error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from konfig.secrets import yamlcore
from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import parse_recipient
from konfig.secrets.sopsfile import DEFAULT_RULE, CryptRule

RULES_FILE = ".sops.yaml"
_RULE_KEYS = (
    "unencrypted_suffix",
    "encrypted_suffix",
    "unencrypted_regex",
    "encrypted_regex",
)
_OTHER_KEYS = ("pgp", "kms", "gcp_kms", "azure_keyvault", "hc_vault_transit_uri", "hckms")
_KNOWN = {"path_regex", "age", "mac_only_encrypted", "aws_profile", *_RULE_KEYS}


@dataclass(frozen=True)
class CreationRule:
    path_regex: str  # "" matches every file
    recipients: tuple[str, ...]
    crypt: CryptRule
    line: int | None = None  # where it starts in .sops.yaml

    def matches(self, rel_path: str) -> bool:
        return not self.path_regex or re.search(self.path_regex, rel_path) is not None


@dataclass(frozen=True)
class Rules:
    """The creation rules of one repository, in order."""

    file: str  # the rule file as messages name it
    rules: tuple[CreationRule, ...]

    def for_file(self, rel_path: str) -> CreationRule:
        """The first rule whose ``path_regex`` matches ``rel_path`` (repository-relative)."""
        for rule in self.rules:
            if rule.matches(rel_path):
                return rule
        raise SecretsError(
            f"no creation rule in {self.file} matches {rel_path}",
            file=rel_path,
            hint=f"add a rule whose path_regex matches it to {self.file}, naming the age "
            "recipients who may decrypt it",
        )


def load_rules(root: Path) -> Rules | None:
    """The repository's rules, or None when it has no ``.sops.yaml``."""
    path = root / RULES_FILE
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretsError(f"cannot read: {exc}", file=RULES_FILE) from exc
    return parse_rules(text, name=RULES_FILE)


def parse_rules(text: str, *, name: str) -> Rules:
    lines: dict[yamlcore.Path, int] = {}
    try:
        node = yamlcore.compose(text)
        data = {} if node is None else yamlcore.construct(node, lines)
    except yamlcore.LoadError as exc:
        raise SecretsError(exc.message, file=name, line=exc.line) from exc
    if not isinstance(data, dict):
        raise SecretsError("is not a YAML mapping", file=name)
    raw = data.get("creation_rules")
    if not isinstance(raw, list) or not raw:
        raise SecretsError(
            "has no `creation_rules` list",
            file=name,
            hint="see docs/secrets.md for the rule file Konfig and sops read",
        )
    rules = []
    for index, entry in enumerate(raw):
        line = lines.get(("creation_rules", index))
        rules.append(_rule(entry, name, line))
    return Rules(name, tuple(rules))


def _rule(entry: Any, name: str, line: int | None) -> CreationRule:
    if not isinstance(entry, dict):
        raise SecretsError("a creation rule must be a mapping", file=name, line=line)
    for key in (*_OTHER_KEYS, "key_groups", "shamir_threshold"):
        if entry.get(key):
            raise SecretsError(
                f"a creation rule uses `{key}`: Konfig reads age recipients only",
                file=name,
                line=line,
                hint="list the recipients under `age`",
            )
    unknown = sorted(set(entry) - _KNOWN - set(_OTHER_KEYS) - {"key_groups", "shamir_threshold"})
    if unknown:
        raise SecretsError(f"unknown entries {unknown} in a creation rule", file=name, line=line)
    pattern = entry.get("path_regex") or ""
    if not isinstance(pattern, str):
        raise SecretsError("`path_regex` must be a string", file=name, line=line)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise SecretsError(
            f"`path_regex` is not a valid regex: {exc}", file=name, line=line
        ) from exc
    age = entry.get("age")
    if isinstance(age, str):
        listed = [r.strip() for r in age.split(",") if r.strip()]
    elif isinstance(age, list) and all(isinstance(r, str) for r in age):
        listed = [r.strip() for r in age if r.strip()]
    else:
        listed = []
    if not listed:
        raise SecretsError(
            "a creation rule names no age recipient", file=name, line=line, hint="set `age`"
        )
    where = f"{name}:{line}" if line else name
    recipients = tuple(dict.fromkeys(parse_recipient(r, where=where) for r in listed))
    crypt_values = {k: entry.get(k) or "" for k in _RULE_KEYS}
    if not all(isinstance(v, str) for v in crypt_values.values()):
        raise SecretsError("an encryption rule must be a string", file=name, line=line)
    try:
        crypt = CryptRule(**crypt_values, mac_only_encrypted=bool(entry.get("mac_only_encrypted")))
        for key in ("unencrypted_regex", "encrypted_regex"):
            if crypt_values[key]:
                re.compile(crypt_values[key])
    except (ValueError, re.error) as exc:
        raise SecretsError(str(exc), file=name, line=line) from exc
    if not any(crypt_values.values()):
        crypt = CryptRule(
            DEFAULT_RULE.unencrypted_suffix, mac_only_encrypted=crypt.mac_only_encrypted
        )
    return CreationRule(pattern, recipients, crypt, line)
