"""Rendering previews: terminal text, markdown and the JSON contract.

Pure functions from a :class:`~konfig.pipeline.previewing.Preview` (plans and per-stack
errors, made by the preview flow) to strings. The
JSON is the contract ``konfig/contracts/preview.schema.json`` (``docs/preview-json.md``
explains it). Secret values were masked when the plan was computed; every renderer
additionally scrubs any known secret value out of its output (e.g. from a server
message), so no format can leak one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from konfig import contracts
from konfig.engine.ignore import IgnoredField
from konfig.engine.plan import (
    ACTIONS,
    CHANGING,
    CONFLICT,
    DANGER_CLASSES,
    Change,
    NotPreviewed,
    StackPlan,
)
from konfig.masking import scrub
from konfig.pipeline.previewing import Preview, StackPreview
from konfig.report.modes import mode_line
from konfig.words import plural

# The document's identity, as its contract (konfig/contracts/preview.schema.json) fixes it.
_IDENTITY = contracts.schema("preview")["properties"]
SCHEMA_VERSION: int = _IDENTITY["schemaVersion"]["const"]
KIND: str = _IDENTITY["kind"]["const"]

_SYMBOL = {
    "create": "+",
    "update": "~",
    "replace": "-/+",
    "delete": "-",
    "unchanged": "=",
    "conflict": "!",
}
_COLOUR = {
    "create": "green",
    "update": "yellow",
    "replace": "magenta",
    "delete": "red",
    "unchanged": "bright_black",
    "conflict": "red",
}
# what a report lists per stack, conflicts first
_SHOWN = (CONFLICT, *CHANGING)


# --- JSON ------------------------------------------------------------------------


def to_json(preview: Preview) -> dict[str, Any]:
    return {
        "schemaVersion": SCHEMA_VERSION,
        "kind": KIND,
        "mode": preview.mode.to_dict(),
        "hasChanges": preview.has_changes,
        "hasConflicts": preview.has_conflicts,
        "hasDrift": preview.has_drift,
        "counts": preview.counts(),
        "dangers": preview.danger_counts(),
        "commits": {"base": preview.commits.base, "head": preview.commits.head},
        "stacks": [_stack_json(s) for s in preview.stacks],
        **({"ignoreRulesProposed": _proposed(preview)} if preview.proposed_rules else {}),
    }


def _proposed(preview: Preview) -> list[dict[str, Any]]:
    """The rules the change adds, changes or drops, each once with its stacks."""
    found: dict[str, dict[str, Any]] = {}
    for path, p in preview.proposed_rules:
        item = p.to_dict()
        key = json.dumps(item, sort_keys=True)
        stacks = found.setdefault(key, {**item, "stacks": []})["stacks"]
        if path not in stacks:
            stacks.append(path)
    return sorted(found.values(), key=lambda i: (i["source"], i["change"]))


def proposed_rule_text(item: dict[str, Any]) -> str:
    """One proposed rule in words: ``appops/a/dev/stack.yaml ignore[0]: Deployment web
    /spec/replicas (reason)`` (an item of ``ignoreRulesProposed``)."""
    sel = item.get("selector") or {}
    labels = ",".join(f"{k}={v}" for k, v in sorted((sel.get("labels") or {}).items()))
    what = " ".join(
        str(v)
        for v in (
            sel.get("kind") or "any kind",
            f"{sel['namespace']}/" + str(sel.get("name") or "*")
            if sel.get("namespace")
            else sel.get("name"),
            f"[{labels}]" if labels else None,
        )
        if v
    )
    managers = item.get("managers") or []
    owned = (
        f" while {', '.join(managers)} own{'s' if len(managers) == 1 else ''} it"
        if managers
        else ""
    )
    return f"{item['source']}: {what} {', '.join(item['paths'])}{owned} ({item['reason']})"


_PROPOSED_NOTE = (
    "previewed with the base branch's rules: an added or changed rule is not applied, so "
    "what it would hide is shown and counted; a removed one still applies"
)


def _stack_json(s: StackPreview) -> dict[str, Any]:
    if s.reused is not None:
        # the previous preview's result, as it recorded it (checked against the contract
        # when read; its key recomputed here and equal): which commit it comes from
        return {**s.reused.entry, "reuseKey": s.reuse_key, "reusedFrom": s.reused.head}
    plan = s.plan
    return {
        "path": s.path,
        "project": s.project,
        "stack": s.stack,
        "context": plan.context if plan else s.context,
        "deleted": s.deleted,
        "status": "error" if s.error else "ok",
        "error": s.error.to_dict() if s.error else None,
        "specDigest": plan.spec_digest if plan else s.spec_digest,
        "priorCommit": plan.prior_commit if plan else None,
        "priorDigest": plan.prior_digest if plan else None,
        "priorDirty": plan.prior_dirty if plan else False,
        "counts": s.counts(),
        "dangers": plan.danger_counts() if plan else dict.fromkeys(DANGER_CLASSES, 0),
        "drift": {
            "objects": len(s.plan.drifted) if s.plan else 0,
            "fields": sum(len(c.drift.fields) for c in s.plan.drifted if c.drift) if s.plan else 0,
        },
        "changes": [c.to_dict() for c in s.changes] if not s.error else [],
        "notPreviewed": [n.to_dict() for n in s.not_previewed],
        "review": s.digest.to_dict() if s.digest is not None and not s.error else None,
        "pull": _pull_json(s),
        "reuseKey": s.reuse_key,
        "reusedFrom": None,
    }


def _pull_json(s: StackPreview) -> dict[str, Any] | None:
    """A pull-delivery stack: what the merge publishes (docs/pull.md, Review)."""
    pull = s.pull
    if pull is None:
        return None
    diff = pull.diff
    return {
        "branch": pull.branch,
        "folder": pull.folder,
        "base": (diff.base or None) if diff else None,
        "digest": diff.digest if diff else None,
        "diff": diff.diff if diff else "",
        "refused": [
            {"rule": r.rule, "resource": r.resource, "message": r.message} for r in pull.refused
        ],
        "controller": s.controller or None,
    }


def render_json(preview: Preview) -> str:
    return scrub(json.dumps(to_json(preview), indent=2) + "\n", set(preview.secrets))


# --- text --------------------------------------------------------------------------


def _value(value: Any, limit: int = 80) -> str:
    text = "(absent)" if value is None else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _values(before: Any, after: Any, limit: int = 80) -> tuple[str, str]:
    """Both sides of a changed value, each at most ``limit`` characters. A long value is
    cut around where the two differ (alike on both sides) so the change stays in view; of
    a multi-line text, the first line that differs is shown, with its number. (Cutting
    both at the same place from the start hid a change in line 30 of two long texts.)"""
    if before is None or after is None:
        return _value(before, limit), _value(after, limit)
    if isinstance(before, str) and isinstance(after, str) and "\n" in before + after:
        old, new = before.split("\n"), after.split("\n")
        at = next(
            (i for i, (x, y) in enumerate(zip(old, new, strict=False)) if x != y),
            min(len(old), len(new)),
        )
        if at > 0 or len(before) > limit or len(after) > limit:
            where = f"line {at + 1}: "
            was = old[at] if at < len(old) else None
            now = new[at] if at < len(new) else None
            b, a = _values(was, now, limit - len(where))
            return where + b, where + a
    b = json.dumps(before, ensure_ascii=False)
    a = json.dumps(after, ensure_ascii=False)
    if (len(b) <= limit and len(a) <= limit) or b == a:
        return _value(before, limit), _value(after, limit)
    first = next(
        (i for i, (x, y) in enumerate(zip(b, a, strict=False)) if x != y), min(len(a), len(b))
    )
    start = max(0, first - limit // 4)
    return _window(b, start, limit), _window(a, start, limit)


def _window(text: str, start: int, limit: int) -> str:
    """``limit`` characters of ``text`` from ``start``, with … where it was cut."""
    head = "…" if start > 0 else ""
    body = text[start:]
    if len(head) + len(body) > limit:
        body = body[: limit - len(head) - 1] + "…"
    return head + body


def _counts_line(counts: dict[str, int]) -> str:
    conflicts = counts.get(CONFLICT, 0)
    return (
        (f"{conflicts} conflict{'s' if conflicts != 1 else ''}, " if conflicts else "")
        + f"{counts['create']} to create, {counts['update']} to update, "
        f"{counts['replace']} to replace, {counts['delete']} to delete, "
        f"{counts['unchanged']} unchanged"
    )


def _ignored(stack: StackPreview) -> list[tuple[Change, IgnoredField]]:
    """``(change, field)`` of every field an ignore rule kept out of the stack's plan."""
    return [(c, f) for c in stack.changes for f in c.ignored]


