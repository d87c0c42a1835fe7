"""The pull-request comment, rendered from a :class:`~konfig.report.records.Report`.

:func:`render` renders a report with the jinja2 templates in ``konfig/report/templates``
under a character budget (:mod:`konfig.report.budget`): heading and summary table first,
then whole per-stack sections (failures first, then changes) while they fit, then
compact sections without diffs, and only as a last resort a section cut in the middle
— always saying so. With many stacks the grouped layout (:mod:`konfig.report.grouped`)
shows each distinct change once instead (:func:`choose_layout`). :func:`render_full` is
the job summary and the artifact; :func:`to_json` the same content as data. Renderers
only read the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from konfig.pipeline import confirmations
from konfig.pipeline.reusing import run_line
from konfig.pipeline.reviewed import placed
from konfig.report import grouped
from konfig.report.budget import DEFAULT_BUDGET, Measure, chars, cut_section, utf8_bytes
from konfig.report.markdown import environment
from konfig.report.records import Report, StackReport

Layout = Literal["auto", "stacks", "grouped"]
# The grouped layout is chosen for more stacks than this with changes or failures.
GROUP_AFTER = 10


@dataclass(frozen=True)
class Rendered:
    text: str
    truncated: bool
    omitted: tuple[str, ...]  # stacks whose diffs (grouped: exceptions) are not in the text
    cut: tuple[str, ...]  # stacks whose section was cut in the middle
    layout: str = "stacks"  # stacks or grouped


def render_placeholder(sha: str, run_url: str | None) -> str:
    return (
        environment()
        .get_template("placeholder.md.j2")
        .render(sha=sha, short=sha[:12], run_url=run_url)
    )


def choose_layout(
    report: Report,
    layout: Layout = "auto",
    *,
    budget: int = DEFAULT_BUDGET,
    measure: Measure = chars,
) -> Literal["stacks", "grouped"]:
    """``auto``: grouped when more than :data:`GROUP_AFTER` stacks change or fail, or
    when at least two do and the per-stack comment would not fit."""
    if layout != "auto":
        return layout
    busy = sum(1 for s in report.stacks if s.changes or s.failures)
    if busy < 2:
        return "stacks"
    if busy > GROUP_AFTER:
        return "grouped"
    per_stack = _render_stacks(report, budget=budget, measure=measure, title="")
    return "grouped" if per_stack.truncated else "stacks"


def render(
    report: Report,
    *,
    budget: int = DEFAULT_BUDGET,
    measure: Measure = chars,
    title: str = "Konfig preview",
    layout: Layout = "auto",
) -> Rendered:
    """Render ``report`` as markdown no larger than ``budget`` (as counted by ``measure``):
    one section per stack, or (many stacks) each distinct change once (docs/report.md)."""
    record = _record(report)
    budget -= measure(record)
    if choose_layout(report, layout, budget=budget, measure=measure) == "grouped":
        shown = grouped.render_grouped(
            report, report.grouping, budget=budget, measure=measure, title=title
        )
        return Rendered(shown.text + record, shown.truncated, shown.omitted, (), "grouped")
    rendered = _render_stacks(report, budget=budget, measure=measure, title=title)
    return replace(rendered, text=rendered.text + record)


def _record(report: Report) -> str:
    """The hidden lines that end the comment and the summary: the reviewed record
    (:mod:`konfig.pipeline.reviewed`, when a stack was previewed with a digest), the
    danger record (:mod:`konfig.pipeline.confirmations`, when a stack is reported) and
    the line naming the run of a live preview (:func:`konfig.pipeline.reusing.run_line`)."""
    run = run_line(report.run_id) + "\n" if report.run_id else ""
    lines = []
    if report.reviewed.stacks:  # (a long one: a reference, the record in an artifact)
        run_id = int(report.run_id) if report.run_id else None
        lines.append(placed(report.reviewed, run_id)[0])
    record = report.danger_record
    if record is not None and report.stacks:
        lines.append(confirmations.hidden(record))
    text = "".join(f"\n{line}\n" for line in lines)
    return (text or "\n") + run if run else text


def render_full(
    report: Report,
    *,
    budget: int,
    measure: Measure = utf8_bytes,
    title: str = "Konfig preview",
    layout: Layout = "auto",
) -> Rendered:
    """The job summary and the artifact: with the grouped layout, the grouped overview
    and then every stack with its diff, within ``budget``."""
    record = _record(report)
    budget -= measure(record)
    if choose_layout(report, layout) == "stacks":
        rendered = _render_stacks(report, budget=budget, measure=measure, title=title)
        return replace(rendered, text=rendered.text + record)
    overview = grouped.render_grouped(
        report, report.grouping, budget=budget // 2, measure=measure, title=title, footer=False
    )
    detail = _render_stacks(
        report, budget=budget - measure(overview.text), measure=measure, title=title, detail=True
    )
    return Rendered(
        overview.text + detail.text + record,
        overview.truncated or detail.truncated,
        detail.omitted,
        detail.cut,
        "grouped",
    )


def _render_stacks(
    report: Report,
    *,
    budget: int,
    measure: Measure,
    title: str,
    detail: bool = False,
) -> Rendered:
    """The per-stack layout (``detail``: the table and sections below a grouped overview)."""
    env = environment()
    stack_tpl = env.get_template("stack.md.j2")

    def head(rows: Sequence[StackReport], hidden: int) -> str:
        return env.get_template("heading.md.j2").render(
            r=report,
            title=title,
            short=report.sha[:12],
            rows=rows,
            hidden_rows=hidden,
            detail=detail,
        )

    def foot(truncated: bool, omitted: Sequence[str], cut: Sequence[str]) -> str:
        return env.get_template("footer.md.j2").render(
            r=report, truncated=truncated, omitted=omitted, cut=cut
        )

    # Heading and summary come first. With thousands of stacks even the table may not
    # fit: keep the failed and changed rows, drop quiet ones, and say how many.
    priority = sorted(report.stacks, key=_priority)
    rows: list[StackReport] = list(report.stacks)
    top = head(rows, 0)
    longest = max((s.path for s in report.stacks), key=len, default="")
    reserve = measure(foot(True, [longest] * 20, [longest])) + 100
    if measure(top) + reserve > budget:
        # Once the table must be cut, it gets at most 60% of the budget so that the
        # diffs of the first (failed, changed) stacks still fit.
        table_budget = budget * 3 // 5
        keep = len(priority)
        while keep > 0:
            keep = keep * 3 // 4
            chosen = {s.path for s in priority[:keep]}
            rows = [s for s in report.stacks if s.path in chosen]
            top = head(rows, len(report.stacks) - len(rows))
            if measure(top) + reserve <= table_budget:
                break
    room = budget - measure(top) - reserve

    sections: dict[str, str] = {}
    omitted: list[str] = []
    for stack in priority:
        if not _has_section(stack):
            continue
        full = stack_tpl.render(s=stack, compact=False)
        if measure(full) <= room:
            sections[stack.path] = full
            room -= measure(full)
        else:
            omitted.append(stack.path)
    # Second pass: what did not fit whole gets a compact section (failures, change list).
    # Only when not even one stack fits whole is a section cut inside (last resort).
    cut: list[str] = []
    still: list[str] = []
    by_path = {s.path: s for s in report.stacks}
    for path in omitted:
        if not sections and room > 400:
            text = cut_section(stack_tpl.render(s=by_path[path], compact=False), room, measure)
            sections[path] = text
            room -= measure(text)
            cut.append(path)
            continue
        compact = stack_tpl.render(s=by_path[path], compact=True)
        if measure(compact) <= room:
            sections[path] = compact
            room -= measure(compact)
        still.append(path)
    truncated = bool(still or cut or len(rows) < len(report.stacks))
    body = "".join(sections[s.path] for s in report.stacks if s.path in sections)
    text = top + body + foot(truncated, still, cut)
    return Rendered(text, truncated, tuple(still), tuple(cut))


def _priority(stack: StackReport) -> tuple[int, str]:
    rank = -1 if stack.conflicts else 0 if stack.failed else 1 if stack.has_changes else 2
    return (rank, stack.path)


def _has_section(stack: StackReport) -> bool:
    return bool(stack.failures or stack.changes or stack.ignored)


def to_json(report: Report, *, layout: Layout = "auto") -> dict[str, Any]:
    """``konfig report --json`` (the contract konfig/contracts/report.schema.json)."""
    return grouped.to_json(report, report.grouping, layout=choose_layout(report, layout))
