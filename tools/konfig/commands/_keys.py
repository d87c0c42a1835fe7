"""The decryption key from the environment, read here and nowhere else.

``SOPS_AGE_KEY`` holds age secret keys as text and ``SOPS_AGE_KEY_FILE`` names a file
of them, as for the sops CLI; when both are set, both are used. The key text is passed
down as data (a :class:`~konfig.secrets.keys.Keyring`) and the variables are removed
from the environment; messages name the variable, never the key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING

from konfig.secrets.errors import SecretsError

if TYPE_CHECKING:
    from konfig.secrets.keys import Keyring

KEY_ENV = "SOPS_AGE_KEY"
KEY_FILE_ENV = "SOPS_AGE_KEY_FILE"


def take_keyring_from_env(environ: MutableMapping[str, str] | None = None) -> Keyring | None:
    """The keyring the environment gives (None when it gives no key), and both variables
    removed from the environment.

    Removing them keeps the key from code that runs later in this process and from
    every process it starts: KCL's ``file.read_env`` would otherwise hand it to a
    model under review, and compile workers would inherit it. Call this before
    compiling anything.
    """
    env = os.environ if environ is None else environ
    try:
        return _keyring(env)
    finally:
        env.pop(KEY_ENV, None)
        env.pop(KEY_FILE_ENV, None)


def drop_keyring_from_env(environ: MutableMapping[str, str] | None = None) -> None:
    """Both variables removed from the environment, unread: a command that decrypts
    nothing (``preview --offline``) never holds a key, and no process it starts does."""
    env = os.environ if environ is None else environ
    env.pop(KEY_ENV, None)
    env.pop(KEY_FILE_ENV, None)


def _keyring(env: Mapping[str, str]) -> Keyring | None:
    texts: list[str] = []
    sources: list[str] = []
    if env.get(KEY_ENV, "").strip():
        texts.append(env[KEY_ENV])
        sources.append(KEY_ENV)
    path = env.get(KEY_FILE_ENV, "").strip()
    if path:
        try:
            texts.append(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise SecretsError(
                f"cannot read the key file: {exc.strerror}", file=f"{KEY_FILE_ENV}={path}"
            ) from exc
        sources.append(f"{KEY_FILE_ENV}={path}")
    if not texts:
        return None
    from konfig.secrets.keys import Keyring  # age (pyrage): only when a key is given

    return Keyring.from_text("\n".join(texts), source=" and ".join(sources))
