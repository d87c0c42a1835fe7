"""The guards of apply and prune: each a small named rule that can stop one object.

In the spirit of kubernetes-sigs/cli-utils ``pkg/apply/filter``: every rule that keeps
Konfig from writing or deleting an object is an object of its own with a ``name`` and
a reason it gives, so each can be read, tested on plain dicts and reported on its own.

Prune guards (:func:`prune_guards`, asked in this order before each delete):

- ``ownership``: the inventory proves it owns the live object (part-of label and, when
  recorded, UID); otherwise the object is left alone and leaves the inventory;
- ``protected-namespace``: Konfig never deletes ``default`` nor a ``kube-*`` Namespace;
- ``namespace-in-use``: a Namespace that still holds objects of other owners stays
  (and stays in the inventory until they are gone);
- ``crd-in-use``: a CustomResourceDefinition whose custom resources other owners hold
  stays (deleting it would delete them, cluster-wide).

Apply guards:

- ``replace-opt-in`` (:func:`replace_allowed`): an object whose immutable fields changed
  is deleted and re-created only when the stack or the object opts in;
- ``foreign-owner`` (:func:`foreign_owner`): an object another inventory owns is never
  taken over;
- ``unmanaged`` (:func:`unmanaged_by`) and ``adopt-opt-in`` (:func:`adopt_allowed`): an
  object that exists without any inventory's label is taken over only when the stack
  or the object opts in.

- ``danger/confirm`` (:func:`unconfirmed`): the changes whose danger classes
  ``konfig.yaml`` ``dangers.confirm`` lists, and every delete of a stack that deletes
  more objects (or a larger share of them) than ``dangers.maxDeletes`` /
  ``maxDeletePercent``, need a confirmation bound to them (``--confirm PATH=DIGEST``);
  the preview marks them refused, apply refuses the stack (docs/danger.md).

Both ownership guards make the planned change a ``conflict`` (with the owner), so the
pull request's preview shows it and apply refuses the stack before any write.

The guards that look at the cluster read it through a :class:`ClusterReader`: the
engine passes one over the live API (with retries), tests one over plain dicts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from konfig.engine.inventory import LABEL_PART_OF, Inventory
from konfig.engine.kube import KubeApiError, KubeError
from konfig.engine.plan import StackPlan
from konfig.ids import ObjectRef, format_id

PROTECTED_NAMESPACES = ("default",)
PROTECTED_PREFIX = "kube-"
REPLACE_ANNOTATION = "konfig.io/replace-on-immutable"
ADOPT_ANNOTATION = "konfig.io/adopt"

# Before a Namespace is pruned every listable namespaced kind is listed in it; these
# objects are made by the cluster itself, never by another owner.
CLUSTER_MADE_KINDS = frozenset({"Event", "Endpoints", "EndpointSlice"})
CLUSTER_MADE = frozenset({("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")})


class ClusterReader(Protocol):
    """What the cluster-reading guards need of the API (a part of ``Kube``).

    ``list`` raises :class:`~konfig.engine.kube.KubeApiError` for a kind the caller may
    not list and :class:`~konfig.engine.kube.KubeError` for a kind not served.
    """

    def namespaced_kinds(self) -> Iterable[tuple[str, str]]: ...

    def list(
        self, api_version: str, kind: str, namespace: str | None = None
    ) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Candidate:
    """One object a guard is asked about: its Spec id, where it lives, its live state."""

    id: str
    ref: ObjectRef
    live: Mapping[str, Any]


@dataclass(frozen=True)
class Objection:
    """A guard's answer that stops the object; ``keep_member``: it stays in the inventory."""

    guard: str
    reason: str
    keep_member: bool


class PruneGuard(Protocol):
    @property
    def name(self) -> str:
        """The guard's name, as reported with what it kept."""
        ...

    def objection(self, candidate: Candidate) -> Objection | None:
        """Why ``candidate`` must not be deleted, or None when this guard lets it go."""
        ...


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


