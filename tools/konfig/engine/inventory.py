"""The per-stack inventory: which objects a stack owns, kept in the cluster.

The inventory is an ApplySet-compatible parent object (kubectl
``pkg/cmd/apply/applyset.go``), so ``kubectl get <kind> -l
applyset.kubernetes.io/part-of=<id>`` and ``kubectl apply --prune --applyset``
understand it too:

* a **ConfigMap** in namespace ``konfig-system`` named by :func:`inventory_name`:
  ``konfig.<project>.<stack>`` (the stack's short address with ``/`` turned into
  ``.``) when no directory on the way has a ``.`` in its name and that is a valid
  name; otherwise ``konfig-<digest>.<readable>``, the digest the first 16 hex digits
  of SHA-256 of the exact stack path. No two stack paths share a name: the first form
  reads back into the path (``.`` only separates), the second never starts like the
  first, and two paths share a digest only by a SHA-256 collision. The Lease of the
  stack's lock has the same name;
* label ``applyset.kubernetes.io/id: applyset-<base64url(sha256(
  "<name>.<namespace>.ConfigMap."))>-v1`` (kubectl's formula: name, namespace,
  kind, group; the core group is empty);
* annotations ``applyset.kubernetes.io/tooling: konfig/<version>``,
  ``applyset.kubernetes.io/contains-group-kinds`` (sorted ``Kind.group``, core
  kinds as ``Kind``) and ``applyset.kubernetes.io/additional-namespaces`` (the
  members' namespaces other than ``konfig-system``);
* data ``stack`` (the stack path), ``members`` (JSON list of ``{"id", "uid"}``
  sorted by id; ``"finished"`` too for a Job that ran and removed itself, see
  :class:`Member`), ``commit`` (the git commit last applied), ``specDigest`` (the digest
  of the Spec really applied), ``appliedAt`` and ``dirty`` (``"true"`` when that Spec
  came from uncommitted changes on top of ``commit`` (``konfig apply --allow-dirty``):
  it matches no commit; absent in inventories older than the field: ``false``);
* binaryData ``appliedFields``: gzip-compressed JSON ``{"<member id>": <fieldsV1>}``,
  the fields Konfig owned on each member right after its last write to it (the
  ``managedFields`` entry of manager ``konfig``): what drift is measured against
  (:mod:`konfig.engine.drift`). Absent in inventories written before it existed, or
  when it would not fit (over :data:`MAX_APPLIED_FIELDS`): drift is then unknown.

Every member carries the label ``applyset.kubernetes.io/part-of: <applyset id>``.
Ownership of a live object is proven per object: its part-of label equals this
inventory's id AND its id is a member (and, when recorded, its UID matches).

**Names konfig gave before they were injective** (``konfig.<parts joined by .>`` for
every path: ``appops/p.x/y`` and ``appops/p/x.y`` shared ``konfig.p.x.y``): a stack whose
name changed reads its inventory from the old name when that one records exactly its
path (:func:`konfig.engine.inventory_store.read_inventory`, the old ApplySet id
accepted as proof of ownership);
its next apply writes the inventory under the new name, relabels every object it
applies, and deletes the old ConfigMap once it completed. An old inventory that
records another stack is never read as this stack's: a stack whose (unchanged) name
holds one is refused until that stack has been applied (:func:`parse_inventory`).

This module is the record and its ConfigMap form, plain data without I/O; reading and
writing it in the cluster is :mod:`konfig.engine.inventory_store`.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from konfig import __version__
from konfig.errors import KonfigError
from konfig.ids import ObjectRef, ResourceIdError, parse_id

NAMESPACE = "konfig-system"
PARENT_API_VERSION = "v1"
PARENT_KIND = "ConfigMap"
NAME_PREFIX = "konfig."
HASHED_PREFIX = "konfig-"  # never the start of a NAME_PREFIX name: the two forms differ
DIGEST_CHARS = 16  # hex digits of SHA-256 in a hashed name (64 bits)
APPOPS = "appops"

LABEL_ID = "applyset.kubernetes.io/id"
LABEL_PART_OF = "applyset.kubernetes.io/part-of"
ANNOTATION_TOOLING = "applyset.kubernetes.io/tooling"
ANNOTATION_GROUP_KINDS = "applyset.kubernetes.io/contains-group-kinds"
ANNOTATION_NAMESPACES = "applyset.kubernetes.io/additional-namespaces"
TOOLING = f"konfig/v{__version__}"

DATA_STACK = "stack"
DATA_MEMBERS = "members"
DATA_COMMIT = "commit"
DATA_DIGEST = "specDigest"
DATA_APPLIED_AT = "appliedAt"
DATA_DIRTY = "dirty"
# how the last complete apply relates to a review (konfig apply --reviewed): JSON with
# status (reviewed, changed, unreviewed), digest, reviewedDigest and pr; absent without
DATA_REVIEW = "review"
# the audit of the last complete apply (docs/owners.md): the identity the API server saw,
# and who approved which change (`konfig apply --approvals`)
DATA_APPLIED_BY = "appliedBy"
DATA_APPROVED_BY = "approvedBy"
DATA_APPROVED_CHANGE = "approvedChange"
# the policy overrides approved with it (JSON list of rule, reason, approvedBy)
DATA_APPROVED_OVERRIDES = "approvedOverrides"
BINARY_APPLIED_FIELDS = "appliedFields"
# Compressed bytes; a ConfigMap holds at most 1 MiB in all, and the members list too.
MAX_APPLIED_FIELDS = 512 * 1024

FieldSets = Mapping[str, Mapping[str, Any]]  # member id -> fieldsV1

# DNS-1123 subdomain: what ConfigMap and Lease names must be.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class InventoryError(KonfigError):
    """The inventory cannot be named, read or written."""


@dataclass(frozen=True, order=True)
class Member:
    """One object the stack owns: its Spec id and the UID it had when last seen.

    ``finished``: for a Job that removes itself (``ttlSecondsAfterFinished``), the digest
    (:func:`manifest_digest`) of the manifest that ran to completion: that Job being
    gone is then its expected end, not drift, and the same manifest is not run again.
    """

    id: str
    uid: str = ""
    finished: str = ""

    @property
    def ref(self) -> ObjectRef:
        return parse_id(self.id)


@dataclass(frozen=True)
class ApprovedOverride:
    """A policy override of the applied change (a rule its stack.yaml disables, a
    ``danger/<class>``), its reason, and the policy's owners who approved it."""

    rule: str
    reason: str
    approved_by: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "reason": self.reason, "approvedBy": list(self.approved_by)}


