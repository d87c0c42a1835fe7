"""Re-using a stack's previous live preview when nothing it was computed from changed.

A new push to a pull request usually changes few of its stacks. For the others, the
preview of the previous push is still the answer, as long as everything it was
computed from is the same. That is one value per stack, the **reuse key**
(:func:`reuse_key`): the sha256 of the Spec's digest, the encrypted files its Secrets
read, whether this run can decrypt them, konfig itself (its source) and the
repository's konfig.yaml and stack.yaml, the cluster (server and context), the
stack's live fingerprint (:mod:`konfig.engine.livefingerprint`: every object the
preview reads, one metadata-only list per kind and namespace) and what its runtime's
plan reads beyond these (:meth:`konfig.pipeline.runtime.Runtime.reuse_inputs`: for a
stack with Terraform resources, the configuration Konfig renders, the providers' lock
and installation, OpenTofu's state lineage and serial: :mod:`konfig.tofu.reuse`).
Every live preview made with it records the key in its JSON (``reuseKey``).

``konfig preview --reuse PREVIOUS.json`` reads the previous run's preview documents
(:func:`read_previous`) as hostile data: each must match the preview contract, be a
live preview, and they must agree on the commit they previewed. A stack's previous
result is taken only when it previewed without an error or a conflict and the key this
run recomputes, from this run's Specs and a fresh read of the cluster, equals the one
it recorded: nothing of the previous document is believed that is not checked again.
Its result then carries ``reusedFrom`` (the commit it was previewed at). A result that
did not preview everything (Terraform resources not previewed for lack of credentials)
is not re-used.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

from konfig import contracts
from konfig.contracts import ContractError, Violation
from konfig.engine.guards import DangerPolicy
from konfig.engine.inventory import Inventory
from konfig.engine.kube import Kube
from konfig.engine.livefingerprint import Lists, fingerprint_digest, live_fingerprint, objects_of
from konfig.errors import ConfigError
from konfig.fingerprint import package_digest
from konfig.repo.layout import STACK_FILE, Stack
from konfig.repo.settings import CONFIG_FILE
from konfig.repo.yamlio import MAX_FILE_BYTES
from konfig.spec import Spec

VERSION = "konfig-reuse-v1"
CONTRACT = "preview"
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_KEY = re.compile(r"^[0-9a-f]{64}$")
HINT = (
    "pass the preview JSON documents (`konfig preview --format json`) of the pull "
    "request's previous live preview, unchanged (in CI: that run's konfig-preview-* artifacts)"
)


@dataclass(frozen=True)
class Reused:
    """A stack's result taken from a previous preview: its JSON entry, as recorded, and
    the commit it was previewed at."""

    entry: Mapping[str, Any] = field(repr=False)
    head: str

    def counts(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in (self.entry.get("counts") or {}).items()}

    def dangers(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in (self.entry.get("dangers") or {}).items()}

    @property
    def drifted_objects(self) -> int:
        return int((self.entry.get("drift") or {}).get("objects") or 0)


@dataclass(frozen=True)
class Previous:
    """The previous preview's re-usable stacks: path -> its entry, and the commit."""

    head: str
    entries: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def candidate(self, path: str, key: str | None) -> Reused | None:
        """The previous result of ``path`` when its recorded key is ``key``."""
        entry = self.entries.get(path)
        if entry is None or key is None or entry.get("reuseKey") != key:
            return None
        return Reused(entry, str(entry.get("reusedFrom") or self.head))


def read_previous(files: Sequence[Path]) -> Previous:
    """The re-usable stacks of the preview documents ``files`` (a previous run's, in
    parts when it was sharded). :class:`ContractError` (exit 1) when one breaks the
    preview contract, is not a live preview, or they disagree on the commit; a stack
    in two of them is not re-used."""
    heads: set[str] = set()
    entries: dict[str, Mapping[str, Any]] = {}
    twice: set[str] = set()
    for path in files:
        data, text = _load(path)
        contracts.validate(CONTRACT, data, file=str(path), text=text)
        mode = (data.get("mode") or {}).get("name", "live")
        head = (data.get("commits") or {}).get("head")
        if mode != "live":
            raise _refused(path, f"is a preview of mode {mode!r}: only a live preview is re-used")
        if not isinstance(head, str) or not _SHA.match(head):
            raise _refused(path, "names no commit (commits.head): re-used results need one")
        heads.add(head)
        for item in data.get("stacks") or []:
            stack = str(item["path"])
            if stack in entries:
                twice.add(stack)
            if _reusable(item):
                entries[stack] = item
    if len(heads) > 1:
        raise _refused(
            files[0], f"the documents preview different commits ({', '.join(sorted(heads))})"
        )
    for stack in twice:
        entries.pop(stack, None)
    return Previous(heads.pop() if heads else "", entries)


