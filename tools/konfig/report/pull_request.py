"""The pull-request report: one markdown document from the JSON of every stage.

Inputs are what the stages print: ``konfig changed --json``, ``konfig compile
--json``, ``konfig test --json``, ``konfig check --format json`` and ``konfig preview
--format json`` (``docs/preview-json.md``). Any of them may be missing (a fork PR has
no preview; a failed job leaves no artifact): the report says what it lacks.

:func:`build` turns the inputs into a :class:`Report` (plain data), which
:mod:`konfig.report.comment` renders (the markdown comment, the job summary, the JSON).

Secret values: the preview masks them; this module masks again every value under a
Secret's ``data``/``stringData`` in diffs (:func:`konfig.masking.mask_secret_diff`), so
a report can never carry one even from a faulty input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePosixPath
from typing import Any, Literal

from konfig.engine.plan import ACTIONS, CHANGING, DANGER_CLASSES
from konfig.errors import UsageError
from konfig.masking import mask_field, mask_secret_diff
from konfig.pipeline.confirmations import LABEL_PREFIX, DangerRecord, Needed
from konfig.pipeline.reviewed import Reviewed, reviewed_of_previews
from konfig.repo.settings import DEFAULT_PRODUCTION_STACKS, is_production
from konfig.report.grouping import (
    FailureNote,
    Field,
    Grouping,
    ObjectChange,
    StackChanges,
    group_changes,
)
from konfig.report.inputs import Document, ReportInputError, validated
from konfig.report.modes import Origin, mode_line
from konfig.words import plural

Status = Literal[
    "conflict",
    "compile-error",
    "preview-error",
    "test-failed",
    "check-failed",
    "changes",
    "deleted",
    "no-changes",
    "passed",
    "pending",
]
STATUS_LABEL: dict[str, str] = {
    "conflict": "⚠️ conflict",
    "compile-error": "❌ compile error",
    "preview-error": "❌ preview error",
    "test-failed": "❌ test failed",
    "check-failed": "❌ check failed",
    "changes": "📝 changes",
    "deleted": "🗑️ deleted",
    "no-changes": "✅ no changes",
    "passed": "✅ passed",
    "pending": "⏳ not previewed",
}
_FAILED = {"conflict", "compile-error", "preview-error", "test-failed", "check-failed"}
OWNERSHIP_RULES = "ownership/"
# what the preview's danger/confirm refusal says (engine.guards.mark_unconfirmed)
_CONFIRM = re.compile(
    r"danger/confirm: (.+?) \(`konfig apply --confirm \S+=([0-9a-f]{16})`\)"
)  # check findings that are conflicts (two stacks, one object)


@dataclass(frozen=True)
class Failure:
    stage: str  # compile, test, check, preview
    message: str
    file: str | None = None
    line: int | None = None
    rule: str | None = None
    detail: str = ""  # e.g. a golden diff

    @property
    def where(self) -> str:
        if not self.file:
            return ""
        return self.file if self.line is None else f"{self.file}:{self.line}"


@dataclass(frozen=True)
class DangerItem:
    name: str  # a danger class (docs/danger.md)
    reason: str


@dataclass(frozen=True)
class DangerRow:
    """One row of the comment's danger table: a class, how many changes have it, where."""

    name: str
    changes: int
    stacks: tuple[str, ...]  # the stacks with it, most changes first
    example: str  # the first change's reason


@dataclass(frozen=True)
class IgnoredItem:
    """A field an ignore rule kept out of a stack's plan (listed, never counted)."""

    object: str  # Kind namespace/name
    path: str
    live: Any
    declared: Any
    rule: str
    reason: str
    applied: str

    @property
    def live_text(self) -> str:
        return json.dumps(self.live, ensure_ascii=False, sort_keys=True)

    @property
    def declared_text(self) -> str:
        return (
            "(absent)"
            if self.declared is None
            else json.dumps(self.declared, ensure_ascii=False, sort_keys=True)
        )


@dataclass(frozen=True)
class ChangeItem:
    id: str
    kind: str
    namespace: str | None
    name: str
    action: str
    reason: str
    validated: bool
    diff: str
    api_version: str = ""
    fields: tuple[Field, ...] = ()  # masked
    owner: str | None = None  # a conflict's owner
    dangers: tuple[DangerItem, ...] = ()
    rename: str = ""  # "rename a → b" when this delete or create is half of a rename

    @property
    def danger_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.name for d in self.dangers))


