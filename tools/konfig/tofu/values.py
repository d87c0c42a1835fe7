"""Generated Secret values and the write-only values OpenTofu takes from Secrets.

A generated key (the database password) is the live Secret's value, else a new random
one, held in memory. It reaches OpenTofu only as an ephemeral variable of a write-only
argument (never in its plan or state) — as PostgreSQL's SCRAM-SHA-256 verifier when the
argument asks for one — and Kubernetes only in the Secret's ``data``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping

from konfig.engine.kube import Kube
from konfig.secrets.generated import generated_keys
from konfig.secrets.refs import SecretData, key_refs
from konfig.spec import Spec
from konfig.tofu.model import TerraformSpecError, terraform_resources
from konfig.tofu.plan_apply import WriteOnlyValue


def generated_data(kube: Kube, spec: Spec) -> dict[str, dict[str, str]]:
    """Resource id -> {key: base64 value} of every generated Secret key: the live
    Secret's value when it has one (a password is generated once), else a new one."""
    out: dict[str, dict[str, str]] = {}
    for res in spec.kubernetes():
        keys = generated_keys(res)
        if not keys:
            continue
        live = kube.get("v1", "Secret", res.name, res.namespace) or {}
        data = live.get("data") or {}
        out[res.id] = {
            g.key: str(data.get(g.key) or "")
            or base64.b64encode(secrets.token_urlsafe(g.length)[: g.length].encode()).decode()
            for g in keys
        }
    return out


def _version(value: str) -> str:
    """A version of a write-only value: changes exactly when the value changes."""
    return str(int(hashlib.sha256(value.encode()).hexdigest()[:12], 16))


def scram_verifier(password: str, *, iterations: int = 4096) -> str:
    """PostgreSQL's SCRAM-SHA-256 verifier of ``password`` (RFC 5802/7677, as
    ``pg_authid.rolpassword`` stores it): PostgreSQL takes it as is, so the clear password
    never reaches the server, its log (a failed statement is logged with its text) or
    ``pg_stat_activity``; the role still logs in with the clear password."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def write_only_values(
    spec: Spec, data: Mapping[str, Mapping[str, str]]
) -> dict[tuple[str, str], WriteOnlyValue]:
    """(Secret id, key) -> the value and version each write-only argument takes; a key
    from an encrypted file is left out when ``data`` lacks it (a preview without the
    decryption key: OpenTofu then plans without the value and ignores its version)."""
    out: dict[tuple[str, str], WriteOnlyValue] = {}
    resources = spec.by_id()
    for item in terraform_resources(spec):
        for w in item.write_only:
            encoded = (data.get(w.secret) or {}).get(w.key)
            holder = resources.get(w.secret)
            from_file = holder is not None and w.key in {
                k.key for k in key_refs(holder.id, holder.extensions)
            }
            if encoded is None and from_file:
                continue
            if encoded is None:
                raise TerraformSpecError(
                    f"{item.id}: {w.attribute} takes its value from {w.secret} key {w.key}, "
                    "which is neither generated nor from an encrypted file in this stack"
                )
            value = base64.b64decode(encoded).decode()
            given = scram_verifier(value) if w.format == "scram-sha-256" else value
            out[(w.secret, w.key)] = WriteOnlyValue(given, _version(value))
    return out


def merged_data(*parts: SecretData | None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for part in parts:
        for rid, keys in (part or {}).items():
            out.setdefault(rid, {}).update(keys)
    return out
