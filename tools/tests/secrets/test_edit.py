"""encrypt / edit / set / rotate: the file operations behind `konfig secrets`."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from konfig.secrets import edit, plainyaml, sopsfile
from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import Keyring
from konfig.secrets.rules import Rules, parse_rules

CANARY = "canary-91d4e7aa-edit"
REL = "appops/shop/dev/secrets.enc.yaml"


@pytest.fixture
def keys() -> tuple[Keyring, Keyring]:
    return Keyring.generate()[0], Keyring.generate()[0]


def rules_for(*keyrings: Keyring) -> Rules:
    recipients = ",".join(k.recipients[0] for k in keyrings)
    return parse_rules(f"creation_rules:\n  - age: {recipients}\n", name=".sops.yaml")


def test_encrypt_then_edit_one_key_changes_one_value(
    tmp_path: Path, keys: tuple[Keyring, Keyring]
) -> None:
    mine, _ = keys
    rules = rules_for(mine)
    text = edit.encrypt_text(f"api:\n  key: {CANARY}\n  user: shop\n", REL, rules)
    assert CANARY not in text
    path = tmp_path / REL
    edit.write_encrypted(path, text)
    previous = edit.decrypt_for_edit(tmp_path, REL, mine)
    assert previous is not None
    plain = plainyaml.dump_plaintext(previous.data)
    assert edit.reencrypt_edited(plain, REL, rules, previous) is None
    changed = edit.reencrypt_edited(plain.replace("shop", "shop2"), REL, rules, previous)
    assert changed is not None
    before, after = sopsfile.parse(text, name=REL), sopsfile.parse(changed, name=REL)
    assert before.value_digest(("api", "key")) == after.value_digest(("api", "key"))
    assert before.value_digest(("api", "user")) != after.value_digest(("api", "user"))


def test_removing_a_recipient_draws_a_new_data_key(
    tmp_path: Path, keys: tuple[Keyring, Keyring]
) -> None:
    mine, theirs = keys
    edit.write_encrypted(
        tmp_path / REL,
        edit.encrypt_text(f"a: {CANARY}\n", REL, rules_for(mine, theirs)),
    )
    previous = edit.decrypt_for_edit(tmp_path, REL, mine)
    assert previous is not None
    text = edit.reencrypt_edited(f"a: {CANARY}\n", REL, rules_for(mine), previous)
    assert text is not None
    new = sopsfile.decrypt(sopsfile.parse(text, name=REL), mine)
    assert new.data_key != previous.data_key
    with pytest.raises(SecretsError, match="no key in"):
        sopsfile.decrypt(sopsfile.parse(text, name=REL), theirs)


def test_set_values_creates_and_updates(tmp_path: Path, keys: tuple[Keyring, Keyring]) -> None:
    mine, _ = keys
    rules = rules_for(mine)
    text = edit.set_values(tmp_path, REL, {("db", "password"): CANARY}, rules=rules, keyring=None)
    edit.write_encrypted(tmp_path / REL, text)
    with pytest.raises(SecretsError, match="cannot edit without a key"):
        edit.set_values(tmp_path, REL, {("db", "user"): "x"}, rules=rules, keyring=None)
    text = edit.set_values(tmp_path, REL, {("db", "user"): "app"}, rules=rules, keyring=mine)
    data = sopsfile.decrypt(sopsfile.parse(text, name=REL), mine).data
    assert data == {"db": {"password": CANARY, "user": "app"}}
    edit.write_encrypted(tmp_path / REL, text)
    with pytest.raises(SecretsError, match="a parent of the key is a value"):
        edit.set_values(tmp_path, REL, {("db", "user", "x"): "y"}, rules=rules, keyring=mine)


def test_rotate_for_the_recipients_the_rules_name_now(
    tmp_path: Path, keys: tuple[Keyring, Keyring]
) -> None:
    mine, theirs = keys
    edit.write_encrypted(tmp_path / REL, edit.encrypt_text(f"a: {CANARY}\n", REL, rules_for(mine)))
    text = edit.rotate(tmp_path, REL, rules=rules_for(theirs), keyring=mine)
    assert sopsfile.decrypt(sopsfile.parse(text, name=REL), theirs).data == {"a": CANARY}


def test_private_plaintext_is_0600_and_wiped() -> None:
    with edit.private_plaintext(f"a: {CANARY}\n") as path:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        (path.parent / ".plaintext.yaml.swp").write_text(CANARY)  # an editor's leftovers
        handle = path.open("rb")
    # the open handle still sees the inode: overwritten with zeros before it was unlinked
    assert CANARY.encode() not in handle.read()
    handle.close()
    assert not path.parent.exists()


def test_write_encrypted_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.enc.yaml"
    edit.write_encrypted(path, "a: 1\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    path.chmod(0o640)
    edit.write_encrypted(path, "a: 2\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.read_text() == "a: 2\n"