@dataclass(frozen=True)
class OwnershipProven:
    """Delete only what the inventory provably owns (ENGINE.md: ownership per object)."""

    inventory: Inventory
    name: str = "ownership"

    def objection(self, candidate: Candidate) -> Objection | None:
        if self.inventory.owns(candidate.id, candidate.live):
            return None
        ref = candidate.ref
        return Objection(
            self.name,
            f"kept {ref.describe()}: not "
            f"provably owned by this stack (its {LABEL_PART_OF} label or UID differs); "
            "dropped from the inventory",
            keep_member=False,
        )


def is_protected_namespace(ref: ObjectRef) -> bool:
    """``default`` and ``kube-*`` Namespaces: the cluster's own."""
    return (
        ref.kind == "Namespace"
        and ref.api_version == "v1"
        and (ref.name in PROTECTED_NAMESPACES or ref.name.startswith(PROTECTED_PREFIX))
    )


@dataclass(frozen=True)
class ProtectedNamespace:
    """Never delete ``default`` nor a ``kube-*`` Namespace."""

    name: str = "protected-namespace"

    def objection(self, candidate: Candidate) -> Objection | None:
        if not is_protected_namespace(candidate.ref):
            return None
        return Objection(
            self.name, f"kept Namespace {candidate.ref.name}: konfig never deletes it", False
        )


@dataclass(frozen=True)
class InUse:
    """A guard that keeps an object while objects of other owners need it, unless its
    deletion is a confirmed cascade (``cascades``: the object's id -> the live objects
    the confirmation counted, :func:`konfig.engine.danger.confirmed_cascades`) and no
    more than that are there: then it goes, and what goes with it is in ``taken``."""

    reader: ClusterReader
    members: frozenset[str]
    set_id: str
    cascades: Mapping[str, int] = field(default_factory=dict)
    taken: dict[str, list[str]] = field(default_factory=dict, compare=False)

    def _judged(
        self, guard: str, candidate: Candidate, what: str, others: Sequence[str]
    ) -> Objection | None:
        confirmed = self.cascades.get(candidate.id)
        if others and confirmed is not None and len(others) <= confirmed:
            self.taken[candidate.id] = list(others)
            return None
        if others and confirmed is not None:
            what += (
                f" ({len(others)}, more than the {confirmed} the confirmed cascade counted: "
                "preview it again and confirm the new digest)"
            )
        return self._kept(guard, what, others)

    def _kept(self, guard: str, what: str, others: Sequence[str]) -> Objection | None:
        if not others:
            return None
        shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
        return Objection(
            guard,
            f"kept {what} ({shown}); it stays in the inventory and is pruned once they are "
            "gone, or with them once its cascade is confirmed (konfig.yaml dangers.confirm: "
            "[cascade], then --confirm STACK=DIGEST as the preview names it: docs/danger.md)",
            keep_member=True,
        )


def others_in_namespace(
    namespace: str,
    listed: Iterable[tuple[str, str, Mapping[str, Any]]],
    members: Iterable[str],
    set_id: str,
) -> list[str]:
    """``Kind/name`` of the objects in ``namespace`` that belong to someone else.

    ``listed`` holds ``(apiVersion, kind, object)`` for every object found there. Not
    counted: what the cluster makes itself, objects with an owner reference (their
    owner decides), service-account tokens, objects being deleted, and our members.
    """
    ours = set(members)
    found: list[str] = []
    for api_version, kind, obj in listed:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        rid = format_id(api_version, kind, namespace, name)
        if (kind, name) in CLUSTER_MADE or meta.get("ownerReferences"):
            continue
        if kind == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
            continue
        if rid in ours and _labels(obj).get(LABEL_PART_OF) == set_id:
            continue
        if meta.get("deletionTimestamp"):
            continue
        found.append(f"{kind}/{name}")
    return found


