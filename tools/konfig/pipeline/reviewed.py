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

A record too long for the comment (:data:`INLINE_MAX`: at 1,000 stacks it is about
130,000 to 300,000 characters, over the forges' 65,536) stays out of it: the comment
carries only a :class:`Reference` (:func:`placed`), the record's sha256 and size and
where it is (the privileged run that wrote the comment and its artifact
:data:`ARTIFACT`), and :func:`read_referenced` reads the artifact's bytes back only when
they are exactly those (docs/review.md, "A record too long for the comment").
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from konfig import contracts
from konfig.engine.digest import (
    ChangeDigest,
    Difference,
    DigestError,
    change_digest,
    differences,
)
from konfig.engine.ignore import field_path
from konfig.engine.plan import StackPlan
from konfig.errors import UsageError

MARKER = "konfig:reviewed"
KIND = "KonfigReviewed"
SCHEMA_VERSION = 1
# A record's text at most (compressed in a comment) and its JSON once decompressed.
MAX_TEXT = 4 * 1024 * 1024
MAX_JSON = 16 * 1024 * 1024
_HIDDEN = re.compile(r"<!-- " + re.escape(MARKER) + r" v1 ([A-Za-z0-9+/=]+) -->")
# A record out of the comment: the hidden line that points at it, the artifact and the
# file in it. Kept in the comment up to INLINE_MAX characters (its hidden line): a
# record in the comment carries the earlier heads previewed (carry), one out of it not.
REFERENCE_MARKER = "konfig:reviewed-at"
ARTIFACT = "konfig-reviewed"
RECORD_FILE = "reviewed.json"
INLINE_MAX = 16_000
_REFERENCE = re.compile(
    r"<!-- " + re.escape(REFERENCE_MARKER) + r" v1 run=([0-9]{1,19}) "
    r"artifact=([A-Za-z0-9._-]{1,100}) sha256=([0-9a-f]{64}) size=([0-9]{1,12}) -->"
)


@dataclass(frozen=True)
class Reviewed:
    """The change digests of a preview, per stack path, and what they were computed at."""

    stacks: Mapping[str, ChangeDigest] = field(default_factory=dict)
    base: str | None = None
    head: str | None = None
    pr: int | None = None
    # the earlier heads of the pull request previewed, oldest first (:func:`carry`)
    history: tuple[Previewed, ...] = ()
    # stacks in pull delivery: the digest of the rendered folder reviewed (sha256:...),
    # what ``konfig publish --reviewed`` requires (docs/pull.md)
    published: Mapping[str, str] = field(default_factory=dict)
    # why `konfig reviewed` refused the record the comment pointed to (then no stack)
    refused: str | None = None

    def digests(self) -> dict[str, str]:
        """Each stack's change digest."""
        return {path: d.digest for path, d in self.stacks.items()}

    def timeline(self) -> list[Previewed]:
        """Every head previewed, oldest first, this record's own head last."""
        if self.head is None:
            return list(self.history)
        return [p for p in self.history if p.head != self.head] + [
            Previewed(self.head, self.digests())
        ]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schemaVersion": SCHEMA_VERSION,
            "kind": KIND,
            "base": self.base,
            "head": self.head,
            "pr": self.pr,
            "stacks": {path: self.stacks[path].to_dict() for path in sorted(self.stacks)},
        }
        if self.history:  # (a record without one keeps the text it had before)
            out["history"] = [p.to_dict() for p in self.history]
        if self.published:
            out["published"] = dict(sorted(self.published.items()))
        if self.refused:
            out["refused"] = self.refused
        return out


@dataclass(frozen=True)
class Previewed:
    """One head of a pull request that was previewed, and each stack's change digest
    there: what an approval of that commit approved."""

    head: str
    digests: Mapping[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"head": self.head, "digests": dict(sorted(self.digests.items()))}


def reviewed_of_previews(previews: list[Mapping[str, Any]], *, pr: int | None = None) -> Reviewed:
    """The record of preview JSON documents (already checked against their contract):
    every stack previewed without an error, with its digest."""
    stacks: dict[str, ChangeDigest] = {}
    published: dict[str, str] = {}
    base = head = None
    for doc in previews:
        commits = doc.get("commits") or {}
        base = base or commits.get("base")
        head = head or commits.get("head")
        for item in doc.get("stacks") or []:
            if item.get("review"):
                stacks[item["path"]] = _digest(item["path"], item["review"], "the preview")
            pull = item.get("pull") or {}
            if pull.get("digest"):
                published[item["path"]] = str(pull["digest"])
    return Reviewed(stacks, base, head, pr, published=published)


