"""age key files: parsing, errors that never echo a key."""

from __future__ import annotations

import pytest

from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import Keyring, parse_recipient


def test_reads_an_age_keygen_style_file_with_comments() -> None:
    keyring, text = Keyring.generate()
    again = Keyring.from_text(f"# created: today\n\n{text}", source="SOPS_AGE_KEY_FILE=k.txt")
    assert again.recipients == keyring.recipients
    assert again.source == "SOPS_AGE_KEY_FILE=k.txt"


def test_a_bad_line_is_named_but_never_echoed() -> None:
    _, text = Keyring.generate()
    secret = text.splitlines()[1]
    mangled = secret[:-3] + "xyz"
    with pytest.raises(SecretsError) as err:
        Keyring.from_text(f"# c\n{mangled}\n", source="SOPS_AGE_KEY")
    assert str(err.value).startswith("SOPS_AGE_KEY: line 2 is not a valid age secret key")
    assert secret[20:] not in str(err.value) and mangled[20:] not in str(err.value)
    with pytest.raises(SecretsError, match="line 1 is not an age secret key"):
        Keyring.from_text("ssh-ed25519 AAAA\n", source="SOPS_AGE_KEY")


def test_an_empty_key_text_is_an_error() -> None:
    with pytest.raises(SecretsError, match=r"^SOPS_AGE_KEY: holds no age secret key"):
        Keyring.from_text("# nothing\n", source="SOPS_AGE_KEY")


def test_recipients_are_checked() -> None:
    keyring, _ = Keyring.generate()
    assert (
        parse_recipient(f" {keyring.recipients[0]} ", where=".sops.yaml") == keyring.recipients[0]
    )
    with pytest.raises(
        SecretsError, match=r"^\.sops\.yaml: 'age1nope' is not a valid age recipient"
    ):
        parse_recipient("age1nope", where=".sops.yaml")
    with pytest.raises(SecretsError, match="is not an age recipient"):
        parse_recipient("AGE-SECRET-KEY-1", where=".sops.yaml")