@dataclass(frozen=True)
class Audit:
    """Who applied a stack and who approved it (recorded with a complete apply)."""

    applied_by: str = ""
    approved_by: tuple[str, ...] = ()
    approved_change: str = ""
    overrides: tuple[ApprovedOverride, ...] = ()


@dataclass(frozen=True)
class Inventory:
    stack_path: str
    members: tuple[Member, ...]
    commit: str
    spec_digest: str
    applyset_id: str
    applied_at: str = ""
    name: str = ""
    uid: str = ""
    dirty: bool = False  # the last complete apply came from uncommitted changes
    # the last complete apply's review (DATA_REVIEW): None when applied without a record
    review: Mapping[str, Any] | None = field(default=None, compare=False)
    applied_by: str = ""  # the user the API server saw (an impersonated ServiceAccount)
    approved_by: tuple[str, ...] = ()  # owners who approved approved_change
    approved_change: str = ""  # the commit (or change digest) they approved
    approved_overrides: tuple[ApprovedOverride, ...] = ()  # and the overrides, with reasons
    # member id -> Konfig's fields right after its last write (None: not recorded)
    applied_fields: FieldSets | None = field(default=None, compare=False, repr=False)
    # The same stack's inventory under the name konfig gave it before names were
    # injective, still in the cluster: its ApplySet id proves ownership too, until an
    # apply completed under the new name and deleted it (former_name, former_uid).
    former_ids: frozenset[str] = frozenset()
    former_name: str = ""
    former_uid: str = ""

    @property
    def accepted_ids(self) -> frozenset[str]:
        """The ApplySet ids whose part-of label proves this stack's ownership."""
        return self.former_ids | {self.applyset_id}

    @property
    def audit(self) -> Audit:
        """The last complete apply's audit, as recorded."""
        return Audit(
            self.applied_by, self.approved_by, self.approved_change, self.approved_overrides
        )

    def ids(self) -> frozenset[str]:
        return frozenset(m.id for m in self.members)

    def member(self, resource_id: str) -> Member | None:
        for m in self.members:
            if m.id == resource_id:
                return m
        return None

    def owns(self, resource_id: str, live: Mapping[str, Any]) -> bool:
        """Proof of ownership of one live object (see the module docstring)."""
        member = self.member(resource_id)
        if member is None:
            return False
        meta = live.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(LABEL_PART_OF) not in self.accepted_ids:
            return False
        return not (member.uid and meta.get("uid") and meta.get("uid") != member.uid)


