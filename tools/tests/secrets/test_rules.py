"""The repository's .sops.yaml: which recipients and rule apply to which file."""

from __future__ import annotations

from pathlib import Path

import pytest

from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import Keyring
from konfig.secrets.rules import load_rules, parse_rules
from konfig.secrets.sopsfile import DEFAULT_RULE, CryptRule

PROD = Keyring.generate()[0].recipients[0]
DEV = Keyring.generate()[0].recipients[0]
OPS = Keyring.generate()[0].recipients[0]

RULES = f"""\
creation_rules:
  - path_regex: ^appops/[^/]+/prod/[^/]*\\.enc\\.yaml$
    age: {PROD}, {OPS}
  - path_regex: /dev/
    age: [{DEV}, {OPS}]
    encrypted_regex: ^(password|token)$
  - age: {OPS}
"""


def test_first_matching_rule_wins() -> None:
    rules = parse_rules(RULES, name=".sops.yaml")
    prod = rules.for_file("appops/shop/prod/secrets.enc.yaml")
    assert prod.recipients == (PROD, OPS)
    assert prod.crypt == DEFAULT_RULE
    dev = rules.for_file("appops/shop/dev/secrets.enc.yaml")
    assert dev.recipients == (DEV, OPS)
    assert dev.crypt == CryptRule(encrypted_regex="^(password|token)$")
    assert dev.line == 4
    assert rules.for_file("elsewhere.enc.yaml").recipients == (OPS,)


def test_no_matching_rule_is_an_error() -> None:
    rules = parse_rules(f"creation_rules:\n  - path_regex: ^x/\n    age: {OPS}\n", name="r")
    with pytest.raises(SecretsError, match=r"^y/s.enc.yaml: no creation rule in r matches"):
        rules.for_file("y/s.enc.yaml")


def test_load_rules_from_the_root(tmp_path: Path) -> None:
    assert load_rules(tmp_path) is None
    (tmp_path / ".sops.yaml").write_text(RULES)
    loaded = load_rules(tmp_path)
    assert loaded is not None and len(loaded.rules) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]\n", "is not a YAML mapping"),
        ("creation_rules: []\n", "has no `creation_rules` list"),
        ("creation_rules:\n  - path_regex: x\n", r"^r:2: a creation rule names no age recipient"),
        ("creation_rules:\n  - age: age1bad\n", r"'age1bad' is not a valid age recipient"),
        ("creation_rules:\n  - pgp: ABC\n", "uses `pgp`: Konfig reads age recipients only"),
        (f"creation_rules:\n  - age: {OPS}\n    path_regex: '('\n", "not a valid regex"),
        (f"creation_rules:\n  - age: {OPS}\n    colour: red\n", r"unknown entries \['colour'\]"),
        (
            f"creation_rules:\n  - age: {OPS}\n    encrypted_regex: a\n    unencrypted_suffix: b\n",
            "use only one of",
        ),
    ],
)
def test_bad_rule_files(text: str, message: str) -> None:
    with pytest.raises(SecretsError, match=message):
        parse_rules(text, name="r")
