"""OpenTofu's JSON plan (``tofu show -json PLAN``) as the changes of the preview model.

Each ``resource_changes[]`` entry becomes a :class:`~konfig.engine.plan.Change` with
``runtime: Terraform``: the id ``<namespace>/<provider>:<type>:<name>``, ``apiVersion``
the provider's address, ``kind`` the resource type. Actions map as

==========================  =========
OpenTofu ``actions``        Konfig
==========================  =========
``["create"]``              create
``["update"]``              update
``["delete","create"]``,    replace
``["create","delete"]``
``["delete"]``, forget      delete
``["no-op"]``, ``["read"]`` unchanged
==========================  =========

and the fields compare ``before`` with ``after``. The plan JSON holds sensitive values
in clear: every leaf the ``*_sensitive`` trees mark is masked
(:func:`konfig.masking.mask_sensitive`), write-only arguments show as ``(write-only)``,
values OpenTofu knows only after apply (``after_unknown``) as ``(known after apply)``.
Unset arguments (null, ``[]``, ``{}``) are left out on both sides, so the provider
reading back ``[]`` for an unset list is no change. A plan that only creates and
updates can also be told from its ``planned_change`` messages alone
(:func:`from_actions`: actions, no field changes). Pure functions; nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from konfig import outputs
from konfig.engine.diff import field_changes, unified_diff
from konfig.engine.plan import Action, Change
from konfig.ids import TerraformAddress
from konfig.masking import mask_sensitive, scrub

RUNTIME = "Terraform"


@dataclass(frozen=True)
class TerraformPlan:
    """One stack's Terraform plan: its changes and what references can know now."""

    changes: tuple[Change, ...]
    values: dict[str, dict[str, Any]]  # resource id -> planned values (unknowns as UNKNOWN)
    has_changes: bool


def _address_id(entry: Mapping[str, Any], ids: Mapping[str, str]) -> str:
    address = str(entry.get("address", ""))
    if address in ids:
        return ids[address]
    provider = str(entry.get("provider_name", ""))
    ns_type = "/".join(provider.split("/")[-2:])
    return f"{ns_type}:{entry.get('type')}:{entry.get('name')}"


def _action(actions: Sequence[str]) -> Action:
    acts = list(actions)
    if acts in (["delete", "create"], ["create", "delete"]):
        return "replace"
    if acts == ["create"]:
        return "create"
    if acts == ["update"]:
        return "update"
    if "delete" in acts or "forget" in acts:
        return "delete"
    return "unchanged"


def _prune(value: Any) -> Any:
    """Leave out unset arguments (null, [], {}) so that they compare equal."""
    if isinstance(value, Mapping):
        out = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _unknown(value: Any, tree: Any) -> Any:
    """``value`` with the leaves ``after_unknown`` marks replaced by UNKNOWN."""
    if tree is True:
        return outputs.UNKNOWN
    if isinstance(tree, Mapping):
        base = dict(value) if isinstance(value, Mapping) else {}
        for key, sub in tree.items():
            if sub is True or isinstance(sub, Mapping | list):
                base[key] = _unknown(base.get(key), sub)
        return base
    if isinstance(tree, list):
        base_list = list(value) if isinstance(value, list) else []
        for index, sub in enumerate(tree):
            if index < len(base_list):
                base_list[index] = _unknown(base_list[index], sub)
            elif sub is True:
                base_list.append(outputs.UNKNOWN)
        return base_list
    return value


def _reason(action: Action, entry: Mapping[str, Any], count: int) -> str:
    change = entry.get("change") or {}
    importing = change.get("importing")
    reason = str(entry.get("action_reason") or "")
    if action == "create":
        return "not in the Terraform state"
    if action == "replace":
        paths = [".".join(str(p) for p in path) for path in change.get("replace_paths") or []]
        why = "an argument that cannot change in place changed"
        if reason == "replace_because_tainted":
            why = "the object is tainted (a failed create)"
        elif reason == "replace_by_request":
            why = "replacement requested"
        where = f" ({', '.join(paths)})" if paths else ""
        return f"{why}{where}: apply destroys and re-creates it"
    if action == "delete":
        if reason == "delete_because_no_resource_config" or not reason:
            return "removed from the stack: apply destroys it"
        return f"apply destroys it ({reason.replace('_', ' ')})"
    if importing:
        suffix = f"; differs in {count} field{'s' if count != 1 else ''}" if count else ""
        return f"exists but is not in the state (an interrupted apply): apply adopts it{suffix}"
    if action == "update":
        return f"differs from the real object in {count} field{'s' if count != 1 else ''}"
    return "matches the real object"


