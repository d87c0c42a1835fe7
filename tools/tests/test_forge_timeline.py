"""fixtures/timeline.py: a round's jobs split by kind, from the forge's records."""

from __future__ import annotations

from typing import Any

from fixtures import timeline

LOG = """\
2026-11-27T21:00:01.5000000Z runner-0 received task 1 of job changed
2026-11-27T21:00:05.2000000Z \u2b50 Run Main ./.konfig-tools/actions/setup
2026-11-27T21:00:05.3000000Z \u2b50 Run Main actions/setup-python@abc
2026-11-27T21:00:06.3000000Z   \u2705  Success - Main actions/setup-python@abc
2026-11-27T21:00:09.0000000Z \u2b50 Run Post actions/checkout@abc
2026-11-27T21:00:10.0000000Z   \u2705  Success - Post actions/checkout@abc
"""


def _job(
    name: str, created: int, started: int, done: int, steps: list[tuple[str, int, int]]
) -> dict[str, Any]:
    def at(sec: int) -> str:
        return f"2026-11-27T21:00:{sec:02d}Z"

    return {
        "name": name,
        "created_at": at(created),
        "started_at": at(started),
        "completed_at": at(done),
        "steps": [
            {
                "name": n,
                "status": "completed",
                "conclusion": "success",
                "started_at": at(a),
                "completed_at": at(b),
            }
            for n, a, b in steps
        ],
    }


def test_a_job_split_by_kind_and_the_critical_path() -> None:
    first = timeline.job_of(
        "preview.yml",
        _job(
            "changed stacks",
            0,
            1,
            10,
            [
                ("actions/checkout@abc", 3, 5),
                ("Run ./.konfig-tools/actions/setup", 5, 7),
                ("Run ./.konfig-tools/actions/changed-stacks", 7, 9),
            ],
        ),
        LOG,
    )
    # inner steps come from the log, with their fractions; the job's own from the API
    inner = [s for s in first.steps if s.depth == 1]
    assert [(s.name, round(s.seconds, 1)) for s in inner] == [("actions/setup-python@abc", 1.0)]
    split = first.split()
    assert split["job start"] == 2.0  # taken at 1, the first step at 3
    assert split["tools"] == 4.0 and split["konfig"] == 2.0
    assert round(sum(split.values()), 6) == 9.0  # started to completed, all of it
    empty = timeline.job_of(
        "preview.yml", _job("compile 1", 0, 11, 12, [("Pick this shard's stacks", 11, 12)]), ""
    )
    second = timeline.job_of(
        "preview-cluster.yml",
        _job("report", 11, 13, 20, [("Run ./.konfig-tools/actions/comment", 14, 19)]),
        "",
    )
    jobs = [first, empty, second]
    # the empty shard did no work: not on the path; the comment seen at 18 (t0 = 0)
    t0 = timeline.parse_time("2026-11-27T21:00:00Z")
    assert [j.name for j in timeline.critical_path(jobs, t0 + 18)] == ["changed stacks", "report"]
    out = timeline.breakdown(jobs, t0, t0 + 18)
    assert out["jobs in series"] == 2.0 and out["total"] == 18.0
    # waiting: 0 -> 1 (the first job taken), 10 -> 13 (the second)
    assert out["waiting for the job (run, needs, a free runner)"] == 4.0
    assert out["konfig"] == 2.0 + 4.0  # the comment step cut at 18
    assert timeline.parse_time("2026-11-27T21:00:05.2500000Z") - t0 == 5.25


def test_the_job_that_wrote_the_comment_ends_the_path_even_started_first() -> None:
    """The requested privileged run's job starts beside the unprivileged one and waits
    for its artifacts inside; the completed run's job starts later but wrote nothing:
    the path is the writer alone, its wait a kind of its own."""
    unprivileged = timeline.job_of(
        "preview.yml",
        _job("changed stacks", 0, 1, 15, [("Run ./.konfig-tools/actions/changed-stacks", 3, 14)]),
        "",
    )
    small = timeline.job_of(
        "preview-cluster.yml",
        _job(
            "preview and report",
            0,
            1,
            19,
            [
                ("actions/checkout@abc", 2, 4),
                ("Wait for the unprivileged run's offline preview", 4, 8),
                ("Run ./.konfig-tools/actions/comment", 8, 9),
                ("Wait for the unprivileged run's compiled Specs and results", 9, 15),
                ("Run ./.konfig-tools/actions/preview", 15, 17),
                ("Run ./.konfig-tools/actions/comment", 17, 18),
            ],
        ),
        "",
    )
    completed = timeline.job_of(
        "preview-cluster.yml",
        _job(
            "pull request and changed stacks",
            15,
            16,
            22,
            [("Run ./.konfig-tools/actions/changed-stacks", 17, 20)],
        ),
        "",
    )
    t0 = timeline.parse_time("2026-11-27T21:00:00Z")
    jobs = [unprivileged, small, completed]
    assert [j.name for j in timeline.critical_path(jobs, t0 + 18.5)] == ["preview and report"]
    out = timeline.breakdown(jobs, t0, t0 + 18.5)
    assert out["jobs in series"] == 1.0
    assert out["waiting on the unprivileged run"] == 4.0 + 6.0
    assert out["konfig"] == 1.0 + 2.0 + 1.0 and out["tools"] == 2.0
