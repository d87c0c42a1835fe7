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
    intervals,
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
