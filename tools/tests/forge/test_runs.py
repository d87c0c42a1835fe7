"""Waiting for another workflow run's artifacts (konfig.forge.runs), from plain data:
the forge's answers are scripted, the clock is the test's."""

from __future__ import annotations

import itertools

import pytest

from konfig.forge.runs import (
    FAST_FOR,
    FAST_INTERVAL,
    SLOWEST_INTERVAL,
    RunProgress,
    WorkflowRun,
    intervals,
    latest_with_artifact,
    of_branch_push,
    of_pull_request,
    run_from_json,
    wait_for_artifacts,
)


class Script:
    """The forge's answers, one a poll, and a clock that the waits advance."""

    def __init__(self, *answers: RunProgress) -> None:
        self.answers = list(answers)
        self.now = 0.0
        self.polls = 0
        self.slept: list[float] = []

    def poll(self) -> RunProgress:
        self.polls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def running(*names: str) -> RunProgress:
    return RunProgress("in_progress", frozenset(names))


def test_ready_as_soon_as_every_artifact_is_there() -> None:
    script = Script(
        RunProgress("queued", frozenset()),
        running("konfig-offline"),
        running("konfig-offline", "konfig-specs-0", "konfig-verify-0"),
    )
    outcome, progress = wait_for_artifacts(
        script.poll,
        ["konfig-specs-0", "konfig-verify-0"],
        timeout=60,
        clock=script.clock,
        sleep=script.sleep,
    )
    assert outcome == "ready" and "konfig-verify-0" in progress.artifacts
    assert script.polls == 3 and script.slept == [FAST_INTERVAL, FAST_INTERVAL]


def test_a_run_that_ended_without_them_ends_the_wait() -> None:
    # a failed or cancelled run (a newer push): the caller takes what is there
    script = Script(running(), RunProgress("completed", frozenset({"konfig-verify-0"})))
    outcome, progress = wait_for_artifacts(
        script.poll,
        ["konfig-offline", "konfig-verify-0"],
        timeout=60,
        clock=script.clock,
        sleep=script.sleep,
    )
    assert outcome == "ended" and progress.artifacts == {"konfig-verify-0"}
    assert script.polls == 2


def test_a_run_that_never_starts_times_out_without_sleeping_past_the_deadline() -> None:
    # e.g. a fork's run waiting for a maintainer's approval
    script = Script(RunProgress("waiting", frozenset()))
    outcome, progress = wait_for_artifacts(
        script.poll,
        ["konfig-offline"],
        timeout=0.6,
        clock=script.clock,
        sleep=script.sleep,
    )
    assert outcome == "timeout" and progress.status == "waiting"
    assert script.slept == [0.25, 0.25, pytest.approx(0.1)] and script.now == pytest.approx(0.6)


def test_present_at_once_is_ready_without_a_wait() -> None:
    script = Script(RunProgress("completed", frozenset({"konfig-offline"})))
    outcome, _ = wait_for_artifacts(
        script.poll, ["konfig-offline"], timeout=0, clock=script.clock, sleep=script.sleep
    )
    assert outcome == "ready" and script.slept == []


def test_fast_while_the_artifacts_are_due_then_backing_off() -> None:
    """A quarter of a second for the first 15 seconds, then each pause 1.5 times the
    one before, up to ten seconds: a fork's run waiting ten minutes for an approval
    costs tens of polls, not 1,200 (GitHub allows a job token 1,000 requests an hour)."""
    script = Script(RunProgress("waiting", frozenset()))
    outcome, _ = wait_for_artifacts(
        script.poll, ["konfig-offline"], timeout=600, clock=script.clock, sleep=script.sleep
    )
    assert outcome == "timeout" and script.now == pytest.approx(600)
    fast = [s for s in script.slept if s == FAST_INTERVAL]
    assert len(fast) == int(FAST_FOR / FAST_INTERVAL)
    later = script.slept[len(fast) :]
    assert later[0] == pytest.approx(FAST_INTERVAL * 1.5)
    assert all(b >= a for a, b in itertools.pairwise(later[:-1]))  # (the last: the deadline)
    assert max(later) == SLOWEST_INTERVAL
    assert script.polls < 150, script.polls
    pause = intervals(1.0)
    assert [pause(0), pause(10), pause(FAST_FOR), pause(FAST_FOR + 1)] == [1.0, 1.0, 1.5, 2.25]


# Which earlier run's artifacts a run may take (issue 33 item 2, docs/security.md "The
# compile cache across pushes"): the runs as the two forges list them.

BASE = "b" * 40
HEAD = "c" * 40


def gitea_run(id: int, path: str, event: str = "pull_request", sha: str = HEAD) -> WorkflowRun:
    # Gitea: `<file>@<ref>`, no head_repository, head_branch empty for refs/pull/N/head
    return WorkflowRun(id, event, path, "", sha, "")


def github_run(
    id: int, workflow: str, event: str, branch: str, repo: str, sha: str = HEAD
) -> WorkflowRun:
    return WorkflowRun(id, event, f".github/workflows/{workflow}", branch, sha, repo)