def hidden(reviewed: Reviewed) -> str:
    """The record as the hidden HTML comment the sticky comment carries."""
    data = json.dumps(reviewed.to_dict(), sort_keys=True, separators=(",", ":"))
    packed = base64.b64encode(zlib.compress(data.encode(), 9)).decode()
    return f"<!-- {MARKER} v1 {packed} -->"


@dataclass(frozen=True)
class Reference:
    """Where a record out of the comment is: artifact ``artifact`` of workflow run
    ``run`` (the privileged run that wrote the comment), a file of ``size`` bytes whose
    sha256 is ``sha256`` (:func:`record_bytes`)."""

    run: int
    sha256: str
    size: int
    artifact: str = ARTIFACT

    def hidden(self) -> str:
        return (
            f"<!-- {REFERENCE_MARKER} v1 run={self.run} artifact={self.artifact} "
            f"sha256={self.sha256} size={self.size} -->"
        )


def record_bytes(reviewed: Reviewed) -> bytes:
    """The record as the artifact holds it (:data:`RECORD_FILE`): its canonical JSON,
    the bytes a :class:`Reference` names."""
    return json.dumps(reviewed.to_dict(), sort_keys=True, separators=(",", ":")).encode()


def reference_to(reviewed: Reviewed, run_id: int) -> Reference:
    """The reference to ``reviewed`` uploaded by run ``run_id`` as :data:`ARTIFACT`."""
    data = record_bytes(reviewed)
    return Reference(run_id, hashlib.sha256(data).hexdigest(), len(data))


def placed(reviewed: Reviewed, run_id: int | None) -> tuple[str, Reference | None]:
    """The hidden line the comment ends with: the record itself while its line is at
    most :data:`INLINE_MAX` characters (or no run can hold it: ``run_id`` None), else
    the :class:`Reference` to it, returned too (the run uploads :func:`record_bytes`)."""
    line = hidden(reviewed)
    if len(line) <= INLINE_MAX or run_id is None:
        return line, None
    ref = reference_to(reviewed, run_id)
    return ref.hidden(), ref


def find_reference(text: str) -> Reference | None:
    """The reference in ``text`` when its last record line is one (None: the last is a
    record in the comment, or there is none)."""
    refs = list(_REFERENCE.finditer(text))
    if not refs:
        return None
    last = refs[-1]
    inline = list(_HIDDEN.finditer(text))
    if inline and inline[-1].start() > last.start():
        return None
    run, artifact, sha, size = last.groups()
    return Reference(int(run), sha, int(size), artifact)


def read_referenced(ref: Reference, data: bytes, *, where: str) -> Reviewed:
    """The record in ``data`` (the file :data:`RECORD_FILE` of ``ref``'s artifact), only
    when it is exactly the bytes ``ref`` names: its size, then its sha256; then checked
    as any record read back (contract, each stack's digest). UsageError otherwise: the
    record reviewed is not this one."""
    if len(data) != ref.size:
        raise UsageError(
            f"{where}: the record in artifact {ref.artifact} of run {ref.run} is "
            f"{len(data)} bytes, the comment names {ref.size}: not the reviewed record"
        )
    sha = hashlib.sha256(data).hexdigest()
    if sha != ref.sha256:
        raise UsageError(
            f"{where}: the record in artifact {ref.artifact} of run {ref.run} has sha256 "
            f"{sha[:16]}…, the comment names {ref.sha256[:16]}…: not the reviewed record"
        )
    if len(data) > MAX_JSON:
        raise UsageError(f"{where}: the record is larger than {MAX_JSON} bytes")
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{where}: the record is not JSON: {exc}") from None
    return _of_record(parsed, where, None)


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
    ref = find_reference(text)
    if ref is not None:
        raise UsageError(
            f"{where}: the record is out of the comment, in artifact {ref.artifact} of run "
            f"{ref.run}",
            hint="`konfig reviewed` fetches and checks it; or pass the record "
            f"({RECORD_FILE} of that artifact)",
        )
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
    history = tuple(
        Previewed(str(p["head"]), {str(k): str(v) for k, v in p["digests"].items()})
        for p in data.get("history") or []
    )
    published = {str(k): str(v) for k, v in (data.get("published") or {}).items()}
    return Reviewed(
        stacks,
        data.get("base"),
        data.get("head"),
        data.get("pr"),
        history,
        published,
        refused=data.get("refused"),
    )


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

