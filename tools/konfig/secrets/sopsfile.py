"""The SOPS file format (YAML documents, age recipients), read and written in Python.

A SOPS file is the plaintext document with every leaf value replaced by
``ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<str|int|float|bool|...>]`` plus a
top-level ``sops`` mapping:

- a random 32-byte **data key** encrypts each value with AES-256-GCM under a fresh
  32-byte IV; the additional authenticated data is the value's path, its mapping keys
  joined and closed by ``:`` (``a:b:``; list items take their list's path), so a value
  moved to another key no longer decrypts;
- ``sops.age`` holds the data key encrypted (ASCII-armored age) to each recipient;
- ``sops.mac`` is the upper-case hex SHA-512 over every value's plaintext in document
  order (only the encrypted ones with ``mac_only_encrypted``), itself encrypted with the
  data key and ``sops.lastmodified`` as additional data: values added, removed,
  reordered or swapped are caught even though each still decrypts;
- ``unencrypted_suffix`` (default ``_unencrypted``), ``encrypted_suffix``,
  ``unencrypted_regex`` or ``encrypted_regex`` (one of them) say which keys stay plain;
- ``version`` the format version (Konfig writes the sops release it is tested against).

Konfig reads and writes what the ``sops`` CLI (v3) does for YAML with age keys and
checks the MAC; it does not read other key types (PGP, cloud KMS, Vault), Shamir key
groups, comment-based encryption rules, or keep YAML comments when it writes a file.
Files are read with :mod:`konfig.secrets.yamlcore` so plain values type as sops types
them. Messages name the file, the key path (``["a"]["b"]``) and the line, never a value.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from konfig.secrets import yamlcore
from konfig.secrets.errors import SecretsError, key_path
from konfig.secrets.keys import AgeDecryptError, Keyring, encrypt_to

# The sops release whose format Konfig writes and round-trips against in the tests
# (hack/sops builds exactly this version; a test keeps the two equal).
SOPS_FORMAT_VERSION = "3.13.3"

METADATA_KEY = "sops"
DEFAULT_UNENCRYPTED_SUFFIX = "_unencrypted"
DATA_KEY_BYTES = 32
IV_BYTES = 32
# Written first into the MAC when it covers only encrypted values, so such a MAC never
# equals one over all values (the constant the sops format fixes for this mode).
_MAC_ONLY_ENCRYPTED_INIT = bytes.fromhex(
    "8a3fd2ad54ce66527b1034f3d147be0b0b975b3bf44f72c6fdadec8176f27d69"
)
_ENC = re.compile(
    r"^ENC\[AES256_GCM,data:([A-Za-z0-9+/=]*),iv:([A-Za-z0-9+/=]+),"
    r"tag:([A-Za-z0-9+/=]+),type:([a-z]+)\]$"
)
_KNOWN_METADATA = {
    "age",
    "lastmodified",
    "mac",
    "version",
    "unencrypted_suffix",
    "encrypted_suffix",
    "unencrypted_regex",
    "encrypted_regex",
    "mac_only_encrypted",
    "key_groups",
    "shamir_threshold",
}
_OTHER_KEY_TYPES = ("pgp", "kms", "gcp_kms", "azure_kv", "hc_vault", "hckms")
_UNSUPPORTED_RULES = ("unencrypted_comment_regex", "encrypted_comment_regex")

Path_ = tuple[str | int, ...]  # a value's place: mapping keys and list indices


def _aad(path: Path_) -> bytes:
    return (":".join(p for p in path if isinstance(p, str)) + ":").encode()


@dataclass(frozen=True)
class CryptRule:
    """Which keys are encrypted: at most one of the four rules; none means all are.

    A file without any rule in its metadata is read with ``unencrypted_suffix:
    _unencrypted``, as sops reads it.
    """

    unencrypted_suffix: str = ""
    encrypted_suffix: str = ""
    unencrypted_regex: str = ""
    encrypted_regex: str = ""
    mac_only_encrypted: bool = False

    def __post_init__(self) -> None:
        rules = [
            self.unencrypted_suffix,
            self.encrypted_suffix,
            self.unencrypted_regex,
            self.encrypted_regex,
        ]
        if sum(1 for r in rules if r) > 1:
            raise ValueError(
                "use only one of unencrypted_suffix, encrypted_suffix, unencrypted_regex "
                "and encrypted_regex"
            )

    def encrypts(self, path: Sequence[str | int]) -> bool:
        keys = [p for p in path if isinstance(p, str)]
        if self.unencrypted_suffix:
            return not any(k.endswith(self.unencrypted_suffix) for k in keys)
        if self.encrypted_suffix:
            return any(k.endswith(self.encrypted_suffix) for k in keys)
        if self.unencrypted_regex:
            pattern = re.compile(self.unencrypted_regex)
            return not any(pattern.search(k) for k in keys)
        if self.encrypted_regex:
            pattern = re.compile(self.encrypted_regex)
            return any(pattern.search(k) for k in keys)
        return True

    def metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in ("unencrypted_suffix", "encrypted_suffix", "unencrypted_regex"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.encrypted_regex:
            out["encrypted_regex"] = self.encrypted_regex
        if self.mac_only_encrypted:
            out["mac_only_encrypted"] = True
        return out


DEFAULT_RULE = CryptRule(unencrypted_suffix=DEFAULT_UNENCRYPTED_SUFFIX)


@dataclass(frozen=True)
class AgeStanza:
    recipient: str
    enc: str  # the data key, ASCII-armored age message


@dataclass(frozen=True)
class Leaf:
    path: Path_
    value: Any
    encrypted: bool  # by the file's rule
    line: int | None


@dataclass(frozen=True)
class SopsFile:
    """An encrypted file as read: structure and metadata checked, nothing decrypted.

    Everything here is safe to show: keys are plain text in a SOPS file, values are
    ciphertext. ``name`` is the file as messages should call it.
    """

    name: str
    tree: dict[str, Any]  # the document without ``sops``, values as in the file
    age: tuple[AgeStanza, ...]
    lastmodified: str
    mac: str
    version: str
    rule: CryptRule
    lines: Mapping[Path_, int] = field(default_factory=dict, repr=False, compare=False)

    @property
    def recipients(self) -> tuple[str, ...]:
        return tuple(s.recipient for s in self.age)

    def leaves(self) -> Iterator[Leaf]:
        """Every non-null value in document order (the MAC's order)."""
        for path, value in _walk(self.tree, ()):
            yield Leaf(path, value, self.rule.encrypts(path), self.lines.get(path))

    def get(self, path: Path_) -> Any:
        """The raw (encrypted) value at ``path``; KeyError when there is none."""
        node: Any = self.tree
        for part in path:
            if isinstance(part, int):
                if not isinstance(node, list) or not 0 <= part < len(node):
                    raise KeyError(path)
            elif not isinstance(node, dict) or part not in node:
                raise KeyError(path)
            node = node[part]
        return node

    def value_digest(self, path: Path_) -> str:
        """A digest of the encrypted value at ``path``: changes when the value is
        re-encrypted with another value (or another data key), reveals nothing.

        Unchanged values keep their ciphertext when Konfig or sops edits a file, so the
        digest moves only for the keys that changed.
        """
        raw = self.get(path)
        text = raw if isinstance(raw, str) else yamlcore.dump(raw)
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    def plaintext_leaves(self) -> list[Leaf]:
        """Values the rule says are encrypted but that are not: plain text left behind."""
        return [
            leaf
            for leaf in self.leaves()
            if leaf.encrypted and not (isinstance(leaf.value, str) and _is_enc_or_empty(leaf.value))
        ]


def _is_enc_or_empty(value: str) -> bool:
    return value == "" or bool(_ENC.match(value))


def _walk(node: Any, path: Path_) -> Iterator[tuple[Path_, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, (*path, index))
    elif node is not None:
        yield path, node


def _map_leaves(node: Any, path: Path_, fn: Callable[[Path_, Any], Any]) -> Any:
    if isinstance(node, dict):
        return {k: _map_leaves(v, (*path, k), fn) for k, v in node.items()}
    if isinstance(node, list):
        return [_map_leaves(v, (*path, i), fn) for i, v in enumerate(node)]
    if node is None:
        return None
    return fn(path, node)


# --- reading --------------------------------------------------------------------------


def read(path: Path, *, name: str | None = None) -> SopsFile:
    """Read and check an encrypted file (no key needed)."""
    shown = name or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SecretsError("no such file", file=shown) from exc
    except UnicodeDecodeError as exc:
        raise SecretsError("is not UTF-8 text: not a SOPS YAML file", file=shown) from exc
    except OSError as exc:
        raise SecretsError(f"cannot read: {exc.strerror}", file=shown) from exc
    return parse(text, name=shown)


def parse(text: str, *, name: str) -> SopsFile:
    lines: dict[Path_, int] = {}
    try:
        node = yamlcore.compose(text)
        document = None if node is None else yamlcore.construct(node, lines)
    except yamlcore.LoadError as exc:
        raise SecretsError(exc.message, file=name, line=exc.line) from exc
    if document is None:
        raise SecretsError("is empty: not a SOPS-encrypted file", file=name)
    if not isinstance(document, dict):
        raise SecretsError("is not a YAML mapping: not a SOPS-encrypted file", file=name)
    meta = document.pop(METADATA_KEY, None)
    if meta is None:
        raise SecretsError(
            "has no `sops` metadata: it is not encrypted",
            file=name,
            hint=f"encrypt it: konfig secrets encrypt {name}",
        )
    line = lines.get((METADATA_KEY,))
    if not isinstance(meta, dict):
        raise SecretsError("`sops` is not a mapping", file=name, line=line)
    return SopsFile(
        name=name,
        tree=document,
        age=_stanzas(meta, name, line),
        lastmodified=_text(meta, "lastmodified", name, line),
        mac=_text(meta, "mac", name, line),
        version=str(meta.get("version") or ""),
        rule=_rule(meta, name, line),
        lines=lines,
    )


def _text(meta: dict[str, Any], key: str, name: str, line: int | None) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value:
        raise SecretsError(f"`sops.{key}` is missing or not a string", file=name, line=line)
    return value


def _stanzas(meta: dict[str, Any], name: str, line: int | None) -> tuple[AgeStanza, ...]:
    unknown = sorted(set(meta) - _KNOWN_METADATA - set(_OTHER_KEY_TYPES) - set(_UNSUPPORTED_RULES))
    if unknown:
        raise SecretsError(
            f"`sops` has unknown entries {unknown}: not a SOPS v3 file", file=name, line=line
        )
    groups = meta.get("key_groups")
    source: dict[str, Any] = meta
    if groups:
        if not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict):
            raise SecretsError(
                "uses several key groups (Shamir secret sharing), which Konfig does not read",
                file=name,
                line=line,
                hint="use one list of age recipients",
            )
        source = groups[0]
    raw = source.get("age") or []
    if not isinstance(raw, list):
        raise SecretsError("`sops.age` is not a list", file=name, line=line)
    stanzas = []
    for entry in raw:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("recipient"), str)
            or not isinstance(entry.get("enc"), str)
        ):
            raise SecretsError(
                "an entry of `sops.age` needs `recipient` and `enc`", file=name, line=line
            )
        stanzas.append(AgeStanza(entry["recipient"], entry["enc"]))
    if not stanzas:
        others = [k for k in _OTHER_KEY_TYPES if source.get(k)]
        detail = f" (it uses {', '.join(others)})" if others else ""
        raise SecretsError(
            f"has no age recipient{detail}: Konfig decrypts age keys only",
            file=name,
            line=line,
            hint="add an age recipient: sops updatekeys, or konfig secrets rotate",
        )
    return tuple(stanzas)


