"""The Terraform resources a stack's state records, as ``konfig status`` and
``konfig drift`` show objects: applied, deleted outside Konfig, or drifted
(``tofu plan -refresh-only``)."""

from __future__ import annotations

import re

from konfig.engine.drift import DriftedField, ObjectDrift
from konfig.engine.health import Health
from konfig.engine.kube import Kube, KubeTarget
from konfig.engine.survey import ObjectStatus
from konfig.errors import KonfigError
from konfig.repo.layout import Stack
from konfig.tofu.context import TofuContext, stack_tofu
from konfig.tofu.preflight import missing_credentials
from konfig.tofu.records import read_state, state_backend
from konfig.tofu.refresh import ResourceDrift, refresh_stack
from konfig.tofu.state import state_ids
from konfig.words import plural


def terraform_objects(
    kube: Kube, stack: Stack, tctx: TofuContext, target: KubeTarget
) -> tuple[ObjectStatus, ...]:
    """The Terraform resources the stack's state records, as ``konfig status`` and
    ``konfig drift`` show objects: applied (in the state) or deleted outside Konfig, and
    their drift from ``tofu plan -refresh-only`` (read-only, no lock). Without the
    provider credentials (named, as a preview names them) or when OpenTofu fails, each
    resource's drift is unknown, with why."""
    ctx = stack_tofu(tctx, stack, target, state_backend(kube, stack.path))
    state = read_state(kube, ctx.backend, where=stack.path)
    ids = state_ids(state)
    if state is None or not ids:
        return ()
    missing = missing_credentials(ctx.terraform, None, state, tctx.environment)
    why = f"not checked: credentials {', '.join(missing)} missing" if missing else ""
    found: tuple[ResourceDrift, ...] = ()
    if not why:
        try:
            found = refresh_stack(ctx, state)
        except KonfigError as exc:
            why = f"not checked: {exc.message}"
    if why:
        return tuple(
            ObjectStatus(rid, _APPLIED_HEALTH, ObjectDrift(rid, "unknown", message=why))
            for rid in sorted(ids.values())
        )
    out: list[ObjectStatus] = []
    for r in found:
        if r.state == "deleted":
            gone = Health("not_found", "deleted outside Konfig (the Terraform state records it)")
            out.append(ObjectStatus(r.id, gone, ObjectDrift(r.id, "deleted", message=_GONE)))
            continue
        fields = tuple(
            DriftedField(f.path, f.after, f.after is None, keys=_field_keys(f.path))
            for f in r.fields
        )
        drift = ObjectDrift(
            r.id,
            r.state,
            fields,
            message=f"{plural(len(fields), 'field')} changed outside Konfig since the last apply"
            if fields
            else "",
        )
        out.append(ObjectStatus(r.id, _APPLIED_HEALTH, drift))
    return tuple(out)


def state_objects(kube: Kube, stack: Stack) -> tuple[ObjectStatus, ...]:
    """The Terraform resources the stack's state records, read from the state Secret
    only (no OpenTofu, no credentials): applied, their drift not checked."""
    backend = state_backend(kube, stack.path)
    ids = state_ids(read_state(kube, backend, where=stack.path))
    return tuple(
        ObjectStatus(rid, _APPLIED_HEALTH, ObjectDrift(rid, "unknown", message=NOT_REFRESHED))
        for rid in sorted(ids.values())
    )


NOT_REFRESHED = "not checked: read from the Terraform state only, not refreshed (--terraform state)"
_APPLIED_HEALTH = Health("current", "applied (recorded in the Terraform state)")
_GONE = "deleted outside Konfig (OpenTofu's refresh no longer finds it)"


def _field_keys(path: str) -> tuple[str, ...]:
    """A top-level or dotted argument path as fieldsV1 keys (what ``value_at`` reads to
    show the repository's value); none for a path into a list."""
    parts = path.split(".")
    if all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
        return tuple(f"f:{p}" for p in parts)
    return ()
