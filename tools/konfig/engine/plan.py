"""The plan of one stack, as data: what applying it would change, object by object.

:class:`StackPlan` holds one :class:`Change` per object (create, update, replace, delete
or unchanged, with the masked field changes and diff); :mod:`konfig.engine.planner`
computes it against the cluster. :func:`plan_differences` tells why a recomputed plan
is not the one a saved preview showed ("apply what was previewed").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from konfig.engine.diff import Comparison, FieldChange, compare
from konfig.engine.drift import ObjectDrift
from konfig.engine.ignore import IgnoredField
from konfig.errors import KonfigError
from konfig.ids import ObjectRef
from konfig.masking import secret_values
from konfig.secrets.refs import NOT_COMPARED, KeyStatus

Action = Literal["create", "update", "replace", "delete", "unchanged", "conflict"]


ACTIONS: tuple[Action, ...] = ("create", "update", "replace", "delete", "unchanged", "conflict")
# the actions that change the cluster, in the order reports list them
CHANGING: tuple[Action, ...] = ("create", "update", "replace", "delete")
# "conflict": the object exists and belongs to someone else (another stack's inventory,
# or no Konfig stack at all); apply refuses the stack, reports list these first
CONFLICT: Action = "conflict"

DangerClass = Literal[
    "destroy", "replace", "rollout", "capacity", "access", "cascade", "data", "deprecated"
]
# the danger classes, in the order reports list them (docs/danger.md)
DANGER_CLASSES: tuple[DangerClass, ...] = (
    "destroy", "replace", "rollout", "capacity", "access", "cascade", "data", "deprecated"
)  # fmt: skip


@dataclass(frozen=True)
class Danger:
    """What a reviewer must not miss about one planned change (:mod:`konfig.engine.danger`
    finds them): its class and why, in words; ``objects``: how many live objects go
    with it (a ``cascade``: what the Namespace or CRD holds), else None."""

    name: DangerClass
    reason: str
    objects: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.name, "reason": self.reason}
        if self.objects is not None:
            out["objects"] = self.objects
        return out


@dataclass(frozen=True)
class Change:
    id: str
    api_version: str
    kind: str
    namespace: str | None
    name: str
    action: Action
    reason: str
    validated: bool
    desired: dict[str, Any] | None  # the manifest apply sends (with the part-of label)
    live: dict[str, Any] | None
    fields: tuple[FieldChange, ...]  # masked
    diff: str  # unified, masked
    # a Secret's keys from encrypted files: changed / unchanged / new / not compared
    secrets: tuple[KeyStatus, ...] = ()
    runtime: str = "Kubernetes"  # or "Terraform" (id, apiVersion = provider, kind = type)
    refused: str = ""  # why apply refuses this change (a guard the stack did not lift)
    owner: str | None = None  # a conflict: who owns the object (a stack path, or words)
    # how the live object differs from Konfig's last apply (None: not in the inventory)
    drift: ObjectDrift | None = None
    dangers: tuple[Danger, ...] = ()  # what a reviewer must not miss (engine.danger)
    # fields an ignore rule kept out (listed, never counted: engine.ignore)
    ignored: tuple[IgnoredField, ...] = ()
    # a rename (engine.danger.renames): the id this delete's object is renamed to, or the
    # id this create's object is renamed from; ``rename_fields``: the create's fields
    # compared with the old object (masked)
    renamed_to: str | None = None
    renamed_from: str | None = None
    rename_fields: tuple[FieldChange, ...] = ()

    @property
    def not_compared(self) -> tuple[str, ...]:
        """Keys whose value could not be compared (no decryption key)."""
        return tuple(k.key for k in self.secrets if k.status == NOT_COMPARED)

    @property
    def drifted(self) -> bool:
        return self.drift is not None and self.drift.drifted

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (docs/preview-json.md): never ``desired`` or ``live``."""
        return {
            "id": self.id,
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "action": self.action,
            "reason": self.reason,
            "validated": self.validated,
            "fields": [f.to_dict() for f in self.fields],
            "diff": self.diff,
            "secrets": [k.to_dict() for k in self.secrets],
            "runtime": self.runtime,
            "refused": self.refused or None,
            "owner": self.owner,
            "drift": self.drift.to_dict() if self.drift is not None else None,
            "dangers": [d.to_dict() for d in self.dangers],
            "ignored": [f.to_dict() for f in self.ignored],
            "rename": self._rename_json(),
        }

    def _rename_json(self) -> dict[str, Any] | None:
        if self.renamed_to is None and self.renamed_from is None:
            return None
        return {
            "from": self.renamed_from or self.id,
            "to": self.renamed_to or self.id,
            "fields": [f.to_dict() for f in self.rename_fields],
        }


@dataclass(frozen=True)
class NotPreviewed:
    """A resource the preview could not plan, and why (e.g. a Terraform resource whose
    provider credentials this environment lacks: named, never a value). Like a Secret
    whose encrypted values were not compared, it is neither a change nor an error."""

    id: str
    runtime: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "runtime": self.runtime, "reason": self.reason}