def danger_line(counts: dict[str, int]) -> str:
    """``destroy 2, cascade 1``: the classes present, in their order ("" for none)."""
    return ", ".join(f"{name} {counts[name]}" for name in DANGER_CLASSES if counts.get(name))


def _key_statuses(change: Change) -> str:
    """``token changed, user unchanged``: the verdict per key, never a value."""
    return ", ".join(f"{k.key} {k.status}" for k in change.secrets)


def not_previewed_note(items: tuple[NotPreviewed, ...]) -> str:
    """``3 Terraform resources not previewed: credentials A, B missing``: one line."""
    reasons = sorted({n.reason.removeprefix("not previewed: ") for n in items})
    runtimes = sorted({n.runtime for n in items})
    return (
        f"{plural(len(items), ' '.join(runtimes) + ' resource')} not previewed: "
        + "; ".join(reasons)
        + " (apply needs them and refuses without)"
    )


def _not_compared(stack: StackPreview) -> str:
    """The Secrets whose encrypted values were not compared, with their keys."""
    found = [f"{c.id} ({', '.join(c.not_compared)})" for c in stack.changes if c.not_compared]
    return "; ".join(found)


def render_text(
    preview: Preview, *, color: bool = False, diff: bool = False, summary: bool = True
) -> str:
    """The terminal report; ``diff`` adds the unified diff of each change; without
    ``summary`` only the stacks (a stack's plan inside its apply output)."""

    def style(text: str, colour: str | None = None, bold: bool = False) -> str:
        if not color:
            return text
        import click  # the CLI's dependency; only for ANSI styling

        return click.style(text, fg=colour, bold=bold)

    lines: list[str] = []
    if preview.mode.name == "offline":
        lines.extend([_offline_line(preview).replace("`", ""), ""])
    for s in preview.stacks:
        context = s.plan.context if s.plan else s.context
        head = f"{s.path}" + (f" (context {context})" if context else "")
        if s.deleted:
            head += " [stack deleted]"
        if s.error:
            lines.append(style(head, bold=True) + ": " + style("error", "red", bold=True))
            where = s.error.file or ""
            if where and s.error.line:
                where += f":{s.error.line}"
            message = f"{where}: {s.error.message}" if where else s.error.message
            lines.extend("  " + line for line in message.splitlines())
            lines.append("")
            continue
        lines.append(style(head, bold=True) + ": " + _counts_line(s.counts()))
        if s.reused is not None:
            lines.append(
                "  "
                + style(
                    f"re-used from {s.reused.head[:12]} (Spec and live objects unchanged "
                    "since its preview; --format json holds its changes)",
                    "bright_black",
                )
            )
        if s.plan is not None and s.plan.prior_dirty:
            lines.append("  " + style(dirty_note(s.plan), "yellow"))
        for c in _listed(s.changes):
            symbol = f"{_SYMBOL[c.action]:>3} {c.action:<7}"
            lines.append(f"  {style(symbol, _COLOUR[c.action])} {c.id}  ({c.reason})")
            if c.renamed_from is not None:
                old = c.renamed_from.rsplit(":", 1)[-1]
                lines.append(
                    "        "
                    + style(f"rename {old} → {c.name}", "cyan", bold=True)
                    + " (created, then the old object is pruned once the new one is healthy)"
                )
                for f in c.rename_fields:
                    was, now = _values(f.before, f.after)
                    lines.append(f"          {f.path}: {was} → {now}")
            for d in c.dangers:
                lines.append("        " + style(f"⚠ {d.name}: {d.reason}", "red", bold=True))
            if c.action in ("update", "replace"):
                for f in c.fields:
                    note = (
                        style("  (drift: changed in the cluster since the last apply)", "magenta")
                        if f.drift
                        else ""
                    )
                    was, now = _values(f.before, f.after)
                    lines.append(f"        {f.path}: {was} → {now}{note}")
            if c.secrets:
                lines.append(f"        secret keys (encrypted or generated): {_key_statuses(c)}")
            if c.refused:
                lines.append("        " + style(f"REFUSED: {c.refused}", "red", bold=True))
            if diff and c.diff:
                for line in c.diff.splitlines():
                    colour = "green" if line.startswith("+") else None
                    colour = "red" if line.startswith("-") else colour
                    lines.append("        " + style(line, colour))
        for owner, ign in _ignored(s):
            was, declared = _values(ign.live, ign.declared)
            lines.append(
                "  "
                + style(
                    f"  ignored {owner.id} {ign.path}: {was} (declared {declared}, {ign.applied})",
                    "bright_black",
                )
                + style(f"  [{ign.rule}: {ign.reason}]", "bright_black")
            )
        uncompared = _not_compared(s)
        if uncompared:
            lines.append(
                f"  {style('?', 'yellow')} could not compare (no decryption key): {uncompared}"
            )
        for item in s.not_previewed:
            why = item.reason.removeprefix("not previewed: ")
            lines.append(f"  {style('  ? not previewed', 'yellow')} {item.id}  ({why})")
        if s.not_previewed:
            lines.append(f"  {style('?', 'yellow')} {not_previewed_note(s.not_previewed)}")
        lines.append("")
    proposed = _proposed(preview) if preview.proposed_rules else []
    if proposed:
        lines.append(
            style(f"Ignore rules this change proposes ({_PROPOSED_NOTE}):", "yellow", bold=True)
        )
        for rule in proposed:
            lines.append(
                f"  {rule['change']} {proposed_rule_text(rule)}  [{', '.join(rule['stacks'])}]"
            )
        lines.append("")
    if not summary:
        return scrub("\n".join(lines).rstrip("\n") + "\n", set(preview.secrets))
    total = preview.counts()
    errors = sum(1 for s in preview.stacks if s.error)
    summary_text = f"Preview: {_counts_line(total)}"
    drifted = preview.drifted_objects()
    if drifted:
        summary_text += (
            f"; {plural(drifted, 'object')} drifted (changed in the cluster since the last apply)"
        )
    dangers = danger_line(preview.danger_counts())
    if dangers:
        summary_text += f"; dangers: {dangers}"
    ignored = sum(len(_ignored(s)) for s in preview.stacks)
    if ignored:
        summary_text += f"; {plural(ignored, 'field')} ignored by rules (not counted)"
    skipped = preview.not_previewed()
    if skipped:
        summary_text += f"; {plural(skipped, 'resource')} not previewed (credentials missing)"
    if errors:
        summary_text += f"; {plural(errors, 'stack')} failed"
    if preview.has_conflicts:
        summary_text += "; apply refuses stacks with conflicts"
    elif not errors and not preview.has_changes and not skipped:
        summary_text += " (no changes)"
    lines.append(style(summary_text, bold=True))
    clusters = sorted({(s.plan.context if s.plan else s.context) or "" for s in preview.stacks})
    if len(clusters) > 1:
        for context in clusters:
            counts: dict[str, int] = dict.fromkeys(ACTIONS, 0)
            group = [
                s
                for s in preview.stacks
                if ((s.plan.context if s.plan else s.context) or "") == context
            ]
            for s in group:
                for action, n in s.counts().items():
                    counts[action] += n
            lines.append(
                f"  cluster {context or '(current context)'}: {plural(len(group), 'stack')}: "
                f"{_counts_line(counts)}"
            )
    return scrub("\n".join(lines) + "\n", set(preview.secrets))


