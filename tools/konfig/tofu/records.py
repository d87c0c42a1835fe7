"""What the OpenTofu runtime keeps in the stack's cluster: the state and the intent record.

The state is OpenTofu's own (the ``kubernetes`` backend: a Secret and a Lease in
:data:`~konfig.tofu.config.STATE_NAMESPACE`, named after the stack's path, one name a
path: :func:`state_suffix`, :func:`state_backend`); the intent
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
from konfig.errors import KonfigError
from konfig.tofu.config import STATE_NAMESPACE, Backend
from konfig.tofu.state import decode_state

# --- the state's name --------------------------------------------------------------
#
# The state Secret is ``tfstate-default-<suffix>``; the suffix is also a label value
# (``tfstateSecretSuffix``, at most 63 characters). :func:`state_suffix` is injective:
#
# - ``appops-<project>-<stack>`` for a path ``appops/<project>/<stack>`` whose project
#   is lowercase letters and digits only and whose stack adds single '-' between them
#   (at most 40 characters): read back, the project ends at the first '-'. This is the
#   name konfig always gave such stacks: nothing moves for them;
# - otherwise ``konfig-<16 hex digits of SHA-256 of the exact path>-<readable>``, which
#   never starts like the first form: two paths share it only by a SHA-256 collision.
#
# Before, every path was lowercased with each run of other characters turned into one
# '-' (:func:`legacy_state_suffix`): ``appops/p-a/db`` and ``appops/p/a-db`` shared
# ``appops-p-a-db``, and one stack's preview listed the other's database role as its
# own. A state under such a former name is moved to the stack's name by its next apply
# when the cluster shows whose it is (:func:`state_backend`), else refused, saying why.

_PLAIN_PROJECT = re.compile(r"[a-z0-9]+")
_PLAIN_STACK = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_PLAIN_MAX = 40
HASHED_PREFIX = "konfig-"
DIGEST_CHARS = 16
SUFFIX_MAX = 63  # a label value (tfstateSecretSuffix)


def legacy_state_suffix(stack_path: str) -> str:
    """The suffix konfig gave a stack's state before names were injective."""
    slug = re.sub(r"[^a-z0-9]+", "-", stack_path.lower()).strip("-")
    if len(slug) > 40:
        slug = f"{slug[:30].rstrip('-')}-{hashlib.sha256(stack_path.encode()).hexdigest()[:8]}"
    return slug or "stack"


def state_suffix(stack_path: str) -> str:
    """The state Secret's suffix for a stack (injective: see the notes above)."""
    parts = stack_path.split("/")
    if (
        len(parts) == 3
        and parts[0] == "appops"
        and _PLAIN_PROJECT.fullmatch(parts[1])
        and _PLAIN_STACK.fullmatch(parts[2])
        and len(stack_path) <= _PLAIN_MAX
    ):
        return "-".join(parts)
    digest = hashlib.sha256(stack_path.encode()).hexdigest()[:DIGEST_CHARS]
    readable = re.sub(r"[^a-z0-9]+", "-", stack_path.lower()).strip("-").removeprefix("appops-")
    return f"{HASHED_PREFIX}{digest}-{readable}"[:SUFFIX_MAX].rstrip("-")


class StateNameError(KonfigError):
    """A state under a former name whose stack konfig cannot tell: nothing is read."""


def _secret(kube: Kube, backend: Backend) -> dict[str, Any] | None:
    return kube.get("v1", "Secret", backend.secret_name, backend.namespace)


def _applied_stacks(kube: Kube) -> list[str]:
    """The stack paths the cluster's inventories record (stacks applied here)."""
    from konfig.engine.inventory_store import list_inventories

    return sorted({i.stack_path for i in list_inventories(kube)})


def _claimants(kube: Kube, suffix: str, applied: list[str]) -> list[str]:
    """The applied stacks that may own the state under ``suffix``, a name konfig gave
    before: those whose former name it is and that have no state under a name of their
    own now (a stack whose name did not change always may)."""
    found: list[str] = []
    for path in applied:
        if legacy_state_suffix(path) != suffix:
            continue
        own = state_suffix(path)
        if own == suffix or _secret(kube, Backend(suffix=own)) is None:
            found.append(path)
    return found


STACK_ANNOTATION = "konfig.io/stack"  # on the state Secret: the stack path it belongs to


def _recorded(secret: Mapping[str, Any]) -> str | None:
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(STACK_ANNOTATION)
    return str(value) if value else None


