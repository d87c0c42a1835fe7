"""A workflow run seen from another one: is it there yet, and what has it uploaded.

The privileged half of the pull-request pipeline starts when the unprivileged run is
requested (docs/security.md, "The first comment: who may post what"), not when it
ended: it waits here for the artifacts it reads (the offline preview, then the
compiled Specs and results), each still read as hostile data afterwards. The forge is asked by
:meth:`konfig.forge.client.GitHub.run_progress`; this module only decides, from plain
data, when to stop waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

WaitOutcome = Literal["ready", "ended", "timeout"]


@dataclass(frozen=True)
class RunProgress:
    """Where a workflow run is, as the forge says: its status (``completed`` once it
    ended, whatever its conclusion) and the names of the artifacts it has uploaded so far
    (both forges list an artifact once its upload is complete)."""

    status: str
    artifacts: frozenset[str]

    @property
    def ended(self) -> bool:
        return self.status == "completed"


def wait_for_artifacts(
    poll: Callable[[], RunProgress],
    names: Sequence[str],
    *,
    timeout: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    interval: float = 0.5,
) -> tuple[WaitOutcome, RunProgress]:
    """Poll a run until it has uploaded every artifact of ``names`` (``ready``), or it
    ended without some (``ended``: a job failed, skipped or was cancelled; the caller
    takes what is there), or ``timeout`` seconds passed (``timeout``: e.g. a fork's run
    waiting for a maintainer's approval). The last progress read comes with the outcome."""
    wanted = frozenset(names)
    deadline = clock() + timeout
    while True:
        progress = poll()
        if wanted <= progress.artifacts:
            return "ready", progress
        if progress.ended:
            return "ended", progress
        left = deadline - clock()
        if left <= 0:
            return "timeout", progress
        sleep(min(interval, left))
