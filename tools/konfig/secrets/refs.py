"""References to encrypted values, and resolving them in memory.

A :class:`SecretRef` names one value in a SOPS file of the repository: the file
(repository-relative), the value's place in it (mapping keys and list indices) and,
once compiled, the digest of its ciphertext::

    SecretRef("appops/webshop/prod/secrets.enc.yaml", ("storefront-tls", "tls.key"),
              "sha256:4f1c...")

The pipeline uses them in two places:

- **compile** (no key): :func:`bind` turns each Secret's references, as the model wrote
  them (a file relative to the stack), into repository paths with the digest of the
  encrypted value. The Spec, the goldens and the compile cache hold only these: a
  golden changes when a secret changes, and never shows it;
- **preview / apply** (with the key): :func:`resolve_spec` fills each referenced key of
  a Secret's ``data`` with the decrypted value, in memory, just before the engine sends
  it; without a key :func:`unresolved` says which Secrets could not be compared.

For other features (e.g. a database password an OpenTofu stack reads):
``Resolver(root, keyring).value(ref)`` returns one decrypted value (str, int, float,
bool or bytes) and ``.bytes(ref)`` the bytes a Kubernetes Secret would hold; each file
is decrypted at most once per Resolver, its MAC checked, and a ref whose digest no
longer matches the file is refused (it was compiled from another version). To create
or change a value, see :func:`konfig.secrets.edit.set_values`.
Errors are :class:`~konfig.secrets.errors.SecretsError` naming the file and key.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from konfig.secrets.errors import SecretsError, key_path
from konfig.spec import Spec

if TYPE_CHECKING:
    from konfig.secrets.keys import Keyring
    from konfig.secrets.sopsfile import Decrypted, SopsFile

EXTENSION = "secrets"  # Resource.extensions key holding a Secret's references


@dataclass(frozen=True)
class SecretRef:
    """One value in a SOPS file: ``file`` is repository-relative (POSIX)."""

    file: str
    path: tuple[str | int, ...]
    digest: str = ""  # of the ciphertext, as compiled; checked on resolve when set

    def __str__(self) -> str:
        return f"{self.file} {key_path(self.path)}"


@dataclass(frozen=True)
class KeyRef:
    """A Secret's data key and where its value comes from."""

    key: str
    ref: SecretRef

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "file": self.ref.file, "path": list(self.ref.path)}
        if self.ref.digest:
            out["digest"] = self.ref.digest
        return out


