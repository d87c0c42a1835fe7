"""Rendering ``konfig drift``: terminal text, markdown (the drift issue) and JSON.

Input is the :class:`~konfig.pipeline.status.StatusReport` of the checked stacks
and, per drifted field, the value the repository sets (``planned``, when the stack
was compiled). The JSON is documented in ``docs/contracts/drift.md``. Live values were
masked when the drift was computed (Secret data never appears); object ids and
values come from the cluster, so markdown puts them in code spans no content can
close.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from konfig.engine.drift import ObjectDrift
from konfig.ids import is_terraform_id
from konfig.pipeline.status import TERRAFORM_UNREAD, StackStatus, StatusReport
from konfig.report.markdown import cell, code
from konfig.words import plural

SCHEMA_VERSION = 1
KIND = "KonfigDrift"
MARKER = "konfig:drift"

PlannedKey = tuple[str, str, str]  # (stack path, object id, field path)


@dataclass(frozen=True)
class DriftReport:
    status: StatusReport
    planned: Mapping[PlannedKey, Any] = field(default_factory=dict)

    @property
    def checked(self) -> tuple[StackStatus, ...]:
        return tuple(s for s in self.status.stacks if s.state != "orphaned")

    @property
    def drifted(self) -> tuple[StackStatus, ...]:
        return tuple(s for s in self.checked if s.drift == "drifted")

    @property
    def errors(self) -> tuple[StackStatus, ...]:
        return tuple(s for s in self.checked if s.state == "error")

    @property
    def has_drift(self) -> bool:
        return bool(self.drifted)

    def objects(self, s: StackStatus) -> tuple[ObjectDrift, ...]:
        return tuple(o.drift for o in (s.status.drifted if s.status else ()))

    def not_checked(self) -> list[tuple[str, str, int | None]]:
        """(stack, why, how many) of the Terraform resources whose drift is unknown (no
        credentials, OpenTofu failed, ``--terraform state``; how many None: not read, by
        ``--terraform skip`` or because the state could not be read): said, never taken
        for "no drift"."""
        out: list[tuple[str, str, int | None]] = []
        for s in self.checked:
            if s.terraform == "skip":
                out.append((s.path, SKIPPED, None))
                continue
            if s.state != "error" and s.error.startswith(TERRAFORM_UNREAD):  # no state read
                out.append((s.path, "not checked" + s.error.removeprefix(TERRAFORM_UNREAD), None))
                continue
            out += [
                (s.path, why, n)
                for why, n in (s.status.unknown_reasons().items() if s.status else ())
                if why != "not recorded"
            ]
        return out

    @property
    def terraform_not_checked(self) -> list[str]:
        """The stacks whose Terraform drift is not (fully) known."""
        return sorted({path for path, _, _ in self.not_checked()})


SKIPPED = "not checked: not read (--terraform skip)"


def _resources(n: int | None) -> str:
    return "Terraform resources" if n is None else plural(n, "Terraform resource")


def _stack_state(s: StackStatus) -> str:
    if s.state in ("error", "never-applied"):
        return s.state
    return {"drifted": "drifted", "none": "in-sync", "unknown": "unknown"}[s.drift]


def to_json(report: DriftReport) -> dict[str, Any]:
    drifted = [o for s in report.drifted for o in report.objects(s)]
    return {
        "schemaVersion": SCHEMA_VERSION,
        "kind": KIND,
        "head": report.status.head,
        "hasDrift": report.has_drift,
        "terraform": {
            "mode": report.status.terraform,
            "notChecked": report.terraform_not_checked,
        },
        "summary": {
            "stacks": len(report.checked),
            "driftedStacks": len(report.drifted),
            "objects": len(drifted),
            "fields": sum(len(o.fields) for o in drifted),
            "unknown": sum(s.status.drift_unknown for s in report.checked if s.status),
            "errors": len(report.errors),
        },
        "stacks": [
            {
                "path": s.path,
                "context": s.context,
                "state": _stack_state(s),
                "commit": (s.inventory.commit or None) if s.inventory else None,
                "appliedAt": (s.inventory.applied_at or None) if s.inventory else None,
                "error": s.error or None,
                "objects": [
                    {
                        "id": o.id,
                        "runtime": "Terraform" if is_terraform_id(o.id) else "Kubernetes",
                        "state": o.state,
                        "message": o.message,
                        "fields": [
                            {
                                "path": f.path,
                                "live": f.live,
                                "removed": f.removed,
                                "planned": report.planned.get((s.path, o.id, f.path)),
                            }
                            for f in o.fields
                        ],
                    }
                    for o in report.objects(s)
                ],
            }
            for s in report.checked
        ],
    }


def render_json(report: DriftReport) -> str:
    return json.dumps(to_json(report), indent=2) + "\n"


def _value(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _applied(s: StackStatus) -> str:
    inv = s.inventory
    if inv is None:
        return ""
    when = inv.applied_at.replace("T", " ") if inv.applied_at else "time unknown"
    return f"applied {inv.commit[:7] if inv.commit else '(unfinished)'} at {when}"


def _symbol(o: ObjectDrift) -> str:
    return {"deleted": "-", "recreated": "!"}.get(o.state, "~")


def render_text(report: DriftReport) -> str:
    lines: list[str] = []
    for s in report.checked:
        if s.state == "error":
            lines.append(f"{s.path} (context {s.context}): error")
            lines.extend("  " + line for line in s.error.splitlines())
            lines.append("")
            continue
        objects = report.objects(s)
        if not objects:
            continue
        lines.append(
            f"{s.path} (context {s.context}, {_applied(s)}): "
            f"{plural(len(objects), 'drifted object')}"
        )
        for o in objects:
            lines.append(f"  {_symbol(o)} {o.id}: {o.message}")
            for f in o.fields:
                planned = report.planned.get((s.path, o.id, f.path))
                live = "removed" if f.removed else f"{_value(f.live)} (live)"
                wanted = "" if planned is None else f", {_value(planned)} (repository)"
                lines.append(f"        {f.path}: {live}{wanted}")
        lines.append("")
    for path, why, n in report.not_checked():
        lines.append(f"{path}: {_resources(n)} {why}")
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"


def summary_line(report: DriftReport) -> str:
    checked = len(report.checked)
    unknown = sum(
        s.status.unknown_reasons().get("not recorded", 0) for s in report.checked if s.status
    )
    tail = ""
    if unknown:
        tail = f"; {plural(unknown, 'object')} applied before drift was recorded (unknown)"
    not_checked = report.not_checked()
    skipped = sum(n or 0 for _, _, n in not_checked)
    if skipped:
        tail += f"; {plural(skipped, 'Terraform resource')} not checked (unknown)"
    unread = sum(1 for _, _, n in not_checked if n is None)
    if unread:
        tail += f"; Terraform drift not checked in {plural(unread, 'stack')}"
    if report.errors:
        tail += f"; {plural(len(report.errors), 'stack')} could not be checked"
    if not report.has_drift and not_checked:  # never "no drift" for what was not checked
        return f"No drift found in what was checked ({plural(checked, 'stack')}){tail}."
    if not report.has_drift:
        return f"No drift in {plural(checked, 'stack')}{tail}."
    objects = sum(len(report.objects(s)) for s in report.drifted)
    return (
        f"Drift: {plural(objects, 'object')} in {len(report.drifted)} of "
        f"{plural(checked, 'stack')}{tail}. `konfig apply <stack>` sets them back; or change "
        "the repository to keep the new values."
    )


def render_markdown(report: DriftReport, *, run_url: str | None = None) -> str:
    """The body of the drift issue (without its marker line; the forge client adds it)."""
    out: list[str] = []
    head = report.status.head
    where = f" at {code(head[:12])}" if head else ""
    not_checked = [
        f"- {code(path)}: {_resources(n)} {cell(why)}" for path, why, n in report.not_checked()
    ]
    if not report.has_drift:
        stacks = plural(len(report.checked), "stack")
        found = f"no drift found in what was checked ({stacks})" if not_checked else ""
        out.append(f"**Konfig drift check**{where}: {found or f'no drift in {stacks}'}.")
        if not_checked:
            out += ["", "Not checked (their drift is unknown):", *not_checked]
        return "\n".join(out) + "\n"
    out.append(f"## Konfig: drift in {plural(len(report.drifted), 'stack')}")
    out.append("")
    run = f" ([run]({run_url}))" if run_url else ""
    out.append(
        f"Found by the drift check{where}{run}: these live objects differ from what Konfig "
        "last applied. The next `konfig apply` of the stack sets them back; to keep a new "
        "value, change the repository instead. This issue is updated in place and closed "
        "when the drift is gone."
    )
    out.append("")
    out.append("| stack | cluster | applied | drifted objects |")
    out.append("| --- | --- | --- | ---: |")
    for s in report.drifted:
        inv = s.inventory
        commit = code(inv.commit[:12]) if inv and inv.commit else "unfinished"
        out.append(f"| {code(s.short)} | {code(s.context)} | {commit} | {len(report.objects(s))} |")
    out.append("")
    for s in report.drifted:
        objects = report.objects(s)
        out.append(
            f"<details open><summary>{cell(s.short)} (context {cell(s.context)}): "
            f"{plural(len(objects), 'drifted object')}</summary>"
        )
        out.append("")
        out.append("| object | drift | field | live | repository |")
        out.append("| --- | --- | --- | --- | --- |")
        for o in objects:
            if not o.fields:
                out.append(f"| {code(o.id)} | {cell(o.message)} | | | |")
            for f in o.fields:
                planned = report.planned.get((s.path, o.id, f.path))
                live = "(removed)" if f.removed else code(_value(f.live))
                wanted = "" if planned is None else code(_value(planned))
                out.append(f"| {code(o.id)} | changed | {code(f.path)} | {live} | {wanted} |")
        out.append("")
        out.append("</details>")
        out.append("")
    if not_checked:
        out += ["Not checked (their drift is unknown):", *not_checked, ""]
    if report.errors:
        out.append(
            f"Not checked: {', '.join(code(s.short) for s in report.errors)} "
            "(the cluster could not be read; see the run log)."
        )
        out.append("")
    return "\n".join(out)
