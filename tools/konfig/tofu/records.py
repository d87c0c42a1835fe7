"""What the OpenTofu runtime keeps in the stack's cluster: the state and the intent record.

The state is OpenTofu's own (the ``kubernetes`` backend: a Secret and a Lease in
:data:`~konfig.tofu.config.STATE_NAMESPACE`, named after the stack's path); the intent
record (a ConfigMap beside it) lists what an apply is creating until OpenTofu finished,
so that the next plan imports what a killed apply created but did not record.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from konfig.engine.kube import Kube
from konfig.tofu.config import STATE_NAMESPACE, Backend
from konfig.tofu.state import decode_state


def state_suffix(stack_path: str) -> str:
    """The state Secret's suffix for a stack: its path as a DNS label (hashed when long)."""
    slug = re.sub(r"[^a-z0-9]+", "-", stack_path.lower()).strip("-")
    if len(slug) > 40:
        slug = f"{slug[:30].rstrip('-')}-{hashlib.sha256(stack_path.encode()).hexdigest()[:8]}"
    return slug or "stack"


def read_state(kube: Kube, backend: Backend, *, where: str) -> dict[str, Any] | None:
    """The stack's state, from the backend's Secret (None when there is none yet)."""
    if kube.get("v1", "Namespace", backend.namespace, None) is None:
        return None
    secret = kube.get("v1", "Secret", backend.secret_name, backend.namespace)
    return decode_state(secret, where=where)


def ensure_state_namespace(kube: Kube) -> None:
    if kube.get("v1", "Namespace", STATE_NAMESPACE, None) is None:
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": STATE_NAMESPACE,
                    "labels": {"app.kubernetes.io/managed-by": "konfig"},
                },
            },
            dry_run=False,
        )


INTENT_PREFIX = "konfig-tofu-intent-"


def read_intent(kube: Kube, backend: Backend) -> list[str]:
    """The Terraform ids an apply was creating when it last stopped without finishing
    (konfig killed while OpenTofu applied): objects that may exist unrecorded."""
    found = kube.get("v1", "ConfigMap", INTENT_PREFIX + backend.suffix, backend.namespace)
    raw = ((found or {}).get("data") or {}).get("creating") or "[]"
    try:
        ids = json.loads(raw)
    except ValueError:
        return []
    return [str(i) for i in ids] if isinstance(ids, list) else []


def write_intent(kube: Kube, backend: Backend, ids: list[str]) -> None:
    """Record (before ``tofu apply``) what it is about to create, and clear it after: the
    next plan imports what the state lacks of it (OpenTofu's own state is written only
    at the end, so a killed apply leaves created objects unrecorded)."""
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": INTENT_PREFIX + backend.suffix,
                "namespace": backend.namespace,
                "labels": {"app.kubernetes.io/managed-by": "konfig"},
            },
            "data": {"creating": json.dumps(sorted(ids))},
        },
        dry_run=False,
    )


def state_serial(state: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """What OpenTofu tells a state's versions by: its lineage and serial (None: no state)."""
    if not state:
        return None
    return (str(state.get("lineage") or ""), int(state.get("serial") or 0))
