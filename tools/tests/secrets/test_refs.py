"""References: bound at compile (digests, no key), resolved in memory (with the key)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from konfig.secrets import edit, refs, sopsfile
from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import Keyring
from konfig.secrets.refs import KeyRef, Resolver, SecretRef
from konfig.secrets.rules import parse_rules
from konfig.spec import spec_from_items

CANARY = "canary-3c0f6b92-refs"
STACK = "appops/shop/prod"
FILE = f"{STACK}/secrets.enc.yaml"
SECRET: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "tls", "namespace": "shop"},
    "type": "kubernetes.io/tls",
}
ID = "v1:Secret:shop:tls"


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, Keyring]:
    keyring = Keyring.generate()[0]
    rules = parse_rules(f"creation_rules:\n  - age: {keyring.recipients[0]}\n", name=".sops.yaml")
    text = edit.encrypt_text(
        f"tls:\n  tls.crt: cert-{CANARY}\n  tls.key: {CANARY}\n  port: 443\n", FILE, rules
    )
    edit.write_encrypted(tmp_path / FILE, text)
    return tmp_path, keyring


def unbound(*keys: str) -> dict[str, Any]:
    return {"secrets": [{"key": k, "file": "secrets.enc.yaml", "path": ["tls", k]} for k in keys]}


def test_bind_adds_repository_paths_and_digests(repo: tuple[Path, Keyring]) -> None:
    root, _ = repo
    bound = refs.bind(
        ID, SECRET, unbound("tls.crt", "tls.key"), stack_dir=STACK, resolver=Resolver(root)
    )
    file = sopsfile.read(root / FILE)
    assert bound == {
        "secrets": [
            {"key": k, "file": FILE, "path": ["tls", k], "digest": file.value_digest(("tls", k))}
            for k in ("tls.crt", "tls.key")
        ]
    }
    assert CANARY not in repr(bound)


@pytest.mark.parametrize(
    ("extensions", "attributes", "message"),
    [
        (
            unbound("nope"),
            SECRET,
            r'^v1:Secret:shop:tls: .*\(key \["tls"\]\["nope"\]\): unknown reference',
        ),
        (
            {"secrets": [{"key": "k", "file": "other.enc.yaml", "path": ["a"]}]},
            SECRET,
            "other.enc.yaml: no such file",
        ),
        (
            {"secrets": [{"key": "k", "file": "secrets.enc.yaml", "path": ["tls"]}]},
            SECRET,
            "names a mapping, not a value",
        ),
        (
            {"secrets": [{"key": "k", "file": "../../../../x.enc.yaml", "path": ["a"]}]},
            SECRET,
            "must be inside the repository",
        ),
        (
            {"secrets": [{"key": "k", "file": "../dev/secrets.enc.yaml", "path": ["a"]}]},
            SECRET,
            "is outside the stack folder appops/shop/prod",
        ),
        (
            unbound("tls.key"),
            {**SECRET, "stringData": {"tls.key": "x"}},
            "set in plain text and from an encrypted file",
        ),
        (unbound("tls.key"), {**SECRET, "kind": "ConfigMap"}, "only a v1 Secret"),
        ({"secrets": [{"key": "k", "file": "f"}]}, SECRET, r"needs `path`"),
        (
            {"secrets": [{"key": "k", "file": "secrets.enc.yaml", "path": ["tls", "tls.key"]}] * 2},
            SECRET,
            "referenced twice",
        ),
    ],
)
def test_bind_errors_name_the_resource_file_and_key(
    repo: tuple[Path, Keyring], extensions: dict[str, Any], attributes: dict[str, Any], message: str
) -> None:
    root, _ = repo
    with pytest.raises(SecretsError, match=message):
        refs.bind(ID, attributes, extensions, stack_dir=STACK, resolver=Resolver(root))


def test_bind_spec(repo: tuple[Path, Keyring]) -> None:
    root, _ = repo
    spec = spec_from_items([{"id": ID, "attributes": SECRET, "extensions": unbound("tls.key")}])
    bound = refs.bind_spec(spec, root=root, stack_dir=STACK)
    (item,) = refs.key_refs(ID, bound.resources[0].extensions)
    assert item.ref.file == FILE and item.ref.digest.startswith("sha256:")


def test_resolve_fills_data_in_memory(repo: tuple[Path, Keyring]) -> None:
    root, keyring = repo
    bound = refs.bind(
        ID, SECRET, unbound("tls.key", "port"), stack_dir=STACK, resolver=Resolver(root)
    )
    spec = spec_from_items([{"id": ID, "attributes": SECRET, "extensions": bound}])
    assert refs.unresolved(spec) == [ID]
    resolved = refs.resolve_spec(spec, Resolver(root, keyring))
    data = resolved.resources[0].attributes["data"]
    assert base64.b64decode(data["tls.key"]).decode() == CANARY
    assert base64.b64decode(data["port"]) == b"443"
    assert "data" not in spec.resources[0].attributes  # the compiled Spec is untouched


def test_resolve_without_a_key_or_after_a_change_is_refused(repo: tuple[Path, Keyring]) -> None:
    root, keyring = repo
    ref = SecretRef(FILE, ("tls", "tls.key"))
    with pytest.raises(SecretsError, match=r"cannot decrypt without a key"):
        Resolver(root).value(ref)
    stale = SecretRef(FILE, ("tls", "tls.key"), "sha256:" + "0" * 64)
    with pytest.raises(SecretsError, match="changed since this reference was compiled"):
        Resolver(root, keyring).value(stale)
    assert Resolver(root, keyring).value(ref) == CANARY


def test_each_file_is_decrypted_once(repo: tuple[Path, Keyring]) -> None:
    root, keyring = repo
    resolver = Resolver(root, keyring)
    first = resolver.decrypted(FILE)
    resolver.value(SecretRef(FILE, ("tls", "tls.crt")))
    assert resolver.decrypted(FILE) is first


def test_key_refs_round_trip() -> None:
    item = KeyRef("k", SecretRef("a/b.enc.yaml", ("x", 0), "sha256:1"))
    assert refs.key_refs("r", {"secrets": [item.to_dict()]}) == (item,)
    assert refs.key_refs("r", {}) == ()


def test_plaintext_keys() -> None:
    assert refs.plaintext_keys({**SECRET, "data": {"b": "x"}, "stringData": {"a": "y"}}) == [
        "a",
        "b",
    ]
    assert refs.plaintext_keys({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}) == []


def test_secret_data_and_key_statuses(repo: tuple[Path, Keyring]) -> None:
    root, keyring = repo
    bound = refs.bind(
        ID, SECRET, unbound("tls.key", "tls.crt"), stack_dir=STACK, resolver=Resolver(root)
    )
    spec = spec_from_items([{"id": ID, "attributes": SECRET, "extensions": bound}])
    data = refs.secret_data(spec, Resolver(root, keyring))
    assert base64.b64decode(data[ID]["tls.key"]).decode() == CANARY
    live = {"data": {"tls.key": base64.b64encode(CANARY.encode()).decode(), "tls.crt": "eA=="}}
    statuses = refs.key_statuses(
        ["tls.key", "tls.crt", "extra"], {"data": data[ID]}, live, compared=True
    )
    assert [s.to_dict() for s in statuses] == [
        {"key": "tls.key", "status": "unchanged"},
        {"key": "tls.crt", "status": "changed"},
        {"key": "extra", "status": "new"},
    ]
    assert {s.status for s in refs.key_statuses(["tls.key"], None, live, compared=False)} == {
        "not compared"
    }
    with pytest.raises(SecretsError, match="cannot decrypt without a key"):
        refs.secret_data(spec, Resolver(root))
