"""What a person reads while stacks apply or are destroyed: per-stack lines and blocks.

Pure functions from the engine's :class:`~konfig.engine.stackrun.Event` records and
:class:`~konfig.engine.stackrun.StackResult` to text. Every object line names its
object by id (``created  apps/v1:Deployment:shop:web``); a stack's block starts with
a header that says what happened to the stack as a whole, so blocks of stacks that
ran at the same time can be printed one after the other and still read alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from konfig.engine.stackrun import SUMMARY, Event, ObjectResult, StackResult
from konfig.ids import ResourceIdError, parse_id
from konfig.words import plural

OUTCOME_WIDTH = 9  # "unchanged"


def _detail(result: ObjectResult) -> str:
    """What the message adds to ``<outcome> <id>`` (empty when nothing)."""
    message = result.message.strip()
    for prefix in (f"{result.outcome}: ", f"{result.outcome} "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
            break
    else:
        if message == result.outcome:
            return ""
    try:
        plain = parse_id(result.id).describe()  # "Deployment web in namespace shop (apps/v1)"
    except ResourceIdError:
        plain = ""
    return "" if message == plain else message


def object_line(result: ObjectResult) -> str:
    """``  created   apps/v1:Deployment:shop:web`` (+ ``: why`` when there is more to say)."""
    detail = _detail(result)
    phase = f"{result.phase}: " if result.phase != "apply" and result.outcome != "deleted" else ""
    text = f"{result.outcome:<{OUTCOME_WIDTH}} {result.id}"
    return f"  {text}" + (f"  ({phase}{detail})" if detail else "")


def event_line(event: Event) -> str:
    """One line of a stack's progress (its object lines name their objects)."""
    if event.kind == "object" and event.result is not None:
        return object_line(event.result)
    return f"  {event.message}"


def counts_text(counts: dict[str, int]) -> str:
    parts = [f"{counts[k]} {k}" for k in (*SUMMARY, "failed", "skipped", "kept") if counts.get(k)]
    return ", ".join(parts) if parts else "nothing to do"


def header(verb: str, result: StackResult, context: str | None) -> str:
    """``appops/x/dev (context admin): applied in 3.1 s: 2 created, 1 unchanged``."""
    where = f" (context {context})" if context else ""
    done = {"apply": "applied", "destroy": "destroyed"}.get(verb, verb)
    counts = counts_text(result.counts())
    if result.ok:
        return f"{result.path}{where}: {done} in {result.seconds:.1f} s: {counts}"
    return (
        f"{result.path}{where}: FAILED after {result.seconds:.1f} s: {counts_text(result.counts())}"
    )


@dataclass
class StackLog:
    """What one stack has done so far (fed by events; rendered live or as one block)."""

    path: str
    context: str | None = None
    lines: list[str] = field(default_factory=list)
    activity: str = "waiting to start"
    objects_done: int = 0

    def add(self, event: Event) -> None:
        self.lines.append(event_line(event))
        if event.kind == "object":
            self.objects_done += 1
        else:
            self.activity = event.message

    def add_text(self, text: str) -> None:
        self.lines.extend(text.rstrip("\n").splitlines())


def block(verb: str, log: StackLog, result: StackResult) -> str:
    """A stack's complete output: its header, every line it logged, and its error."""
    out = [header(verb, result, log.context), *log.lines]
    if result.error:
        out += ["  " + line for line in result.error.splitlines()]
    return "\n".join(out) + "\n"


def totals(results: Sequence[StackResult]) -> dict[str, int]:
    total = dict.fromkeys((*SUMMARY, "failed", "skipped", "kept"), 0)
    for r in results:
        for key, n in r.counts().items():
            total[key] = total.get(key, 0) + n
    return total


def summary_lines(verb: str, results: Sequence[StackResult], contexts: dict[str, str]) -> list[str]:
    """``Apply complete: ...`` and, with several clusters, one line per cluster."""
    by_cluster: dict[str, list[StackResult]] = {}
    for r in results:
        by_cluster.setdefault(contexts.get(r.path, ""), []).append(r)
    head = f"{verb} complete: " + ", ".join(
        f"{n} {k}" for k, n in totals(results).items() if k in SUMMARY
    )
    if len(by_cluster) <= 1:
        return [head]
    lines = [head]
    for context, group in sorted(by_cluster.items()):
        lines.append(
            f"  cluster {context or '(current context)'}: {plural(len(group), 'stack')}: "
            f"{counts_text(totals(group))}"
        )
    return lines
