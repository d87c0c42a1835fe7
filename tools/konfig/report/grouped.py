"""The grouped pull-request comment: each distinct change once, then the exceptions.

Used when many stacks change (see ``comment.render``): instead of one section
per stack, the comment shows

1. a heading and a *look at these first* table, in review order: failed stacks,
   then deletes and replaces before updates and creates, production-like stacks
   before others, exceptions before the changes they deviate from;
2. the changes across stacks (``grouping.Group`` of role ``shared``/``varied``), each
   with its fields (before → after), how many objects in how many stacks, and the
   folded list of those stacks;
3. the exceptions: one section per stack that failed or whose change differs, with
   its failures, what is different and the diff of those objects;

under a character budget: the table is cut first to its most urgent rows, then
exception diffs are left out, then stack lists, and whatever still does not fit is
named in the footer. The full per-stack detail is the job summary's business.

:func:`to_json` is the same content as data (``konfig report --json``, documented
in ``docs/report-json.md``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from konfig.ids import ResourceIdError, parse_id
from konfig.masking import mask_secret_diff
from konfig.report.budget import Measure, chars
from konfig.report.grouping import ACTION_RANK, FailureGroup, Group, Grouping, StackException
from konfig.report.markdown import environment
from konfig.report.records import ChangeItem, Report, StackReport

SCHEMA_VERSION = 1
KIND = "KonfigReport"
ICON = {"delete": "🗑️", "replace": "♻️", "update": "📝", "create": "✨", "failed": "❌"}
TABLE_SHARE = 3  # the look-first table gets at most 1/3 of the budget
VALUE_LIMIT = 120
FIELD_LIMIT = 20  # fields listed per group; the rest are counted


def plural(kind: str, n: int) -> str:
    if n == 1:
        return kind
    if kind.endswith(("ss", "x", "ch", "sh")):
        return kind + "es"
    if kind.endswith("s"):
        return kind  # Endpoints
    if kind.endswith("y") and kind[-2:-1].lower() not in "aeiou":
        return kind[:-1] + "ies"
    return kind + "s"


def value(v: Any) -> str:
    """A field value as an inline code span (``(absent)`` for none)."""
    if v is None:
        return "(absent)"
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    if len(text) > VALUE_LIMIT:
        text = text[: VALUE_LIMIT - 1] + "…"
    return inline(text)


def inline(text: object) -> str:
    """An inline code span no content can close early (outside tables)."""
    s = " ".join(str(text).split())
    if "`" not in s:
        return f"`{s}`"
    ticks = "`" * (max(len(run) for run in _runs(s)) + 1)
    return f"{ticks} {s} {ticks}"


def _runs(s: str) -> list[str]:
    out, run = [], ""
    for ch in s:
        if ch == "`":
            run += ch
        elif run:
            out.append(run)
            run = ""
    return [*out, run] if run else out


# -- view models ------------------------------------------------------------------


@dataclass(frozen=True)
class Fold:
    """A line of a folded stack list: these stack names in these projects."""

    production: bool
    stacks: tuple[str, ...]
    projects: tuple[str, ...]


def fold(paths: Sequence[str], production: frozenset[str]) -> list[Fold]:
    """Stack paths folded by project: ``prod`` in 99 projects, ``dev, staging`` in 98, …"""
    out: list[Fold] = []
    for prod in (True, False):
        by_project: dict[str, list[str]] = {}
        for p in paths:
            if (p in production) != prod:
                continue
            parts = p.split("/", 2)
            project, stack = (parts[1], parts[2]) if len(parts) == 3 else (p, "")
            by_project.setdefault(project, []).append(stack)
        by_set: dict[tuple[str, ...], list[str]] = {}
        for project, stacks in by_project.items():
            by_set.setdefault(tuple(sorted(stacks)), []).append(project)
        lines = [Fold(prod, k, tuple(sorted(v))) for k, v in by_set.items()]
        lines.sort(key=lambda f: (-len(f.projects), f.stacks))
        out.extend(lines)
    return out


@dataclass(frozen=True)
class Row:
    """One row of the look-first table."""

    icon: str
    what: str  # markdown
    where: str  # markdown
    key: tuple[Any, ...]


@dataclass(frozen=True)
class Numbered:
    number: int
    group: Group


def _number(grouping: Grouping) -> dict[str, int]:
    return {g.id: i for i, g in enumerate(grouping.shared, start=1)}


def describe(g: Group) -> str:
    """``update Deployment `{project}``` as markdown."""
    return f"{g.action} {g.kind} {inline(g.name)}"


def _rows(report: Report, grouping: Grouping, numbers: Mapping[str, int]) -> list[Row]:
    by_path = {s.path: s for s in report.stacks}
    rows: list[Row] = []
    for fg in grouping.failure_groups:
        first = fg.failures[0]
        where = f"{len(fg.stacks):,} stacks"
        if fg.production:
            where += f" ({len(fg.production):,} production-like)"
        at = f" at {inline(_where(first.file, first.line))}" if first.file else ""
        what = f"**{_failure_label(by_path.get(fg.sample))}**{at}: {inline(_first_line(first))}"
        # (the same shape as a failed stack's key below: a count, then a text)
        key = (0, 9, 0 if fg.production else 1, 0, -len(fg.stacks), fg.id)
        rows.append(Row(ICON["failed"], what, where, key))
    for e in grouping.exceptions:
        stack = by_path.get(e.stack)
        parts = []
        if e.failed or (stack is not None and stack.failed):
            label = stack.status_label.replace("❌ ", "") if stack is not None else "failed"
            parts.append(f"**{label}**")
        for gid in e.groups:
            g = grouping.group(gid)
            if g.variant_of and g.variant_of in numbers:
                parts.append(f"{describe(g)} differs from change {numbers[g.variant_of]}")
            else:
                parts.append(f"{describe(g)} {_only(g)}")
        failed = e.failed or (stack is not None and stack.failed)
        rank = min((ACTION_RANK[grouping.group(g).action] for g in e.groups), default=9)
        action = next(
            (
                grouping.group(g).action
                for g in e.groups
                if ACTION_RANK[grouping.group(g).action] == rank
            ),
            "update",
        )
        where = inline(e.stack) + (" (production-like)" if e.production else "")
        rows.append(
            Row(
                ICON["failed"] if failed else ICON.get(action, "📝"),
                "; ".join(parts) or "**failed**",
                where,
                (0 if failed else 1, rank, 0 if e.production else 1, 0, -1, e.stack),
            )
        )
    for g in grouping.shared:
        n = numbers[g.id]
        what = f"{describe(g)} (change {n})"
        if g.role == "varied":
            what += ", values differ per stack"
        elif g.variant_of is not None and g.variant_of in numbers:
            what += f", differs from change {numbers[g.variant_of]}"
        where = f"{len(g.stacks):,} stacks"
        if g.production:
            where += f" ({len(g.production):,} production-like)"
        rank = ACTION_RANK.get(g.action, 9)
        rows.append(
            Row(
                ICON.get(g.action, "📝"),
                what,
                where,
                (1, rank, 0 if g.production else 1, 1, -len(g.stacks), n),
            )
        )
    rows.sort(key=lambda r: r.key)
    return rows


@dataclass(frozen=True)
class ExceptionView:
    exception: StackException
    stack: StackReport | None
    notes: tuple[str, ...]  # markdown: what is different
    changes: tuple[ChangeItem, ...]  # the objects to show

    @property
    def path(self) -> str:
        return self.exception.stack


def _exceptions(
    report: Report, grouping: Grouping, numbers: Mapping[str, int]
) -> list[ExceptionView]:
    by_path = {s.path: s for s in report.stacks}
    views = []
    for e in grouping.exceptions:
        stack = by_path.get(e.stack)
        notes: list[str] = []
        ids: set[str] = set()
        for gid in e.groups:
            g = grouping.group(gid)
            mine = [o for o in g.occurrences if o.stack == e.stack]
            ids |= {o.id for o in mine}
            what = (
                f"{g.action} {g.kind} {inline(_concrete_name(mine[0].id))}" if mine else describe(g)
            )
            others = "" if len(g.stacks) == 1 else f" (and in {_more(g)})"
            if g.variant_of and g.variant_of in numbers:
                notes.append(f"{what} differs from change {numbers[g.variant_of]}{others}:")
                notes.extend(_lines(g, reference=f"change {numbers[g.variant_of]}"))
            elif g.action in ("update", "replace") and g.fields:
                notes.append(f"{what} {_only(g, 'in this stack')}:")
                notes.extend(_lines(g, reference=None))
            else:
                notes.append(f"{what} {_only(g, 'in this stack')}")
        also = [n for gid, n in numbers.items() if e.stack in grouping.group(gid).stacks]
        if also:
            listed = ", ".join(str(n) for n in sorted(also))
            notes.append(f"and change{'s' if len(also) > 1 else ''} {listed}, as the others")
        changes = tuple(c for c in (stack.changes if stack else ()) if c.id in ids)
        views.append(ExceptionView(e, stack, tuple(notes), changes))
    return views


def _more(g: Group) -> str:
    n = len(g.stacks) - 1
    return f"{n} more stack{'' if n == 1 else 's'}"


def _only(g: Group, here: str = "here") -> str:
    return f"only {here}" if len(g.stacks) == 1 else f"{here} and in {_more(g)} only"


def _failure_label(stack: StackReport | None) -> str:
    return stack.status_label.replace("❌ ", "") if stack is not None else "failed"


def _where(file: str | None, line: int | None) -> str:
    return "" if not file else file if line is None else f"{file}:{line}"


def _first_line(f: Any) -> str:
    lines = str(f.message).splitlines()
    text = lines[0] if lines else ""
    return text if len(text) <= VALUE_LIMIT else text[: VALUE_LIMIT - 1] + "…"


def _concrete_name(object_id: str) -> str:
    try:
        return parse_id(object_id).name  # a name may hold ':' (system:auth-delegator)
    except ResourceIdError:
        return object_id


def _lines(g: Group, *, reference: str | None) -> list[str]:
    """The fields of a variant or single group, as nested list items."""
    out = []
    for i, f in enumerate(g.fields[:FIELD_LIMIT]):
        line = f"  - {inline(f.path)}: {value(f.before)} → {value(f.after)}"
        other = g.reference[i] if reference and i < len(g.reference) else None
        if other is not None:
            line += f" ({reference}: {value(other.before)} → {value(other.after)})"
        out.append(line)
    if len(g.fields) > FIELD_LIMIT:
        out.append(f"  - … and {len(g.fields) - FIELD_LIMIT} more fields (see the job summary)")
    return out


# -- rendering --------------------------------------------------------------------


@dataclass(frozen=True)
class Shortened:
    text: str
    truncated: bool
    omitted: tuple[str, ...]  # exceptions not shown (named in the footer)


def render_grouped(
    report: Report,
    grouping: Grouping,
    *,
    budget: int,
    measure: Measure = chars,
    title: str = "Konfig preview",
    footer: bool = True,
) -> Shortened:
    """The grouped comment within ``budget`` (``footer``: end it; the job summary
    continues with every stack instead)."""
    env = environment()
    env.filters["inline"] = inline
    env.filters["value"] = value
    env.filters["num"] = lambda n: f"{n:,}"
    env.globals["plural"] = plural
    env.globals["describe"] = describe
    numbers = _number(grouping)
    rows = _rows(report, grouping, numbers)
    placeholders = sorted({p for g in grouping.shared for p in g.placeholders})

    def head(shown: Sequence[Row]) -> str:
        return env.get_template("grouped_heading.md.j2").render(
            r=report,
            g=grouping,
            title=title,
            short=report.sha[:12],
            rows=shown,
            hidden_rows=len(rows) - len(shown),
            placeholders=placeholders,
            exceptions_count=len(grouping.exceptions)
            + sum(len(fg.stacks) for fg in grouping.failure_groups),
        )

    def foot(omitted: Sequence[str], lists: bool) -> str:
        return env.get_template("grouped_footer.md.j2").render(
            r=report, omitted=omitted, lists=lists, truncated=bool(omitted) or lists
        )

    reserve = measure(foot(["appops/" + "x" * 60] * 20, True)) + 64
    shown = rows
    top = head(shown)
    while measure(top) > budget // TABLE_SHARE and len(shown) > 5:
        shown = shown[: max(5, len(shown) * 3 // 4)]
        top = head(shown)
    room = budget - measure(top) - reserve

    group_tpl = env.get_template("grouped_group.md.j2")
    exc_tpl = env.get_template("grouped_exception.md.j2")
    fail_tpl = env.get_template("grouped_failures.md.j2")
    by_path = {s.path: s for s in report.stacks}
    shared = [Numbered(numbers[g.id], g) for g in grouping.shared]
    views = _exceptions(report, grouping, numbers)

    first: dict[tuple[str, ...], int] = {}
    for item in shared:
        first.setdefault(item.group.stacks, item.number)

    def group_text(item: Numbered, lists: bool) -> str:
        g = item.group
        same_as = first[g.stacks] if first[g.stacks] != item.number else None
        sample = g.sample
        diff = mask_secret_diff(sample.diff) if g.kind == "Secret" else sample.diff
        return group_tpl.render(
            n=item.number,
            g=g,
            fields=g.fields[:FIELD_LIMIT],
            more_fields=max(0, len(g.fields) - FIELD_LIMIT),
            folds=fold(g.stacks, grouping.production) if lists else None,
            sample=sample,
            diff=diff if lists and _sample_shown(g) else "",
            changed=len(grouping.changed),
            same_as=same_as,
            head=numbers.get(g.variant_of) if g.variant_of else None,
        )

    def exc_text(view: ExceptionView, compact: bool) -> str:
        return exc_tpl.render(v=view, s=view.stack, compact=compact)

    def failure_text(fg: FailureGroup, compact: bool) -> str:
        sample = by_path.get(fg.sample)
        return fail_tpl.render(
            fg=fg,
            label=_failure_label(sample),
            sample=sample.failures if sample is not None else (),
            folds=fold(fg.stacks, grouping.production),
            compact=compact,
        )

    # Exceptions in review order: stacks that fail the same way first, then each stack.
    items: list[tuple[tuple[str, ...], str, str]] = [
        (fg.stacks, failure_text(fg, False), failure_text(fg, True))
        for fg in grouping.failure_groups
    ]
    items += [((v.path,), exc_text(v, False), exc_text(v, True)) for v in views]

    # Groups always get their fields; their stack lists and samples only while the
    # exceptions still fit in full (the exceptions are what must be read).
    full_groups = [group_text(i, True) for i in shared]
    bare_groups = [group_text(i, False) for i in shared]
    lists = True
    groups_text = "".join(full_groups)
    if measure(groups_text) + sum(measure(compact) for _, _, compact in items) > room:
        lists = False
        groups_text = "".join(bare_groups)
    room -= measure(groups_text)

    sections: list[str] = []
    omitted: list[str] = []
    for paths, full, compact in items:
        for text in (full, compact):
            if measure(text) <= room:
                sections.append(text)
                room -= measure(text)
                break
        else:
            omitted.extend(paths)
    exc_head = "### Exceptions\n\n" if items else ""
    body = top + ("### Changes across stacks\n\n" if shared else "") + groups_text
    body += exc_head + "".join(sections)
    dropped = not lists and bool(shared)  # stack lists left out
    truncated = bool(omitted) or dropped or len(shown) < len(rows)
    text = body + foot(omitted, dropped) if footer else body
    return Shortened(text, truncated, tuple(omitted))


def _sample_shown(g: Group) -> bool:
    """A create shows one created object; a change without a field list its diff."""
    if g.role == "varied":
        return False
    return g.action == "create" or (g.action in ("update", "replace") and not g.fields)


# -- JSON -------------------------------------------------------------------------


def to_json(report: Report, grouping: Grouping, *, layout: str) -> dict[str, Any]:
    """``konfig report --json``: the report's status, stacks, groups and exceptions."""
    numbers = _number(grouping)
    return {
        "schemaVersion": SCHEMA_VERSION,
        "kind": KIND,
        "sha": report.sha,
        "status": _status(report),
        "layout": layout,
        "counts": report.totals,
        "dangers": report.danger_totals,
        "labels": list(report.labels),
        "dangerCheck": {
            "conclusion": report.danger_conclusion,
            "confirmations": [
                {"stack": path, "digest": digest, "what": what}
                for path, digest, what in report.confirmations
            ],
        },
        "ignoreRulesProposed": [p.to_json() for p in report.proposed_rules],
        "stacks": [
            {
                "path": s.path,
                "status": s.status,
                "production": s.path in grouping.production,
                "reasons": list(s.reasons),
                "counts": dict(s.counts),
                "failures": [
                    {
                        "stage": f.stage,
                        "message": f.message,
                        "file": f.file,
                        "line": f.line,
                        "rule": f.rule,
                    }
                    for f in s.failures
                ],
                "notPreviewed": [{"id": i, "reason": why} for i, why in s.not_previewed],
            }
            for s in report.stacks
        ],
        "groups": [_group_json(g, numbers) for g in grouping.groups],
        "exceptions": [
            {
                "stack": e.stack,
                "production": e.production,
                "failed": e.failed,
                "groups": list(e.groups),
            }
            for e in grouping.exceptions
        ],
        "failureGroups": [
            {
                "id": fg.id,
                "stacks": list(fg.stacks),
                "productionStacks": list(fg.production),
                "placeholders": list(fg.placeholders),
                "failures": [
                    {"stage": f.stage, "message": f.message, "file": f.file, "line": f.line}
                    for f in fg.failures
                ],
            }
            for fg in grouping.failure_groups
        ],
        "otherFailures": [
            {"stage": f.stage, "message": f.message, "file": f.file, "line": f.line, "rule": f.rule}
            for f in report.other_failures
        ],
        "missing": list(report.missing),
    }


def _status(report: Report) -> str:
    if report.failed:
        return "failed"
    if not report.previewed:
        return "not-previewed"
    return "changes" if report.has_changes else "no-changes"


def _group_json(g: Group, numbers: Mapping[str, int]) -> dict[str, Any]:
    return {
        "id": g.id,
        "number": numbers.get(g.id),
        "role": g.role,
        "exceptional": g.exceptional,
        "variantOf": g.variant_of,
        "action": g.action,
        "apiVersion": g.api_version,
        "kind": g.kind,
        "name": g.name,
        "placeholders": list(g.placeholders),
        "fields": [{"path": f.path, "before": f.before, "after": f.after} for f in g.fields],
        "varies": [
            {
                "path": v.path,
                "before": {"distinct": v.before_count, "examples": list(v.befores)},
                "after": {"distinct": v.after_count, "examples": list(v.afters)},
            }
            for v in g.varies
        ],
        "objects": [{"stack": o.stack, "id": o.id} for o in g.occurrences],
        "stacks": list(g.stacks),
        "productionStacks": list(g.production),
    }
