"""Creating and changing encrypted files: encrypt, edit, set, rotate.

Each operation takes the repository root, a file's repository-relative path, the
rules (:mod:`konfig.secrets.rules`) and, when it must read existing values, a
keyring; it returns the new file text and leaves writing to the caller
(:func:`write_encrypted`). Values exist only in memory and, for ``edit``, in a
private 0600 temporary file that :func:`private_plaintext` overwrites and removes.

- :func:`encrypt_text` — a plaintext YAML mapping, encrypted for the file's rule;
- :func:`reencrypt_edited` — the edited plaintext, re-encrypted keeping the data key
  and the ciphertext of unchanged values (a one-key edit changes one line);
- :func:`set_values` — set (or add) values without an editor, e.g. a password a
  pipeline generates at first apply: ``set_values(root, rel, {("db", "password"):
  pw}, rules=rules, keyring=keyring)`` (the keyring is needed only when the file
  exists);
- :func:`rotate` — a new data key for the recipients the rules name now.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from konfig.errors import UsageError
from konfig.repo.files import WriteScope, atomic_write_text
from konfig.repo.layout import find_root
from konfig.secrets import plainyaml, sopsfile
from konfig.secrets.errors import SecretsError, key_path
from konfig.secrets.keys import Keyring
from konfig.secrets.rules import CreationRule, Rules
from konfig.secrets.sopsfile import Decrypted


def encrypt_text(plaintext: str, rel: str, rules: Rules) -> str:
    """Encrypt a plaintext YAML mapping for the recipients the rules give ``rel``."""
    data = plainyaml.load_plaintext(plaintext, name=rel)
    rule = rules.for_file(rel)
    return sopsfile.encrypt(data, rule.recipients, name=rel, rule=rule.crypt)


def refuse_link(root: Path, rel: str) -> None:
    """Never decrypt or re-encrypt a file through a link that leaves its folder: the rules
    of ``rel`` would re-encrypt another folder's (another environment's) values."""
    from konfig.secrets.refs import resolves_outside

    outside = resolves_outside(root, rel, posixpath.dirname(rel))
    if outside is not None:
        raise SecretsError(
            f"resolves to {outside} (a link): edit or rotate {outside} itself, and replace "
            "the link by a file of this folder's own",
            file=rel,
        )


def decrypt_for_edit(root: Path, rel: str, keyring: Keyring | None) -> Decrypted | None:
    """The current file decrypted, or None when it does not exist yet (a new file)."""
    refuse_link(root, rel)
    if not (root / rel).exists():
        return None
    if keyring is None:
        raise SecretsError(
            "cannot edit without a key",
            file=rel,
            hint="set SOPS_AGE_KEY_FILE or SOPS_AGE_KEY to a key of one of its recipients",
        )
    return sopsfile.decrypt(sopsfile.read(root / rel, name=rel), keyring)


def reencrypt_edited(edited: str, rel: str, rules: Rules, previous: Decrypted | None) -> str | None:
    """The new file text for the edited plaintext; None when nothing changed.

    Recipients and encryption rule come from the rules (a changed rule file takes effect
    on the next edit); the data key is kept unless the recipients changed.
    """
    data = plainyaml.load_plaintext(edited, name=f"{rel} (edited)")
    rule = rules.for_file(rel)
    if previous is not None and data == previous.data and _same_keys(previous, rule):
        return None
    return _encrypt(data, rel, rule, previous)


def set_values(
    root: Path,
    rel: str,
    values: Mapping[tuple[str, ...], Any],
    *,
    rules: Rules,
    keyring: Keyring | None,
) -> str:
    """The file text with each ``path -> value`` set (created, with its parents, when
    missing). A new file needs no key; an existing one is decrypted first."""
    previous = decrypt_for_edit(root, rel, keyring)
    data: dict[str, Any] = _copy(previous.data) if previous else {}
    for path, value in values.items():
        if not path:
            raise SecretsError("an empty key path", file=rel)
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SecretsError(
                    "a parent of the key is a value, not a mapping",
                    file=rel,
                    key=key_path(path),
                )
            node = child
        node[path[-1]] = value
    return _encrypt(data, rel, rules.for_file(rel), previous)


def rotate(root: Path, rel: str, *, rules: Rules, keyring: Keyring) -> str:
    """A new data key (and IVs) for the recipients the rules name for ``rel`` now."""
    refuse_link(root, rel)
    previous = sopsfile.decrypt(sopsfile.read(root / rel, name=rel), keyring)
    rule = rules.for_file(rel)
    return sopsfile.encrypt(
        previous.data,
        rule.recipients,
        name=rel,
        rule=rule.crypt,
        previous=previous,
        rotate=True,
    )


def _encrypt(data: dict[str, Any], rel: str, rule: CreationRule, previous: Decrypted | None) -> str:
    # recipients removed by the rules must not keep the data key: draw a new one
    rotate = previous is not None and not set(previous.file.recipients) <= set(rule.recipients)
    rotate = rotate or (previous is not None and previous.file.rule != rule.crypt)
    return sopsfile.encrypt(
        data, rule.recipients, name=rel, rule=rule.crypt, previous=previous, rotate=rotate
    )


def _same_keys(previous: Decrypted, rule: CreationRule) -> bool:
    return (
        set(previous.file.recipients) == set(rule.recipients) and previous.file.rule == rule.crypt
    )


def _copy(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node


def write_encrypted(path: Path, text: str, *, scope: WriteScope | None = None) -> None:
    """Write an encrypted file atomically (never half-written), keeping its mode, inside
    ``scope`` (default: the repository holding ``path``; outside any repository, its
    folder)."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    atomic_write_text(path, text, scope=scope or _repository_of(path), mode=mode)


def _repository_of(path: Path) -> WriteScope:
    try:
        return WriteScope.repository(find_root(path.parent))
    except UsageError:
        return WriteScope.named(path.parent, "the folder", folder=True)


def _tmp_base() -> str | None:
    # memory-backed when the machine has one, so the plaintext never reaches a disk
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


@contextlib.contextmanager
def private_plaintext(text: str, *, suffix: str = ".yaml") -> Iterator[Path]:
    """A 0600 file in a 0700 temporary folder holding ``text``; overwritten with zeros
    and removed on exit, whatever happens."""
    folder = Path(tempfile.mkdtemp(prefix="konfig-secret-", dir=_tmp_base()))
    path = folder / f"plaintext{suffix}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        yield path
    finally:
        _wipe(folder)


def _wipe(folder: Path) -> None:
    for item in folder.iterdir():  # editors may leave swap or backup files beside it
        if item.is_file() and not item.is_symlink():
            with contextlib.suppress(OSError):
                size = item.stat().st_size
                with item.open("r+b") as handle:
                    handle.write(b"\0" * size)
                    handle.flush()
                    os.fsync(handle.fileno())
        with contextlib.suppress(OSError):
            if item.is_dir() and not item.is_symlink():
                _wipe(item)
            else:
                item.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