@dataclass(frozen=True)
class PullItem:
    """A stack in pull delivery: what the merge publishes (docs/pull.md, Review)."""

    branch: str
    folder: str
    digest: str | None  # sha256:... of the folder (None: refused)
    diff: str  # the rendered output's diff against the branch as published ("": none)
    controller: str | None = None  # whose live preview the changes are (None: none made)
    refused: tuple[str, ...] = ()  # "message [rule]"

    @property
    def target(self) -> str:
        return f"{self.branch}:{self.folder}/"

    @property
    def files_changed(self) -> int:
        return sum(1 for line in self.diff.splitlines() if line.startswith("+++ "))


# -- conflicts first: an object that belongs to another stack, or to nobody in Konfig --


@dataclass(frozen=True)
class Conflict:
    stack: str
    id: str  # the object (or where a check found it)
    message: str


@dataclass(frozen=True)
class StackReport:
    path: str
    reasons: tuple[str, ...] = ()
    deleted: bool = False
    previewed: bool = False
    counts: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(ACTIONS, 0))
    changes: tuple[ChangeItem, ...] = ()
    failures: tuple[Failure, ...] = ()
    production: bool = False  # production-like (docs/report.md)
    # resources the preview could not plan: (id, reason naming the missing credentials)
    not_previewed: tuple[tuple[str, str], ...] = ()
    ignored: tuple[IgnoredItem, ...] = ()  # fields ignore rules kept out of the plan
    digest: str | None = None  # the change digest previewed (konfig.engine.digest)
    # (object id, field path) the cluster differs in that this change does not change
    cluster_differs: tuple[tuple[str, str], ...] = ()
    pull: PullItem | None = None  # a stack in pull delivery: what the merge publishes

    @property
    def conflicts(self) -> tuple[Conflict, ...]:
        """The preview's conflicts and the check's ownership findings of this stack."""
        found = [
            Conflict(self.path, c.id, c.reason) for c in self.changes if c.action == "conflict"
        ]
        found += [
            Conflict(self.path, f.where, f.message)
            for f in self.failures
            if f.rule and f.rule.startswith(OWNERSHIP_RULES)
        ]
        return tuple(found)

    @property
    def status(self) -> Status:
        if self.conflicts:
            return "conflict"
        stages = {f.stage for f in self.failures}
        for stage, status in (
            ("compile", "compile-error"),
            ("preview", "preview-error"),
            ("test", "test-failed"),
            ("check", "check-failed"),
        ):
            if stage in stages:
                return status  # type: ignore[return-value]
        if not self.previewed:
            return "pending"
        if self.deleted:
            return "deleted"
        if any(self.counts.get(a, 0) for a in CHANGING):
            return "changes"
        return "no-changes"

    @property
    def status_label(self) -> str:
        label = STATUS_LABEL[self.status]
        if self.not_previewed:
            label += f", ⚠️ {len(self.not_previewed)} not previewed"
        return label

    @property
    def failed(self) -> bool:
        return self.status in _FAILED

    @property
    def has_changes(self) -> bool:
        return any(self.counts.get(a, 0) for a in CHANGING)

    @property
    def danger_counts(self) -> dict[str, int]:
        """Changes per danger class (a change counts once per class)."""
        counts: dict[str, int] = dict.fromkeys(DANGER_CLASSES, 0)
        for c in self.changes:
            for name in c.danger_names:
                counts[name] = counts.get(name, 0) + 1
        return counts


@dataclass(frozen=True)
class Mode:
    """How the previews of a report were made (the preview JSON's ``mode``): ``live``
    against the clusters, or ``offline``, the render diff of ``base`` against ``merge``."""

    name: Literal["live", "offline"]
    base: str | None = None
    merge: str | None = None