def _rule(meta: dict[str, Any], name: str, line: int | None) -> CryptRule:
    for unsupported in _UNSUPPORTED_RULES:
        if meta.get(unsupported):
            raise SecretsError(
                f"uses `{unsupported}`, which Konfig does not read", file=name, line=line
            )
    values = {
        k: meta.get(k) or ""
        for k in ("unencrypted_suffix", "encrypted_suffix", "unencrypted_regex", "encrypted_regex")
    }
    if not any(values.values()):
        values["unencrypted_suffix"] = DEFAULT_UNENCRYPTED_SUFFIX
    if not all(isinstance(v, str) for v in values.values()):
        raise SecretsError("an encryption rule in `sops` is not a string", file=name, line=line)
    for key in ("unencrypted_regex", "encrypted_regex"):
        if values[key]:
            try:
                re.compile(values[key])
            except re.error as exc:
                raise SecretsError(f"`sops.{key}` is not a valid regex: {exc}", file=name) from exc
    try:
        return CryptRule(**values, mac_only_encrypted=bool(meta.get("mac_only_encrypted")))
    except ValueError as exc:
        raise SecretsError(str(exc), file=name, line=line) from exc


# --- decrypting -----------------------------------------------------------------------


@dataclass(frozen=True)
class Decrypted:
    """A decrypted file: the plaintext document, in memory only.

    ``data`` holds the values (never print it). ``data_key`` and the IVs let
    :func:`encrypt` write the file back with unchanged values keeping their exact
    ciphertext, as sops does, so a one-key edit changes one line (and one digest).
    """

    file: SopsFile
    data: dict[str, Any] = field(repr=False)
    data_key: bytes = field(repr=False)
    ivs: Mapping[tuple[bytes, str, bytes], bytes] = field(repr=False, default_factory=dict)

    def get(self, path: Path_) -> Any:
        node: Any = self.data
        for part in path:
            node = node[part]
        return node


