"""Danger confirmations on the forge: the danger record a preview hides in its comment,
the ``/konfig confirm STACK DIGEST`` commands reviewers write, and the verdict of the
status ``konfig/dangers`` (``konfig dangers``, docs/danger.md).

1. ``konfig report`` hides a :class:`DangerRecord` in the sticky comment
   (:func:`hidden`): the commit previewed, whether the preview ran against the clusters,
   the labels (one ``konfig/danger:<class>`` per class present) and every stack whose
   dangers konfig.yaml's ``dangers`` policy asks a confirmation for, with the digest
   (:mod:`konfig.engine.guards` ``danger/confirm``: the first 16 hex digits of the
   stack's change digest).
2. A reviewer allowed to confirm (write access to the repository, not the pull
   request's author) writes a comment with the line ``/konfig confirm STACK DIGEST``.
   Comments are hostile: only that line's exact grammar is read (:func:`commands_in`),
   the author's permission comes from the forge, never from the comment.
3. :func:`verdict`: a stack is confirmed when a confirmation names it with the digest
   the record has; a later push that changes the stack's change has another digest, so
   the old confirmation no longer counts. At merge the same commands, read from the
   merged pull request, become ``konfig apply --confirm STACK=DIGEST``, which the
   guard compares with the change it applies.

Plain data in, plain data out; the command reads the forge.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from konfig.errors import UsageError

STATUS_CONTEXT = "konfig/dangers"
LABEL_PREFIX = "konfig/danger:"
MARKER = "konfig:dangers"
KIND = "KonfigDangers"
# Permissions (GitHub's and Gitea's answers to .../collaborators/{user}/permission)
# that may confirm.
CONFIRMERS = frozenset({"admin", "maintain", "write", "owner"})
MAX_TEXT = 256 * 1024
MAX_JSON = 4 * 1024 * 1024
_HIDDEN = re.compile(r"<!-- " + re.escape(MARKER) + r" v1 ([A-Za-z0-9+/=]+) -->")
# One command per line; the stack a repository path, the digest 16 lowercase hex digits.
_COMMAND = re.compile(
    r"^[ \t]*/konfig[ \t]+confirm[ \t]+([A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*)[ \t]+"
    r"([0-9a-f]{16})[ \t]*$",
    re.MULTILINE,
)
_STACK = re.compile(r"^[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$")
_DIGEST = re.compile(r"^[0-9a-f]{16}$")
_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_CLASS = re.compile(r"^[a-z]{1,32}$")


@dataclass(frozen=True)
class Needed:
    """A stack apply refuses until its change is confirmed: ``what`` needs it."""

    stack: str
    digest: str
    what: str

    def command(self) -> str:
        return f"/konfig confirm {self.stack} {self.digest}"


@dataclass(frozen=True)
class DangerRecord:
    """What the preview of ``head`` found: labels and the confirmations it needs."""

    head: str
    live: bool  # previewed against the clusters (an offline preview cannot count a cascade)
    labels: tuple[str, ...] = ()
    needed: tuple[Needed, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "schemaVersion": 1,
            "head": self.head,
            "live": self.live,
            "labels": list(self.labels),
            "needed": [{"stack": n.stack, "digest": n.digest, "what": n.what} for n in self.needed],
        }


def hidden(record: DangerRecord) -> str:
    """The record as the hidden HTML comment the sticky comment carries."""
    data = json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"))
    packed = base64.b64encode(zlib.compress(data.encode(), 9)).decode()
    return f"<!-- {MARKER} v1 {packed} -->"


def read_record(text: str, *, where: str) -> DangerRecord | None:
    """The record hidden in a comment body (the last one), None when it has none.
    Refused (UsageError naming ``where``) when it is too large or not a record."""
    if len(text) > MAX_TEXT * 64:
        raise UsageError(f"{where}: {len(text)} characters, more than a comment may have")
    found = _HIDDEN.findall(text)
    if not found:
        return None
    if len(found[-1]) > MAX_TEXT:
        raise UsageError(f"{where}: the danger record is larger than {MAX_TEXT} characters")
    try:
        unpack = zlib.decompressobj()
        raw = unpack.decompress(base64.b64decode(found[-1], validate=True), MAX_JSON)
        if unpack.unconsumed_tail:
            raise UsageError(f"{where}: the danger record is larger than {MAX_JSON} bytes")
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, zlib.error, ValueError) as exc:
        raise UsageError(f"{where}: the danger record is not readable: {exc}") from None
    return _of_dict(data, where)


def _of_dict(data: Any, where: str) -> DangerRecord:
    def bad(why: str) -> UsageError:
        return UsageError(f"{where}: not a danger record: {why}")

    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("schemaVersion") != 1:
        raise bad(f"kind {KIND} and schemaVersion 1 expected")
    head, live = data.get("head"), data.get("live")
    if not isinstance(head, str) or not _SHA.match(head) or not isinstance(live, bool):
        raise bad("head (a commit) and live (true/false) expected")
    labels = data.get("labels")
    if not isinstance(labels, list) or not all(
        isinstance(x, str)
        and x.startswith(LABEL_PREFIX)
        and _CLASS.match(x.removeprefix(LABEL_PREFIX))
        for x in labels
    ):
        raise bad(f"labels must be {LABEL_PREFIX}<class> names")
    needed = []
    for item in data.get("needed") or []:
        if not isinstance(item, dict):
            raise bad("needed: objects expected")
        stack, digest, what = item.get("stack"), item.get("digest"), item.get("what")
        if not (
            isinstance(stack, str)
            and _STACK.match(stack)
            and len(stack) < 512
            and ".." not in stack.split("/")
        ):
            raise bad("needed: a stack path expected")
        if not (isinstance(digest, str) and _DIGEST.match(digest)):
            raise bad("needed: a 16-digit digest expected")
        if not (isinstance(what, str) and len(what) < 1024):
            raise bad("needed: what needs it, in words, expected")
        needed.append(Needed(stack, digest, what))
    return DangerRecord(head, live, tuple(labels), tuple(needed))


# -- the reviewers' commands ----------------------------------------------------------


@dataclass(frozen=True)
class Confirmation:
    """``login`` confirmed ``stack``'s change of digest ``digest`` (comment ``comment``)."""

    login: str
    stack: str
    digest: str
    comment: int = 0


