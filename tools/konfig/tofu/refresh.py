"""Drift of a stack's Terraform resources: ``tofu plan -refresh-only``, read-only.

What ``konfig status`` and ``konfig drift`` need without compiling the stack: the
configuration holds only the provider configurations the state's resources use (from
stack.yaml) and no resource, so OpenTofu refreshes every resource the state records
and its plan's ``resource_drift`` says which ones changed outside OpenTofu since the
last apply (``update``: the fields, before = what the state records, after = the real
object; ``delete``: the object is gone). Nothing is written anywhere: the plan runs
without the state lock (a plan never writes state, and the lock would make status wait
for, or block, an apply) in a working directory of its own (``<stack>.refresh``, so a
running apply's saved plan is never touched), and the plan file is removed at once.

Values are masked as in a preview (:mod:`konfig.tofu.plans`): sensitive values ``***``,
credentials scrubbed from tofu's output. Pure of printing and of the environment: the
caller passes the credentials' values (``StackTofu.environment``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from konfig.engine.diff import FieldChange
from konfig.repo.files import remove
from konfig.tofu import plans
from konfig.tofu.config import CONFIG_FILE, configuration, state_providers
from konfig.tofu.plan_apply import StackTofu
from konfig.tofu.runner import Workdir
from konfig.tofu.state import state_ids

PLAN_PREFIX = "konfig-refresh-"  # + the process id: two status runs never share one
SUFFIX = ".refresh"

RefreshState = Literal["in_sync", "drifted", "deleted"]


@dataclass(frozen=True)
class ResourceDrift:
    """One resource the state records, as OpenTofu found it."""

    id: str
    address: str
    state: RefreshState
    fields: tuple[FieldChange, ...] = ()  # before: recorded at the last apply; after: real


def refresh_stack(
    ctx: StackTofu, state: Mapping[str, Any], *, secrets: set[str] | None = None
) -> tuple[ResourceDrift, ...]:
    """Refresh every resource ``state`` records (read-only); raises TofuError."""
    ids = state_ids(state)
    if not ids:
        return ()
    config = configuration([], ctx.terraform, ctx.backend, state_providers=state_providers(state))
    variables = {v.name: ctx.environment.get(v.env, "") for v in config.variables if v.env}
    path = ctx.workdir.with_name(ctx.workdir.name + SUFFIX)
    workdir = Workdir(
        ctx.settings,
        path,
        what=ctx.stack_path,
        cluster=ctx.cluster,
        secrets=set(secrets or ()) | {v for v in variables.values() if len(v) >= 4},
        scope=ctx.scope,
    )
    workdir.write_config(config.document, CONFIG_FILE)
    workdir.init(config.document["terraform"])
    plan_file = f"{PLAN_PREFIX}{os.getpid()}.tfplan"
    try:
        workdir.plan(plan_file, variables, lock=False, refresh_only=True)
        shown = workdir.show(plan_file)
    finally:
        remove([path / plan_file], scope=workdir.scope)
    return drift_of(shown, ids, secrets=workdir.secrets)


def drift_of(
    shown: Mapping[str, Any], ids: Mapping[str, str], *, secrets: set[str] | None = None
) -> tuple[ResourceDrift, ...]:
    """Per resource of ``ids`` (address -> id): its drift in a refresh-only plan JSON."""
    entries = [
        e
        for e in shown.get("resource_drift") or []
        if isinstance(e, Mapping) and e.get("mode", "managed") == "managed"
    ]
    # the drift entries have the shape of resource_changes: translate them the same way
    changes = {
        c.id: c
        for c in plans.translate({"resource_changes": entries}, ids, secrets=secrets).changes
    }
    out: list[ResourceDrift] = []
    for address, rid in sorted(ids.items(), key=lambda item: item[1]):
        change = changes.get(rid)
        if change is None or change.action == "unchanged":
            out.append(ResourceDrift(rid, address, "in_sync"))
        elif change.action == "delete":
            out.append(ResourceDrift(rid, address, "deleted"))
        else:
            out.append(ResourceDrift(rid, address, "drifted", change.fields))
    return tuple(out)