Status = Literal["reviewed", "changed", "unreviewed", "released"]


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
    because: tuple[str, ...] = ()  # what the base branch changed in it since the review
    pr: int | None = None
    reviewed_head: str | None = None

    @property
    def blocked(self) -> bool:
        return self.status not in ("reviewed", "released") and self.policy == "block"

    def to_json(self) -> dict[str, Any]:
        """The stack's ``review`` in ``konfig apply --json`` (contracts/apply.schema.json)."""
        return {
            "status": self.status,
            "policy": self.policy,
            "blocked": self.blocked,
            "digest": self.digest,
            "reviewedDigest": self.reviewed_digest,
            "pr": self.pr,
            "reviewedHead": self.reviewed_head,
            "differences": [str(d) for d in self.differences[:100]],
            "because": list(self.because),
        }

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
        if self.status == "released":
            return f"{self.path}: released by hand (digest {self.digest[:12]})"
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
        listed += "".join(f"\n  because {b}" for b in self.because)
        return head + listed


def verify(
    reviewed: Reviewed,
    plans: Sequence[StackPlan],
    policy_of: Callable[[str], str],
    sealed_of: Callable[[str], Sequence[tuple[str, str]]] = lambda _path: (),
    *,
    released: Mapping[str, str] | None = None,
    because: Callable[[Sequence[str]], Mapping[str, Sequence[str]]] | None = None,
) -> list[Verdict]:
    """Each plan recomputed at merge against ``reviewed``; ``policy_of(path)`` is the
    stack's ``onReviewedChanged``, ``sealed_of(path)`` its encrypted files' digests
    (:func:`konfig.secrets.refs.sealed_files`). ``released``: stack -> the change digest
    someone allowed to released by hand (it counts when it is the digest now);
    ``because(stacks)``: for the stacks whose change is not the reviewed one, what the
    base branch changed in them since the reviewed head."""
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
        if status != "reviewed" and (released or {}).get(plan.path) == now.digest:
            status = "released"
        ruled = ignored_now(plan, before, diffs) if before is not None else ()
        if reviewed.refused and status == "unreviewed":
            ruled = (f"the reviewed record of #{reviewed.pr} was refused: {reviewed.refused}",)
        out.append(
            Verdict(
                plan.path,
                status,
                policy_of(plan.path),
                now.digest,
                before.digest if before else None,
                diffs,
                now.cluster_differs,
                because=ruled,
                pr=reviewed.pr,
                reviewed_head=reviewed.head,
            )
        )
    moved = [v.path for v in out if v.status in ("changed", "unreviewed")]
    if because is not None and moved and reviewed.head:
        why = because(moved)
        out = [replace(v, because=(*v.because, *why.get(v.path, ()))) for v in out]
    return out


def ignored_now(
    plan: StackPlan, reviewed: ChangeDigest, diffs: Sequence[Difference]
) -> tuple[str, ...]:
    """Why reviewed fields are no longer changed: an ignore rule keeps them out now that
    the review did not apply (one the pull request adds: its preview used the base
    branch's rules, docs/review.md). One line per field, naming the rule."""
    changes = {c.id: c for c in plan.changes}
    fields = {o.id: dict(o.fields) for o in reviewed.objects}
    out: list[str] = []
    for d in diffs:
        if not d.what.startswith("no longer") or d.id not in changes:
            continue
        change = changes[d.id]
        wanted = [d.path] if d.path else list(fields.get(d.id, {}))
        by_path = {field_path(change.live, f.path): f for f in change.ignored}
        for path in wanted:
            hit = next(
                (f for p, f in by_path.items() if path == p or path.startswith((p + ".", p + "["))),
                None,
            )
            if hit is not None:
                out.append(
                    f"{d.id} {path} is ignored now by {hit.rule} ({hit.reason}; {hit.applied}), "
                    "a rule the reviewed preview did not apply"
                )
    return tuple(out)