class Resolver:
    """Reads the repository's SOPS files; decrypts each at most once, in memory.

    Without a keyring it still reads structure and digests (compile, check, preview
    without a key); :meth:`value` then raises a SecretsError saying a key is needed.
    """

    def __init__(self, root: Path, keyring: Keyring | None = None) -> None:
        self.root = root
        self.keyring = keyring
        self._files: dict[str, SopsFile] = {}
        self._decrypted: dict[str, Decrypted] = {}

    @property
    def can_decrypt(self) -> bool:
        return self.keyring is not None

    def holds_key_for(self, rel: str) -> bool:
        """Whether the keyring holds a key of one of the file's recipients. A preview
        holds the key of non-production recipients only (docs/secrets.md): a production
        file is then not decrypted, and its Secrets are reported not compared."""
        if self.keyring is None:
            return False
        return bool(set(self.file(rel).recipients) & set(self.keyring.recipients))

    def file(self, rel: str) -> SopsFile:
        rel = _checked_rel(rel)
        if rel not in self._files:
            outside = resolves_outside(self.root, rel, posixpath.dirname(rel))
            if outside is not None:
                raise SecretsError(
                    f"resolves to {outside} (a link): encrypted files are read only where "
                    "they are, never through a link; replace the link by the file itself",
                    file=rel,
                )
            from konfig.secrets import sopsfile  # (and cryptography): only when a stack has refs

            self._files[rel] = sopsfile.read(self.root / rel, name=rel)
        return self._files[rel]

    def decrypted(self, rel: str) -> Decrypted:
        rel = _checked_rel(rel)
        if self.keyring is None:
            raise SecretsError(
                "cannot decrypt without a key",
                file=rel,
                hint="set SOPS_AGE_KEY_FILE (a file of age keys) or SOPS_AGE_KEY (the key "
                "text) to a key of one of the file's recipients",
            )
        if rel not in self._decrypted:
            from konfig.secrets import sopsfile

            self._decrypted[rel] = sopsfile.decrypt(self.file(rel), self.keyring)
        return self._decrypted[rel]

    def digest(self, ref: SecretRef) -> str:
        """The current digest of the referenced ciphertext; SecretsError when it is not there."""
        file = self.file(ref.file)
        try:
            raw = file.get(ref.path)
        except KeyError:
            raise SecretsError(
                "unknown reference: the file has no such key",
                file=ref.file,
                key=key_path(ref.path),
                hint=f"add it: konfig secrets edit {ref.file}",
            ) from None
        if isinstance(raw, dict | list):
            raise SecretsError(
                f"the reference names a {'mapping' if isinstance(raw, dict) else 'list'}, "
                "not a value",
                file=ref.file,
                key=key_path(ref.path),
                line=file.lines.get(ref.path),
            )
        if not file.rule.encrypts(ref.path):
            raise SecretsError(
                "the referenced value is not encrypted (its key matches the file's "
                "unencrypted rule)",
                file=ref.file,
                key=key_path(ref.path),
                line=file.lines.get(ref.path),
            )
        return file.value_digest(ref.path)

    def value(self, ref: SecretRef) -> Any:
        """The decrypted value (str, int, float, bool or bytes), in memory only."""
        current = self.digest(ref)
        if ref.digest and ref.digest != current:
            raise SecretsError(
                "the value changed since this reference was compiled (its digest differs)",
                file=ref.file,
                key=key_path(ref.path),
                hint="compile again (preview and apply use what compile saw)",
            )
        return self.decrypted(ref.file).get(ref.path)

    def bytes(self, ref: SecretRef) -> bytes:
        """The value as the bytes a Kubernetes Secret holds (text as UTF-8)."""
        return as_bytes(self.value(ref))


