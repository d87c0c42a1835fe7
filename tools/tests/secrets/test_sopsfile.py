"""The SOPS format in Python: encryption, decryption, the MAC, rules, errors."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from konfig.secrets import plainyaml, sopsfile
from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import Keyring

CANARY = "canary-7f3a9c1e-value"
DATA: dict[str, Any] = {
    "app": {
        "password": CANARY,
        "port": 5432,
        "debug": False,
        "ratio": 0.25,
        "hosts": ["a.example", "b.example"],
        "note_unencrypted": "stays readable",
        "nothing": None,
        "blank": "",
    },
    "tls.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
}


@pytest.fixture(scope="module")
def keyring() -> Keyring:
    return Keyring.generate()[0]


@pytest.fixture(scope="module")
def other() -> Keyring:
    return Keyring.generate(source="SOPS_AGE_KEY")[0]


def encrypted(keyring: Keyring, data: dict[str, Any] | None = None, **kw: Any) -> str:
    return sopsfile.encrypt(data or DATA, keyring.recipients, name="s.enc.yaml", **kw)


def test_round_trip_keeps_values_and_types(keyring: Keyring) -> None:
    text = encrypted(keyring)
    assert CANARY not in text
    assert "stays readable" in text  # the _unencrypted suffix keeps it plain
    file = sopsfile.parse(text, name="s.enc.yaml")
    assert file.version == sopsfile.SOPS_FORMAT_VERSION
    assert file.rule == sopsfile.DEFAULT_RULE
    assert sopsfile.decrypt(file, keyring).data == DATA


def test_values_are_typed_and_bound_to_their_path(keyring: Keyring) -> None:
    raw = yaml.safe_load(encrypted(keyring))
    assert raw["app"]["port"].endswith(",type:int]")
    assert raw["app"]["debug"].endswith(",type:bool]")
    assert raw["app"]["ratio"].endswith(",type:float]")
    assert raw["app"]["password"].endswith(",type:str]")
    assert raw["app"]["blank"] == ""  # sops leaves empty strings empty
    assert raw["app"]["nothing"] is None
    iv = re.search(r",iv:([^,]+),", raw["app"]["password"])
    assert iv is not None and len(base64.b64decode(iv.group(1))) == 32


def test_a_value_moved_to_another_key_does_not_decrypt(keyring: Keyring, tmp_path: Path) -> None:
    raw = yaml.safe_load(encrypted(keyring))
    raw["app"]["port"], raw["app"]["password"] = raw["app"]["password"], raw["app"]["port"]
    file = sopsfile.parse(yaml.safe_dump(raw, sort_keys=False), name="moved.enc.yaml")
    with pytest.raises(SecretsError) as err:
        sopsfile.decrypt(file, keyring)
    message = str(err.value)
    assert message.startswith('moved.enc.yaml:2 (key ["app"]["password"]): cannot decrypt')
    assert "tampered" in message


def test_swapping_list_items_is_caught_by_the_mac(keyring: Keyring) -> None:
    # list items share their list's path, so each still decrypts: only the MAC notices
    raw = yaml.safe_load(encrypted(keyring))
    raw["app"]["hosts"].reverse()
    file = sopsfile.parse(yaml.safe_dump(raw, sort_keys=False), name="swap.enc.yaml")
    with pytest.raises(SecretsError, match=r"^swap.enc.yaml: MAC mismatch"):
        sopsfile.decrypt(file, keyring)


def test_removing_a_value_is_caught_by_the_mac(keyring: Keyring) -> None:
    raw = yaml.safe_load(encrypted(keyring))
    del raw["app"]["port"]
    file = sopsfile.parse(yaml.safe_dump(raw, sort_keys=False), name="r.enc.yaml")
    with pytest.raises(SecretsError, match="MAC mismatch"):
        sopsfile.decrypt(file, keyring)


def test_editing_an_unencrypted_value_is_caught_by_the_mac(keyring: Keyring) -> None:
    text = encrypted(keyring).replace("stays readable", "was changed")
    with pytest.raises(SecretsError, match="MAC mismatch"):
        sopsfile.decrypt(sopsfile.parse(text, name="u.enc.yaml"), keyring)


def test_a_changed_lastmodified_breaks_the_mac(keyring: Keyring) -> None:
    raw = yaml.safe_load(encrypted(keyring))
    raw["sops"]["lastmodified"] = "2001-01-01T00:00:00Z"
    file = sopsfile.parse(yaml.safe_dump(raw, sort_keys=False), name="l.enc.yaml")
    with pytest.raises(SecretsError, match=r"cannot decrypt the MAC"):
        sopsfile.decrypt(file, keyring)


def test_a_flipped_ciphertext_byte_names_file_key_and_line(keyring: Keyring) -> None:
    raw = yaml.safe_load(encrypted(keyring))
    value = raw["tls.crt"]
    data = re.search(r"data:([^,]+),", value)
    assert data is not None
    flipped = bytearray(base64.b64decode(data.group(1)))
    flipped[0] ^= 1
    raw["tls.crt"] = value.replace(data.group(1), base64.b64encode(flipped).decode())
    file = sopsfile.parse(yaml.safe_dump(raw, sort_keys=False), name="t.enc.yaml")
    with pytest.raises(SecretsError) as err:
        sopsfile.decrypt(file, keyring)
    assert str(err.value).startswith('t.enc.yaml:12 (key ["tls.crt"]): cannot decrypt the value')


def test_plaintext_where_ciphertext_belongs_is_refused(keyring: Keyring) -> None:
    raw = yaml.safe_load(encrypted(keyring))
    raw["app"]["password"] = CANARY
    file = sopsfile.parse(yaml.safe_dump(raw, sort_keys=False), name="p.enc.yaml")
    assert [leaf.path for leaf in file.plaintext_leaves()] == [("app", "password")]
    with pytest.raises(SecretsError) as err:
        sopsfile.decrypt(file, keyring)
    assert "plain-text value" in str(err.value)
    assert CANARY not in str(err.value)


def test_wrong_key_names_the_file_and_both_sets_of_recipients(
    keyring: Keyring, other: Keyring
) -> None:
    file = sopsfile.parse(encrypted(keyring), name="w.enc.yaml")
    with pytest.raises(SecretsError) as err:
        sopsfile.decrypt(file, other)
    message = str(err.value)
    assert message.startswith("w.enc.yaml: no key in SOPS_AGE_KEY can decrypt this file")
    assert keyring.recipients[0] in message and other.recipients[0] in message


def test_a_damaged_age_stanza_is_reported(keyring: Keyring) -> None:
    raw = yaml.safe_load(encrypted(keyring))
    raw["sops"]["age"][0]["enc"] = (
        "-----BEGIN AGE ENCRYPTED FILE-----\nAAAA\n-----END AGE ENCRYPTED FILE-----\n"
    )
    file = sopsfile.parse(yaml.safe_dump(raw, sort_keys=False), name="d.enc.yaml")
    with pytest.raises(
        SecretsError, match=r"^d.enc.yaml: the age stanza of the data key is damaged"
    ):
        sopsfile.decrypt(file, keyring)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"^m.enc.yaml: is empty"),
        ("- a\n- b\n", r"^m.enc.yaml: is not a YAML mapping"),
        ("a: 1\n", r"^m.enc.yaml: has no `sops` metadata: it is not encrypted"),
        ("a: 1\nb: [\n", r"^m.enc.yaml:3: invalid YAML"),
        ("a: 1\na: 2\n", r"^m.enc.yaml:2: duplicate key 'a'"),
        ("a: 1\nsops: 3\n", r"^m.enc.yaml:2: `sops` is not a mapping"),
        (
            "a: 1\nsops:\n  lastmodified: '2024-01-01T00:00:00Z'\n  mac: x\n  version: 3.9.0\n",
            r"^m.enc.yaml:2: has no age recipient",
        ),
        (
            "a: 1\nsops:\n  pgp: [{fp: X, enc: Y}]\n  lastmodified: '2024-01-01T00:00:00Z'\n"
            "  mac: x\n  version: 3.9.0\n",
            r"has no age recipient \(it uses pgp\): Konfig decrypts age keys only",
        ),
        (
            "a: 1\nsops:\n  age: [{recipient: r, enc: e}]\n  mac: x\n",
            r"^m.enc.yaml:2: `sops.lastmodified` is missing",
        ),
        (
            "a: 1\nsops:\n  age: [{recipient: r, enc: e}]\n  lastmodified: x\n  mac: x\n"
            "  unencrypted_suffix: _u\n  encrypted_regex: x\n",
            r"use only one of",
        ),
        (
            "a: 1\nsops:\n  age: [{recipient: r, enc: e}]\n  lastmodified: x\n  mac: x\n"
            "  encrypted_comment_regex: x\n",
            r"uses `encrypted_comment_regex`, which Konfig does not read",
        ),
        (
            "a: 1\nsops:\n  key_groups: [{age: []}, {age: []}]\n  lastmodified: x\n  mac: x\n",
            r"several key groups \(Shamir",
        ),
    ],
)
def test_malformed_files_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(SecretsError, match=message):
        sopsfile.parse(text, name="m.enc.yaml")


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(SecretsError, match=r"^gone.enc.yaml: no such file"):
        sopsfile.read(tmp_path / "gone", name="gone.enc.yaml")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SecretsError, match="is not UTF-8"):
        sopsfile.read(tmp_path / "bin", name="bin")


def test_edit_keeps_the_ciphertext_of_unchanged_values(keyring: Keyring) -> None:
    first = sopsfile.parse(encrypted(keyring), name="e.enc.yaml")
    decrypted = sopsfile.decrypt(first, keyring)
    changed = {**DATA, "app": {**DATA["app"], "port": 6543}}
    second = sopsfile.parse(
        sopsfile.encrypt(changed, keyring.recipients, name="e", previous=decrypted), name="e"
    )
    moved = {
        leaf.path
        for leaf in first.leaves()
        if leaf.encrypted and first.value_digest(leaf.path) != second.value_digest(leaf.path)
    }
    assert moved == {("app", "port")}
    assert second.age == first.age  # same data key, same stanza
    assert sopsfile.decrypt(second, keyring).data == changed


def test_rotate_draws_a_new_data_key_for_the_new_recipients(
    keyring: Keyring, other: Keyring
) -> None:
    first = sopsfile.parse(encrypted(keyring), name="r.enc.yaml")
    decrypted = sopsfile.decrypt(first, keyring)
    rotated = sopsfile.parse(
        sopsfile.encrypt(
            decrypted.data, other.recipients, name="r", previous=decrypted, rotate=True
        ),
        name="r",
    )
    assert rotated.recipients == other.recipients
    assert sopsfile.decrypt(rotated, other).data == DATA
    assert sopsfile.decrypt(rotated, other).data_key != decrypted.data_key
    with pytest.raises(SecretsError, match="no key in"):
        sopsfile.decrypt(rotated, keyring)
    assert all(
        first.value_digest(leaf.path) != rotated.value_digest(leaf.path)
        for leaf in first.leaves()
        if leaf.encrypted and leaf.value != ""
    )


def test_adding_a_recipient_on_edit_keeps_the_data_key(keyring: Keyring, other: Keyring) -> None:
    decrypted = sopsfile.decrypt(sopsfile.parse(encrypted(keyring), name="a"), keyring)
    both = sopsfile.parse(
        sopsfile.encrypt(
            DATA, [*keyring.recipients, *other.recipients], name="a", previous=decrypted
        ),
        name="a",
    )
    assert sopsfile.decrypt(both, other).data_key == decrypted.data_key
    assert sopsfile.decrypt(both, keyring).data == DATA


@pytest.mark.parametrize(
    ("rule", "plain_paths"),
    [
        (sopsfile.CryptRule(encrypted_regex="^(data|stringData)$"), {("kind",), ("meta", "name")}),
        (sopsfile.CryptRule(unencrypted_regex="^name$"), {("meta", "name")}),
        (sopsfile.CryptRule(encrypted_suffix="Data"), {("kind",), ("meta", "name")}),
        (sopsfile.DEFAULT_RULE, {("meta", "name_unencrypted")}),
    ],
)
def test_encryption_rules(
    keyring: Keyring, rule: sopsfile.CryptRule, plain_paths: set[tuple[str, ...]]
) -> None:
    data: dict[str, Any] = {"kind": "Secret", "meta": {"name": "x"}, "stringData": {"k": CANARY}}
    if rule == sopsfile.DEFAULT_RULE:
        data["meta"] = {"name_unencrypted": "x"}
    file = sopsfile.parse(encrypted(keyring, data, rule=rule), name="r")
    assert {leaf.path for leaf in file.leaves() if not leaf.encrypted} == plain_paths
    assert file.rule == rule
    assert sopsfile.decrypt(file, keyring).data == data


def test_mac_only_encrypted(keyring: Keyring) -> None:
    rule = sopsfile.CryptRule(unencrypted_suffix="_unencrypted", mac_only_encrypted=True)
    text = encrypted(keyring, rule=rule)
    assert "mac_only_encrypted: true" in text
    # with this mode, plain values may change without breaking the MAC
    edited = text.replace("stays readable", "edited by hand")
    data = sopsfile.decrypt(sopsfile.parse(edited, name="m"), keyring).data
    assert data["app"]["note_unencrypted"] == "edited by hand"


def test_no_rule_is_written_as_the_default_suffix(keyring: Keyring) -> None:
    file = sopsfile.parse(encrypted(keyring, rule=sopsfile.CryptRule()), name="n")
    assert file.rule == sopsfile.DEFAULT_RULE


def test_lastmodified_is_utc_seconds(keyring: Keyring) -> None:
    moment = datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    file = sopsfile.parse(encrypted(keyring, now=moment), name="t")
    assert file.lastmodified == "2030-05-06T07:08:09Z"
    assert sopsfile.decrypt(file, keyring).data == DATA


def test_plaintext_with_comments_is_refused() -> None:
    with pytest.raises(SecretsError, match=r"^p.yaml:2: has a YAML comment"):
        plainyaml.load_plaintext("a: 1\n# note\nb: 2\n", name="p.yaml")
    assert plainyaml.load_plaintext("a: 'x # not a comment'\n", name="p") == {
        "a": "x # not a comment"
    }


def test_refuses_to_encrypt_a_file_that_is_already_encrypted(keyring: Keyring) -> None:
    with pytest.raises(SecretsError, match="already encrypted"):
        plainyaml.load_plaintext(encrypted(keyring), name="x")


def test_values_never_appear_in_reprs(keyring: Keyring) -> None:
    decrypted = sopsfile.decrypt(sopsfile.parse(encrypted(keyring), name="x"), keyring)
    assert CANARY not in repr(decrypted)
    assert decrypted.data_key.hex() not in repr(decrypted)
