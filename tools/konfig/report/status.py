"""Rendering ``konfig status``: a table per cluster (rich), and the JSON contract.

The JSON is documented in ``docs/contracts/status.md``. The table is built as rich
renderables; :func:`render_text` turns it into plain text (no colour) for files,
pipes and tests, and the CLI prints the renderables to a console that honours
``NO_COLOR``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from konfig.pipeline.status import StackStatus, StatusReport
from konfig.repo.names import display
from konfig.words import plural

_HEALTH_STYLE = {
    "healthy": "green",
    "progressing": "yellow",
    "failed": "red",
    "missing": "red",
    "empty": "",
    "unknown": "bright_black",
}


SERVICE_ACCOUNT = "system:serviceaccount:"


def _commit(s: StackStatus, head: str | None) -> Text:
    inv = s.inventory
    if s.state == "never-applied":
        return Text("never applied", style="yellow")
    if s.state == "error":
        return Text("error", style="red")
    if inv is None or not inv.commit:
        return Text("— (apply did not finish)", style="yellow")
    short = inv.commit[:7]
    if s.state == "orphaned":
        note = (
            "stack deleted from the repository"
            if s.orphan == "deleted"
            else "not in this repository"
        )
        return Text(f"{short} ({note})", style="magenta")
    if head and inv.commit == head:
        return Text(f"{short} (HEAD)")
    if s.commits_behind is None:
        return Text(f"{short} (not in this history)", style="yellow")
    behind = plural(s.commits_behind, "commit")
    if s.pending:
        return Text(f"{short} ({behind} behind, changed)", style="yellow")
    return Text(f"{short} ({behind} behind, unaffected)")


def _health(s: StackStatus) -> Text:
    if s.status is None:
        return Text("")
    counts = s.status.health_counts()
    if s.health == "healthy":
        return Text("healthy", style="green")
    if s.health == "empty":
        return Text("no objects")
    parts = []
    for key, word in (
        ("failed", "failed"),
        ("not_found", "missing"),
        ("in_progress", "progressing"),
    ):
        if counts[key]:
            parts.append(f"{counts[key]} {word}")
    return Text(", ".join(parts), style=_HEALTH_STYLE[s.health])


def _drift(s: StackStatus) -> Text:
    if s.status is None:
        return Text("")
    drifted = s.status.drifted
    if drifted:
        fields = sum(len(o.drift.fields) for o in drifted)
        text = f"yes: {plural(len(drifted), 'object')}"
        if fields:
            text += f", {plural(fields, 'field')}"
        return Text(text, style="red")
    reasons = [f"{n} {why}" for why, n in s.status.unknown_reasons().items()]
    if s.terraform_unread:
        skipped = " (--terraform skip)" if s.terraform == "skip" else ""
        reasons.append(f"Terraform resources not read{skipped}")
    if reasons:
        return Text(f"unknown ({'; '.join(reasons)})", style="bright_black")
    return Text("no", style="green")


def _objects(s: StackStatus) -> str:
    if s.inventory is None:
        return ""
    terraform = len(s.status.terraform) if s.status else 0
    if s.terraform == "skip":
        return f"{len(s.inventory.members)} + Terraform (not read)"
    return str(len(s.inventory.members)) + (f" + {terraform} Terraform" if terraform else "")


def _audit(s: StackStatus) -> str:
    """Who applied the stack as which identity, approved by whom: shown when a stack
    has its own identity or recorded approvals (the kubeconfig's user is in --json)."""
    inv = s.inventory
    if inv is None or not (inv.approved_by or inv.applied_by.startswith(SERVICE_ACCOUNT)):
        return ""
    parts = [f"applied as {inv.applied_by or 'an unrecorded identity'}"]
    if inv.approved_by:
        change = f" of {inv.approved_change[:12]}" if inv.approved_change else ""
        parts.append(f"approved by {', '.join(inv.approved_by)}{change}")
    else:
        parts.append("no approval recorded")
    for o in inv.approved_overrides:
        who = ", ".join(o.approved_by) or "nobody"
        parts.append(f"override {display(o.rule)} ({display(o.reason)}) approved by {who}")
    return "; ".join(parts)


def _applied_at(s: StackStatus) -> str:
    inv = s.inventory
    if inv is None or not inv.applied_at:
        return ""
    return inv.applied_at.replace("T", " ")


def tables(report: StatusReport) -> Iterator[RenderableType]:
    """One titled table per cluster, then the summary line."""
    for cluster, stacks in report.by_cluster():
        title = f"cluster {cluster.context}" + (f" ({cluster.server})" if cluster.server else "")
        if cluster.error:
            why = " (only stacks deleted from the repository used it)" if cluster.optional else ""
            yield Text(
                f"{title}: cannot be read{why}", style="yellow" if cluster.optional else "bold red"
            )
            yield Text("  " + cluster.error)
            yield Text("")
            continue
        table = Table(
            title=title, title_justify="left", title_style="bold", box=None, pad_edge=False
        )
        for column in ("STACK", "COMMIT", "APPLIED", "OBJECTS", "HEALTH", "DRIFT"):
            table.add_column(
                column,
                justify="right" if column == "OBJECTS" else "left",
                no_wrap=column not in ("HEALTH", "DRIFT"),  # those wrap on a narrow terminal
            )
        for s in stacks:
            table.add_row(
                Text(s.short + (" (orphaned)" if s.state == "orphaned" else "")),
                _commit(s, report.head),
                _applied_at(s),
                _objects(s),
                _health(s),
                _drift(s),
            )
        yield table
        for s in stacks:
            audit = _audit(s)
            if audit:
                yield Text(f"{s.short}: {audit}")
        for s in stacks:
            if s.error and s.state != "error":  # e.g. its Terraform state was not read
                yield Text(f"{s.short}: {s.error}", style="yellow")
        for s in stacks:
            line = review_line(s)
            if line is not None:
                yield line
        for s in stacks:
            if s.pull is not None:
                yield pull_line(s)
        yield Text("")
    yield Text(summary_line(report), style="bold")
    if report.terraform != "refresh" and any(s.terraform for s in report.stacks):
        yield Text(TERRAFORM_NOTES[report.terraform], style="bright_black")


_REVIEW_WORDS = {
    "reviewed": ("the reviewed change", "green"),
    "changed": ("changed since the review (applied as onReviewedChanged: apply)", "yellow"),
    "unreviewed": ("no reviewed preview had this change", "yellow"),
    "released": ("released by hand at its digest (konfig apply --release)", "yellow"),
}


def review_line(s: StackStatus) -> Text | None:
    """What the last complete apply of ``s`` was, as to review (``apply --reviewed``)."""
    review = s.inventory.review if s.inventory is not None else None
    if not review:
        return None
    words, style = _REVIEW_WORDS[str(review["status"])]
    pr = f" of pull request #{review['pr']}" if review.get("pr") else ""
    digest = str(review.get("digest") or "")[:12]
    return Text(f"{s.short}: applied change {digest}{pr}: {words}", style=style)


TERRAFORM_NOTES = {
    "state": "Terraform resources read from their state only (--terraform state): not "
    "refreshed, their drift not checked.",
    "skip": "Terraform resources not read (--terraform skip): their drift is unknown.",
}


def summary_line(report: StatusReport) -> str:
    n = report.counts()
    clusters = len(report.clusters)
    parts = [f"{n['applied']} applied ({n['behind']} behind HEAD)"]
    if n["neverApplied"]:
        parts.append(f"{n['neverApplied']} never applied")
    if n["orphaned"]:
        parts.append(f"{plural(n['orphaned'], 'orphaned inventory', 'orphaned inventories')}")
    if n["errors"]:
        parts.append(f"{n['errors']} unreadable")
    health = []
    if n["unhealthy"]:
        health.append(f"{n['unhealthy']} unhealthy")
    if n["progressing"]:
        health.append(f"{n['progressing']} progressing")
    if n["drifted"]:
        health.append(f"{n['drifted']} drifted")
    text = f"{plural(n['stacks'], 'stack')} on {plural(clusters, 'cluster')}: " + ", ".join(parts)
    if health:
        return text + "; " + ", ".join(health)
    unknown = sum(1 for s in report.stacks if s.status is not None and s.drift == "unknown")
    if n["applied"] and unknown:  # never "no drift" for what was not checked
        return text + f"; all healthy, no drift found, drift unknown in {plural(unknown, 'stack')}"
    return text + ("; all healthy, no drift" if n["applied"] else "")


def render_text(report: StatusReport, *, width: int = 240) -> str:
    """The tables as plain text (no colour, no terminal codes)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False, no_color=True)
    console.print(Group(*tables(report)))
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


def render_json(report: StatusReport) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def pull_line(s: StackStatus) -> Text:
    """What the controller of a pull-delivery stack says (docs/pull.md)."""
    pull = s.pull
    assert pull is not None
    where = f"{s.short}: pull delivery ({pull.branch}:{pull.folder}/)"
    c = pull.controller
    if c is None:
        return Text(f"{where}: {pull.error}", style="yellow")
    live = f", source commit {pull.source_commit[:12]} live" if pull.source_commit else ""
    if c.controller == "argocd":
        state = f"{c.sync or 'sync unknown'}, {c.health or 'health unknown'}"
        text = f"{where}: Argo CD Application {c.name} {state} at {c.revision or 'no revision'}"
        text += live
    else:
        state = {"True": "ready", "False": "not ready"}.get(c.ready, "ready unknown")
        text = f"{where}: Flux Kustomization {c.name} {state} at {c.revision or 'no revision'}"
        text += live
    if c.ready != "True" and c.message:
        text += f" ({c.reason}: {c.message})"
    return Text(text, style="green" if c.ready == "True" else "yellow")