@dataclass(frozen=True)
class Report:
    sha: str
    run_url: str | None
    stacks: tuple[StackReport, ...]
    other_failures: tuple[Failure, ...] = ()  # not tied to a stack (e.g. base/ unit tests)
    missing: tuple[str, ...] = ()  # inputs that were expected but absent
    previewed: bool = False
    reviewed: Reviewed = field(
        default_factory=Reviewed
    )  # the change digests previewed: the hidden record
    mode: Mode | None = None  # None: no preview
    origin: Origin | None = None  # where the pull request comes from (the forge says)
    live_follows: bool = False  # an offline comment the live preview replaces
    # (commit, stacks): results a live preview re-used from that commit's preview
    reused: tuple[tuple[str, int], ...] = ()
    # the run whose preview artifacts this report shows (hidden in the comment: the next
    # push's preview re-uses its unchanged stacks, pipeline.reusing)
    run_id: str | None = None

    @property
    def reused_line(self) -> str | None:
        """``♻️ 2 stacks re-used from `1a2b…`` (unchanged since that commit's preview)."""
        if not self.reused:
            return None
        parts = [f"{plural(n, 'stack')} re-used from `{sha[:12]}`" for sha, n in self.reused]
        return (
            "♻️ "
            + ", ".join(parts)
            + " (Spec and live objects unchanged since that commit's preview)"
        )

    @property
    def mode_line(self) -> str | None:
        """The comment's first line: which mode ran, and why (docs/report.md)."""
        if self.mode is None:
            return None
        return mode_line(
            self.mode.name,
            base=self.mode.base,
            merge=self.mode.merge,
            origin=self.origin,
            live_follows=self.live_follows,
        )

    @property
    def failed(self) -> bool:
        return bool(self.other_failures) or any(s.failed for s in self.stacks)

    @property
    def has_changes(self) -> bool:
        return any(s.has_changes for s in self.stacks)

    @property
    def conflicts(self) -> tuple[Conflict, ...]:
        return tuple(c for s in self.stacks for c in s.conflicts)

    @property
    def status(self) -> str:
        if self.failed:
            return "❌ failed"
        if not self.previewed:
            return "⏳ checks passed, not previewed"
        return "📝 changes to apply" if self.has_changes else "✅ no changes"

    @cached_property
    def dangers(self) -> tuple[DangerRow, ...]:
        """The danger table (class × stack counts), in the classes' order."""
        rows = []
        for name in DANGER_CLASSES:
            per_stack = [(s.danger_counts[name], s) for s in self.stacks if s.danger_counts[name]]
            if not per_stack:
                continue
            per_stack.sort(key=lambda t: (-t[0], t[1].path))
            first = next(
                d.reason for c in per_stack[0][1].changes for d in c.dangers if d.name == name
            )
            rows.append(
                DangerRow(
                    name,
                    sum(n for n, _ in per_stack),
                    tuple(s.path for _, s in per_stack),
                    first,
                )
            )
        return tuple(rows)

    @property
    def danger_totals(self) -> dict[str, int]:
        totals: dict[str, int] = dict.fromkeys(DANGER_CLASSES, 0)
        for s in self.stacks:
            for name, n in s.danger_counts.items():
                totals[name] = totals.get(name, 0) + n
        return totals

    @property
    def labels(self) -> tuple[str, ...]:
        """The pull request's labels: one per danger class present (``konfig/danger:<class>``)."""
        return tuple(f"{LABEL_PREFIX}{name}" for name, n in self.danger_totals.items() if n)

    @property
    def confirmations(self) -> tuple[tuple[str, str, str], ...]:
        """``(stack, digest, what)`` of each stack apply refuses until confirmed
        (``danger/confirm``, as the preview marked it under konfig.yaml's policy)."""
        found: dict[str, tuple[str, str, str]] = {}
        for s in self.stacks:
            for c in s.changes:
                m = _CONFIRM.search(c.reason)
                if m is not None and s.path not in found:
                    found[s.path] = (s.path, m.group(2), m.group(1))
        return tuple(found.values())

    @property
    def danger_record(self) -> DangerRecord | None:
        """What ``konfig dangers`` reads back from the comment (labels, the confirmations
        the policy asks for): None without a commit to bind it to. ``live`` only when
        every expected result came and the preview ran against the clusters: an offline
        preview cannot count a cascade."""
        if not self.sha or self.sha == "unknown":
            return None
        live = not self.missing and (self.mode is None or self.mode.name == "live")
        return DangerRecord(
            self.sha,
            live,
            self.labels,
            tuple(Needed(stack, digest, what) for stack, digest, what in self.confirmations),
        )

    @property
    def danger_conclusion(self) -> str:
        """The danger check's conclusion: ``action_required`` while a stack needs a
        confirmation the policy asks for, else ``success``."""
        return "action_required" if self.confirmations else "success"

    @property
    def ignored_by_rule(self) -> tuple[tuple[str, int], ...]:
        """(rule, fields it ignored) over every stack, most first."""
        counts: dict[str, int] = {}
        for s in self.stacks:
            for f in s.ignored:
                counts[f.rule] = counts.get(f.rule, 0) + 1
        return tuple(sorted(counts.items(), key=lambda t: (-t[1], t[0])))

    @property
    def ignored_count(self) -> int:
        return sum(len(s.ignored) for s in self.stacks)

    @property
    def totals(self) -> dict[str, int]:
        return {a: sum(s.counts.get(a, 0) for s in self.stacks) for a in ACTIONS}

    @property
    def not_previewed(self) -> tuple[tuple[str, str, str], ...]:
        """(stack, resource id, reason) of every resource the preview could not plan."""
        return tuple((s.path, i, why) for s in self.stacks for i, why in s.not_previewed)

    @cached_property
    def grouping(self) -> Grouping:
        """The stacks' changes grouped across stacks (each distinct change once)."""
        return group_changes(
            StackChanges(
                s.path,
                tuple(
                    ObjectChange(
                        c.api_version, c.kind, c.namespace, c.name, c.action, c.fields, c.diff
                    )
                    for c in s.changes
                ),
                production=s.production,
                failed=s.failed,
                failures=tuple(FailureNote(f.stage, f.message, f.file, f.line) for f in s.failures),
            )
            for s in self.stacks
        )