def decrypt(file: SopsFile, keyring: Keyring) -> Decrypted:
    """Decrypt every value and check the MAC; any failure is a SecretsError naming the file."""
    data_key = _data_key(file, keyring)
    digest = hashlib.sha512()
    if file.rule.mac_only_encrypted:
        digest.update(_MAC_ONLY_ENCRYPTED_INIT)
    ivs: dict[tuple[bytes, str, bytes], bytes] = {}
    aes = AESGCM(data_key)

    def one(path: Path_, raw: Any) -> Any:
        encrypted = file.rule.encrypts(path)
        if not encrypted:
            value = raw
        elif not isinstance(raw, str) or not _is_enc_or_empty(raw):
            raise SecretsError(
                "holds a plain-text value where an encrypted one belongs",
                file=file.name,
                key=key_path(path),
                line=file.lines.get(path),
                hint="re-encrypt the file (konfig secrets edit) instead of editing ciphertext",
            )
        elif raw == "":
            value = ""
        else:
            value = _decrypt_value(aes, raw, path, file, ivs)
        if encrypted or not file.rule.mac_only_encrypted:
            digest.update(_typed(value, file, path)[1])
        return value

    data = _map_leaves(file.tree, (), one)
    _check_mac(file, aes, digest.hexdigest().upper())
    return Decrypted(file, data, data_key, ivs)


