"""The change digest of one stack's plan: what a reviewer approved, as one comparable value.

A preview's plan (:class:`~konfig.engine.plan.StackPlan`) becomes a :class:`ChangeDigest`:

- the **change set**, normalised: per object that changes, its id, its action and the
  digest of each changed field's new value by field path (a create or delete: the
  digest of the whole object; a Secret's values and sensitive annotations only as a
  salted, slow digest, :func:`secret_digest`: never the value, and not one a
  dictionary attack can reverse cheaply). The stack's **digest** is the sha256 of it;
  two previews of the same change give the same digest on any machine (canonical
  JSON, no time, no order of the server's answers);
- **what the cluster already differs in**: a field someone changed outside Konfig that
  the repository does not change (drift, :mod:`konfig.engine.drift`) is listed but not
  counted, so a ``kubectl edit`` between preview and merge does not make the change a
  different one; a drifted field the repository *does* change leaves the change set
  (it is no longer a change of the repository's): that counts;
- the **live fingerprint** it was computed against: uid and resourceVersion of every
  object it touches, and OpenTofu's state lineage and serial (not counted: the cluster
  moves all the time; apply uses the ones it reads as preconditions instead);
- the Spec's digest (recorded, not counted: a Spec may change without changing what
  applying it changes, e.g. once another merge applied the same base change).

:func:`differences` says how a recomputed digest differs from a reviewed one, path by
path. Plain data in and out; nothing here talks to the cluster.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from konfig.engine.diff import leaves, normalize, segment
from konfig.engine.plan import CHANGING, CONFLICT, Change, StackPlan
from konfig.errors import KonfigError
from konfig.masking import MASK, MASK_AFTER, MASK_BEFORE

VERSION = "konfig-change-digest-v1"
# Digests of single values: 16 hex digits (64 bits) keep the record small; the stack's
# digest is a full sha256.
VALUE_DIGITS = 16
_MASKED = frozenset({MASK, MASK_AFTER, MASK_BEFORE})
# scrypt's cost for a secret value's digest (about 16 MiB and tens of milliseconds): a
# digest posted in a pull request must not give a short password away to a brute force.
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def value_digest(value: Any) -> str:
    """The digest of a plain (not secret) value: sha256 of its canonical JSON."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode()).hexdigest()[:VALUE_DIGITS]


def secret_digest(value: Any, *, salt: str) -> str:
    """The digest of a secret value: scrypt, salted with where the value lives (stack,
    object, field), so equal values elsewhere differ and no table reverses it."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    out = hashlib.scrypt(
        data.encode(), salt=(VERSION + "\0" + salt).encode(), dklen=VALUE_DIGITS // 2, **_SCRYPT
    )
    return "s" + out.hex()[: VALUE_DIGITS - 1]


@dataclass(frozen=True)
class ObjectDigest:
    """One object of the change set: its action and what it sets."""

    id: str
    action: str
    fields: tuple[tuple[str, str], ...]  # (field path, digest of the new value), sorted
    secrets: tuple[tuple[str, str], ...] = ()  # (key, status) of values from encrypted files

    @property
    def digest(self) -> str:
        return _sha256(self.to_dict(with_digest=False))[:VALUE_DIGITS]

    def to_dict(self, *, with_digest: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "action": self.action,
            "fields": dict(self.fields),
        }
        if self.secrets:
            out["secrets"] = dict(self.secrets)
        if with_digest:
            out["digest"] = self.digest
        return out


@dataclass(frozen=True)
class LiveVersion:
    """The version of a live object a digest was computed against."""

    id: str
    uid: str
    resource_version: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "uid": self.uid, "resourceVersion": self.resource_version}


@dataclass(frozen=True)
class ChangeDigest:
    """A stack's change digest with what it was computed from (see the module)."""

    digest: str
    spec_digest: str | None
    objects: tuple[ObjectDigest, ...]
    cluster_differs: tuple[tuple[str, str], ...] = ()  # (object id, field path): not counted
    live: tuple[LiveVersion, ...] = ()
    tofu_state: tuple[str, int] | None = None  # OpenTofu's (lineage, serial)
    # (file, sha256 of its bytes) of the encrypted files the stack's Secrets read: counted
    sealed: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "sealed": dict(self.sealed),
            "specDigest": self.spec_digest,
            "objects": [o.to_dict() for o in self.objects],
            "clusterDiffers": [{"id": i, "path": p} for i, p in self.cluster_differs],
            "live": [v.to_dict() for v in self.live],
            "tofuState": (
                None
                if self.tofu_state is None
                else {"lineage": self.tofu_state[0], "serial": self.tofu_state[1]}
            ),
        }

    @classmethod
    def from_dict(cls, path: str, data: Mapping[str, Any]) -> ChangeDigest:
        """The digest of stack ``path`` from a record already checked against its
        contract; refused (:class:`DigestError`) when its digest is not the one of its
        change set (a record edited by hand or by someone else)."""
        objects = tuple(
            ObjectDigest(
                str(o["id"]),
                str(o["action"]),
                tuple(sorted((str(k), str(v)) for k, v in (o.get("fields") or {}).items())),
                tuple(sorted((str(k), str(v)) for k, v in (o.get("secrets") or {}).items())),
            )
            for o in data.get("objects") or []
        )
        state = data.get("tofuState")
        sealed = tuple(sorted((str(k), str(v)) for k, v in (data.get("sealed") or {}).items()))
        if _stack_sha(path, objects, sealed) != data["digest"]:
            raise DigestError(
                f"{path}: the recorded digest is not the digest of the recorded change set "
                "(the record was altered)"
            )
        return cls(
            str(data["digest"]),
            data.get("specDigest"),
            objects,
            tuple((str(d["id"]), str(d["path"])) for d in data.get("clusterDiffers") or []),
            tuple(
                LiveVersion(str(v["id"]), str(v["uid"]), str(v["resourceVersion"]))
                for v in data.get("live") or []
            ),
            None if not state else (str(state["lineage"]), int(state["serial"])),
            sealed,
        )


