"""A workflow run seen from another one: is it there yet, and what has it uploaded.

The privileged half of the pull-request pipeline starts when the unprivileged run is
requested (docs/security.md, "The first comment: who may post what"), not when it
ended: it waits here for the artifacts it reads (the offline preview, then the
compiled Specs and results), each still read as hostile data afterwards. The forge is asked by
:func:`konfig.forge.runlist.run_progress`; this module only decides, from plain
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


@dataclass(frozen=True)
class WorkflowRun:
    """One run in the forge's list of a repository's workflow runs (GitHub's and
    Gitea's ``GET /repos/{repo}/actions/runs``), the fields that say whose it is.

    The two forges name a run's workflow and ref differently: GitHub's ``path`` is the
    workflow file (``.github/workflows/preview.yml``) with the branch in
    ``head_branch`` and the repository it came from in ``head_repository``; Gitea's is
    ``<file name>@<ref>``, the ref of a pull request's run being
    ``refs/pull/<number>/head`` (a ref only the forge writes), with no
    ``head_repository``."""

    id: int
    event: str
    path: str
    head_branch: str
    head_sha: str
    head_repo: str  # "owner/name"; "" when the forge does not say (Gitea)


def run_from_json(data: object) -> WorkflowRun | None:
    """A run of the forge's list, or None for an entry that is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), int):
        return None
    head_repo = data.get("head_repository")
    return WorkflowRun(
        id=data["id"],
        event=str(data.get("event") or ""),
        path=str(data.get("path") or ""),
        head_branch=str(data.get("head_branch") or ""),
        head_sha=str(data.get("head_sha") or ""),
        head_repo=str(head_repo.get("full_name") or "") if isinstance(head_repo, dict) else "",
    )


def of_pull_request(
    run: WorkflowRun, workflow: str, number: int, *, head_repo: str, head_ref: str
) -> bool:
    """Whether ``run`` is a ``pull_request`` run of ``workflow`` (its file name) for
    pull request ``number``, whose head is branch ``head_ref`` of ``head_repo``.

    Gitea: the ref in its path is the pull request's own. GitHub: a pull request's run
    names its head branch and the repository it lives in, which only that repository's
    owner can push to (a fork's pull request from a branch of the same name is another
    repository)."""
    if run.path == f"{workflow}@refs/pull/{number}/head":
        return True
    return (
        run.event == "pull_request"
        and run.path.split("@", 1)[0] == f".github/workflows/{workflow}"
        and bool(head_ref)
        and run.head_branch == head_ref
        and bool(head_repo)
        and run.head_repo == head_repo
    )


def of_branch_push(run: WorkflowRun, workflow: str, *, repo: str, branch: str, sha: str) -> bool:
    """Whether ``run`` is a ``push`` run of ``workflow`` on ``branch`` of ``repo`` (the
    default branch: only those who may push to it start one) at commit ``sha``."""
    if run.event != "push" or run.head_sha != sha:
        return False
    return _of_branch(run, workflow, repo=repo, branch=branch)


def _of_branch(run: WorkflowRun, workflow: str, *, repo: str, branch: str) -> bool:
    """Whether ``run`` ran ``workflow`` with the definition of ``branch`` of ``repo``:
    Gitea names the ref in the path (``apply.yml@refs/heads/main``); GitHub names the
    file and gives the branch and repository apart."""
    if run.path == f"{workflow}@refs/heads/{branch}":
        return True  # Gitea
    return (
        run.path.split("@", 1)[0] == f".github/workflows/{workflow}"
        and run.head_branch == branch
        and run.head_repo == repo
    )


def latest_with_artifact(
    runs: Sequence[WorkflowRun],
    matches: Callable[[WorkflowRun], bool],
    artifacts: Callable[[int], frozenset[str]],
    name: str,
    *,
    tries: int = 5,
) -> int | None:
    """The newest run of ``runs`` that ``matches`` and has uploaded artifact ``name``
    (``artifacts(run id)`` asks the forge), looking at ``tries`` matching runs at most
    (a cancelled run may have uploaded nothing); None: none."""
    mine = sorted((r for r in runs if matches(r)), key=lambda r: r.id, reverse=True)
    for run in mine[:tries]:
        if name in artifacts(run.id):
            return run.id
    return None


# The workflows whose runs write the pull request's last comment with the live preview
# (the privileged half, started by ``workflow_run`` with the default branch's
# definition): only their artifacts hold a reviewed record (docs/review.md).
PRIVILEGED_WORKFLOWS = ("preview-cluster.yml", "preview-requested.yml")


def of_privileged_preview(
    run: WorkflowRun,
    *,
    repo: str,
    branch: str,
    workflows: Sequence[str] = PRIVILEGED_WORKFLOWS,
) -> bool:
    """Whether ``run`` is a ``workflow_run`` run of one of ``workflows`` with the
    definition of ``branch`` (the default branch) of ``repo``: never a pull request's
    own run, whose workflow file and artifacts the pull request writes."""
    if run.event != "workflow_run":
        return False
    return any(_of_branch(run, w, repo=repo, branch=branch) for w in workflows)