def as_bytes(value: Any) -> bytes:
    """A decrypted value as bytes: text as UTF-8, numbers and booleans as sops prints them."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, float):
        from konfig.secrets.yamlcore import go_float

        return go_float(value).encode()
    return str(value).encode()


LINK_RULE = "secrets/link"


def resolves_outside(root: Path, rel: str, folder: str) -> str | None:
    """Where ``rel`` really is (symbolic links followed) when that is not inside
    ``folder`` as spelled (both repository-relative), else None. A missing file is left
    to the reader, which reports it."""
    path = root / rel
    if not path.exists():
        return None
    real_root = root.resolve()
    real = path.resolve()
    if real.is_relative_to(real_root / folder):
        return None
    try:
        return real.relative_to(real_root).as_posix()
    except ValueError:
        return str(real)


def _checked_rel(rel: str) -> str:
    norm = posixpath.normpath(rel)
    if rel.startswith("/") or norm == ".." or norm.startswith("../"):
        raise SecretsError("an encrypted file must be inside the repository", file=rel)
    return norm


# --- references in a Spec -------------------------------------------------------------


def key_refs(resource_id: str, extensions: Mapping[str, Any]) -> tuple[KeyRef, ...]:
    """The references of one resource (``extensions.secrets``), checked."""
    raw = extensions.get(EXTENSION)
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SecretsError(f"{resource_id}: `extensions.{EXTENSION}` must be a list")
    out: list[KeyRef] = []
    for index, entry in enumerate(raw):
        where = f"{resource_id}: `extensions.{EXTENSION}[{index}]`"
        if not isinstance(entry, Mapping):
            raise SecretsError(f"{where} must be a mapping")
        key, file, path = entry.get("key"), entry.get("file"), entry.get("path")
        if not isinstance(key, str) or not key:
            raise SecretsError(f"{where} needs `key`, the Secret's data key")
        if not isinstance(file, str) or not file:
            raise SecretsError(f"{where} needs `file`, the encrypted file")
        if (
            not isinstance(path, list)
            or not path
            or not all(isinstance(p, str | int) and not isinstance(p, bool) for p in path)
        ):
            raise SecretsError(f"{where} needs `path`, the keys of the value in the file")
        digest = entry.get("digest") or ""
        out.append(KeyRef(key, SecretRef(file, tuple(path), str(digest))))
    keys = [r.key for r in out]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise SecretsError(f"{resource_id}: the key(s) {duplicates} are referenced twice")
    return tuple(out)


def bind(
    resource_id: str,
    attributes: Mapping[str, Any],
    extensions: Mapping[str, Any],
    *,
    stack_dir: str,
    resolver: Resolver,
) -> dict[str, Any]:
    """Compile: ``extensions`` with the references' files made repository-relative (from
    ``stack_dir``) and the digest of each encrypted value added. No key needed.

    A referenced key must not also be set in the Secret's plain ``data``/``stringData``.
    """
    refs = key_refs(resource_id, extensions)
    if not refs:
        return dict(extensions)
    if not _is_secret(attributes):
        raise SecretsError(f"{resource_id}: only a v1 Secret can take values from encrypted files")
    plain = set(attributes.get("data") or {}) | set(attributes.get("stringData") or {})
    bound: list[dict[str, Any]] = []
    for item in refs:
        if item.key in plain:
            raise SecretsError(
                f"{resource_id}: key {item.key!r} is set in plain text and from an encrypted "
                "file; keep only the encrypted one"
            )
        rel = _checked_rel(posixpath.join(stack_dir, item.ref.file))
        if not rel.startswith(stack_dir.rstrip("/") + "/"):
            # the compile cache keys a stack on the files in its folder
            raise SecretsError(
                f"{resource_id}: fromFile {item.ref.file!r} is outside the stack folder "
                f"{stack_dir}; keep the stack's encrypted files in it"
            )
        ref = SecretRef(rel, item.ref.path)
        outside = resolves_outside(resolver.root, rel, stack_dir)
        if outside is not None:
            raise SecretsError(
                f"{resource_id}: fromFile {item.ref.file!r} resolves to {outside} (a link), "
                f"outside the stack folder {stack_dir}: a stack reads only its own encrypted "
                "files, and a link would hand it another stack's values (another "
                "environment's); replace the link by a file of the stack's own, encrypted "
                f"for its recipients (konfig secrets encrypt {rel})",
                file=rel,
                rule=LINK_RULE,
            )
        try:
            digest = resolver.digest(ref)
        except SecretsError as exc:
            raise SecretsError(f"{resource_id}: {exc.message}", hint=exc.hint) from exc
        bound.append(KeyRef(item.key, replace(ref, digest=digest)).to_dict())
    return {**extensions, EXTENSION: bound}


def bind_spec(spec: Spec, *, root: Path, stack_dir: str) -> Spec:
    """Compile: every resource's references bound (see :func:`bind`); no key needed."""
    resolver = Resolver(root)
    out = []
    for resource in spec.resources:
        if key_refs(resource.id, resource.extensions):
            extensions = bind(
                resource.id,
                resource.attributes,
                resource.extensions,
                stack_dir=stack_dir,
                resolver=resolver,
            )
            resource = replace(resource, extensions=extensions)
        out.append(resource)
    return Spec(tuple(out))


@dataclass(frozen=True)
class Resolved:
    """A Secret's attributes with its referenced values filled in (in memory)."""

    attributes: dict[str, Any] = field(repr=False)
    keys: tuple[str, ...]  # the data keys that came from encrypted files


