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
    # each artifact's id (to download it), by name
    ids: tuple[tuple[str, int], ...] = ()

    def artifact_id(self, name: str) -> int | None:
        return next((i for n, i in self.ids if n == name), None)

    @property
    def ended(self) -> bool:
        return self.status == "completed"


# How often the forge is asked: fast while the artifacts are due (a one-stack run uploads
# its offline preview seconds after it started; a quarter-second poll loses 0.12 s on
# average), then less and less often (a fork's run that waits for a maintainer's
# approval must not spend the token's API rate limit: GitHub's GITHUB_TOKEN has 1,000
# requests an hour, and each poll is two).
FAST_INTERVAL = 0.25
FAST_FOR = 15.0
SLOWEST_INTERVAL = 10.0
BACKOFF = 1.5


def intervals(fast: float = FAST_INTERVAL) -> Callable[[float], float]:
    """The pause before the next poll, given how long the wait has lasted: ``fast``
    for the first :data:`FAST_FOR` seconds, then each pause :data:`BACKOFF` times the
    one before, up to :data:`SLOWEST_INTERVAL`."""
    last = [fast]

    def pause(waited: float) -> float:
        if waited >= FAST_FOR:
            last[0] = min(SLOWEST_INTERVAL, last[0] * BACKOFF)
        return last[0]

    return pause


def wait_for_artifacts(
    poll: Callable[[], RunProgress],
    names: Sequence[str],
    *,
    timeout: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    interval: Callable[[float], float] | None = None,
) -> tuple[WaitOutcome, RunProgress]:
    """Poll a run until it has uploaded every artifact of ``names`` (``ready``), or it
    ended without some (``ended``: a job failed, skipped or was cancelled; the caller
    takes what is there), or ``timeout`` seconds passed (``timeout``: e.g. a fork's run
    waiting for a maintainer's approval). The last progress read comes with the outcome.
    ``interval``: the pause before the next poll, given the seconds waited so far
    (default :func:`intervals`)."""
    wanted = frozenset(names)
    pause = interval if interval is not None else intervals()
    started = clock()
    deadline = started + timeout
    while True:
        progress = poll()
        if wanted <= progress.artifacts:
            return "ready", progress
        if progress.ended:
            return "ended", progress
        now = clock()
        left = deadline - now
        if left <= 0:
            return "timeout", progress
        sleep(min(pause(now - started), left))
