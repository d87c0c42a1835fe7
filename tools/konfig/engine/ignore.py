"""Ignore rules: fields of the live object Konfig neither shows as a change nor sets back.

One set of rules for preview, drift and apply (docs/ignore.md), declared in
``konfig.yaml``, a ``project.yaml`` or a ``stack.yaml`` (``ignore:``, the contract
``common.schema.json#/$defs/ignoreRule``: held to it, with file and line, when the
repository is read). A rule selects objects (group, kind, namespace, name, labels),
names fields as JSON Pointers whose list items may be chosen by a merge key
(``/spec/template/spec/containers[name=istio-proxy]``), optionally only while given
field managers own them, and says why (mandatory).

Apply semantics as Flux's: an ignored field is left out of what Konfig applies when
another manager owns it in the live object, and kept at its live value when Konfig is
its only owner (leaving it out would delete it); a field the live object lacks is
applied as declared (a create is never changed). What was ignored is kept as
:class:`IgnoredField` on the change: listed, never counted as a change.

An HPA of the same stack that targets an object makes that object's ``spec.replicas``
ignored without a rule (:func:`autoscaled`; reason: the HPA's name).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from konfig.engine.diff import list_item_labels, segment
from konfig.engine.drift import ObjectDrift
from konfig.engine.kube.request import FIELD_MANAGER
from konfig.errors import KonfigError
from konfig.ids import ObjectRef
from konfig.masking import mask_field
from konfig.repo.layout import PROJECT_FILE, STACK_FILE, Repository, Stack
from konfig.repo.settings import CONFIG_FILE

Step = str | int  # a map key or a list index: one step of a concrete path

# one pointer segment: a key (``~0``/``~1`` escapes), then optionally ``[key=value]``
_SEGMENT = re.compile(r"((?:[^/~\[\]]|~[01])+)(?:\[([A-Za-z0-9_.-]+)=([^\]/]+)\])?")
POINTER_PATTERN = r"^(/((?:[^/~\[\]]|~[01])+)(\[[A-Za-z0-9_.-]+=[^\]/]+\])?)+$"


@dataclass(frozen=True)
class Segment:
    key: str
    item_key: str | None = None  # the list item's merge key (``name``), if selected
    item_value: str | None = None


def parse_pointer(text: str) -> tuple[Segment, ...]:
    """``/spec/containers[name=web]/image`` as its segments; KonfigError when malformed
    (the contract's pattern, :data:`POINTER_PATTERN`, refuses the same)."""
    if not re.fullmatch(POINTER_PATTERN, text):
        raise KonfigError(
            f"{text!r} is not a JSON Pointer such as /spec/replicas or "
            "/spec/template/spec/containers[name=istio-proxy]"
        )
    out: list[Segment] = []
    for raw in text.split("/")[1:]:
        m = _SEGMENT.fullmatch(raw)
        assert m is not None  # the pattern above holds
        key = m.group(1).replace("~1", "/").replace("~0", "~")
        out.append(Segment(key, m.group(2), m.group(3)))
    return tuple(out)


@dataclass(frozen=True)
class IgnoreRule:
    reason: str
    paths: tuple[str, ...]  # as written (JSON Pointers)
    source: str  # where it was declared: ``konfig.yaml ignore[0]``, or ``automatic``
    group: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    managers: tuple[str, ...] = ()  # only while one of these owns the field

    def selects(self, obj: Mapping[str, Any]) -> bool:
        api_version = str(obj.get("apiVersion", ""))
        group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        return (
            (self.group is None or self.group == group)
            and (self.kind is None or self.kind == obj.get("kind"))
            and (self.namespace is None or self.namespace == meta.get("namespace"))
            and (self.name is None or self.name == meta.get("name"))
            and all(labels.get(k) == v for k, v in self.labels)
        )


def rules_from(raw: Iterable[Mapping[str, Any]], where: str) -> tuple[IgnoreRule, ...]:
    """Rules as declared (already held to the contract) in ``where`` (a file name)."""
    rules = []
    for index, item in enumerate(raw):
        selector = item.get("selector") or {}
        paths = tuple(str(p) for p in item.get("paths") or ())
        for p in paths:
            parse_pointer(p)
        rules.append(
            IgnoreRule(
                reason=str(item["reason"]),
                paths=paths,
                source=f"{where} ignore[{index}]",
                group=selector.get("group"),
                kind=selector.get("kind"),
                namespace=selector.get("namespace"),
                name=selector.get("name"),
                labels=tuple(sorted((selector.get("labels") or {}).items())),
                managers=tuple(str(m) for m in item.get("managers") or ()),
            )
        )
    return tuple(rules)


def autoscaled(manifests: Iterable[Mapping[str, Any]]) -> tuple[IgnoreRule, ...]:
    """``spec.replicas`` of each object an HPA of the same manifests targets."""
    rules = []
    for hpa in manifests:
        if hpa.get("kind") != "HorizontalPodAutoscaler":
            continue
        target = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        meta = hpa.get("metadata") or {}
        if not target.get("kind") or not target.get("name"):
            continue
        api_version = str(target.get("apiVersion") or "")
        rules.append(
            IgnoreRule(
                reason=f"scaled by HorizontalPodAutoscaler {meta.get('name')}",
                paths=("/spec/replicas",),
                source="automatic",
                group=api_version.rsplit("/", 1)[0] if "/" in api_version else None,
                kind=str(target["kind"]),
                namespace=meta.get("namespace"),
                name=str(target["name"]),
            )
        )
    return tuple(rules)


def stack_rules(
    stack: Stack, manifests: Iterable[Mapping[str, Any]] = ()
) -> tuple[IgnoreRule, ...]:
    """Every rule of ``stack``: konfig.yaml's, its project's, its own, then the automatic
    ones of the HPAs among its ``manifests``."""
    rules: list[IgnoreRule] = []
    for where, raw in stack.inherited_ignore:
        rules += rules_from(raw, where)
    rules += rules_from(stack.raw.get("ignore") or (), f"{stack.path}/{STACK_FILE}")
    rules += autoscaled(manifests)
    return tuple(rules)


def with_base_rules(stack: Stack, base: Repository) -> Stack:
    """``stack`` with the ignore rules ``base`` (the base branch's checkout) declares
    for it: base's konfig.yaml, base's project.yaml of its project, base's stack.yaml
    of it (none of the latter two when base has not got them). A pull request is
    previewed with them, so a rule it adds cannot hide its own change."""
    project = next((p for p in base.projects if p.path == stack.project_path), None)
    own = next((s for s in base.stacks if s.path == stack.path), None)
    raw = {k: v for k, v in stack.raw.items() if k != "ignore"}
    if own is not None and own.raw.get("ignore"):
        raw["ignore"] = own.raw["ignore"]
    inherited = (
        (CONFIG_FILE, tuple(base.config.ignore)),
        (
            f"{stack.project_path}/{PROJECT_FILE}",
            tuple((project.raw.get("ignore") if project else None) or ()),
        ),
    )
    return replace(stack, raw=raw, inherited_ignore=inherited)


ProposedChange = Literal["added", "changed", "removed"]


@dataclass(frozen=True)
class ProposedRule:
    """A declared rule of the change that the base has not (``added``; ``changed``: the
    same file and place says something else now), or one of the base's the change drops
    (``removed``). Listed, not applied: the preview uses the base's rules."""

    change: ProposedChange
    rule: IgnoreRule

    def to_dict(self) -> dict[str, Any]:
        r = self.rule
        selector = {
            k: v
            for k, v in (
                ("group", r.group),
                ("kind", r.kind),
                ("namespace", r.namespace),
                ("name", r.name),
                ("labels", dict(r.labels) or None),
            )
            if v is not None
        }
        return {
            "change": self.change,
            "source": r.source,
            "reason": r.reason,
            "selector": selector,
            "paths": list(r.paths),
            "managers": list(r.managers),
        }


def proposed_rules(head: Stack, base: Stack) -> tuple[ProposedRule, ...]:
    """The declared rules of ``head`` (the change's stack) that ``base`` (the same stack
    with the base's rules, :func:`with_base_rules`) has not, and the other way round;
    compared by what they say, not by their place in a file (a rule moved is no
    change). A new rule where the base had one it no longer has is ``changed``."""

    def key(r: IgnoreRule) -> tuple[Any, ...]:
        return (r.reason, r.paths, r.group, r.kind, r.namespace, r.name, r.labels, r.managers)

    mine, theirs = stack_rules(head), stack_rules(base)
    before = {key(r) for r in theirs}
    after = {key(r) for r in mine}
    dropped = {r.source: r for r in theirs if key(r) not in after}
    out = [
        ProposedRule("changed" if r.source in dropped else "added", r)
        for r in mine
        if key(r) not in before
    ]
    replaced = {p.rule.source for p in out if p.change == "changed"}
    out += [ProposedRule("removed", r) for r in dropped.values() if r.source not in replaced]
    return tuple(out)


@dataclass(frozen=True)
class IgnoredField:
    """A field a rule kept out of the plan: what the repository has and the live value."""

    path: str  # concrete JSON Pointer (``/spec/template/spec/containers/1/image``)
    live: Any
    declared: Any
    rule: str  # the rule's source
    reason: str
    applied: str  # "left out" (another manager owns it) or "kept live" (only Konfig's)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "live": self.live,
            "declared": self.declared,
            "rule": self.rule,
            "reason": self.reason,
            "applied": self.applied,
        }