def stack_parts(stack_path: str) -> tuple[str, ...]:
    """``appops/<project>/<stack>`` (or ``<project>/<stack>``) → ``(project, stack...)``."""
    parts = PurePosixPath(stack_path.strip().strip("/")).parts
    if parts and parts[0] == APPOPS:
        parts = parts[1:]
    if len(parts) < 2:
        raise InventoryError(
            f"cannot name the inventory of {stack_path!r}: expected appops/<project>/<stack>"
        )
    return tuple(parts)


def legacy_inventory_name(stack: str | Any) -> str | None:
    """The name konfig gave the inventory before names were injective
    (``konfig.<parts joined by .>``), or None when that was not a valid name."""
    path = stack if isinstance(stack, str) else str(stack.path)
    name = NAME_PREFIX + ".".join(stack_parts(path))
    return name if len(name) <= 253 and _DNS_SUBDOMAIN.match(name) else None


def _readable(part: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", part.lower()).strip("-") or "x"


def inventory_name(stack: str | Any) -> str:
    """The inventory (and Lease) name of a stack (see the module docstring): no two
    stack paths share one.

    Accepts a :class:`konfig.repo.layout.Stack` or a stack path, so a stack whose directory
    no longer exists can still be addressed (destroy of a deleted stack).
    """
    path = stack_path_of(stack)
    parts = stack_parts(path)
    plain = legacy_inventory_name(path)
    if plain is not None and not any("." in p for p in parts):
        return plain
    digest = hashlib.sha256(path.encode()).hexdigest()[:DIGEST_CHARS]
    name = f"{HASHED_PREFIX}{digest}." + ".".join(_readable(p) for p in parts)
    return name[:253].rstrip(".-")


def stack_path_of(stack: str | Any) -> str:
    path = stack if isinstance(stack, str) else str(stack.path)
    parts = PurePosixPath(path.strip().strip("/")).parts
    if parts and parts[0] != APPOPS:
        parts = (APPOPS, *parts)
    return PurePosixPath(*parts).as_posix()


def applyset_id(name: str, namespace: str = NAMESPACE) -> str:
    """kubectl's ApplySet id for a ConfigMap parent (``V1ApplySetIdFormat``)."""
    digest = hashlib.sha256(f"{name}.{namespace}.{PARENT_KIND}.".encode()).digest()
    encoded = base64.urlsafe_b64encode(digest).decode().rstrip("=")
    return f"applyset-{encoded}-v1"


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    """A digest of a manifest as applied (for :attr:`Member.finished`)."""
    data = json.dumps(manifest, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode()).hexdigest()[:32]


def union_members(old: Iterable[Member], new: Iterable[Member]) -> tuple[Member, ...]:
    """Old and new members by id; a UID from ``new`` wins over the old one when set."""
    merged: dict[str, Member] = {}
    for m in old:
        merged[m.id] = m
    for m in new:
        prior = merged.get(m.id)
        merged[m.id] = m if m.uid or prior is None else prior
    return tuple(sorted(merged.values()))


def encode_fields(fields: FieldSets, ids: Iterable[str]) -> str | None:
    """``binaryData.appliedFields`` for the members ``ids`` (None: too large to keep)."""
    wanted = sorted(set(ids))
    doc = {i: fields[i] for i in wanted if i in fields}
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    packed = gzip.compress(raw, compresslevel=9, mtime=0)
    if len(packed) > MAX_APPLIED_FIELDS:
        return None
    return base64.b64encode(packed).decode()


def decode_fields(value: Any) -> dict[str, dict[str, Any]] | None:
    """The member id → fieldsV1 map of ``binaryData.appliedFields`` (None: unreadable).

    Unreadable is not an error: drift is then unknown until the next apply rewrites it.
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        doc = json.loads(gzip.decompress(base64.b64decode(value, validate=True)))
    except (binascii.Error, OSError, EOFError, ValueError):
        return None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        return None
    return {str(k): v for k, v in doc.items()}


def inventory_manifest(
    stack_path: str,
    members: Iterable[Member],
    *,
    commit: str,
    spec_digest: str,
    applied_at: str,
    dirty: bool = False,
    applied_fields: FieldSets | None = None,
    review: Mapping[str, Any] | None = None,
    audit: Audit | None = None,
) -> dict[str, Any]:
    """The ConfigMap that records an inventory (pure; for server-side apply)."""
    audit = audit or Audit()
    name = inventory_name(stack_path)
    ordered = sorted({m.id: m for m in members}.values())
    refs = [m.ref for m in ordered]
    group_kinds = sorted({r.group_kind for r in refs})
    namespaces = sorted({r.namespace for r in refs if r.namespace and r.namespace != NAMESPACE})
    return {
        "apiVersion": PARENT_API_VERSION,
        "kind": PARENT_KIND,
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {
                LABEL_ID: applyset_id(name),
                "app.kubernetes.io/managed-by": "konfig",
            },
            "annotations": {
                ANNOTATION_TOOLING: TOOLING,
                ANNOTATION_GROUP_KINDS: ",".join(group_kinds),
                ANNOTATION_NAMESPACES: ",".join(namespaces),
            },
        },
        "data": {
            DATA_STACK: stack_path_of(stack_path),
            DATA_MEMBERS: json.dumps(
                [
                    {"id": m.id, "uid": m.uid, **({"finished": m.finished} if m.finished else {})}
                    for m in ordered
                ],
                separators=(",", ":"),
            ),
            DATA_COMMIT: commit,
            DATA_DIGEST: spec_digest,
            DATA_APPLIED_AT: applied_at,
            DATA_DIRTY: "true" if dirty else "false",
            **({DATA_REVIEW: json.dumps(dict(review), sort_keys=True)} if review else {}),
            DATA_APPLIED_BY: audit.applied_by,
            DATA_APPROVED_BY: ",".join(audit.approved_by),
            DATA_APPROVED_CHANGE: audit.approved_change,
            DATA_APPROVED_OVERRIDES: json.dumps([o.to_json() for o in audit.overrides])
            if audit.overrides
            else "",
        },
        **_binary(applied_fields, [m.id for m in ordered]),
    }


def _binary(fields: FieldSets | None, ids: list[str]) -> dict[str, Any]:
    encoded = None if fields is None else encode_fields(fields, ids)
    # Always sent, so that server-side apply drops an old value that no longer fits.
    return {"binaryData": {BINARY_APPLIED_FIELDS: encoded} if encoded else {}}


def repair_hint(name: str, obj: Mapping[str, Any] | None = None) -> str:
    """How to repair a hand-edited inventory: restore the field, or delete it and apply."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    kinds = str(annotations.get(ANNOTATION_GROUP_KINDS) or "").strip() or "<kinds>"
    return (
        "konfig alone writes this ConfigMap; a hand edit broke it. Either put the field "
        f"back (kubectl -n {NAMESPACE} edit configmap {name}; data.{DATA_MEMBERS} is a "
        'JSON list of {"id": "<apiVersion>:<Kind>:<namespace>:<name>", "uid": "..."}), '
        f"or delete it (kubectl -n {NAMESPACE} delete configmap {name}) and apply the "
        "stack again: the apply records what the stack declares, and objects it no "
        "longer declares are then not pruned; list them with kubectl get "
        f"{kinds} -A -l {LABEL_PART_OF}={applyset_id(name)}"
    )


def former_name_of(stack_path: str) -> str | None:
    """The legacy name of ``stack_path`` when it differs from its name now."""
    try:
        old = legacy_inventory_name(stack_path)
        return old if old != inventory_name(stack_path) else None
    except InventoryError:
        return None


def _review(raw: Any) -> dict[str, Any] | None:
    """The recorded review (DATA_REVIEW), or None: absent, or not the record konfig writes
    (a hand edit is ignored, never trusted for more than it says)."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.get("status") not in (
        "reviewed",
        "changed",
        "unreviewed",
        "released",
    ):
        return None
    pr = data.get("pr")
    return {
        "status": data["status"],
        "digest": str(data.get("digest") or "") or None,
        "reviewedDigest": str(data.get("reviewedDigest") or "") or None,
        "pr": pr if isinstance(pr, int) and not isinstance(pr, bool) else None,
    }


def parse_inventory(obj: Mapping[str, Any], *, stack: str | None = None) -> Inventory:
    """Read an inventory ConfigMap; raises InventoryError naming the object, the field
    and how to repair it when it is malformed (a hand edit). ``stack``: the stack path
    it must record."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    where = f"inventory ConfigMap {NAMESPACE}/{name}"
    data = obj.get("data") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    expected = applyset_id(name, str(meta.get("namespace") or NAMESPACE))
    ours = str(annotations.get(ANNOTATION_TOOLING) or "").startswith("konfig/") or (
        DATA_MEMBERS in data and DATA_STACK in data
    )
    if labels.get(LABEL_ID) != expected:
        if not ours:
            raise InventoryError(
                f"ConfigMap {NAMESPACE}/{name} is not a Konfig inventory: label {LABEL_ID} "
                f"is {labels.get(LABEL_ID)!r}, expected {expected!r}",
                hint="another tool owns this name; delete or rename it",
            )
        found = "missing" if LABEL_ID not in labels else f"{labels[LABEL_ID]!r}"
        raise InventoryError(
            f"{where}: label {LABEL_ID} is {found}, expected {expected!r} (changed by hand?)",
            hint=f"put it back: kubectl -n {NAMESPACE} label --overwrite configmap {name} "
            f"{LABEL_ID}={expected}",
        )
    if DATA_MEMBERS not in data:
        raise InventoryError(f"{where} has no data.{DATA_MEMBERS}", hint=repair_hint(name, obj))
    try:
        raw = json.loads(data.get(DATA_MEMBERS) or "[]")
    except (json.JSONDecodeError, TypeError) as exc:
        raise InventoryError(
            f"{where}: data.{DATA_MEMBERS} is not JSON: {exc}", hint=repair_hint(name, obj)
        ) from None
    if not isinstance(raw, list):
        raise InventoryError(
            f"{where}: data.{DATA_MEMBERS} must be a JSON list, not {type(raw).__name__}",
            hint=repair_hint(name, obj),
        )
    members: list[Member] = []
    for number, item in enumerate(raw, 1):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise InventoryError(
                f'{where}: data.{DATA_MEMBERS} entry {number} has no "id" string: '
                f"{json.dumps(item)[:200]}",
                hint=repair_hint(name, obj),
            )
        try:
            parse_id(item["id"])
        except ResourceIdError as exc:
            raise InventoryError(
                f"{where}: data.{DATA_MEMBERS} entry {number}: {exc.message}",
                hint=repair_hint(name, obj),
            ) from None
        uid = item.get("uid") or ""
        if not isinstance(uid, str):
            raise InventoryError(
                f'{where}: data.{DATA_MEMBERS} entry {number} ({item["id"]}): "uid" must '
                f"be a string, not {json.dumps(uid)[:100]}",
                hint=repair_hint(name, obj),
            )
        finished = item.get("finished") or ""
        members.append(Member(item["id"], uid, finished if isinstance(finished, str) else ""))
    recorded = str(data.get(DATA_STACK) or "")
    if stack is not None and recorded and recorded != stack_path_of(stack):
        if former_name_of(recorded) == name:
            raise InventoryError(
                f"{where} is the inventory of {recorded!r}, under the name konfig gave it "
                f"before names were injective; {stack_path_of(stack)!r} has that name now, "
                "and konfig will not read another stack's inventory as its own: nothing "
                f"was planned or written for {stack_path_of(stack)!r}",
                hint=f"apply {recorded!r} first (konfig moves its inventory to its own name, "
                f"{inventory_name(recorded)}), or destroy it if it is gone from the "
                f"repository; then {stack_path_of(stack)!r}",
            )
        raise InventoryError(
            f"{where}: data.{DATA_STACK} is {recorded!r}, but this ConfigMap is the "
            f"inventory of {stack_path_of(stack)!r} (changed or copied by hand?)",
            hint=f"set data.{DATA_STACK} back to {stack_path_of(stack)!r}: kubectl -n "
            f"{NAMESPACE} edit configmap {name}",
        )
    return Inventory(
        stack_path=recorded,
        members=tuple(sorted(members)),
        commit=str(data.get(DATA_COMMIT) or ""),
        spec_digest=str(data.get(DATA_DIGEST) or ""),
        applyset_id=expected,
        applied_at=str(data.get(DATA_APPLIED_AT) or ""),
        name=name,
        uid=str(meta.get("uid") or ""),
        dirty=str(data.get(DATA_DIRTY) or "").lower() == "true",
        review=_review(data.get(DATA_REVIEW)),
        applied_by=str(data.get(DATA_APPLIED_BY) or ""),
        approved_by=tuple(a for a in str(data.get(DATA_APPROVED_BY) or "").split(",") if a),
        approved_change=str(data.get(DATA_APPROVED_CHANGE) or ""),
        approved_overrides=_overrides(data.get(DATA_APPROVED_OVERRIDES)),
        applied_fields=decode_fields((obj.get("binaryData") or {}).get(BINARY_APPLIED_FIELDS)),
    )


def _overrides(text: Any) -> tuple[ApprovedOverride, ...]:
    """The recorded policy overrides (anything else in the field: none)."""
    try:
        items = json.loads(str(text)) if text else []
    except ValueError:
        return ()
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("rule"), str):
            by = item.get("approvedBy")
            out.append(
                ApprovedOverride(
                    item["rule"],
                    str(item.get("reason") or ""),
                    tuple(str(a) for a in by) if isinstance(by, list) else (),
                )
            )
    return tuple(out)


def label_member(manifest: Mapping[str, Any], set_id: str) -> dict[str, Any]:
    """A copy of ``manifest`` with the ``part-of`` label of the ApplySet ``set_id``."""
    out = dict(manifest)
    meta = dict(out.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    labels[LABEL_PART_OF] = set_id
    meta["labels"] = labels
    out["metadata"] = meta
    return out


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
