"""`konfig secrets`: keygen, encrypt, edit, rotate, check — end to end through the CLI."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from fixtures.repos import KonfigRunner, RepoBuilder

from konfig.secrets import sopsfile
from konfig.secrets.keys import Keyring

CANARY = "canary-0d7c33f1-cli"
FILE = "appops/shop/dev/secrets.enc.yaml"


@pytest.fixture
def keyed(repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose .sops.yaml names a key made by `konfig secrets keygen`."""
    root = repo_builder.root
    key = tmp_path / "age.key"
    result = konfig("secrets", "keygen", "-o", str(key), cwd=root)
    assert result.code == 0, result.err
    recipient = result.out.strip()
    assert recipient.startswith("age1") and CANARY not in result.out
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    (root / ".sops.yaml").write_text(f"creation_rules:\n  - age: {recipient}\n")
    return root, key


def test_keygen_never_overwrites(keyed: tuple[Path, Path], konfig: KonfigRunner) -> None:
    root, key = keyed
    before = key.read_text()
    result = konfig("secrets", "keygen", "-o", str(key), cwd=root)
    assert result.code == 2 and "refusing to overwrite" in result.err
    assert key.read_text() == before


def test_encrypt_in_place_then_check(
    keyed: tuple[Path, Path], konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, key = keyed
    path = root / FILE
    path.parent.mkdir(parents=True)
    path.write_text(f"db:\n  password: {CANARY}\n")
    result = konfig("secrets", "encrypt", FILE, cwd=root)
    assert result.code == 0, result.err
    assert CANARY not in path.read_text() + result.out + result.err
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    checked = konfig("secrets", "check", "--json", cwd=root)
    assert checked.code == 0, checked.out + checked.err
    assert json.loads(checked.out)["verified"] == [FILE]
    assert "SOPS_AGE_KEY_FILE" not in os.environ  # taken out of the environment


def test_edit_with_an_editor(
    keyed: tuple[Path, Path], konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, key = keyed
    path = root / FILE
    path.parent.mkdir(parents=True)
    path.write_text(f"db:\n  password: {CANARY}\n  user: shop\n")
    assert konfig("secrets", "encrypt", FILE, cwd=root).code == 0
    before = sopsfile.read(path)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    monkeypatch.setenv("EDITOR", "sed -i s/shop/shop2/")
    result = konfig("secrets", "edit", FILE, cwd=root)
    assert result.code == 0, result.err
    after = sopsfile.read(path)
    assert after.value_digest(("db", "password")) == before.value_digest(("db", "password"))
    assert after.value_digest(("db", "user")) != before.value_digest(("db", "user"))
    data = sopsfile.decrypt(after, Keyring.from_text(key.read_text(), source="k")).data
    assert data == {"db": {"password": CANARY, "user": "shop2"}}
    assert CANARY not in result.out + result.err


def test_edit_without_a_key_or_with_a_failing_editor(
    keyed: tuple[Path, Path], konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, key = keyed
    (root / FILE).parent.mkdir(parents=True)
    (root / FILE).write_text(f"a: {CANARY}\n")
    assert konfig("secrets", "encrypt", FILE, cwd=root).code == 0
    monkeypatch.delenv("SOPS_AGE_KEY_FILE", raising=False)
    monkeypatch.delenv("SOPS_AGE_KEY", raising=False)
    result = konfig("secrets", "edit", FILE, cwd=root)
    assert result.code == 1 and f"{FILE}: cannot edit without a key" in result.err
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    monkeypatch.setenv("EDITOR", "false")
    before = (root / FILE).read_text()
    result = konfig("secrets", "edit", FILE, cwd=root)
    assert result.code == 2 and "nothing saved" in result.err
    assert (root / FILE).read_text() == before


def test_rotate_after_changing_the_recipients(
    keyed: tuple[Path, Path], konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root, key = keyed
    (root / FILE).parent.mkdir(parents=True)
    (root / FILE).write_text(f"a: {CANARY}\n")
    assert konfig("secrets", "encrypt", FILE, cwd=root).code == 0
    new_key = tmp_path / "new.key"
    recipient = konfig("secrets", "keygen", "-o", str(new_key), cwd=root).out.strip()
    (root / ".sops.yaml").write_text(f"creation_rules:\n  - age: {recipient}\n")
    stale = konfig("secrets", "check", cwd=root)
    assert stale.code == 1
    assert f"{FILE}: error: not encrypted for {recipient}" in stale.out
    assert "[secrets/recipients]" in stale.out
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    rotated = konfig("secrets", "rotate", "--all", cwd=root)
    assert rotated.code == 0, rotated.err
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(new_key))
    assert konfig("secrets", "check", cwd=root).code == 0


def test_encrypt_errors(keyed: tuple[Path, Path], konfig: KonfigRunner) -> None:
    root, _ = keyed
    (root / "plain.yaml").write_text("a: 1 # a comment\n")
    result = konfig("secrets", "encrypt", "plain.yaml", cwd=root)
    assert result.code == 1 and "plain.yaml:1: has a YAML comment" in result.err
    result = konfig("secrets", "encrypt", "missing.yaml", cwd=root)
    assert result.code == 2 and "cannot read" in result.err
    (root / ".sops.yaml").unlink()
    (root / "plain.yaml").write_text("a: 1\n")
    result = konfig("secrets", "encrypt", "plain.yaml", cwd=root)
    assert result.code == 2 and "has no .sops.yaml" in result.err


LINKED_MAIN = """\
import base.pkg.models.frontend

web: frontend.Server {
    name = "web"
    namespace = "shop-dev"
    image = "nginx:1.27.3"
    ports = [{port = 80}]
    secrets = [{name = "db", fromFile = "secrets.enc.yaml", keys = ["password"]}]
}
"""


def test_a_link_to_another_stacks_encrypted_file_is_refused(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """dev's secrets.enc.yaml links to prod's: compile, check and rotate refuse it as a
    link (secrets/link), and no hint re-encrypts prod's values for dev's recipients."""
    root = repo_builder.root
    keys = {env: tmp_path / f"{env}.key" for env in ("dev", "prod")}
    recipients = {
        env: konfig("secrets", "keygen", "-o", str(path), cwd=root).out.strip()
        for env, path in keys.items()
    }
    (root / ".sops.yaml").write_text(
        "creation_rules:\n"
        f"  - path_regex: /prod/\n    age: {recipients['prod']}\n"
        f"  - path_regex: /dev/\n    age: {recipients['dev']}\n"
    )
    repo_builder.stack("shop", "prod", main=LINKED_MAIN.replace("shop-dev", "shop-prod"))
    repo_builder.stack("shop", "dev", main=LINKED_MAIN)
    prod_file = "appops/shop/prod/secrets.enc.yaml"
    dev_file = "appops/shop/dev/secrets.enc.yaml"
    (root / prod_file).write_text(f"db:\n  password: {CANARY}\n")
    assert konfig("secrets", "encrypt", prod_file, cwd=root).code == 0
    prod_before = (root / prod_file).read_bytes()
    (root / dev_file).symlink_to("../prod/secrets.enc.yaml")
    compiled = konfig("compile", "shop/dev", cwd=root)
    assert compiled.code == 1
    assert f"{dev_file}: web" in compiled.err or f"{dev_file}: " in compiled.err
    assert f"resolves to {prod_file} (a link)" in compiled.err
    assert "[secrets/link]" in compiled.err
    assert konfig("compile", "shop/prod", cwd=root).code == 0
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(keys["prod"]))
    checked = konfig("check", "--all", cwd=root)
    assert checked.code == 1
    assert f"{dev_file}: error: resolves to {prod_file} (a link)" in checked.out
    assert "[secrets/link]" in checked.out
    assert f"konfig secrets rotate {dev_file}" not in checked.out + checked.err
    assert "[secrets/recipients]" not in checked.out
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(keys["prod"]))
    rotated = konfig("secrets", "rotate", dev_file, cwd=root)
    assert rotated.code == 1
    assert f"resolves to {prod_file} (a link)" in rotated.err
    assert (root / prod_file).read_bytes() == prod_before
    assert CANARY not in compiled.out + compiled.err + checked.out + rotated.out + rotated.err