class DigestError(KonfigError):
    """A recorded change digest does not hold together."""


def _stack_sha(
    path: str, objects: Sequence[ObjectDigest], sealed: Sequence[tuple[str, str]]
) -> str:
    body: list[Any] = [VERSION, path, [o.to_dict() for o in objects]]
    if sealed:  # (a stack without encrypted files keeps the digest it had before)
        body.append(dict(sealed))
    return _sha256(body)


def _sha256(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _object_digest(stack: str, change: Change) -> tuple[ObjectDigest | None, list[str]]:
    """The object's part of the change set (None: nothing the repository changes) and
    the paths where the cluster already differs without the repository changing them."""
    drifted = change.drift is not None and change.drift.drifted
    if drifted and change.drift is not None and change.drift.state in ("deleted", "recreated"):
        # gone or re-created out of band: the whole object differs, not the repository's doing
        return None, ["(the whole object)"]
    if change.action == "delete":
        return ObjectDigest(change.id, change.action, ()), []
    raw = leaves(normalize(change.desired))
    counted: list[tuple[str, str]] = []
    differs: list[str] = []
    # values from encrypted files (or generated): what the plan knows of them depends on
    # the key at hand (a preview without the production key compares none), so they count
    # by the digest of their files (ChangeDigest.sealed), never by value or verdict here
    sealed = {("data" + segment(k.key)) for k in change.secrets}
    for f in change.fields:
        if f.path in sealed:
            continue
        if f.drift:
            differs.append(f.path)
            continue
        if isinstance(f.after, str) and f.after in _MASKED:
            salt = f"{stack}\0{change.id}\0{f.path}"
            counted.append((f.path, secret_digest(raw.get(f.path, f.after), salt=salt)))
        else:
            counted.append((f.path, value_digest(f.after)))
    secrets = tuple(sorted((k.key, "sealed") for k in change.secrets))
    if change.action == "update" and not counted:
        # only drift (apply sets it back) or sealed values (counted by their files)
        return None, differs
    return ObjectDigest(change.id, change.action, tuple(sorted(counted)), secrets), differs


def change_digest(plan: StackPlan, sealed: Sequence[tuple[str, str]] = ()) -> ChangeDigest:
    """The change digest of ``plan`` (a preview's or one recomputed before apply);
    ``sealed``: (file, sha256) of the encrypted files its Secrets read."""
    objects: list[ObjectDigest] = []
    differs: list[tuple[str, str]] = []
    live: list[LiveVersion] = []
    for change in sorted(plan.changes, key=lambda c: c.id):
        if change.action in (*CHANGING, CONFLICT):
            entry, paths = _object_digest(plan.path, change)
            if entry is not None:
                objects.append(entry)
            differs += [(change.id, p) for p in paths]
        elif change.drift is not None and change.drift.drifted:
            differs += [(change.id, f.path) for f in change.drift.fields]
        meta = (change.live or {}).get("metadata") or {}
        if change.action != "unchanged" and meta.get("uid"):
            live.append(
                LiveVersion(change.id, str(meta["uid"]), str(meta.get("resourceVersion") or ""))
            )
    files = tuple(sorted(sealed))
    return ChangeDigest(
        _stack_sha(plan.path, objects, files),
        plan.spec_digest,
        tuple(objects),
        tuple(differs),
        tuple(live),
        plan.tofu_state,
        files,
    )


@dataclass(frozen=True)
class Difference:
    """How one object (and field) of the change now differs from the reviewed one."""

    id: str
    path: str  # a field path, or "" for the whole object
    what: str  # "now also", "no longer", "changed", or "action A -> B"

    def __str__(self) -> str:
        where = f"{self.id} {self.path}" if self.path else self.id
        return f"{self.what}: {where}"


def differences(reviewed: ChangeDigest, now: ChangeDigest) -> list[Difference]:
    """Why ``now`` is not the reviewed change, object by object and path by path
    (empty when the digests are equal)."""
    if reviewed.digest == now.digest:
        return []
    before = {o.id: o for o in reviewed.objects}
    after = {o.id: o for o in now.objects}
    out: list[Difference] = []
    for rid in sorted(set(before) | set(after)):
        b, a = before.get(rid), after.get(rid)
        if b is None:
            assert a is not None
            out.append(Difference(rid, "", f"now also {a.action}"))
        elif a is None:
            out.append(Difference(rid, "", f"no longer {b.action}"))
        elif b.action != a.action:
            out.append(Difference(rid, "", f"action {b.action} -> {a.action}"))
        elif b.digest != a.digest:
            bf, af = dict(b.fields), dict(a.fields)
            for path in sorted(set(bf) | set(af)):
                if path not in bf:
                    out.append(Difference(rid, path, "now also"))
                elif path not in af:
                    out.append(Difference(rid, path, "no longer"))
                elif bf[path] != af[path]:
                    out.append(Difference(rid, path, "changed"))
            if dict(b.secrets) != dict(a.secrets) or (not bf and not af):
                out.append(Difference(rid, "", "changed"))
    for file in sorted(set(dict(reviewed.sealed)) | set(dict(now.sealed))):
        if dict(reviewed.sealed).get(file) != dict(now.sealed).get(file):
            out.append(Difference(file, "", "encrypted file changed"))
    if not out:  # the record was cut (no fields) or made by another version
        out.append(Difference("(the stack)", "", "changed"))
    return out