def _data_key(file: SopsFile, keyring: Keyring) -> bytes:
    damaged: list[str] = []
    for stanza in file.age:
        try:
            key = keyring.decrypt(stanza.enc.encode())
        except AgeDecryptError as exc:
            if not exc.no_match:
                damaged.append(f"{stanza.recipient}: {exc.reason}")
            continue
        if len(key) != DATA_KEY_BYTES:
            raise SecretsError(
                f"the data key for {stanza.recipient} is {len(key)} bytes, not {DATA_KEY_BYTES}",
                file=file.name,
            )
        return key
    if damaged:
        raise SecretsError(
            "the age stanza of the data key is damaged: " + "; ".join(damaged), file=file.name
        )
    raise SecretsError(
        "no key in "
        f"{keyring.source} can decrypt this file: it is encrypted for "
        f"{', '.join(file.recipients)}; the key(s) given are for {', '.join(keyring.recipients)}",
        file=file.name,
        hint="use a key of one of the file's recipients, or have the file re-encrypted for "
        "yours (konfig secrets rotate, by someone who can decrypt it)",
    )


def _decrypt_value(
    aes: AESGCM,
    raw: str,
    path: Path_,
    file: SopsFile,
    ivs: dict[tuple[bytes, str, bytes], bytes],
) -> Any:
    match = _ENC.match(raw)
    assert match is not None
    try:
        data, iv, tag = (base64.b64decode(match.group(i), validate=True) for i in (1, 2, 3))
    except ValueError as exc:
        raise SecretsError(
            "encrypted value is not valid base64 (damaged file?)",
            file=file.name,
            key=key_path(path),
            line=file.lines.get(path),
        ) from exc
    kind = match.group(4)
    try:
        plain = aes.decrypt(iv, data + tag, _aad(path))
    except (InvalidTag, ValueError) as exc:
        raise SecretsError(
            "cannot decrypt the value: authentication failed (the ciphertext, its key path or "
            "the data key was changed: a tampered or damaged file)",
            file=file.name,
            key=key_path(path),
            line=file.lines.get(path),
        ) from exc
    value = _untyped(kind, plain, file, path)
    ivs[(_aad(path), kind, plain)] = iv
    return value


