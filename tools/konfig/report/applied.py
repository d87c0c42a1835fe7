"""The apply report (the merge pipeline's job summary): ``konfig apply/destroy --json``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from konfig.report.budget import SUMMARY_LIMIT_BYTES, utf8_bytes
from konfig.report.inputs import expect, nonempty, stack_path
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
    applied: Sequence[Mapping[str, Any]],
    destroyed: Sequence[Mapping[str, Any]] = (),
    *,
    sha: str,
    run_url: str | None = None,
    missing: Sequence[str] = (),
) -> ApplyReport:
    """The results of ``konfig apply --json`` / ``konfig destroy --json`` as one report."""
    stacks: list[AppliedStack] = []
    for verb, docs in (("apply", applied), ("destroy", destroyed)):
        for doc in docs:
            expect(
                isinstance(doc, Mapping) and isinstance(doc.get("stacks"), list),
                f"{verb}: expected {{ok, stacks: [...]}} (konfig {verb} --json)",
            )
            for item in doc["stacks"]:
                path = stack_path(item, f"{verb}: a stack")
                counts = item.get("counts") or {}
                inventory = item.get("inventory") or {}
                stacks.append(
                    AppliedStack(
                        path=path,
                        verb=verb,
                        ok=bool(item.get("ok")),
                        error=nonempty(item.get("error")),
                        counts={k: int(counts.get(k, 0) or 0) for k in APPLY_COUNTS},
                        seconds=float(item.get("seconds") or 0.0),
                        problems=tuple(
                            AppliedObject(
                                str(o.get("id", "")),
                                str(o.get("outcome", "")),
                                str(o.get("message", "")),
                            )
                            for o in item.get("objects") or []
                            if isinstance(o, Mapping) and o.get("outcome") in ("failed", "skipped")
                        ),
                        commit=nonempty(inventory.get("commit"))
                        if isinstance(inventory, Mapping)
                        else None,
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