@dataclass(frozen=True)
class NamespaceHoldsOthers(InUse):
    """Keep a Namespace that still holds objects of other owners (every listable kind),
    unless its deletion is a confirmed cascade that counted them (:class:`InUse`)."""

    name: str = "namespace-in-use"

    def objection(self, candidate: Candidate) -> Objection | None:
        ref = candidate.ref
        if ref.kind != "Namespace" or ref.api_version != "v1":
            return None
        others = others_in_namespace(ref.name, self._listed(ref.name), self.members, self.set_id)
        what = f"Namespace {ref.name}: it still holds objects of other owners"
        return self._judged(self.name, candidate, what, others)

    def _listed(self, namespace: str) -> list[tuple[str, str, Mapping[str, Any]]]:
        listed: list[tuple[str, str, Mapping[str, Any]]] = []
        for api_version, kind in sorted(set(self.reader.namespaced_kinds())):
            if kind in CLUSTER_MADE_KINDS:
                continue
            try:
                items = self.reader.list(api_version, kind, namespace)
            except KubeApiError:
                continue  # not listable for us (403, 405): nothing we could judge
            listed.extend((api_version, kind, obj) for obj in items)
        return listed


def served_kind(crd: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(apiVersion, kind)`` of a CRD's custom resources (first served version)."""
    spec = crd.get("spec") or {}
    group = str(spec.get("group", ""))
    kind = str((spec.get("names") or {}).get("kind", ""))
    served = [v.get("name") for v in spec.get("versions") or [] if v.get("served")]
    if not group or not kind or not served:
        return None
    return f"{group}/{served[0]}", kind


def others_of_kind(
    api_version: str,
    kind: str,
    items: Iterable[Mapping[str, Any]],
    members: Iterable[str],
    set_id: str,
) -> list[str]:
    """``Kind/name [in ns]`` of the custom resources that are not ours nor being deleted."""
    ours = set(members)
    found: list[str] = []
    for obj in items:
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace"), str(meta.get("name", ""))
        rid = format_id(api_version, kind, str(ns) if ns else None, name)
        mine = _labels(obj).get(LABEL_PART_OF) == set_id and rid in ours
        if not mine and not meta.get("deletionTimestamp"):
            found.append(f"{kind}/{name}" + (f" in {ns}" if ns else ""))
    return found


@dataclass(frozen=True)
class CrdHasInstances(InUse):
    """Keep a CRD whose custom resources other owners hold (deleting it deletes them,
    cluster-wide), unless its deletion is a confirmed cascade that counted them
    (:class:`InUse`)."""

    name: str = "crd-in-use"

    def objection(self, candidate: Candidate) -> Objection | None:
        if candidate.ref.kind != "CustomResourceDefinition":
            return None
        kind = served_kind(candidate.live)
        if kind is None:
            return None
        try:
            items = self.reader.list(kind[0], kind[1])
        except KubeError:
            return None  # the kind is not served (any more): nothing left to protect
        others = others_of_kind(kind[0], kind[1], items, self.members, self.set_id)
        what = (
            f"CustomResourceDefinition {candidate.ref.name}: deleting it would delete custom "
            "resources of other owners"
        )
        return self._judged(self.name, candidate, what, others)


def prune_guards(
    inventory: Inventory,
    reader: ClusterReader,
    set_id: str,
    cascades: Mapping[str, int] | None = None,
) -> tuple[PruneGuard, ...]:
    """The prune guards in the order they are asked (the cheap, local ones first);
    ``cascades``: the confirmed ones (a Namespace's or a CRD's, :class:`InUse`); the
    two in-use guards share one ``taken``."""
    members = inventory.ids()
    confirmed = dict(cascades or {})
    taken: dict[str, list[str]] = {}
    return (
        OwnershipProven(inventory),
        ProtectedNamespace(),
        NamespaceHoldsOthers(reader, members, set_id, confirmed, taken),
        CrdHasInstances(reader, members, set_id, confirmed, taken),
    )


def first_objection(guards: Iterable[PruneGuard], candidate: Candidate) -> Objection | None:
    """The first guard's objection to deleting ``candidate``, or None: it may go."""
    for guard in guards:
        found = guard.objection(candidate)
        if found is not None:
            return found
    return None


# --- apply guards ------------------------------------------------------------------------


def _opted_in(desired: Mapping[str, Any] | None, annotation: str) -> bool:
    annotations = ((desired or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(annotation, "")).lower() == "true"


def replace_allowed(desired: Mapping[str, Any] | None, *, stack_opts_in: bool) -> bool:
    """``replace-opt-in``: delete and re-create on an immutable-field change only when the
    stack (``apply: {replaceOnImmutable: true}``) or the object (annotation) opts in."""
    return stack_opts_in or _opted_in(desired, REPLACE_ANNOTATION)


def adopt_allowed(desired: Mapping[str, Any] | None, *, stack_opts_in: bool) -> bool:
    """``adopt-opt-in``: take over an object no inventory owns only when the stack
    (``apply: {adoptUnmanaged: true}``) or the object (annotation) opts in."""
    return stack_opts_in or _opted_in(desired, ADOPT_ANNOTATION)


def unmanaged_by(live: Mapping[str, Any]) -> str | None:
    """``unmanaged``: who manages ``live`` when no inventory's label is on it (its field
    managers, or "no field manager"); None when an inventory's label is there."""
    if _labels(live).get(LABEL_PART_OF):
        return None
    fields = (live.get("metadata") or {}).get("managedFields") or []
    managers = sorted({str(f.get("manager")) for f in fields if f.get("manager")})
    return ", ".join(managers) if managers else "no field manager"


def foreign_owner(live: Mapping[str, Any], ours: str | Collection[str]) -> str | None:
    """``foreign-owner``: the ApplySet id of another inventory that owns ``live``, or None.
    ``ours``: this stack's ApplySet id (or ids: its own and a former name's)."""
    owner = str(_labels(live).get(LABEL_PART_OF) or "")
    mine = {ours} if isinstance(ours, str) else set(ours)
    return owner if owner and owner not in mine else None


# --- danger confirmation -----------------------------------------------------------------

CONFIRM_RULE = "danger/confirm"


@dataclass(frozen=True)
class DangerPolicy:
    """``konfig.yaml`` ``dangers``: which danger classes (docs/danger.md) need a
    confirmation before apply, and the count guard: deleting more than ``max_deletes``
    objects, or more than ``max_delete_percent`` % of a stack's objects."""

    confirm: tuple[str, ...] = ()
    max_deletes: int | None = None
    max_delete_percent: float | None = None

    @classmethod
    def of(cls, settings: Mapping[str, Any] | None) -> DangerPolicy:
        """From ``konfig.yaml``'s ``dangers`` (already held to its contract)."""
        data = settings or {}
        percent = data.get("maxDeletePercent")
        return cls(
            tuple(data.get("confirm") or ()),
            data.get("maxDeletes"),
            None if percent is None else float(percent),
        )

    @property
    def active(self) -> bool:
        return (
            bool(self.confirm)
            or self.max_deletes is not None
            or (self.max_delete_percent is not None)
        )

    def stricter(self, other: DangerPolicy) -> DangerPolicy:
        """Both policies at once: every class either confirms, the lower of each limit
        (a merged change is held to the policy before it too: it cannot relax its own)."""

        def low(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else min(a, b)

        deletes = low(self.max_deletes, other.max_deletes)
        return DangerPolicy(
            tuple(dict.fromkeys((*self.confirm, *other.confirm))),
            None if deletes is None else int(deletes),
            low(self.max_delete_percent, other.max_delete_percent),
        )


@dataclass(frozen=True)
class DangerGuard:
    """``danger/confirm``: the policy, and the confirmations given (stack path -> the
    confirmation digests given for it, ``konfig apply --confirm PATH=DIGEST``, repeatable:
    one of them must be the change's)."""

    policy: DangerPolicy
    confirmed: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Unconfirmed:
    """What ``danger/confirm`` stops in one stack: why per change id, and the digest a
    confirmation must name."""

    digest: str
    why: Mapping[str, str]
    summary: str


CONFIRM_DIGITS = 16  # a confirmation names the first digits of the change digest


def confirmation_digest(plan: StackPlan) -> str:
    """The digest a confirmation is bound to: the stack's change digest
    (:func:`konfig.engine.digest.change_digest`, what reviewers approve), so that a
    push that changes the stack's change, its dangers included, needs a new one; with
    the live count of each ``cascade`` (what a deleted Namespace or CRD takes with it)
    when the plan was assessed against the cluster, so that a confirmation covers the
    objects the reviewer was shown and no more."""
    from konfig.engine.digest import change_digest  # scrypt for Secrets: only when asked

    digest = change_digest(plan).digest
    counts = sorted(
        (c.id, d.objects)
        for c in plan.changes
        for d in c.dangers
        if d.name == "cascade" and d.objects is not None
    )
    if counts:
        body = json.dumps([digest, counts], separators=(",", ":"))
        digest = hashlib.sha256(body.encode()).hexdigest()
    return digest[:CONFIRM_DIGITS]


def unconfirmed(plan: StackPlan, guard: DangerGuard | None) -> Unconfirmed | None:
    """``danger/confirm``: the changes of ``plan`` (its dangers assessed) that need a
    confirmation the guard does not hold, or None."""
    if guard is None or not guard.policy.active:
        return None
    policy = guard.policy
    why: dict[str, str] = {}
    items: list[tuple[str, str, str]] = []
    for change in plan.changes:
        wanted = [d.name for d in change.dangers if d.name in policy.confirm]
        if wanted:
            why[change.id] = f"{', '.join(dict.fromkeys(wanted))} needs a confirmation"
            items += [(change.id, change.action, name) for name in wanted]
    deletes = [c for c in plan.changes if c.action == "delete"]
    held = [c for c in plan.changes if c.action in ("update", "replace", "delete", "unchanged")]
    over: list[str] = []
    if policy.max_deletes is not None and len(deletes) > policy.max_deletes:
        over.append(f"deletes {len(deletes)} objects (more than {policy.max_deletes})")
    if (
        policy.max_delete_percent is not None
        and deletes
        and 100 * len(deletes) / len(held) > policy.max_delete_percent
    ):
        share = 100 * len(deletes) / len(held)
        over.append(
            f"deletes {share:.0f}% of its {len(held)} objects (more than "
            f"{policy.max_delete_percent:g}%)"
        )
    if over:
        for change in deletes:
            why[change.id] = "; ".join([*([why[change.id]] if change.id in why else []), *over])
            items.append((change.id, change.action, "count"))
    if not why:
        return None
    digest = confirmation_digest(plan)
    if digest in guard.confirmed.get(plan.path, frozenset()):
        return None
    parts = sorted({n for _, _, n in items if n != "count"})
    summary = ", ".join(parts) + ("; " if parts and over else "") + "; ".join(over)
    return Unconfirmed(digest, why, summary)


def confirm_hint(path: str, found: Unconfirmed) -> str:
    return (
        f"review the dangers, then confirm: `konfig apply --confirm {path}={found.digest}` "
        "(a confirmation is bound to the stack's change digest: a change to it needs a new one; "
        "konfig.yaml `dangers` says what needs one, docs/danger.md)"
    )


def mark_unconfirmed(plan: StackPlan, guard: DangerGuard | None) -> StackPlan:
    """``plan`` with each change ``danger/confirm`` stops marked ``refused`` (the
    preview shows it; apply refuses the stack: :func:`unconfirmed`)."""
    found = unconfirmed(plan, guard)
    if found is None:
        return plan
    marked = tuple(
        replace(
            c,
            refused=f"{CONFIRM_RULE}: {found.why[c.id]} "
            f"(`konfig apply --confirm {plan.path}={found.digest}`)",
        )
        if c.id in found.why and not c.refused
        else c
        for c in plan.changes
    )
    return replace(plan, changes=marked)
