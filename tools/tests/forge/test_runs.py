"""Waiting for another workflow run's artifacts (konfig.forge.runs), from plain data:
the forge's answers are scripted, the clock is the test's."""

from __future__ import annotations

import pytest

from konfig.forge.runs import RunProgress, wait_for_artifacts


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
    assert script.polls == 3 and script.slept == [0.5, 0.5]


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
        timeout=1.2,
        clock=script.clock,
        sleep=script.sleep,
    )
    assert outcome == "timeout" and progress.status == "waiting"
    assert script.slept == [0.5, 0.5, pytest.approx(0.2)] and script.now == pytest.approx(1.2)


def test_present_at_once_is_ready_without_a_wait() -> None:
    script = Script(RunProgress("completed", frozenset({"konfig-offline"})))
    outcome, _ = wait_for_artifacts(
        script.poll, ["konfig-offline"], timeout=0, clock=script.clock, sleep=script.sleep
    )
    assert outcome == "ready" and script.slept == []