# --- markdown ----------------------------------------------------------------------


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def dirty_note(plan: StackPlan) -> str:
    """What preview says of a stack last applied from uncommitted changes (as pending)."""
    base = f"on top of {plan.prior_commit[:12]}" if plan.prior_commit else "outside any commit"
    return f"last applied from uncommitted changes ({base}): the cluster matches no commit"


def _listed(changes: tuple[Change, ...]) -> list[Change]:
    """The changes a report lists for a stack: conflicts first, then what changes."""
    return sorted((c for c in changes if c.action in _SHOWN), key=lambda c: c.action != CONFLICT)


def _offline_line(preview: Preview) -> str:
    m = preview.mode
    return mode_line(m.name, base=m.base, merge=m.merge)


def render_markdown(preview: Preview) -> str:
    """Markdown for a PR comment or job summary: conflicts first, a summary table, then
    per-stack details."""
    out: list[str] = []
    total = preview.counts()
    status = (
        "conflicts"
        if preview.has_conflicts
        else "errors"
        if preview.has_errors
        else ("changes" if preview.has_changes else "no changes")
    )
    if preview.mode.name == "offline":
        out.extend([_offline_line(preview), ""])
    out.append(f"**Konfig preview**: {status}. {_counts_line(total)}.")
    dangers = preview.dangers()
    if dangers:
        out.extend(["", f"**⚠️ Dangers**: {danger_line(preview.danger_counts())}", ""])
        for path, c, d in dangers:
            out.append(f"- **{d.name}** `{path}`: `{c.id}`: {_md_cell(d.reason)}")
    proposed = _proposed(preview) if preview.proposed_rules else []
    if proposed:
        out.extend(["", f"**🙈 Ignore rules this change proposes** ({_PROPOSED_NOTE}):", ""])
        for rule in proposed:
            stacks = ", ".join(f"`{p}`" for p in rule["stacks"])
            out.append(f"- **{rule['change']}** {_md_cell(proposed_rule_text(rule))}: {stacks}")
    skipped = preview.not_previewed()
    if skipped:
        out.append("")
        out.append(
            f"⚠️ {plural(skipped, 'resource')} not previewed: their provider credentials are "
            "not set in this environment (listed below); apply needs them."
        )
    drifted = preview.drifted_objects()
    if drifted:
        out.append("")
        out.append(
            f"⚠️ {plural(drifted, 'object')} drifted: changed in the cluster since the last "
            "apply (marked *drift* below); applying sets them back."
        )
    out.append("")
    conflicts = preview.conflicts()
    if conflicts:
        out.append("**Conflicts** (apply refuses these stacks):")
        out.append("")
        for path, c in conflicts:
            out.append(f"- `{path}`: `{c.id}`: {_md_cell(c.reason)}")
        out.append("")
    out.append("| stack | status | create | update | replace | delete | unchanged |")
    out.append("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for s in preview.stacks:
        n = s.counts()
        conflicted = s.plan is not None and s.plan.conflicts
        st = "error" if s.error else "conflict" if conflicted else "deleted" if s.deleted else "ok"
        out.append(
            f"| `{s.path}` | {st} | {n['create']} | {n['update']} | {n['replace']} | "
            f"{n['delete']} | {n['unchanged']} |"
        )
    out.append("")
    for s in preview.stacks:
        context = s.plan.context if s.plan else s.context
        title = f"`{s.path}`" + (f" (context `{context}`)" if context else "")
        if s.error:
            out.append(f"<details open><summary>❌ {title}: error</summary>")
            out.append("")
            where = s.error.file or ""
            if where and s.error.line:
                where += f":{s.error.line}"
            body = f"{where}: {s.error.message}" if where else s.error.message
            fence = _fence(body)
            out.extend([fence, body, fence, "", "</details>", ""])
            continue
        changing = _listed(s.changes)
        summary = _counts_line(s.counts())
        out.append(f"<details><summary>{title}: {summary}</summary>")
        out.append("")
        if s.plan is not None and s.plan.prior_dirty:
            out.extend([f"> {dirty_note(s.plan)}", ""])
        if changing or s.not_previewed:
            out.append("| action | object | reason |")
            out.append("| --- | --- | --- |")
            for skipped_item in s.not_previewed:
                out.append(
                    f"| not previewed | `{skipped_item.id}` | {_md_cell(skipped_item.reason)} |"
                )
            for c in changing:
                reason = c.reason
                if c.secrets:
                    reason += f" (secret keys, encrypted or generated: {_key_statuses(c)})"
                if c.refused:
                    reason += f" **⛔ REFUSED: {c.refused}**"
                if c.renamed_from is not None:
                    reason += f" (rename {c.renamed_from.rsplit(':', 1)[-1]} → {c.name})"
                for d in c.dangers:
                    reason += f" **⚠️ {d.name}**: {d.reason}"
                out.append(f"| {c.action} | `{c.id}` | {_md_cell(reason)} |")
            out.append("")
            diff_text = "".join(c.diff for c in changing if c.diff)
            if diff_text:
                fence = _fence(diff_text)
                out.extend([f"{fence}diff", diff_text.rstrip("\n"), fence, ""])
        else:
            out.append("No changes.")
            out.append("")
        ignored = _ignored(s)
        if ignored:
            out.append(f"Ignored by rules, not counted as changes ({len(ignored)}):")
            out.append("")
            for owner, ign in ignored:
                was, declared = _values(ign.live, ign.declared)
                out.append(
                    f"- `{owner.id}` `{ign.path}`: {_md_cell(was)} (declared {_md_cell(declared)}, "
                    f"{ign.applied}): {_md_cell(ign.rule)}: {_md_cell(ign.reason)}"
                )
            out.append("")
        uncompared = _not_compared(s)
        if uncompared:
            out.append(f"Could not compare (no decryption key): {_md_cell(uncompared)}")
            out.append("")
        out.append("</details>")
        out.append("")
    return scrub("\n".join(out), set(preview.secrets))