def field_path(obj: Any, concrete: str) -> str:
    """The field path of the plan's diff (``spec.template.spec.containers[name=web].image``)
    of a concrete pointer into ``obj`` (an :attr:`IgnoredField.path`): what a reviewer
    read, so that what a rule keeps out can be named where the change is."""
    out, node = "", obj
    for raw in concrete.split("/")[1:]:
        step = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and step.isdigit() and int(step) < len(node):
            labels = list_item_labels(node)
            out += labels[int(step)] if labels else f"[{step}]"
            node = node[int(step)]
        else:
            out += segment(step)
            node = node.get(step) if isinstance(node, Mapping) else None
    return out.lstrip(".")


def _escape(step: Step) -> str:
    return str(step).replace("~", "~0").replace("/", "~1")


def pointer(steps: Sequence[Step]) -> str:
    return "".join(f"/{_escape(s)}" for s in steps)


def locations(obj: Any, segments: Sequence[Segment]) -> list[tuple[Step, ...]]:
    """The concrete paths in ``obj`` a pointer names (list items by merge key)."""
    found: list[tuple[Step, ...]] = [()]
    node_of: list[Any] = [obj]
    for seg in segments:
        next_found: list[tuple[Step, ...]] = []
        next_nodes: list[Any] = []
        for path, node in zip(found, node_of, strict=True):
            if not isinstance(node, Mapping) or seg.key not in node:
                if isinstance(node, Mapping) and seg.item_key is None:
                    next_found.append((*path, seg.key))  # a leaf that may be absent
                    next_nodes.append(None)
                continue
            child = node[seg.key]
            if seg.item_key is None:
                next_found.append((*path, seg.key))
                next_nodes.append(child)
                continue
            if not isinstance(child, list):
                continue
            for index, item in enumerate(child):
                if isinstance(item, Mapping) and str(item.get(seg.item_key)) == seg.item_value:
                    next_found.append((*path, seg.key, index))
                    next_nodes.append(item)
        found, node_of = next_found, next_nodes
    return found