def moved_since(root: Path, head: str, commit: str, stacks: Sequence[str]) -> dict[str, list[str]]:
    """What the commits between the reviewed ``head`` and the merged ``commit`` changed
    in each of ``stacks`` (through the import graph; the pull request's own changes are
    in ``head`` already), as ``main@<commit> <reason>``; nothing when ``head`` is not in
    this clone (a squash merge) or not an ancestor of ``commit``."""
    from konfig.detect import gitrepo
    from konfig.detect.changeset import affected_stacks
    from konfig.errors import KonfigError

    try:
        start = gitrepo.merge_base(root, head, commit)
    except KonfigError:
        return {}
    if start != gitrepo.rev_parse(root, head):
        return {}
    changes = affected_stacks(root, head, commit)
    wanted = set(stacks)
    tip = gitrepo.rev_parse(root, commit)
    try:  # a merge commit: its first parent is the branch before the merge
        main = gitrepo.rev_parse(root, f"{tip}^")
    except KonfigError:
        main = tip
    if main == start:  # the reviewed head is the parent: the commit itself moved it
        main = tip
    return {
        s.path: [f"main@{main[:12]} {reason}" for reason in s.reasons]
        for s in changes.stacks
        if s.path in wanted
    }


# -- across pushes: the heads previewed, and which approvals still hold ------------------

HISTORY = 20  # heads a record keeps (contracts/review.schema.json: history.maxItems)


def find_hidden(text: str) -> bool:
    """Whether ``text`` carries a hidden record (it may still be unreadable), not a
    reference to one out of the comment."""
    return bool(_HIDDEN.search(text)) and find_reference(text) is None


def with_record(text: str, reviewed: Reviewed) -> str:
    """``text`` with its (last) hidden record replaced by ``reviewed``'s."""
    found = list(_HIDDEN.finditer(text))
    if not found:
        return text
    last = found[-1]
    return text[: last.start()] + hidden(reviewed) + text[last.end() :]


@dataclass(frozen=True)
class Carried:
    """A new preview's record with the earlier heads' digests carried over, and how each
    stack's change compares with the preview it replaces."""

    reviewed: Reviewed
    since: str | None  # the head of the record replaced (None: no earlier record)
    changed: tuple[str, ...] = ()  # stacks whose change digest differs from it
    kept: tuple[str, ...] = ()  # stacks whose change digest is the same


def carry(previous: Reviewed | None, new: Reviewed) -> Carried:
    """``new`` with ``previous``'s heads (its history and its own head) kept, bounded to
    :data:`HISTORY` heads, oldest dropped first. A head previewed again keeps its place
    once, with the newer digests. ``new`` may be empty (a comment without a live
    preview): the heads are kept all the same."""
    if previous is None:
        return Carried(new, None)
    line = previous.timeline()
    heads = [p for p in line if p.head != new.head]
    history = tuple(heads[-HISTORY:])
    if not heads or new.head is None:
        return Carried(replace(new, history=history), None)
    last = heads[-1]  # the head previewed before this one
    before, now = dict(last.digests), new.digests()
    changed = tuple(sorted(s for s in set(before) | set(now) if before.get(s) != now.get(s)))
    kept = tuple(sorted(s for s in now if before.get(s) == now[s]))
    return Carried(replace(new, history=history), last.head, changed, kept)


def trim(reviewed: Reviewed) -> Reviewed | None:
    """``reviewed`` with its oldest head dropped (None: no history left to drop), for a
    comment that would be too long."""
    if not reviewed.history:
        return None
    return replace(reviewed, history=reviewed.history[1:])


def approvals_holding(
    reviewed: Reviewed, approvals: Iterable[tuple[str, str]]
) -> dict[str, tuple[str, ...]]:
    """Per stack of ``reviewed``, the logins whose approval still holds for it:
    ``approvals`` are (login, commit approved); one holds when the stack's change digest
    at that commit is its digest now and no head previewed since showed another."""
    by_commit: dict[str, set[str]] = {}
    for login, commit in approvals:
        by_commit.setdefault(commit, set()).add(login)
    line = reviewed.timeline() if reviewed.head else []
    out: dict[str, tuple[str, ...]] = {}
    for stack, now in reviewed.stacks.items():
        who: set[str] = set()
        for previewed in reversed(line):
            if previewed.digests.get(stack) != now.digest:
                break
            who |= by_commit.get(previewed.head, set())
        out[stack] = tuple(sorted(who, key=str.lower))
    return out