@dataclass(frozen=True)
class Inputs:
    """The JSON documents (parsed, or :class:`Document` with their file); every one
    optional, previews may come in parts. Each must match its command's contract."""

    previews: Sequence[Document | Mapping[str, Any]] = ()
    changed: Document | Mapping[str, Any] | None = None
    compile: Sequence[Document | Sequence[Any]] = ()  # each: konfig compile --json
    tests: Sequence[Document | Mapping[str, Any]] = ()
    checks: Sequence[Document | Sequence[Any]] = ()
    missing: Sequence[str] = ()


# -- building ---------------------------------------------------------------------


def build(
    inputs: Inputs,
    *,
    sha: str,
    run_url: str | None = None,
    production: tuple[str, ...] = DEFAULT_PRODUCTION_STACKS,
    pr: int | None = None,
    origin: Origin | None = None,
    live_follows: bool = False,
    run_id: str | None = None,
) -> Report:
    """Merge the stage outputs into one :class:`Report` (pure; raises ReportInputError
    when a document does not match its contract).

    A stack is production-like as ``konfig changed --json`` says; a stack it does not
    describe (or an older change set) by the ``production`` path patterns.
    """
    stacks: dict[str, dict[str, Any]] = {}

    def entry(path: str) -> dict[str, Any]:
        return stacks.setdefault(
            path,
            {"path": path, "reasons": [], "deleted": False, "failures": []},
        )

    others: list[Failure] = []
    if inputs.changed is not None:
        _read_changed(validated("changed", inputs.changed), entry)
    for listed in inputs.compile:
        _read_compile(validated("compile", listed), entry)
    for doc in inputs.tests:
        _read_test(validated("test", doc), entry, others)
    for findings in inputs.checks:
        _read_check(validated("check", findings), entry, others)
    previews = [validated("preview", preview) for preview in inputs.previews]
    modes: set[Mode] = set()
    for doc in previews:
        mode = _mode(doc)
        if mode is not None:
            modes.add(mode)
        _read_preview(doc, entry)
    if len(modes) > 1:
        shown = ", ".join(sorted(f"{m.name} {str(m.base or '')[:12]}".strip() for m in modes))
        raise ReportInputError(
            f"previews of different modes or commits ({shown}): one report shows one mode "
            "of one merge"
        )
    try:
        # what reviewers saw against the clusters: an offline render diff is no such record
        live = [doc for doc in previews if (_mode(doc) or Mode("live")).name == "live"]
        reviewed = reviewed_of_previews(live, pr=pr)
    except UsageError as exc:
        raise ReportInputError(str(exc)) from None
    reused: dict[str, int] = {}
    for doc in live:
        for item in doc["stacks"]:
            if item.get("reusedFrom"):
                reused[str(item["reusedFrom"])] = reused.get(str(item["reusedFrom"]), 0) + 1

    # A failure in a file inside a stack (e.g. a unit test there) belongs to its row.
    rest = []
    for failure in others:
        owner = _owner(failure.file, stacks)
        if owner is None:
            rest.append(failure)
        else:
            stacks[owner]["failures"].append(failure)

    reports = []
    for path in sorted(stacks):
        data = stacks[path]
        failures = _dedupe(data["failures"])
        if any(f.stage == "compile" for f in failures):
            # The preview of a stack that does not compile repeats the compile error.
            failures = tuple(
                f
                for f in failures
                if not (f.stage == "preview" and f.message.startswith("compile failed"))
            )
        reports.append(
            StackReport(
                path=path,
                reasons=tuple(data["reasons"]),
                deleted=bool(data["deleted"]),
                previewed="counts" in data,
                counts=data.get("counts", dict.fromkeys(ACTIONS, 0)),
                changes=tuple(data.get("changes", ())),
                failures=failures,
                production=is_production(path, data.get("production"), production),
                not_previewed=tuple(data.get("not_previewed", ())),
                ignored=tuple(data.get("ignored", ())),
                digest=reviewed.stacks[path].digest if path in reviewed.stacks else None,
                cluster_differs=(
                    reviewed.stacks[path].cluster_differs if path in reviewed.stacks else ()
                ),
                pull=data.get("pull"),
            )
        )
    return Report(
        sha=sha,
        run_url=run_url,
        stacks=tuple(reports),
        other_failures=_dedupe(rest),
        missing=tuple(inputs.missing),
        previewed=bool(inputs.previews),
        reviewed=reviewed,
        mode=next(iter(modes)) if modes else None,
        origin=origin,
        live_follows=live_follows,
        reused=tuple(sorted(reused.items())),
        run_id=run_id if live else None,
    )


