"""The checks over encrypted files and compiled Secrets (konfig secrets check / konfig check)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.sops import SopsCli

from konfig.secrets import audit, edit
from konfig.secrets.keys import Keyring
from konfig.secrets.rules import parse_rules
from konfig.spec import spec_from_items

CANARY = "canary-5e2a80c4-audit"


def setup(root: Path) -> tuple[Keyring, Keyring]:
    mine, other = Keyring.generate()[0], Keyring.generate()[0]
    rules = f"creation_rules:\n  - path_regex: /prod/\n    age: {mine.recipients[0]}\n"
    (root / ".sops.yaml").write_text(rules)
    parsed = parse_rules(rules, name=".sops.yaml")
    good = "appops/a/prod/secrets.enc.yaml"
    edit.write_encrypted(root / good, edit.encrypt_text(f"s:\n  k: {CANARY}\n", good, parsed))
    return mine, other


def test_a_clean_repository(tmp_path: Path) -> None:
    mine, _ = setup(tmp_path)
    files = audit.encrypted_files(tmp_path)
    assert files == ["appops/a/prod/secrets.enc.yaml"]
    rules = parse_rules((tmp_path / ".sops.yaml").read_text(), name=".sops.yaml")
    report = audit.audit_files(tmp_path, files, rules=rules, keyring=mine)
    assert report.problems == () and report.verified == tuple(files)
    without = audit.audit_files(tmp_path, files, rules=rules, keyring=None)
    assert without.problems == () and without.not_verified == tuple(files)


def test_every_problem_is_found_and_named(tmp_path: Path) -> None:
    mine, other = setup(tmp_path)
    rules = parse_rules((tmp_path / ".sops.yaml").read_text(), name=".sops.yaml")
    # plain text committed under an encrypted name
    (tmp_path / "appops/a/prod/plain.enc.yaml").write_text(f"s:\n  k: {CANARY}\n")
    # a value left in plain text
    good = tmp_path / "appops/a/prod/secrets.enc.yaml"
    doc = yaml.safe_load(good.read_text())
    doc["s"]["extra"] = CANARY
    (tmp_path / "appops/a/prod/leftover.enc.yaml").write_text(yaml.safe_dump(doc))
    # encrypted for someone the rules do not name
    wrong = "appops/a/prod/wrong.enc.yaml"
    other_rules = parse_rules(f"creation_rules:\n  - age: {other.recipients[0]}\n", name="x")
    edit.write_encrypted(tmp_path / wrong, edit.encrypt_text("s:\n  k: v\n", wrong, other_rules))
    # no rule at all
    edit.write_encrypted(
        tmp_path / "appops/a/dev/x.enc.yaml",
        edit.encrypt_text("s:\n  k: v\n", "appops/a/dev/x.enc.yaml", other_rules),
    )
    # tampered: a value swapped in from another file no longer decrypts
    tampered = tmp_path / "appops/a/prod/tampered.enc.yaml"
    doc = yaml.safe_load(good.read_text())
    doc["s"]["k"] = yaml.safe_load((tmp_path / wrong).read_text())["s"]["k"]
    tampered.write_text(yaml.safe_dump(doc))
    report = audit.audit_files(tmp_path, audit.encrypted_files(tmp_path), rules=rules, keyring=mine)
    found = {(p.rule, p.file) for p in report.problems}
    assert found == {
        ("secrets/not-encrypted", "appops/a/prod/plain.enc.yaml"),
        ("secrets/plaintext-value", "appops/a/prod/leftover.enc.yaml"),
        ("secrets/decrypt", "appops/a/prod/leftover.enc.yaml"),
        ("secrets/recipients", wrong),
        ("secrets/recipients", "appops/a/dev/x.enc.yaml"),
        ("secrets/decrypt", "appops/a/prod/tampered.enc.yaml"),
    }
    messages = "\n".join(p.message for p in report.problems)
    assert CANARY not in messages
    assert f"konfig secrets rotate {wrong}" in messages
    assert 'key ["s"]["k"]' in messages  # the tampered value is named


def test_plaintext_secret_data_in_a_spec() -> None:
    spec = spec_from_items(
        [
            {
                "id": "v1:Secret:ns:db",
                "attributes": {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "db", "namespace": "ns"},
                    "stringData": {"password": CANARY},
                },
            },
            {
                "id": "v1:ConfigMap:ns:c",
                "attributes": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "c", "namespace": "ns"},
                    "data": {"a": "b"},
                },
            },
        ]
    )
    problems = audit.audit_specs({"appops/a/dev": spec})
    assert [(p.rule, p.resource) for p in problems] == [
        ("secrets/plaintext-secret", "v1:Secret:ns:db")
    ]
    assert CANARY not in problems[0].message and "password" in problems[0].message


def test_check_with_a_key_that_opens_nothing_says_so(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    sops_cli: SopsCli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A file encrypted by the real sops CLI, `konfig check` and `konfig secrets check`
    given another key: exit 1, the file, its recipient and the key's (never the key)."""
    root = repo_builder.root
    prod_key, wrong_key = tmp_path / "prod.key", tmp_path / "wrong.key"
    prod = sops_cli.keygen(prod_key)
    wrong = sops_cli.keygen(wrong_key)
    (root / ".sops.yaml").write_text(f"creation_rules:\n  - age: {prod}\n")
    repo_builder.stack("shop", "stage")
    rel = "appops/shop/stage/secrets.enc.yaml"
    (root / rel).write_text(f"db:\n  password: {CANARY}\n")
    sops_cli.run("encrypt", "--in-place", rel, cwd=root)
    assert CANARY not in (root / rel).read_text()
    for args in (("check", "shop/stage"), ("secrets", "check")):
        monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(wrong_key))
        result = konfig(*args, cwd=root)
        assert result.code == 1, (args, result.out, result.err)
        assert f"{rel}: error: the key in SOPS_AGE_KEY_FILE={wrong_key} (recipient {wrong})" in (
            result.out
        )
        assert f"this one is encrypted for {prod}" in result.out
        assert "[secrets/wrong-key]" in result.out
        secret = wrong_key.read_text().split("AGE-SECRET-KEY-")[1][:20]
        assert secret not in result.out + result.err and CANARY not in result.out
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(prod_key))
    right = konfig("check", "shop/stage", cwd=root)
    assert right.code == 0, right.out + right.err