_GO_INT = re.compile(r"^[+-]?[0-9]+$")
_GO_BOOL = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def _untyped(kind: str, plain: bytes, file: SopsFile, path: Path_) -> Any:
    def bad(what: str) -> SecretsError:
        return SecretsError(
            f"decrypted value is not {what}",
            file=file.name,
            key=key_path(path),
            line=file.lines.get(path),
        )

    if kind == "bytes":
        return plain
    try:
        text = plain.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad("UTF-8 text") from exc
    if kind == "str":
        return text
    if kind == "time":
        return yamlcore.GoTime(text)
    if kind == "int":
        if not _GO_INT.match(text):
            raise bad("an integer")
        return int(text)
    if kind == "float":
        try:
            return float(text)
        except ValueError as exc:
            raise bad("a number") from exc
    if kind == "bool":
        if text not in _GO_BOOL:
            raise bad("a boolean")
        return _GO_BOOL[text]
    raise SecretsError(
        f"value has type {kind!r}, which Konfig does not read",
        file=file.name,
        key=key_path(path),
        line=file.lines.get(path),
    )


def _typed(value: Any, file: SopsFile | str, path: Path_) -> tuple[str, bytes]:
    """The sops type name and the bytes a value is encrypted and MAC'd as."""
    if isinstance(value, bool):
        return "bool", b"True" if value else b"False"
    if isinstance(value, int):
        return "int", str(value).encode()
    if isinstance(value, float):
        return "float", yamlcore.go_float(value).encode()
    if isinstance(value, yamlcore.GoTime):
        return "time", value.encode()
    if isinstance(value, str):
        return "str", value.encode()
    if isinstance(value, bytes):
        return "bytes", value
    name = file.name if isinstance(file, SopsFile) else file
    raise SecretsError(
        f"value of type {type(value).__name__} cannot be stored in a SOPS file",
        file=name,
        key=key_path(path),
    )


def _check_mac(file: SopsFile, aes: AESGCM, computed: str) -> None:
    match = _ENC.match(file.mac)
    if not match:
        raise SecretsError("`sops.mac` is not an encrypted value (damaged file?)", file=file.name)
    try:
        data, iv, tag = (base64.b64decode(match.group(i), validate=True) for i in (1, 2, 3))
        stored = aes.decrypt(iv, data + tag, _go_rfc3339(file.lastmodified, file).encode())
    except (InvalidTag, ValueError) as exc:
        raise SecretsError(
            "cannot decrypt the MAC: `sops.mac` or `sops.lastmodified` was changed "
            "(a tampered or damaged file)",
            file=file.name,
        ) from exc
    if not hmac.compare_digest(stored, computed.encode()):
        raise SecretsError(
            "MAC mismatch: the values were changed after the file was encrypted (added, "
            "removed, reordered, swapped or edited without sops or Konfig)",
            file=file.name,
            hint="restore the file from git, or re-create it from the plaintext",
        )