def resolve_attributes(
    resource_id: str,
    attributes: Mapping[str, Any],
    extensions: Mapping[str, Any],
    resolver: Resolver,
) -> Resolved:
    """Preview / apply: the Secret with ``data[key]`` = base64 of each decrypted value."""
    refs = key_refs(resource_id, extensions)
    if not refs:
        return Resolved(dict(attributes), ())
    data = dict(attributes.get("data") or {})
    for item in refs:
        data[item.key] = base64.b64encode(resolver.bytes(item.ref)).decode()
    return Resolved({**attributes, "data": data}, tuple(r.key for r in refs))


def resolve_spec(spec: Spec, resolver: Resolver) -> Spec:
    """The Spec with every referenced Secret value filled in (in memory; never write it)."""
    out = []
    for resource in spec.resources:
        if key_refs(resource.id, resource.extensions):
            resolved = resolve_attributes(
                resource.id, resource.attributes, resource.extensions, resolver
            )
            resource = replace(resource, attributes=resolved.attributes)
        out.append(resource)
    return Spec(tuple(out))


def unresolved(spec: Spec) -> list[str]:
    """Ids of the resources whose values come from encrypted files."""
    return [r.id for r in spec.resources if key_refs(r.id, r.extensions)]


# What secret_data yields and preview and apply carry (in memory, never written):
# resource id -> data key -> base64 value.
SecretData = Mapping[str, Mapping[str, str]]


def secret_data(spec: Spec, resolver: Resolver) -> dict[str, dict[str, str]]:
    """Preview / apply: resource id -> {data key: base64 value} for every referenced key,
    decrypted in memory (each file once). Raises SecretsError (file and key named) on the
    first reference that cannot be resolved: call it before anything is written."""
    out: dict[str, dict[str, str]] = {}
    for resource in spec.resources:
        refs = key_refs(resource.id, resource.extensions)
        if refs:
            out[resource.id] = {
                item.key: base64.b64encode(resolver.bytes(item.ref)).decode() for item in refs
            }
    return out


@dataclass(frozen=True)
class KeyStatus:
    """What a preview may say about one key of a Secret from an encrypted file."""

    key: str
    status: str  # "changed", "unchanged", "new", "not compared"

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "status": self.status}


NOT_COMPARED = "not compared"


def key_statuses(
    keys: Iterable[str],
    desired: Mapping[str, Any] | None,
    live: Mapping[str, Any] | None,
    *,
    compared: bool,
) -> tuple[KeyStatus, ...]:
    """Per referenced key: the planned value against the live one (both base64 in memory;
    only the verdict leaves this function)."""
    want = (desired or {}).get("data") or {}
    have = (live or {}).get("data") or {}
    out = []
    for key in keys:
        if not compared:
            status = NOT_COMPARED
        elif key not in have:
            status = "new"
        else:
            status = "unchanged" if _b64(want.get(key)) == _b64(have.get(key)) else "changed"
        out.append(KeyStatus(key, status))
    return tuple(out)


def _b64(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        return None


def sealed_files(root: Path, spec: Spec) -> tuple[tuple[str, str], ...]:
    """(file, sha256 of its bytes) of every encrypted file ``spec``'s Secrets read: how a
    change digest counts their values without decrypting them (a file that cannot be
    read counts as ``missing``)."""
    out = []
    for rel in referenced_files(r.extensions for r in spec.resources):
        try:
            digest = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        except OSError:
            digest = "0" * 64
        out.append((rel, digest))
    return tuple(sorted(out))


def referenced_files(extensions_of: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every file the given resources' references read, once each, in order."""
    seen: dict[str, None] = {}
    for extensions in extensions_of:
        for item in key_refs("resource", extensions):
            seen.setdefault(item.ref.file, None)
    return list(seen)


def _is_secret(attributes: Mapping[str, Any]) -> bool:
    return attributes.get("apiVersion") == "v1" and attributes.get("kind") == "Secret"


def plaintext_keys(attributes: Mapping[str, Any]) -> list[str]:
    """The keys a v1 Secret carries in plain text (``data``/``stringData`` in the Spec)."""
    if not _is_secret(attributes):
        return []
    return sorted(set(attributes.get("data") or {}) | set(attributes.get("stringData") or {}))
