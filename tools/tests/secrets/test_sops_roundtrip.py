"""Konfig and the real sops CLI (built by hack/sops) read each other's files.

Both directions, every value type, the encryption rules, edits and the MAC: a file
tampered after either tool wrote it is refused by both.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.sops import REPO_ROOT, SopsCli

from konfig.secrets import plainyaml, sopsfile
from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import Keyring

CANARY = "canary-2b8e51d0-roundtrip"

# Plain scalars whose type YAML 1.1 (PyYAML) and Go's yaml.v3 (sops) disagree on, plus
# the ordinary ones: sops' typing of each must be Konfig's.
PLAINTEXT = f"""\
password: {CANARY}
port: 5432
octal: 0o17
old_octal: 0755
hex: 0x1F
underscored: 1_000
yes_word: yes
on_word: on
date: 2001-12-14
stamp: 2001-12-14T21:59:43.10-05:00
spaced: 2001-12-14 21:59:43.10
short: 2001-2-3t1:2:3Z
not_a_date: 2001-13-01
quoted_date: "2001-12-14"
sexagesimal: 1:20
ratio: 0.25
big: 1e3
flag: true
multi: |
  line one
  line two
list:
  - a
  - 2
  - false
nested:
  deeper:
    value: x
  empty: ""
  nothing: null