def state_backend(kube: Kube, stack_path: str, *, move: bool = False) -> Backend:
    """Where the stack's state is (the ``kubernetes`` backend of its suffix).

    The state Secret records its stack (annotation ``konfig.io/stack``, set by apply):
    one that records this stack is read at once, one that records another is refused.
    One from before that record, under a name that konfig always gave this stack
    alone, is this stack's (and apply records it). For one under a name several paths
    had before names were injective (:func:`legacy_state_suffix`), the cluster's
    inventories tell: it is this stack's when no other applied stack had that name
    and has no state under a name of its own now. A read (preview, status) then reads
    it where it is; ``move`` (apply and destroy, under the stack's Lease) records it
    and, when it is under the former name, moves it (with its intent record) to the
    stack's name first. Anything else is refused, never read as this stack's:
    :class:`StateNameError` names the other stacks and what to do."""
    new = Backend(suffix=state_suffix(stack_path))
    old = Backend(suffix=legacy_state_suffix(stack_path))
    if kube.get("v1", "Namespace", new.namespace, None) is None:
        return new  # no state anywhere yet
    found = _secret(kube, new)
    if found is not None:
        owner = _recorded(found)
        if owner == stack_path:
            return new
        if owner is not None:
            raise StateNameError(
                f"{stack_path}: the OpenTofu state {new.namespace}/{new.secret_name} records "
                f"that it is the state of {owner}: nothing of it was read for {stack_path}",
                hint="it was copied or annotated by hand: put it back where it belongs "
                f"(tfstate-default-{state_suffix(owner)}) or correct its annotation "
                f"{STACK_ANNOTATION}",
            )
        if old.suffix == new.suffix:  # a name konfig gave other paths too, before
            applied = _applied_stacks(kube)
            others = [p for p in _claimants(kube, new.suffix, applied) if p != stack_path]
            if others:
                raise _unclear(stack_path, new, [stack_path, *others], applied)
        if move:
            _record(kube, new, stack_path)
        return new
    if old.suffix == new.suffix:
        return new
    found = _secret(kube, old)
    if found is None or _recorded(found) not in (None, stack_path):
        return new  # none, or another stack's: never this one's
    applied = _applied_stacks(kube)
    claimants = _claimants(kube, old.suffix, applied)
    if _recorded(found) != stack_path:
        if stack_path not in claimants:
            return new  # another stack's, or nobody's known: never this one's
        if claimants != [stack_path]:
            raise _unclear(stack_path, old, claimants, applied)
    if not move:
        return old
    _move_state(kube, old, new, stack_path)
    return new


def _record(kube: Kube, backend: Backend, stack_path: str) -> None:
    """Annotate the state Secret with its stack (a field manager of its own: OpenTofu's
    updates keep it)."""
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": backend.secret_name,
                "namespace": backend.namespace,
                "annotations": {STACK_ANNOTATION: stack_path},
            },
        },
        dry_run=False,
        field_manager="konfig-state",
    )


def _unclear(
    stack_path: str, where: Backend, claimants: list[str], applied: list[str]
) -> StateNameError:
    others = [p for p in claimants if p != stack_path]
    name = f"{where.namespace}/{where.secret_name}"
    if stack_path not in applied:
        whose = (
            f"the OpenTofu state {name} is the state of {', '.join(others)} under the name "
            f"konfig gave it before names were injective, which {stack_path} has now"
        )
        hint = (
            f"apply {others[0]} first (konfig moves its state to its own name, "
            f"tfstate-default-{state_suffix(others[0])}), or destroy it if it is gone "
            f"from the repository; then {stack_path}"
        )
    else:
        whose = (
            f"the OpenTofu state {name} has the name konfig gave {' and '.join(claimants)} "
            "before names were injective, and both were applied: konfig cannot tell whose "
            "it is"
        )
        names = ", ".join(f"{p}: tfstate-default-{state_suffix(p)}" for p in claimants)
        hint = (
            "see which stack's resources it records, copy it to that stack's own name "
            f"({names}) and delete it; docs/terraform.md (State names)"
        )
    return StateNameError(
        f"{stack_path}: {whose}; nothing of it was read for {stack_path}", hint=hint
    )


def _move_state(kube: Kube, old: Backend, new: Backend, stack_path: str) -> None:
    """Copy the state Secret (and the intent record) to the new name, then delete the
    old ones (UID preconditions: a state someone replaced meanwhile is not deleted)."""
    lease = kube.get("coordination.k8s.io/v1", "Lease", old.lease_name, old.namespace)
    if lease is not None and (lease.get("spec") or {}).get("holderIdentity"):
        raise StateNameError(
            f"{stack_path}: its OpenTofu state is still locked under its former name "
            f"({old.namespace}/{old.lease_name}): nothing was moved",
            hint="wait for the apply that holds it, or release it (tofu force-unlock)",
        )
    secret = _secret(kube, old)
    if secret is None:
        return
    meta = secret.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    if "tfstateSecretSuffix" in labels:
        labels["tfstateSecretSuffix"] = new.suffix
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": secret.get("type") or "Opaque",
            "metadata": {
                "name": new.secret_name,
                "namespace": new.namespace,
                "labels": labels,
                "annotations": {
                    **dict(meta.get("annotations") or {}),
                    STACK_ANNOTATION: stack_path,
                },
            },
            "data": dict(secret.get("data") or {}),
        },
        dry_run=False,
    )
    intent = kube.get("v1", "ConfigMap", INTENT_PREFIX + old.suffix, old.namespace)
    if intent is not None:
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": INTENT_PREFIX + new.suffix,
                    "namespace": new.namespace,
                    "labels": {"app.kubernetes.io/managed-by": "konfig"},
                },
                "data": dict(intent.get("data") or {}),
            },
            dry_run=False,
        )
        kube.delete(
            "v1",
            "ConfigMap",
            INTENT_PREFIX + old.suffix,
            old.namespace,
            uid=str((intent.get("metadata") or {}).get("uid") or "") or None,
            propagation="Background",  # nothing depends on it
        )
    kube.delete(
        "v1",
        "Secret",
        old.secret_name,
        old.namespace,
        uid=str(meta.get("uid") or "") or None,
        propagation="Background",  # nothing depends on it
    )


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
