"""The owners' comment: whose approval each affected production stack needs, and who
gave it (:class:`konfig.pipeline.approvals.OwnersVerdict`)."""

from __future__ import annotations

import re

from konfig.pipeline.approvals import STATUS_CONTEXT, OwnersVerdict
from konfig.report.markdown import cell, code

OWNERS_MARKER = "konfig:owners"
# logins come from the base commit's konfig.yaml (its contract allows these only): they
# are mentioned on purpose, to ask the owners for their review
_LOGIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _mention(login: str) -> str:
    return f"@{login}" if _LOGIN.match(login) else code(login)


def render_owners(verdict: OwnersVerdict) -> str:
    """Markdown: a line of verdict, then a row per production stack."""
    mark = "✅" if verdict.ok else "⏳"
    lines = [
        f"### {mark} Owners' approvals (`{STATUS_CONTEXT}`)",
        "",
        verdict.summary() + ".",
    ]
    if verdict.stacks:
        lines += [
            "",
            f"Each production stack below needs an approval of commit {code(verdict.change[:12])} "
            "from an owner of its project (owners as the base branch declares them; an "
            "approval of an earlier commit does not count).",
            "",
            "| Stack | Needs an approval from one of | Approved by |",
            "|---|---|---|",
        ]
        for s in verdict.stacks:
            who = ", ".join(_mention(o) for o in s.requirement.owners) or "nobody is named"
            done = ", ".join(f"✅ {_mention(o)}" for o in s.approved_by) or "⏳ waiting"
            lines.append(f"| {code(s.requirement.stack)} | {who} | {done} |")
    if verdict.overrides:
        lines += [
            "",
            f"Each policy override below needs an approval of commit {code(verdict.change[:12])} "
            "from the owners konfig.yaml `owners.policies` names for the rule (else the "
            "platform team), as the base branch declares them.",
            "",
            "| Stack | Overrides | Reason | Needs an approval from one of | Approved by |",
            "|---|---|---|---|---|",
        ]
        for o in verdict.overrides:
            who = ", ".join(_mention(x) for x in o.override.owners) or "nobody is named"
            done = ", ".join(f"✅ {_mention(x)}" for x in o.approved_by) or "⏳ waiting"
            lines.append(
                f"| {code(o.override.stack)} | {code(o.override.rule)} | "
                f"{cell(o.override.reason, 300)} | {who} | {done} |"
            )
    return "\n".join(lines) + "\n"