def _go_rfc3339(text: str, file: SopsFile) -> str:
    """``lastmodified`` as sops re-formats it for the MAC's additional data."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise SecretsError(
            f"`sops.lastmodified` {text!r} is not an RFC 3339 time", file=file.name
        ) from exc
    if moment.tzinfo is None:
        raise SecretsError(f"`sops.lastmodified` {text!r} has no time zone", file=file.name)
    return _format_rfc3339(moment)


def _format_rfc3339(moment: datetime) -> str:
    offset = moment.utcoffset() or timedelta(0)
    base = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if offset == timedelta(0):
        return base + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    return f"{base}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


# --- encrypting -----------------------------------------------------------------------


def encrypt(
    data: Mapping[str, Any],
    recipients: Sequence[str],
    *,
    name: str,
    rule: CryptRule = DEFAULT_RULE,
    previous: Decrypted | None = None,
    rotate: bool = False,
    now: datetime | None = None,
) -> str:
    """The text of a SOPS file holding ``data`` for ``recipients``.

    With ``previous`` (the decrypted file being edited) and not ``rotate``, the data key
    is kept, values that did not change keep their exact ciphertext, and the age stanzas
    of recipients that stay are kept, as sops does on edit. ``rotate`` draws a new data
    key (and new IVs) so recipients that were removed can no longer decrypt new versions.
    """
    if not recipients:
        raise SecretsError("no age recipient to encrypt for", file=name)
    if METADATA_KEY in data:
        raise SecretsError(f"the top-level key {METADATA_KEY!r} is reserved for sops", file=name)
    _check_keys(data, (), name)
    if not rule.metadata().keys() - {"mac_only_encrypted"}:
        # a file names its rule; with none, sops reads `_unencrypted` as the default
        rule = CryptRule(DEFAULT_UNENCRYPTED_SUFFIX, mac_only_encrypted=rule.mac_only_encrypted)
    keep = previous is not None and not rotate
    data_key = previous.data_key if keep and previous else secrets.token_bytes(DATA_KEY_BYTES)
    ivs = previous.ivs if keep and previous else {}
    aes = AESGCM(data_key)
    digest = hashlib.sha512()
    if rule.mac_only_encrypted:
        digest.update(_MAC_ONLY_ENCRYPTED_INIT)

    def one(path: Path_, value: Any) -> Any:
        kind, plain = _typed(value, name, path)
        encrypted = rule.encrypts(path)
        if encrypted or not rule.mac_only_encrypted:
            digest.update(plain)
        if not encrypted:
            return value
        if plain == b"" and kind in ("str", "bytes"):
            return ""  # sops leaves empty strings empty
        aad = _aad(path)
        iv = ivs.get((aad, kind, plain)) or secrets.token_bytes(IV_BYTES)
        return _enc(aes, iv, plain, aad, kind)

    tree = _map_leaves(dict(data), (), one)
    moment = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    lastmodified = _format_rfc3339(moment)
    mac = _enc(
        aes,
        secrets.token_bytes(IV_BYTES),
        digest.hexdigest().upper().encode(),
        lastmodified.encode(),
        "str",
    )
    old = {s.recipient: s for s in previous.file.age} if keep and previous else {}
    stanzas = []
    for recipient in dict.fromkeys(recipients):
        stanza = old.get(recipient)
        enc = stanza.enc if stanza else encrypt_to(data_key, [recipient]).decode()
        stanzas.append({"recipient": recipient, "enc": enc})
    meta: dict[str, Any] = {
        "age": stanzas,
        "lastmodified": lastmodified,
        "mac": mac,
        **rule.metadata(),
        "version": SOPS_FORMAT_VERSION,
    }
    return yamlcore.dump({**tree, METADATA_KEY: meta})


def _enc(aes: AESGCM, iv: bytes, plain: bytes, aad: bytes, kind: str) -> str:
    sealed = aes.encrypt(iv, plain, aad)
    data, tag = sealed[:-16], sealed[-16:]
    b64 = base64.b64encode
    return (
        f"ENC[AES256_GCM,data:{b64(data).decode()},iv:{b64(iv).decode()},"
        f"tag:{b64(tag).decode()},type:{kind}]"
    )


def _check_keys(node: Any, path: Path_, name: str) -> None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if not isinstance(key, str):
                raise SecretsError(
                    f"key {key!r} is not a string", file=name, key=key_path(path) or None
                )
            _check_keys(value, (*path, key), name)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _check_keys(value, (*path, index), name)
