"""The reviewed record: the change digests a pull request's reviewers saw, and reading it back.

A preview computes each stack's :class:`~konfig.engine.digest.ChangeDigest`; ``konfig
report`` gathers them into one :class:`Reviewed` record (the commits previewed, the
pull request, the digest per stack) and hides it in the sticky comment
(:func:`hidden`: a compressed, base64 HTML comment after the marker
``konfig:reviewed``). At merge, ``konfig apply --reviewed FILE`` reads it back
(:func:`read_reviewed`: the record's JSON, a preview JSON, or a comment body holding
it) and compares it with the digests it recomputes.

Read back from a comment the record is hostile input (anyone who can write the pull
request's comments can write one): its size is bounded before and after
decompression, it must match ``contracts/review.schema.json``, and every stack's
digest must be the digest of its recorded change set
(:meth:`ChangeDigest.from_dict`). Which comment is read (the forge identity's own)
is the caller's business.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from konfig import contracts
from konfig.engine.digest import (
    ChangeDigest,
    Difference,
    DigestError,
    change_digest,
    differences,
)
from konfig.engine.plan import StackPlan
from konfig.errors import UsageError

MARKER = "konfig:reviewed"
KIND = "KonfigReviewed"
SCHEMA_VERSION = 1
# A record's text at most (compressed in a comment) and its JSON once decompressed.
MAX_TEXT = 4 * 1024 * 1024
MAX_JSON = 16 * 1024 * 1024
_HIDDEN = re.compile(r"<!-- " + re.escape(MARKER) + r" v1 ([A-Za-z0-9+/=]+) -->")


@dataclass(frozen=True)
class Reviewed:
    """The change digests of a preview, per stack path, and what they were computed at."""

    stacks: Mapping[str, ChangeDigest] = field(default_factory=dict)
    base: str | None = None
    head: str | None = None
    pr: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schemaVersion": SCHEMA_VERSION,
            "kind": KIND,
            "base": self.base,
            "head": self.head,
            "pr": self.pr,
            "stacks": {path: self.stacks[path].to_dict() for path in sorted(self.stacks)},
        }


def reviewed_of_previews(previews: list[Mapping[str, Any]], *, pr: int | None = None) -> Reviewed:
    """The record of preview JSON documents (already checked against their contract):
    every stack previewed without an error, with its digest."""
    stacks: dict[str, ChangeDigest] = {}
    base = head = None
    for doc in previews:
        commits = doc.get("commits") or {}
        base = base or commits.get("base")
        head = head or commits.get("head")
        for item in doc.get("stacks") or []:
            if item.get("review"):
                stacks[item["path"]] = _digest(item["path"], item["review"], "the preview")
    return Reviewed(stacks, base, head, pr)


def hidden(reviewed: Reviewed) -> str:
    """The record as the hidden HTML comment the sticky comment carries."""
    data = json.dumps(reviewed.to_dict(), sort_keys=True, separators=(",", ":"))
    packed = base64.b64encode(zlib.compress(data.encode(), 9)).decode()
    return f"<!-- {MARKER} v1 {packed} -->"


def read_reviewed(text: str, *, where: str) -> Reviewed:
    """The record in ``text``: its JSON, a ``konfig preview --format json`` document, or
    a comment body with the hidden record (the last one wins). Refused (UsageError
    naming ``where``) when it is none of them, too large, breaks the contract or does
    not hold together."""
    if len(text) > MAX_TEXT:
        raise UsageError(f"{where}: {len(text)} characters, more than a record may have")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"{where}: not JSON: {exc}") from None
        if isinstance(data, dict) and data.get("kind") == "KonfigPreview":
            _check("preview", data, where, text)
            return reviewed_of_previews([data])
        return _of_record(data, where, text)
    found = _HIDDEN.findall(text)
    if not found:
        raise UsageError(
            f"{where}: no reviewed record in it (no `{MARKER}` marker)",
            hint="pass the pull request's Konfig comment, the record `konfig report "
            "--reviewed-out` wrote, or the preview JSON",
        )
    try:
        packed = base64.b64decode(found[-1], validate=True)
        unpack = zlib.decompressobj()
        raw = unpack.decompress(packed, MAX_JSON)
        if unpack.unconsumed_tail:
            raise UsageError(f"{where}: the hidden record is larger than {MAX_JSON} bytes")
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, zlib.error, ValueError) as exc:
        raise UsageError(f"{where}: the hidden record is not readable: {exc}") from None
    return _of_record(data, where, None)


def _of_record(data: Any, where: str, text: str | None) -> Reviewed:
    _check("review", data, where, text)
    stacks = {path: _digest(path, d, where) for path, d in data["stacks"].items()}
    return Reviewed(stacks, data.get("base"), data.get("head"), data.get("pr"))


def _check(contract: str, data: Any, where: str, text: str | None) -> None:
    try:
        contracts.validate(contract, data, file=where, text=text)
    except contracts.ContractError as exc:
        raise UsageError(str(exc), hint="pass a record konfig wrote") from None


def _digest(path: str, data: Mapping[str, Any], where: str) -> ChangeDigest:
    try:
        return ChangeDigest.from_dict(path, data)
    except DigestError as exc:
        raise UsageError(f"{where}: {exc}") from None


# -- at merge: the change recomputed, compared with the reviewed one --------------------

Status = Literal["reviewed", "changed", "unreviewed"]


@dataclass(frozen=True)
class Verdict:
    """One stack at merge: is the change apply would make the reviewed one?

    ``reviewed``: the digest recomputed is the one in the record (or nothing changes);
    ``changed``: the record has another digest for the stack; ``unreviewed``: the record
    has none (a direct push, or a stack no preview of the pull request planned).
    ``policy`` (``stack.yaml`` ``apply.onReviewedChanged``) decides the other two."""

    path: str
    status: Status
    policy: str  # block or apply
    digest: str  # the change digest now
    reviewed_digest: str | None
    differences: tuple[Difference, ...] = ()
    cluster_differs: tuple[tuple[str, str], ...] = ()

    @property
    def blocked(self) -> bool:
        return self.status != "reviewed" and self.policy == "block"

    def record(self, pr: int | None) -> dict[str, Any]:
        """What the inventory records of an apply of this verdict (``konfig status``)."""
        return {
            "status": self.status,
            "digest": self.digest,
            "reviewedDigest": self.reviewed_digest,
            "pr": pr,
        }

    def explain(self) -> str:
        """One paragraph for the report and the error: what differs, path by path."""
        if self.status == "reviewed":
            return f"{self.path}: the reviewed change (digest {self.digest[:12]})"
        if self.status == "unreviewed":
            head = f"{self.path}: no reviewed preview of this change (digest {self.digest[:12]})"
        else:
            head = (
                f"{self.path}: changed since the review (reviewed digest "
                f"{str(self.reviewed_digest)[:12]}, now {self.digest[:12]})"
            )
        listed = "".join(f"\n  {d}" for d in self.differences[:30])
        more = len(self.differences) - 30
        if more > 0:
            listed += f"\n  ... and {more} more"
        return head + listed


def verify(
    reviewed: Reviewed,
    plans: Sequence[StackPlan],
    policy_of: Callable[[str], str],
    sealed_of: Callable[[str], Sequence[tuple[str, str]]] = lambda _path: (),
) -> list[Verdict]:
    """Each plan recomputed at merge against ``reviewed``; ``policy_of(path)`` is the
    stack's ``onReviewedChanged``, ``sealed_of(path)`` its encrypted files' digests
    (:func:`konfig.secrets.refs.sealed_files`)."""
    out: list[Verdict] = []
    for plan in plans:
        now = change_digest(plan, sealed_of(plan.path))
        before = reviewed.stacks.get(plan.path)
        if before is None:
            status: Status = "reviewed" if not now.objects else "unreviewed"
            diffs = tuple(Difference(o.id, "", f"not reviewed: {o.action}") for o in now.objects)
        else:
            diffs = tuple(differences(before, now))
            status = "reviewed" if not diffs else "changed"
        out.append(
            Verdict(
                plan.path,
                status,
                policy_of(plan.path),
                now.digest,
                before.digest if before else None,
                diffs,
                now.cluster_differs,
            )
        )
    return out