def _mode(doc: Mapping[str, Any]) -> Mode | None:
    """A preview document's mode; None for one written before Konfig had modes (live,
    but the comment does not claim what the document does not say)."""
    raw = doc.get("mode")
    if raw is None:
        return None
    if raw["name"] == "offline":
        return Mode("offline", str(raw["base"]), str(raw["merge"]))
    return Mode("live")


def _owner(file: str | None, stacks: Mapping[str, Any]) -> str | None:
    if not file:
        return None
    candidates = [p for p in stacks if PurePosixPath(file).is_relative_to(p)]
    return max(candidates, key=len) if candidates else None


def _dedupe(failures: Iterable[Failure]) -> tuple[Failure, ...]:
    seen: dict[tuple[str, str, str | None, int | None], Failure] = {}
    for f in failures:
        seen.setdefault((f.stage, f.message, f.file, f.line), f)
    return tuple(seen.values())


def _read_changed(doc: Mapping[str, Any], entry: Callable[[str], dict[str, Any]]) -> None:
    for item in doc["stacks"]:
        e = entry(item["path"])
        if "production" in item:
            e["production"] = item["production"]
        for reason in item["reasons"]:
            if reason not in e["reasons"]:
                e["reasons"].append(reason)
    for path in doc["deleted_stacks"]:
        e = entry(path)
        e["deleted"] = True
        if "stack deleted" not in e["reasons"]:
            e["reasons"].append("stack deleted")


def _compile_failure(err: Mapping[str, Any]) -> Failure:
    """A compile error as ``konfig compile --json`` and ``konfig test --json`` write it."""
    return Failure("compile", err["message"] or "compile failed", err["file"] or None, err["line"])


def _read_compile(doc: Sequence[Mapping[str, Any]], entry: Callable[[str], dict[str, Any]]) -> None:
    for item in doc:
        e = entry(item["path"])
        if item["error"] is not None:
            e["failures"].append(_compile_failure(item["error"]))


# `konfig test --json` statuses that are not failures
_TEST_OK = ("passed", "created", "updated", "unchanged")