REVIEWED_CONTEXT = "konfig/reviewed"
StatusState = Literal["success", "failure", "pending"]


@dataclass(frozen=True)
class StackReview:
    """One stack of a pull request: its change digest now, who approved it, and the
    commit of the base branch that made its preview stale."""

    path: str
    digest: str
    approved_by: tuple[str, ...]
    stale_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "digest": self.digest,
            "approvedBy": list(self.approved_by),
            "staleBy": self.stale_by,
        }


@dataclass(frozen=True)
class ReviewState:
    """The status ``konfig/reviewed`` of a pull request's head."""

    head: str
    state: StatusState
    description: str  # one line, at most 140 characters (the forges keep no more)
    stacks: tuple[StackReview, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "state": self.state,
            "description": self.description,
            "stacks": [s.to_json() for s in self.stacks],
        }


def _names(paths: Sequence[str], room: int) -> str:
    shown: list[str] = []
    for i, path in enumerate(paths):
        more = f" and {len(paths) - i} more"
        if len(", ".join([*shown, path])) + len(more) > room:
            return ", ".join(shown) + more
        shown.append(path)
    return ", ".join(shown)


def stale_description(commit: str, stacks: Sequence[str], branch: str = "main") -> str:
    """The status line of a preview the base branch made stale (at most 140 characters)."""
    lead = f"stale: {branch}@{commit[:10]} changed "
    return lead + _names(sorted(stacks), 140 - len(lead))


def review_state(
    reviewed: Reviewed | None,
    head: str,
    approvals: Iterable[tuple[str, str]],
    stale: Mapping[str, str] | None = None,
) -> ReviewState:
    """``konfig/reviewed`` of ``head``: green only when the preview of ``head`` is the
    record, no commit of the base branch since its merge base changed one of its stacks
    (``stale``: stack -> that commit), and every stack that changes something has an
    approval that still holds (:func:`approvals_holding`)."""
    if reviewed is None or reviewed.head != head:
        return ReviewState(head, "pending", f"no preview of {head[:12]} yet")
    holding = approvals_holding(reviewed, approvals)
    stale = stale or {}
    stacks = tuple(
        StackReview(path, d.digest, holding.get(path, ()), stale.get(path))
        for path, d in sorted(reviewed.stacks.items())
        if d.objects or d.sealed
    )
    if not stacks:
        return ReviewState(head, "success", "nothing to apply: no review needed")
    old = [s for s in stacks if s.stale_by]
    if old:
        by = sorted({str(s.stale_by) for s in old})
        return ReviewState(head, "failure", stale_description(by[0], [s.path for s in old]), stacks)
    waiting = [s.path for s in stacks if not s.approved_by]
    if waiting:
        lead = "not approved as previewed now: "
        return ReviewState(head, "failure", lead + _names(waiting, 140 - len(lead)), stacks)
    n = len(stacks)
    return ReviewState(
        head, "success", f"{n} stack{'s' if n != 1 else ''}: approved as previewed", stacks
    )


def stale_stacks(
    root: Path, head: str, main: str, stacks: Iterable[str], *, cache: Path | None = None
) -> dict[str, str]:
    """The stacks of ``stacks`` that commits of the base branch ``main`` made since its
    merge base with ``head`` change (through the import graph, as ``konfig changed``):
    stack -> ``main``'s commit. A preview of ``head`` did not see them, and the merge
    would apply them with it."""
    from konfig.detect import gitrepo
    from konfig.detect.changeset import affected_stacks

    tip = gitrepo.rev_parse(root, main)
    base = gitrepo.merge_base(root, tip, head)
    if base == tip:
        return {}
    changes = affected_stacks(root, base, tip, cache=cache)
    touched = set(changes.stack_paths) | set(changes.deleted_stacks)
    return {s: tip for s in sorted(stacks) if s in touched}