@dataclass(frozen=True)
class StackPlan:
    path: str
    context: str | None
    deleted: bool
    spec_digest: str | None
    prior_commit: str | None
    prior_digest: str | None
    changes: tuple[Change, ...]
    prior_dirty: bool = False  # the last apply came from uncommitted changes
    not_previewed: tuple[NotPreviewed, ...] = ()  # planned by nobody (credentials missing)
    tofu_state: tuple[str, int] | None = None  # OpenTofu's state planned against (lineage, serial)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(ACTIONS, 0)
        for change in self.changes:
            counts[change.action] += 1
        return counts

    @property
    def has_changes(self) -> bool:
        return any(c.action in CHANGING for c in self.changes)

    def danger_counts(self) -> dict[str, int]:
        """Changes per danger class (a change counts once per class it has)."""
        counts: dict[str, int] = dict.fromkeys(DANGER_CLASSES, 0)
        for change in self.changes:
            for name in {d.name for d in change.dangers}:
                counts[name] += 1
        return counts

    def refusals(self) -> list[Change]:
        """The changes apply refuses (a guard the stack did not lift)."""
        return [c for c in self.changes if c.refused]

    @property
    def conflicts(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.action == CONFLICT)

    @property
    def drifted(self) -> tuple[Change, ...]:
        """The objects someone changed in the cluster since Konfig's last apply."""
        return tuple(c for c in self.changes if c.drifted)

    def secrets(self) -> set[str]:
        """Every Secret value the plan touches, for scrubbing free text."""
        found: set[str] = set()
        for change in self.changes:
            found |= secret_values(change.desired) | secret_values(change.live)
        return found


class PlanError(KonfigError):
    """The stack cannot be planned: the server rejected objects, or ownership conflicts."""

    def __init__(self, stack_path: str, problems: Sequence[str]) -> None:
        if len(problems) == 1:
            message = f"{stack_path}: {problems[0]}"
        else:
            listed = "\n".join(f"  - {p}" for p in problems)
            message = f"{stack_path}: {len(problems)} objects cannot be planned:\n{listed}"
        super().__init__(message)
        self.problems = tuple(problems)


def change_signature(change: Mapping[str, Any]) -> tuple[str, str, str]:
    """What must match between a saved preview and the recomputed plan for one change
    (the field changes themselves; not how they are labelled, e.g. ``drift``)."""
    fields = json.dumps(
        [
            {k: v for k, v in f.items() if k in ("path", "before", "after")}
            for f in change.get("fields") or []
            if isinstance(f, Mapping)
        ],
        sort_keys=True,
        default=str,
    )
    return (str(change.get("id")), str(change.get("action")), fields)


def plan_differences(saved_stack: Mapping[str, Any], plan: StackPlan) -> list[str]:
    """Why the recomputed ``plan`` is not the one in a saved preview stack entry."""
    problems: list[str] = []
    if saved_stack.get("status") != "ok":
        return [f"the saved preview of {plan.path} has status {saved_stack.get('status')!r}"]
    skipped = saved_stack.get("notPreviewed") or []
    if skipped:
        reasons = sorted({str(n.get("reason")) for n in skipped if isinstance(n, Mapping)})
        return [
            f"the saved preview of {plan.path} did not preview {len(skipped)} "
            f"resource{'s' if len(skipped) != 1 else ''} ({'; '.join(reasons)}): preview "
            "with the credentials, then apply that preview"
        ]
    if (saved_stack.get("specDigest") or None) != plan.spec_digest:
        problems.append(
            f"spec digest {str(plan.spec_digest)[:12]} != previewed "
            f"{str(saved_stack.get('specDigest'))[:12]} (the configuration changed)"
        )
    saved = {change_signature(c)[0]: change_signature(c) for c in saved_stack.get("changes") or []}
    now = {c.id: change_signature(c.to_dict()) for c in plan.changes}
    for rid in sorted(set(saved) | set(now)):
        if rid not in now:
            problems.append(f"{rid}: previewed as {saved[rid][1]}, no longer in the plan")
        elif rid not in saved:
            problems.append(f"{rid}: now {now[rid][1]}, not in the preview")
        elif saved[rid][1] != now[rid][1]:
            problems.append(f"{rid}: previewed as {saved[rid][1]}, now {now[rid][1]}")
        elif saved[rid][2] != now[rid][2]:
            problems.append(f"{rid}: {now[rid][1]} with different field changes than previewed")
    return problems


def make_change(
    rid: str,
    ref: ObjectRef,
    action: Action,
    reason: str,
    *,
    validated: bool,
    desired: dict[str, Any] | None,
    live: dict[str, Any] | None,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    comparison: Comparison | None = None,
    owner: str | None = None,
) -> Change:
    """One change; its fields and diff compare ``before`` with ``after`` (masked)."""
    if comparison is None:
        comparison = compare(before, after, name=rid)
    return Change(
        id=rid,
        api_version=ref.api_version,
        kind=ref.kind,
        namespace=ref.namespace,
        name=ref.name,
        action=action,
        reason=reason,
        validated=validated,
        desired=desired,
        live=live,
        fields=comparison.fields,
        diff=comparison.diff,
        owner=owner,
    )