def _read_test(
    doc: Mapping[str, Any], entry: Callable[[str], dict[str, Any]], others: list[Failure]
) -> None:
    for item in doc["stacks"]:
        e = entry(item["path"])
        status = item["status"]
        if status == "compile-error" and "error" in item:
            e["failures"].append(_compile_failure(item["error"]))
        elif status not in _TEST_OK:
            detail = "".join(d["diff"] for d in item.get("diffs", ()))
            e["failures"].append(
                Failure(
                    "test",
                    item.get("message") or f"golden test {status}",
                    item.get("golden") or None,
                    item.get("line"),
                    detail=detail,
                )
            )
    for unit in doc["unitTests"]:
        if unit["passed"]:
            continue
        message = f"{unit['package']}: {unit['name']}: {unit.get('message', '')}".strip(": ")
        others.append(Failure("test", message, unit.get("file") or None, unit.get("line")))


def _read_check(
    doc: Sequence[Mapping[str, Any]], entry: Callable[[str], dict[str, Any]], others: list[Failure]
) -> None:
    for item in doc:
        if item["severity"] != "error":
            continue
        failure = Failure(
            "check",
            item["message"] or "check failed",
            item["file"] or None,
            item["line"],
            rule=item["rule"] or None,
        )
        if item.get("stack"):
            entry(item["stack"])["failures"].append(failure)
        else:
            others.append(failure)


def _read_preview(doc: Mapping[str, Any], entry: Callable[[str], dict[str, Any]]) -> None:
    for item in doc["stacks"]:
        e = entry(item["path"])
        e["deleted"] = e["deleted"] or item["deleted"]
        if item["status"] == "error":  # a failed stack has no counts to show
            err = item["error"] or {}
            e["failures"].append(
                Failure(
                    "preview",
                    err.get("message") or "preview failed",
                    err.get("file") or None,
                    err.get("line"),
                )
            )
        else:
            # "conflict" is absent from a preview written before Konfig knew conflicts
            e["counts"] = {a: item["counts"].get(a, 0) for a in ACTIONS}
        changes = [
            ChangeItem(
                id=c["id"],
                kind=c["kind"],
                namespace=c["namespace"] or None,
                name=c["name"],
                action=c["action"],
                reason=c["reason"] + (f" ⛔ REFUSED: {c['refused']}" if c.get("refused") else ""),
                validated=c["validated"],
                diff=mask_secret_diff(c["diff"]) if c["kind"] == "Secret" else c["diff"],
                api_version=c.get("apiVersion", ""),
                fields=_fields(c.get("apiVersion", ""), c["kind"], c["fields"]),
                owner=c.get("owner") or None,
                dangers=tuple(DangerItem(d["class"], d["reason"]) for d in c.get("dangers") or []),
                rename=_rename_text(c.get("rename")),
            )
            for c in item["changes"]
            if c["action"] != "unchanged"
        ]
        e["changes"] = sorted(changes, key=lambda c: c.id)
        e["ignored"] = [
            IgnoredItem(
                f"{c['kind']} " + (f"{c['namespace']}/" if c["namespace"] else "") + c["name"],
                f["path"],
                *mask_field(
                    c.get("apiVersion", ""),
                    c["kind"],
                    f["path"].lstrip("/").replace("/", "."),
                    f.get("live"),
                    f.get("declared"),
                ),
                f["rule"],
                f["reason"],
                f["applied"],
            )
            for c in sorted(item["changes"], key=lambda c: c["id"])
            for f in c.get("ignored") or []
        ]
        e["not_previewed"] = [(n["id"], n["reason"]) for n in item.get("notPreviewed") or []]
        pull = item.get("pull")
        if pull:
            e["pull"] = PullItem(
                pull["branch"],
                pull["folder"],
                pull["digest"],
                pull["diff"],
                pull.get("controller"),
                tuple(f"{r['message']} [{r['rule']}]" for r in pull["refused"]),
            )


def _fields(api_version: str, kind: str, raw: Sequence[Mapping[str, Any]]) -> tuple[Field, ...]:
    out = []
    for f in raw:
        before, after = mask_field(api_version, kind, f["path"], f["before"], f["after"])
        out.append(Field(f["path"], before, after, bool(f.get("drift"))))
    return tuple(out)


def _rename_text(rename: Any) -> str:
    if not isinstance(rename, Mapping):
        return ""
    old = str(rename.get("from", "")).rsplit(":", 1)[-1]
    new = str(rename.get("to", "")).rsplit(":", 1)[-1]
    return f"rename {old} → {new}"
