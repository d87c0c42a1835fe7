"""The apply report (the merge pipeline's job summary): ``konfig apply/destroy --json``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from konfig.report.budget import SUMMARY_LIMIT_BYTES, utf8_bytes
from konfig.report.inputs import Document, validated
from konfig.report.markdown import environment

APPLY_COUNTS = ("created", "updated", "replaced", "deleted", "unchanged", "failed", "skipped")


@dataclass(frozen=True)
class AppliedObject:
    id: str
    outcome: str
    message: str


@dataclass(frozen=True)
class AppliedStack:
    path: str
    verb: str  # apply or destroy
    ok: bool
    error: str | None
    counts: Mapping[str, int]
    seconds: float
    problems: tuple[AppliedObject, ...]  # failed and skipped objects
    commit: str | None
    identity: str | None = None  # the user its requests impersonated (None: the kubeconfig's)
    approved_by: tuple[str, ...] = ()  # the audit: owners who approved approved_change
    approved_change: str | None = None

    @property
    def audit(self) -> str:
        """As which identity, approved by whom (empty: neither an identity of its own nor
        a recorded approval)."""
        parts = []
        if self.identity:
            parts.append(f"as {self.identity}")
        if self.approved_by:
            of = f" of {self.approved_change[:12]}" if self.approved_change else ""
            parts.append(f"approved by {', '.join(self.approved_by)}{of}")
        return "; ".join(parts)


@dataclass(frozen=True)
class ApplyReport:
    sha: str
    run_url: str | None
    stacks: tuple[AppliedStack, ...]
    missing: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing and all(s.ok for s in self.stacks)


def build_apply(
    applied: Sequence[Document | Mapping[str, Any]],
    destroyed: Sequence[Document | Mapping[str, Any]] = (),
    *,
    sha: str,
    run_url: str | None = None,
    missing: Sequence[str] = (),
) -> ApplyReport:
    """The results of ``konfig apply --json`` / ``konfig destroy --json`` as one report
    (ReportInputError when a document does not match the contract)."""
    stacks: list[AppliedStack] = []
    for verb, docs in (("apply", applied), ("destroy", destroyed)):
        for doc in docs:
            for item in validated(verb, doc)["stacks"]:
                counts = item["counts"]
                inventory = item.get("inventory") or {}
                stacks.append(
                    AppliedStack(
                        path=item["path"],
                        verb=verb,
                        ok=item["ok"],
                        error=item["error"] or None,
                        counts={k: counts.get(k, 0) for k in APPLY_COUNTS},
                        seconds=float(item.get("seconds", 0.0)),
                        problems=tuple(
                            AppliedObject(o["id"], o["outcome"], o.get("message", ""))
                            for o in item["objects"]
                            if o["outcome"] in ("failed", "skipped")
                        ),
                        commit=inventory.get("commit") or None,
                        identity=item.get("identity") or None,
                        approved_by=tuple(inventory.get("approvedBy") or ()),
                        approved_change=inventory.get("approvedChange") or None,
                    )
                )
    stacks.sort(key=lambda s: (s.path, s.verb))
    return ApplyReport(sha=sha, run_url=run_url, stacks=tuple(stacks), missing=tuple(missing))


def render_apply(report: ApplyReport, *, budget: int = SUMMARY_LIMIT_BYTES - 1024) -> str:
    """The apply job summary; problems are listed per stack, capped to the budget."""
    env = environment()
    template = env.get_template("apply.md.j2")
    limit = 50
    while True:
        text = template.render(r=report, short=report.sha[:12], counts=APPLY_COUNTS, limit=limit)
        if utf8_bytes(text) <= budget or limit == 0:
            return text
        limit //= 2