def commands_in(body: str) -> list[tuple[str, str]]:
    """The ``(stack, digest)`` of every ``/konfig confirm STACK DIGEST`` line of a
    comment body; anything else in it is ignored. A stack written without ``appops/``
    gets it."""
    out = []
    for stack, digest in _COMMAND.findall(body[:MAX_TEXT]):
        if ".." in stack.split("/"):
            continue
        out.append((stack if stack.startswith("appops/") else f"appops/{stack}", digest))
    return out


def may_confirm(permission: str, login: str, author: str) -> bool:
    """A writer of the repository who is not the pull request's author."""
    return permission.lower() in CONFIRMERS and login.lower() != author.lower()


# -- the verdict ------------------------------------------------------------------------

State = Literal["success", "failure", "pending"]


@dataclass(frozen=True)
class StackConfirmation:
    needed: Needed
    by: tuple[str, ...]  # who confirmed this digest

    @property
    def confirmed(self) -> bool:
        return bool(self.by)


@dataclass(frozen=True)
class Verdict:
    record: DangerRecord
    stacks: tuple[StackConfirmation, ...]

    @property
    def state(self) -> State:
        if not self.record.live:
            return "pending"
        return "success" if all(s.confirmed for s in self.stacks) else "failure"

    def summary(self) -> str:
        """The status's description (at most 140 characters on the forge)."""
        if not self.record.live:
            return "waiting for the live preview (dangers are counted against the clusters)"
        waiting = [s for s in self.stacks if not s.confirmed]
        if waiting:
            first = waiting[0].needed
            more = f" (+{len(waiting) - 1} more stacks)" if len(waiting) > 1 else ""
            return f"{first.what} in {first.stack}: {first.command()}{more}"
        if self.stacks:
            return f"dangers confirmed in {len(self.stacks)} stack(s)"
        return "no danger needs a confirmation"


def verdict(record: DangerRecord, confirmations: Iterable[Confirmation]) -> Verdict:
    """Each stack the record says needs a confirmation, with who confirmed its digest."""
    given = list(confirmations)
    return Verdict(
        record,
        tuple(
            StackConfirmation(
                n,
                tuple(
                    sorted({c.login for c in given if c.stack == n.stack and c.digest == n.digest})
                ),
            )
            for n in record.needed
        ),
    )


def confirm_args(confirmations: Sequence[Confirmation]) -> list[str]:
    """``STACK=DIGEST`` for ``konfig apply --confirm`` (each pair once, sorted)."""
    return sorted({f"{c.stack}={c.digest}" for c in confirmations})


def labels_after(current: Iterable[str], wanted: Iterable[str]) -> list[str] | None:
    """The pull request's labels with the danger labels set to ``wanted`` (the others
    kept), or None when nothing changes."""
    now = list(current)
    keep = [x for x in now if not x.startswith(LABEL_PREFIX)]
    after = keep + sorted(set(wanted))
    return None if sorted(after) == sorted(now) else after