_MISSING = object()


def get(obj: Any, path: Sequence[Step]) -> Any:
    node = obj
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return _MISSING
        elif not isinstance(node, Mapping) or step not in node:
            return _MISSING
        node = node[step]
    return node


def _set(obj: Any, path: Sequence[Step], value: Any) -> None:
    node = obj
    for step in path[:-1]:
        if isinstance(node, dict) and step not in node:
            node[step] = {}
        node = node[step]
    node[path[-1]] = value


def _delete(obj: Any, path: Sequence[Step]) -> None:
    parent = get(obj, path[:-1])
    if isinstance(parent, dict):
        parent.pop(path[-1], None)
    elif isinstance(parent, list) and isinstance(path[-1], int) and path[-1] < len(parent):
        parent.pop(path[-1])


def _insert(obj: dict[str, Any], segments: Sequence[Segment], value: Any) -> None:
    """Put ``value`` where ``segments`` point in ``obj``: a map key, or a list item
    (chosen by merge key) appended to its list; nothing when a parent is missing."""
    last = segments[-1]
    parents = locations(obj, (*segments[:-1], Segment(last.key)))
    if len(parents) != 1:
        return
    parent = get(obj, parents[0][:-1])
    if not isinstance(parent, dict):
        return
    if last.item_key is None:
        parent[last.key] = copy.deepcopy(value)
        return
    items = parent.get(last.key)
    if items is None:
        items = parent[last.key] = []
    if isinstance(items, list):
        items.append(copy.deepcopy(value))


def _fields_key(step: Step, item: Any) -> list[str]:
    """The managedFields (fieldsV1) keys that may stand for one step."""
    if isinstance(step, str):
        return [f"f:{step}"]
    keys = []
    if isinstance(item, Mapping):
        for merge in ("name", "containerPort", "mountPath", "key", "ip", "type"):
            if merge in item:
                keys.append("k:" + json.dumps({merge: item[merge]}, separators=(",", ":")))
        if "containerPort" in item and "protocol" in item:
            both = {"containerPort": item["containerPort"], "protocol": item["protocol"]}
            keys.append("k:" + json.dumps(both, separators=(",", ":")))
    keys.append("v:" + json.dumps(item, separators=(",", ":")))
    return keys