yes_unencrypted: yes
octal_unencrypted: 0o17
date_unencrypted: 2001-12-14
stamp_unencrypted: 2001-12-14T21:59:43.10-05:00
quoted_unencrypted: "2001-12-14"
float_unencrypted: 1e3
"""


@pytest.fixture(scope="module")
def key(sops_cli: SopsCli, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Keyring]:
    """An age key made by the real age-keygen: its file, its recipient, its Keyring."""
    path = tmp_path_factory.mktemp("age") / "keys.txt"
    recipient = sops_cli.keygen(path)
    keyring = Keyring.from_text(path.read_text(), source=f"SOPS_AGE_KEY_FILE={path}")
    assert keyring.recipients == (recipient,)
    return path, recipient, keyring


def sops_encrypt(
    sops_cli: SopsCli, tmp_path: Path, text: str, recipient: str | None, *extra: str
) -> str:
    """``sops encrypt`` of ``text``: for ``recipient``, or by the .sops.yaml in tmp_path."""
    plain = tmp_path / "plain.yaml"
    plain.write_text(text)
    age = ("--age", recipient) if recipient else ()
    res = sops_cli.run(
        "encrypt",
        *age,
        *extra,
        "--input-type",
        "yaml",
        "--output-type",
        "yaml",
        str(plain),
        cwd=tmp_path,
    )
    return res.stdout


def sops_decrypt(sops_cli: SopsCli, tmp_path: Path, text: str, key_file: Path) -> Any:
    enc = tmp_path / "file.enc.yaml"
    enc.write_text(text)
    res = sops_cli.run(
        "decrypt", "--output-type", "json", str(enc), cwd=tmp_path, key_file=key_file
    )
    return json.loads(res.stdout)


def test_the_pinned_sops_is_the_format_konfig_writes(sops_cli: SopsCli, tmp_path: Path) -> None:
    script = (REPO_ROOT / "hack" / "sops").read_text()
    pinned = re.search(r'^SOPS_VERSION = "v([0-9.]+)"', script, re.M)
    assert pinned is not None and pinned.group(1) == sopsfile.SOPS_FORMAT_VERSION
    version = sops_cli.run("--version", "--disable-version-check", cwd=tmp_path).stdout
    assert f"sops {sopsfile.SOPS_FORMAT_VERSION}" in version


def test_sops_encrypts_konfig_decrypts(
    sops_cli: SopsCli, tmp_path: Path, key: tuple[Path, str, Keyring]
) -> None:
    _, recipient, keyring = key
    text = sops_encrypt(sops_cli, tmp_path, PLAINTEXT, recipient)
    assert CANARY not in text
    file = sopsfile.parse(text, name="by-sops.enc.yaml")
    assert file.version == sopsfile.SOPS_FORMAT_VERSION
    # the MAC check passes, so plain values were typed as sops typed them; the
    # encrypted ones carry sops' type, which must be what Konfig reads from the plaintext
    assert sopsfile.decrypt(file, keyring).data == plainyaml.load_plaintext(PLAINTEXT, name="p")


def test_konfig_encrypts_sops_decrypts(
    sops_cli: SopsCli, tmp_path: Path, key: tuple[Path, str, Keyring]
) -> None:
    key_file, recipient, _ = key
    data = plainyaml.load_plaintext(PLAINTEXT, name="p")
    text = sopsfile.encrypt(data, [recipient], name="by-konfig.enc.yaml")
    assert CANARY not in text
    assert sops_decrypt(sops_cli, tmp_path, text, key_file) == data


def test_konfig_file_decrypts_to_the_same_plaintext_in_sops(
    sops_cli: SopsCli, tmp_path: Path, key: tuple[Path, str, Keyring]
) -> None:
    key_file, recipient, _ = key
    data = {"db": {"password": CANARY, "port": 5432}, "tls.key": "k\ney\n"}
    text = sopsfile.encrypt(data, [recipient], name="k.enc.yaml")
    out = sops_cli.run(
        "decrypt",
        "--output-type",
        "json",
        "/dev/stdin",
        "--input-type",
        "yaml",
        cwd=tmp_path,
        key_file=key_file,
        input=text,
    ).stdout
    assert json.loads(out) == data


@pytest.mark.parametrize(
    ("flags", "rule"),
    [
        (
            ("--encrypted-regex", "^(data|stringData)$"),
            sopsfile.CryptRule(encrypted_regex="^(data|stringData)$"),
        ),
        (("--unencrypted-regex", "^kind$"), sopsfile.CryptRule(unencrypted_regex="^kind$")),
        (("--encrypted-suffix", "_secret"), sopsfile.CryptRule(encrypted_suffix="_secret")),
        # only a creation rule in .sops.yaml turns this on
        ((), sopsfile.CryptRule(unencrypted_suffix="_unencrypted", mac_only_encrypted=True)),
    ],
)
def test_encryption_rules_both_ways(
    sops_cli: SopsCli,
    tmp_path: Path,
    key: tuple[Path, str, Keyring],
    flags: tuple[str, ...],
    rule: sopsfile.CryptRule,
) -> None:
    key_file, recipient, keyring = key
    data = {
        "kind": "Secret",
        "stringData": {"password": CANARY},
        "token_secret": CANARY,
        "note_unencrypted": "plain",
    }
    if rule.mac_only_encrypted:
        config = {"creation_rules": [{"age": recipient, "mac_only_encrypted": True}]}
        (tmp_path / ".sops.yaml").write_text(json.dumps(config))
    by_sops = sopsfile.parse(
        sops_encrypt(
            sops_cli,
            tmp_path,
            plainyaml.dump_plaintext(data),
            None if rule.mac_only_encrypted else recipient,
            *flags,
        ),
        name="s",
    )
    assert by_sops.rule == rule
    assert sopsfile.decrypt(by_sops, keyring).data == data
    by_konfig = sopsfile.encrypt(data, [recipient], name="k", rule=rule)
    assert sops_decrypt(sops_cli, tmp_path, by_konfig, key_file) == data
    plain = {leaf.path for leaf in by_sops.leaves() if not leaf.encrypted}
    assert plain == {
        leaf.path for leaf in sopsfile.parse(by_konfig, name="k").leaves() if not leaf.encrypted
    }


def _flip_first_value(text: str) -> str:
    match = re.search(r"data:([A-Za-z0-9+/=]+),", text)
    assert match is not None
    raw = bytearray(base64.b64decode(match.group(1)))
    raw[0] ^= 1
    return text.replace(match.group(1), base64.b64encode(raw).decode(), 1)


def _reorder_list(text: str) -> str:
    doc = yaml.safe_load(text)
    doc["items"].reverse()
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.parametrize("writer", ["sops", "konfig"])
@pytest.mark.parametrize(
    ("tamper", "konfig_says", "sops_says"),
    [
        (_flip_first_value, "cannot decrypt the value", "Could not decrypt"),
        (_reorder_list, "MAC mismatch", "MAC mismatch"),
        (lambda t: t.replace("visible", "changed"), "MAC mismatch", "MAC mismatch"),
    ],
)
def test_tampered_files_are_refused_by_both(
    sops_cli: SopsCli,
    tmp_path: Path,
    key: tuple[Path, str, Keyring],
    writer: str,
    tamper: Any,
    konfig_says: str,
    sops_says: str,
) -> None:
    key_file, recipient, keyring = key
    data = {"a": CANARY, "b": "other", "items": ["one", "two"], "c_unencrypted": "visible"}
    if writer == "sops":
        text = sops_encrypt(sops_cli, tmp_path, plainyaml.dump_plaintext(data), recipient)
    else:
        text = sopsfile.encrypt(data, [recipient], name="t")
    assert sops_decrypt(sops_cli, tmp_path, text, key_file) == data  # untampered: fine
    bad = tamper(text)
    with pytest.raises(SecretsError, match=konfig_says) as err:
        sopsfile.decrypt(sopsfile.parse(bad, name="t.enc.yaml"), keyring)
    assert str(err.value).startswith("t.enc.yaml")
    enc = tmp_path / "bad.enc.yaml"
    enc.write_text(bad)
    res = sops_cli.run("decrypt", str(enc), cwd=tmp_path, key_file=key_file, check=False)
    assert res.returncode != 0
    assert sops_says in res.stderr
    assert CANARY not in res.stdout


def test_wrong_key_is_refused_by_both(
    sops_cli: SopsCli, tmp_path: Path, key: tuple[Path, str, Keyring]
) -> None:
    _, recipient, _ = key
    other = tmp_path / "other.txt"
    sops_cli.keygen(other)
    text = sopsfile.encrypt({"a": CANARY}, [recipient], name="w")
    enc = tmp_path / "w.enc.yaml"
    enc.write_text(text)
    res = sops_cli.run("decrypt", str(enc), cwd=tmp_path, key_file=other, check=False)
    assert res.returncode != 0
    with pytest.raises(SecretsError, match="no key in"):
        sopsfile.decrypt(
            sopsfile.parse(text, name="w"), Keyring.from_text(other.read_text(), source="x")
        )


def test_edits_by_either_tool_read_in_the_other(
    sops_cli: SopsCli, tmp_path: Path, key: tuple[Path, str, Keyring]
) -> None:
    key_file, recipient, keyring = key
    text = sopsfile.encrypt({"a": CANARY, "b": "two"}, [recipient], name="e")
    enc = tmp_path / "e.enc.yaml"
    enc.write_text(text)
    # sops changes one value in place (keeping the data key), Konfig reads it
    sops_cli.run("set", str(enc), '["b"]', '"three"', cwd=tmp_path, key_file=key_file)
    after_sops = sopsfile.parse(enc.read_text(), name="e")
    before = sopsfile.parse(text, name="e")
    decrypted = sopsfile.decrypt(after_sops, keyring)
    assert decrypted.data == {"a": CANARY, "b": "three"}
    assert after_sops.value_digest(("a",)) == before.value_digest(("a",))
    assert after_sops.value_digest(("b",)) != before.value_digest(("b",))
    # Konfig adds a key in place, sops reads it
    again = sopsfile.encrypt(
        {**decrypted.data, "c": "new"}, [recipient], name="e", previous=decrypted
    )
    assert sops_decrypt(sops_cli, tmp_path, again, key_file) == {
        "a": CANARY,
        "b": "three",
        "c": "new",
    }


def test_sops_rotate_of_a_konfig_file(
    sops_cli: SopsCli, tmp_path: Path, key: tuple[Path, str, Keyring]
) -> None:
    key_file, recipient, keyring = key
    other = tmp_path / "other.txt"
    other_recipient = sops_cli.keygen(other)
    enc = tmp_path / "r.enc.yaml"
    enc.write_text(sopsfile.encrypt({"a": CANARY}, [recipient], name="r"))
    sops_cli.run(
        "rotate",
        "--in-place",
        "--add-age",
        other_recipient,
        str(enc),
        cwd=tmp_path,
        key_file=key_file,
    )
    rotated = sopsfile.parse(enc.read_text(), name="r")
    assert set(rotated.recipients) == {recipient, other_recipient}
    both = Keyring.from_text(other.read_text(), source="other")
    assert sopsfile.decrypt(rotated, both).data == {"a": CANARY}
    assert sopsfile.decrypt(rotated, keyring).data == {"a": CANARY}


def test_age_keygen_files_and_several_keys_per_text(sops_cli: SopsCli, tmp_path: Path) -> None:
    first, second = tmp_path / "1.txt", tmp_path / "2.txt"
    r1, r2 = sops_cli.keygen(first), sops_cli.keygen(second)
    keyring = Keyring.from_text(
        first.read_text() + "\n" + second.read_text(), source="SOPS_AGE_KEY"
    )
    assert keyring.recipients == (r1, r2)
    text = sopsfile.encrypt({"a": CANARY}, [r2], name="two")
    assert sopsfile.decrypt(sopsfile.parse(text, name="two"), keyring).data == {"a": CANARY}


def test_sops_reads_konfig_output_without_a_yaml_warning(
    sops_cli: SopsCli, tmp_path: Path, key: tuple[Path, str, Keyring]
) -> None:
    _, recipient, _ = key
    enc = tmp_path / "f.enc.yaml"
    enc.write_text(sopsfile.encrypt({"a": CANARY}, [recipient], name="f"))
    res = sops_cli.run("filestatus", str(enc), cwd=tmp_path)
    assert json.loads(res.stdout) == {"encrypted": True}
