"""The state the ``kubernetes`` backend keeps: a Secret ``tfstate-default-<suffix>``.

Its ``data.tfstate`` is the state file (format version 4), gzip-compressed when the
Secret is annotated ``encoding: gzip`` (always, with OpenTofu 1.12), base64 as every
Secret value. Konfig reads it to learn which resources the state records and their
attribute values (for references, after apply) without starting OpenTofu and its
provider. The values are kept in memory only. Pure functions.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
import zlib
from collections.abc import Mapping
from typing import Any

from konfig.errors import KonfigError


class StateError(KonfigError):
    """The state Secret cannot be read."""


def decode_state(secret: Mapping[str, Any] | None, *, where: str) -> dict[str, Any] | None:
    """The state file a backend Secret holds (None when there is no Secret or no state)."""
    if not secret:
        return None
    raw = (secret.get("data") or {}).get("tfstate")
    if not raw:
        return None
    try:
        data = base64.b64decode(str(raw), validate=True)
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        if annotations.get("encoding") == "gzip" or data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        state = json.loads(data)
    except (binascii.Error, OSError, EOFError, zlib.error, ValueError) as exc:
        raise StateError(f"{where}: the Terraform state cannot be read: {exc}") from None
    if not isinstance(state, dict):
        raise StateError(f"{where}: the Terraform state is not a JSON object")
    if "encrypted_data" in state:
        raise StateError(
            f"{where}: the Terraform state is encrypted (OpenTofu state encryption); "
            "Konfig keeps it unencrypted in its own namespace (docs/terraform.md)"
        )
    return state


def state_addresses(state: Mapping[str, Any] | None) -> set[str]:
    """The addresses (``type.name``) of the managed resources the state records."""
    out: set[str] = set()
    for res in (state or {}).get("resources") or []:
        if isinstance(res, Mapping) and res.get("mode") == "managed" and not res.get("module"):
            out.add(f"{res.get('type')}.{res.get('name')}")
    return out


def state_ids(state: Mapping[str, Any] | None) -> dict[str, str]:
    """Address (``type.name``) -> resource id (``<namespace>/<provider>:<type>:<name>``)
    of each managed resource the state records (its provider names the namespace)."""
    out: dict[str, str] = {}
    for res in (state or {}).get("resources") or []:
        if not isinstance(res, Mapping) or res.get("mode") != "managed" or res.get("module"):
            continue
        match = re.match(r'^provider\["([^"]+)"\]', str(res.get("provider", "")))
        if match:
            ns_provider = "/".join(match.group(1).split("/")[-2:])
            kind, name = res.get("type"), res.get("name")
            out[f"{kind}.{name}"] = f"{ns_provider}:{kind}:{name}"
    return out


def state_configs(state: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
    """Provider configuration (``provider["<source>"].<alias>``'s alias, else the
    provider's local name) -> the ids of the state's managed resources that use it."""
    by_address = state_ids(state)
    out: dict[str, set[str]] = {}
    for res in (state or {}).get("resources") or []:
        if not isinstance(res, Mapping) or res.get("mode") != "managed" or res.get("module"):
            continue
        match = re.match(
            r'^provider\["([^"]+)"\](?:\.([A-Za-z0-9_-]+))?$', str(res.get("provider"))
        )
        rid = by_address.get(f"{res.get('type')}.{res.get('name')}")
        if match and rid:
            config = match.group(2) or match.group(1).rsplit("/", 1)[-1]
            out.setdefault(config, set()).add(rid)
    return {name: tuple(sorted(found)) for name, found in sorted(out.items())}