def test_a_run_of_the_pull_request_is_its_own_on_both_forges() -> None:
    mine = {"head_repo": "acme/config", "head_ref": "topic"}
    assert of_pull_request(gitea_run(1, "preview.yml@refs/pull/7/head"), "preview.yml", 7, **mine)
    # another pull request's run, another workflow, a branch's push run: not its own
    assert not of_pull_request(
        gitea_run(2, "preview.yml@refs/pull/8/head"), "preview.yml", 7, **mine
    )
    assert not of_pull_request(gitea_run(3, "apply.yml@refs/pull/7/head"), "preview.yml", 7, **mine)
    assert not of_pull_request(
        gitea_run(4, "preview.yml@refs/heads/topic", "push"), "preview.yml", 7, **mine
    )
    gh = github_run(5, "preview.yml", "pull_request", "topic", "acme/config")
    assert of_pull_request(gh, "preview.yml", 7, **mine)
    # a fork's pull request from a branch of the same name lives in another repository
    fork = github_run(6, "preview.yml", "pull_request", "topic", "mallory/config")
    assert not of_pull_request(fork, "preview.yml", 7, **mine)
    # pull_request_target runs the base branch's definition; a push is not the PR's run
    for event in ("pull_request_target", "push"):
        other = github_run(7, "preview.yml", event, "topic", "acme/config")
        assert not of_pull_request(other, "preview.yml", 7, **mine)
    # unknown head (a deleted fork): nothing on GitHub is its own
    assert not of_pull_request(gh, "preview.yml", 7, head_repo="", head_ref="topic")


def test_a_base_run_is_a_push_to_the_base_branch_at_the_base_commit() -> None:
    def is_base(run: WorkflowRun) -> bool:
        return of_branch_push(run, "apply.yml", repo="acme/config", branch="main", sha=BASE)

    assert is_base(gitea_run(1, "apply.yml@refs/heads/main", "push", BASE))
    assert is_base(github_run(2, "apply.yml", "push", "main", "acme/config", BASE))
    # another commit, another branch, another workflow
    assert not is_base(gitea_run(3, "apply.yml@refs/heads/main", "push", HEAD))
    assert not is_base(gitea_run(4, "apply.yml@refs/heads/topic", "push", BASE))
    assert not is_base(gitea_run(5, "preview.yml@refs/heads/main", "push", BASE))
    # a pull request's run at the base commit, e.g. a fork whose branch is named main
    assert not is_base(gitea_run(6, "apply.yml@refs/pull/7/head", "pull_request", BASE))
    assert not is_base(github_run(7, "apply.yml", "pull_request", "main", "mallory/config", BASE))
    assert not is_base(github_run(8, "apply.yml", "push", "main", "mallory/config", BASE))
    # dispatched by hand: not what a push to the branch ran
    assert not is_base(gitea_run(9, "apply.yml@refs/heads/main", "workflow_dispatch", BASE))


def test_the_newest_run_that_uploaded_the_artifact() -> None:
    runs = [gitea_run(i, f"preview.yml@refs/pull/{7 if i != 14 else 8}/head") for i in range(9, 15)]
    uploaded = {9: {"konfig-verify-0"}, 11: {"konfig-verify-0"}, 14: {"x"}}
    asked: list[int] = []

    def artifacts(run_id: int) -> frozenset[str]:
        asked.append(run_id)
        return frozenset(uploaded.get(run_id, ()))

    def mine(r: WorkflowRun) -> bool:
        return of_pull_request(r, "preview.yml", 7, head_repo="", head_ref="")

    # 13, 12 (cancelled, nothing uploaded), then 11; 14 is another pull request's
    assert latest_with_artifact(runs, mine, artifacts, "konfig-verify-0") == 11
    assert asked == [13, 12, 11]
    asked.clear()
    assert latest_with_artifact(runs, mine, artifacts, "konfig-verify-0", tries=2) is None
    assert asked == [13, 12]
    assert run_from_json({"id": "x"}) is None
    assert run_from_json(
        {"id": 3, "event": "push", "path": "a.yml@refs/heads/main", "head_sha": BASE}
    ) == WorkflowRun(3, "push", "a.yml@refs/heads/main", "", BASE, "")


# Whose artifact may hold a reviewed record (docs/review.md, "A record too long for the
# comment"): the privileged preview run's only, never the pull request's own run.


def test_only_the_privileged_preview_runs_hold_a_reviewed_record() -> None:
    from konfig.forge.runs import of_privileged_preview

    def run(event: str, path: str, branch: str = "main", repo: str = "") -> WorkflowRun:
        return WorkflowRun(9, event, path, branch, "a" * 40, repo)

    ok = {"repo": "acme/config", "branch": "main"}
    # Gitea: the ref is in the path
    assert of_privileged_preview(run("workflow_run", "preview-cluster.yml@refs/heads/main"), **ok)
    assert of_privileged_preview(run("workflow_run", "preview-requested.yml@refs/heads/main"), **ok)
    # the pull request's own run, even of a workflow it names preview-cluster.yml
    assert not of_privileged_preview(run("pull_request", "preview.yml@refs/pull/3/head"), **ok)
    assert not of_privileged_preview(
        run("pull_request", "preview-cluster.yml@refs/pull/3/head"), **ok
    )
    assert not of_privileged_preview(
        run("workflow_run", "preview-cluster.yml@refs/pull/3/head"), **ok
    )
    # another branch's definition, another workflow of the default branch
    assert not of_privileged_preview(
        run("workflow_run", "preview-cluster.yml@refs/heads/dev"), **ok
    )
    assert not of_privileged_preview(run("workflow_run", "stale.yml@refs/heads/main"), **ok)
    # GitHub: the file, the branch and the repository apart
    gh = ".github/workflows/preview-cluster.yml"
    assert of_privileged_preview(run("workflow_run", gh, "main", "acme/config"), **ok)
    assert not of_privileged_preview(run("pull_request", gh, "main", "acme/config"), **ok)
    assert not of_privileged_preview(run("workflow_run", gh, "main", "fork/config"), **ok)
    assert not of_privileged_preview(run("workflow_run", gh, "feature", "acme/config"), **ok)