def _reusable(item: Mapping[str, Any]) -> bool:
    """Only a clean result: no error, no conflict, not a deleted stack, everything
    previewed, with a key."""
    counts = item.get("counts") or {}
    key = item.get("reuseKey")
    return (
        item.get("status") == "ok"
        and item.get("error") is None
        and not item.get("deleted")
        and not counts.get("conflict")
        and not item.get("notPreviewed")
        and isinstance(key, str)
        and bool(_KEY.match(key))
    )


def _load(path: Path) -> tuple[Any, str]:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path), hint=HINT) from exc
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"is larger than {MAX_FILE_BYTES >> 20} MiB", file=str(path), hint=HINT)
    try:
        text = raw.decode("utf-8")
        return json.loads(text), text
    except UnicodeDecodeError as exc:
        raise ConfigError("is not UTF-8 text", file=str(path), hint=HINT) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"is not JSON: {exc.msg}", file=str(path), line=exc.lineno, hint=HINT
        ) from exc


def _refused(path: Path, message: str) -> ContractError:
    return ContractError([Violation("invalid-value", (), message, str(path))], hint=HINT)


def reuse_key(
    kube: Kube,
    root: Path,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    *,
    sealed: Sequence[tuple[str, str]],
    can_decrypt: bool,
    runtime_inputs: str = "",
    lists: dict[tuple[str, str], Lists] | None = None,
    policy: DangerPolicy | None = None,
) -> str:
    """What a live preview of ``stack`` is computed from, as one sha256 (the module).
    ``runtime_inputs``: what its runtime's plan reads beyond the Kubernetes objects
    (:meth:`~konfig.pipeline.runtime.Runtime.reuse_inputs`). ``lists``: the lists read
    for earlier stacks of this run, per cluster (server, context): each kind and
    namespace is listed once a run. The ignore
    rules the stack is previewed with and the danger ``policy`` count too: with
    ``--rules-from`` they are the base branch's, which may move between two pushes."""
    memo = None if lists is None else lists.setdefault((kube.server, kube.context), {})
    versions = live_fingerprint(kube, objects_of(stack.path, spec, prior, kube), memo)
    body = [
        VERSION,
        package_digest(VERSION),
        stack.path,
        kube.server,
        kube.context,
        spec.digest(),
        sorted(sealed),
        can_decrypt,
        _file_sha(root / CONFIG_FILE),
        _file_sha(root / stack.path / STACK_FILE),
        fingerprint_digest(versions),
        runtime_inputs,
        [stack.inherited_ignore, stack.raw.get("ignore"), policy and astuple(policy)],
    ]
    text = json.dumps(body, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _file_sha(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


# -- which run made the previous preview ------------------------------------------------
# The sticky comment of a live preview names the run whose preview artifacts it shows,
# hidden: the next push's run reads it from Konfig's own comment (found by marker and
# author, never from the pull request's files) and downloads that run's previews.
RUN_MARKER = "konfig:preview-run"
_RUN = re.compile(r"^<!-- " + re.escape(RUN_MARKER) + r" v1 ([0-9]{1,20}) -->$", re.MULTILINE)


def run_line(run_id: str) -> str:
    """The hidden line naming the run of a comment's live preview."""
    if not re.fullmatch(r"[0-9]{1,20}", run_id):
        raise ConfigError(f"the run id {run_id!r} is not a number")
    return f"<!-- {RUN_MARKER} v1 {run_id} -->"


def previous_run(body: str) -> str | None:
    """The run a comment's live preview came from (None: it names none, or several)."""
    found = set(_RUN.findall(body))
    return found.pop() if len(found) == 1 else None


def keep_previous_run(previous: str | None, body: str) -> str:
    """``body`` for the comment that replaces ``previous``: a body of no live preview (the
    offline first comment, posted while the run works) goes on naming the run of the
    comment's last live preview, so the run that makes the next live preview finds the
    results it may re-use; a body that names its own run is as it is."""
    if previous is None or _RUN.search(body):
        return body
    run = previous_run(previous)
    return body if run is None else body.rstrip("\n") + "\n" + run_line(run) + "\n"