def owners(live: Mapping[str, Any], path: Sequence[Step]) -> set[str]:
    """The field managers of ``live`` that own ``path`` (or a field under it)."""
    found: set[str] = set()
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        node: Any = entry.get("fieldsV1") or {}
        walked: list[Step] = []
        for step in path:
            item = get(live, (*walked, step)) if isinstance(step, int) else None
            keys = [k for k in _fields_key(step, item) if isinstance(node, Mapping) and k in node]
            if not keys:
                node = None
                break
            node = node[keys[0]]
            walked.append(step)
        if node is not None:
            found.add(str(entry.get("manager") or ""))
    return found


def ignore_fields(
    desired: Mapping[str, Any],
    live: Mapping[str, Any] | None,
    rules: Sequence[IgnoreRule],
    *,
    manager: str = FIELD_MANAGER,
) -> tuple[dict[str, Any], tuple[IgnoredField, ...]]:
    """``desired`` as apply must send it under ``rules`` (Flux's semantics: left out
    when another manager owns the field, kept live when only Konfig does), and the
    fields ignored whose declared value differs from the live one."""
    if live is None:
        return dict(desired), ()
    out = copy.deepcopy(dict(desired))
    ignored: list[IgnoredField] = []
    for rule in rules:
        if not rule.selects(desired):
            continue
        for text in rule.paths:
            segments = parse_pointer(text)
            # a merge key picks the same item on both sides, whatever its index
            wanted_at = locations(out, segments)
            for index, path in enumerate(locations(live, segments)):
                was = get(live, path)
                if was is _MISSING:
                    continue  # not in the cluster: applied as declared
                by = owners(live, path)
                if rule.managers and not by & set(rule.managers):
                    continue
                at = wanted_at[index] if index < len(wanted_at) else None
                wanted = get(out, at) if at is not None else _MISSING
                if by - {manager}:
                    if wanted is not _MISSING and at is not None:
                        _delete(out, at)
                    applied = "left out"
                    changed = wanted is not _MISSING and wanted != was
                else:
                    if wanted is not _MISSING and at is not None:
                        _set(out, at, copy.deepcopy(was))
                    elif manager in by:  # Konfig owns it and dropped it: keep it as live
                        _insert(out, segments, was)
                    applied = "kept live"
                    changed = wanted != was and (wanted is not _MISSING or manager in by)
                if changed:
                    shown = text if len(wanted_at) <= 1 else pointer(path)
                    dotted = ".".join(str(s) for s in path)  # masked as a field change is
                    before, after = mask_field(
                        str(desired.get("apiVersion", "")),
                        str(desired.get("kind", "")),
                        dotted,
                        was,
                        None if wanted is _MISSING else wanted,
                    )
                    ignored.append(
                        IgnoredField(shown, before, after, rule.source, rule.reason, applied)
                    )
    return out, tuple(ignored)


def _fields_prefix(segments: Sequence[Segment]) -> list[str]:
    """A pointer as the fieldsV1 keys it names (a list item by its merge key)."""
    keys = []
    for seg in segments:
        keys.append(f"f:{seg.key}")
        if seg.item_key is not None:
            keys.append("k:" + json.dumps({seg.item_key: seg.item_value}, separators=(",", ":")))
    return keys


def without_ignored(
    drift: ObjectDrift,
    ref: ObjectRef,
    rules: Sequence[IgnoreRule],
    labels: Mapping[str, str] | None = None,
) -> ObjectDrift:
    """``drift`` without the fields a rule ignores (drift reads the same rules as
    preview and apply). Rules are matched on the object's group, kind, namespace, name
    and ``labels`` (the live object's, as the survey read them)."""
    if not drift.fields or not rules:
        return drift
    meta: dict[str, Any] = {"name": ref.name, "labels": dict(labels or {})}
    if ref.namespace:
        meta["namespace"] = ref.namespace
    shell = {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta}
    prefixes = [
        _fields_prefix(parse_pointer(p)) for r in rules if r.selects(shell) for p in r.paths
    ]
    kept = tuple(
        f for f in drift.fields if not any(list(f.keys[: len(p)]) == p for p in prefixes if f.keys)
    )
    if len(kept) == len(drift.fields):
        return drift
    if not kept:
        return ObjectDrift(drift.id, "in_sync")
    n = len(kept)
    return ObjectDrift(
        drift.id,
        drift.state,
        kept,
        f"{n} field{'s' if n != 1 else ''} changed outside Konfig since the last apply",
    )
