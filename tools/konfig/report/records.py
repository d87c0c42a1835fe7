"""The pull-request report as plain data: a :class:`Report` of :class:`StackReport` rows
(their changes, failures, dangers, ignored fields, conflicts and pull delivery), what
the comment says about the whole (status, the danger table and record, labels,
confirmations) and the changes grouped across stacks.

:func:`konfig.report.pull_request.build` makes these records from the stages' JSON;
:mod:`konfig.report.comment` and :mod:`konfig.report.grouped` render them and only
read them. Values here are already masked (the builder masks every Secret value).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from konfig.engine.plan import ACTIONS, CHANGING, DANGER_CLASSES
from konfig.pipeline.confirmations import LABEL_PREFIX, DangerRecord, Needed
from konfig.pipeline.reviewed import Reviewed
from konfig.report.grouping import (
    FailureNote,
    Field,
    Grouping,
    ObjectChange,
    StackChanges,
    group_changes,
)
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
OWNERSHIP_RULES = "ownership/"  # check findings that are conflicts (two stacks, one object)
# what the preview's danger/confirm refusal says (engine.guards.mark_unconfirmed)
_CONFIRM = re.compile(r"danger/confirm: (.+?) \(`konfig apply --confirm \S+=([0-9a-f]{16})`\)")


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
class ProposedRuleItem:
    """An ignore rule the change adds, changes or drops against the base branch's (the
    preview's ``ignoreRulesProposed``): listed in its own section, never applied."""

    change: str  # added, changed, removed
    source: str
    text: str  # the rule in words (report.previews.proposed_rule_text)
    stacks: tuple[str, ...]
    reason: str = ""
    selector: Mapping[str, Any] = field(default_factory=dict)  # as declared
    paths: tuple[str, ...] = ()
    managers: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """An item of ``konfig report --json``'s ``ignoreRulesProposed``."""
        return {
            "change": self.change,
            "source": self.source,
            "text": self.text,
            "reason": self.reason,
            "selector": dict(self.selector),
            "paths": list(self.paths),
            "managers": list(self.managers),
            "stacks": list(self.stacks),
        }


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
    # the ignore rules the change proposes (previewed with the base's: listed, not applied)
    proposed_rules: tuple[ProposedRuleItem, ...] = ()

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