def translate(
    plan: Mapping[str, Any],
    ids: Mapping[str, str],
    *,
    write_only: Mapping[str, tuple[str, ...]] | None = None,
    versions: Mapping[str, tuple[str, ...]] | None = None,
    secrets: set[str] | None = None,
) -> TerraformPlan:
    """Changes from a plan JSON. ``ids``: address -> resource id of the stack's resources;
    ``write_only``: id -> its write-only arguments; ``versions``: id -> the arguments
    that carry a version of a write-only value (masked like sensitive values: they are
    derived from the secret); ``secrets``: values to scrub."""
    write_only = write_only or {}
    versions = versions or {}
    changes: list[Change] = []
    values: dict[str, dict[str, Any]] = {}
    for entry in plan.get("resource_changes") or []:
        if not isinstance(entry, Mapping) or entry.get("mode", "managed") != "managed":
            continue
        rid = _address_id(entry, ids)
        change = entry.get("change") or {}
        action = _action(change.get("actions") or ["no-op"])
        before_raw = change.get("before")
        after_raw = change.get("after")
        if action == "delete":
            after_raw = None
        after_full = (
            _unknown(after_raw, change.get("after_unknown")) if after_raw is not None else None
        )
        if after_full is not None:
            values[rid] = after_full
        before, after = mask_sensitive(
            _prune(before_raw) if isinstance(before_raw, Mapping) else None,
            _prune(after_full) if isinstance(after_full, Mapping) else None,
            _with_sensitive(change.get("before_sensitive"), versions.get(rid, ())),
            _with_sensitive(change.get("after_sensitive"), versions.get(rid, ())),
            write_only=write_only.get(rid, ()),
        )
        before, after = _scrubbed(before, secrets), _scrubbed(after, secrets)
        if action in ("create", "delete"):
            shown_b, shown_a = (None, after) if action == "create" else (before, None)
        else:
            shown_b, shown_a = before, after
        fields = tuple(
            f for f in (field_changes(shown_b, shown_a) if action != "unchanged" else ()) if f.path
        )
        if action == "update" and not fields and not change.get("importing"):
            action = "unchanged"  # only write-only arguments or unset values "changed"
        address = TerraformAddress(*_split(rid))
        changes.append(
            Change(
                id=rid,
                api_version=f"{address.namespace}/{address.provider}",
                kind=address.type,
                namespace=None,
                name=address.name,
                action=action,
                reason=_reason(action, entry, len(fields)),
                validated=True,
                desired=None,
                live=None,
                fields=fields,
                diff=unified_diff(shown_b, shown_a, name=rid) if fields else "",
                runtime=RUNTIME,
            )
        )
    has_changes = any(c.action != "unchanged" for c in changes)
    return TerraformPlan(tuple(sorted(changes, key=lambda c: c.id)), values, has_changes)


# What a plan's ``planned_change`` message says (OpenTofu's machine-readable UI), for
# the actions :func:`from_actions` takes: a resource without a message is a no-op.
_STREAMED: dict[str, tuple[Action, str]] = {
    "create": ("create", "not in the Terraform state"),
    "update": (
        "update",
        "differs from the real object: updated in place; `konfig preview` shows the fields",
    ),
    "noop": ("unchanged", "matches the real object"),
}


def from_actions(actions: Mapping[str, str], ids: Mapping[str, str]) -> TerraformPlan:
    """The changes of a plan that only creates and updates, from its ``planned_change``
    messages (``actions``: address -> action) instead of the plan JSON: one change per
    resource of the configuration (``ids``: address -> resource id; one without a
    message is unchanged), without field changes or planned values (only the plan JSON
    has them). An action or an address this cannot report is a ValueError: the caller
    reads the plan JSON instead."""
    unknown = sorted(set(actions) - set(ids))
    if unknown:
        raise ValueError(f"not in the configuration: {', '.join(unknown)}")
    strange = sorted({a for a in actions.values() if a not in _STREAMED})
    if strange:
        raise ValueError(f"actions {', '.join(strange)}: the plan JSON says more")
    changes: list[Change] = []
    for address, rid in ids.items():
        action, reason = _STREAMED[actions.get(address, "noop")]
        parts = TerraformAddress(*_split(rid))
        changes.append(
            Change(
                id=rid,
                api_version=f"{parts.namespace}/{parts.provider}",
                kind=parts.type,
                namespace=None,
                name=parts.name,
                action=action,
                reason=reason,
                validated=True,
                desired=None,
                live=None,
                fields=(),
                diff="",
                runtime=RUNTIME,
            )
        )
    has_changes = any(c.action != "unchanged" for c in changes)
    return TerraformPlan(tuple(sorted(changes, key=lambda c: c.id)), {}, has_changes)


def _with_sensitive(tree: Any, names: Sequence[str]) -> Any:
    if not names or tree is True:
        return tree
    out = dict(tree) if isinstance(tree, Mapping) else {}
    for name in names:
        out[name] = True
    return out


def _split(rid: str) -> tuple[str, str, str, str]:
    ns_provider, type_, name = rid.split(":", 2)
    namespace, _, provider = ns_provider.partition("/")
    return namespace, provider, type_, name


def _scrubbed(value: Any, secrets: set[str] | None) -> Any:
    if not secrets:
        return value
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, Mapping):
        return {k: _scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, secrets) for v in value]
    return value


def state_values(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Address -> attribute values of the managed resources of a state (OpenTofu's state
    file format, version 4: what the ``kubernetes`` backend keeps in its Secret)."""
    out: dict[str, dict[str, Any]] = {}
    for res in state.get("resources") or []:
        if not isinstance(res, Mapping) or res.get("mode") != "managed":
            continue
        if res.get("module"):
            continue
        for inst in res.get("instances") or []:
            if isinstance(inst, Mapping) and "index_key" not in inst:
                attrs = inst.get("attributes")
                if isinstance(attrs, Mapping):
                    out[f"{res.get('type')}.{res.get('name')}"] = dict(attrs)
    return out
