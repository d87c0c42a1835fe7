"""The local forge's fan-out: what a matrix of shard jobs gets on Gitea (issue 33 item 3,
issue 29 item 5).

Two facts the workflows' design rests on, each checked on the real forge (`hack/forge`:
the pinned Gitea and act_runner, five runners):

- a matrix built from a job output (`fromJSON(needs.<job>.outputs.<x>)`) is not expanded:
  Gitea expands a matrix when the run is created, before any output exists, and runs the
  job once with an empty `matrix.shard`. So the workflows keep a static matrix
  (`konfig matrix --shards N`, docs/forges.md). When this fails, Gitea has learnt it:
  the workflows can move to a dynamic matrix.
- the jobs of a static matrix that turn waiting together are spread over every idle
  runner, even when the database is slow (a load of 18 on two cores): before the requeue
  trigger `hack/forge up` installs, a runner that lost the race for a job stayed idle
  beside the queue (eight jobs on one runner here, with every task's creation slowed by
  0.7 s in the database as a loaded machine slows it).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.forge import Forge

pytestmark = [pytest.mark.forge, pytest.mark.timeout(1800)]

JOBS = 8
SLOW_SECONDS = 0.7

WORKFLOW = """\
name: fanout
on: [push]
jobs:
  gen:
    runs-on: ubuntu-latest
    outputs:
      ids: ${{ steps.s.outputs.ids }}
    steps:
      - id: s
        run: echo 'ids=[0,1,2]' >> "$GITHUB_OUTPUT"
  dynamic:
    needs: gen
    runs-on: ubuntu-latest
    strategy:
      matrix:
        shard: ${{ fromJSON(needs.gen.outputs.ids) }}
    steps:
      - run: echo "dynamic shard=<${{ matrix.shard }}>"
  fan:
    needs: gen
    runs-on: ubuntu-latest
    strategy:
      matrix:
        shard: [%(shards)s]
    steps:
      - run: sleep 6
"""


def _psql(forge: Forge, sql: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))
    assert found, "psql of the forge's PostgreSQL not found"
    cmd = [str(found[-1]), "-h", "127.0.0.1", "-p", str(forge.info["postgres_port"])]
    cmd += ["-U", "postgres", "-d", "gitea", "-v", "ON_ERROR_STOP=1", "-qAtc", sql]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def slow_tasks(forge: Forge) -> Iterator[None]:
    """Every task's creation held SLOW_SECONDS in the database (what a loaded machine does
    to Gitea's transactions), for this test only."""
    _psql(
        forge,
        "CREATE OR REPLACE FUNCTION konfig_test_slow() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN PERFORM pg_sleep({SLOW_SECONDS}); RETURN NEW; END $$; "
        "DROP TRIGGER IF EXISTS konfig_test_slow ON action_task; "
        "CREATE TRIGGER konfig_test_slow AFTER INSERT ON action_task "
        "FOR EACH ROW EXECUTE FUNCTION konfig_test_slow();",
    )
    try:
        yield
    finally:
        _psql(forge, "DROP TRIGGER IF EXISTS konfig_test_slow ON action_task;")


def _git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(cwd),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    res = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _finished_run(forge: Forge, repo: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        runs = forge.runs(repo)
        return runs[0] if runs and runs[0].get("status") == "completed" else None

    return forge.wait("the fan-out run to complete", done, timeout=600, interval=2)


def test_a_fan_out_runs_on_every_runner_and_a_matrix_from_outputs_is_not_expanded(
    forge: Forge, slow_tasks: None, tmp_path: Path
) -> None:
    work = tmp_path / "fanout"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "README").write_text("fan-out\n")
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "init", cwd=work)
    repo = forge.import_repo("fanout", work, lambda *a, cwd: _git(*a, cwd=cwd))
    (work / ".github" / "workflows").mkdir(parents=True)
    shards = ", ".join(str(i) for i in range(JOBS))
    (work / ".github" / "workflows" / "fanout.yml").write_text(WORKFLOW % {"shards": shards})
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "fan out", cwd=work)
    start = time.monotonic()
    _git("push", "-q", "origin", "main", cwd=work)
    run = _finished_run(forge, repo)
    took = time.monotonic() - start
    jobs = forge.jobs(repo, int(run["id"]))
    assert run.get("conclusion") == "success", forge.run_logs(repo, int(run["id"]))

    # Gitea (1.26) does not expand the matrix from gen's output: one job, no shard.
    dynamic = [j for j in jobs if str(j["name"]).startswith("dynamic")]
    assert len(dynamic) == 1, [j["name"] for j in dynamic]
    assert "dynamic shard=<>" in forge.job_log(repo, int(dynamic[0]["id"]))

    # The static matrix: every runner takes some of its jobs (5 runners, 8 jobs).
    fan = [j for j in jobs if str(j["name"]).startswith("fan")]
    assert len(fan) == JOBS
    runners = {str(j["runner_name"]) for j in fan}
    expected = set(forge.info["runners"])
    assert runners == expected, (
        f"the {JOBS} fan-out jobs ran on {sorted(runners)} only, not on every runner of "
        f"{sorted(expected)} (run took {took:.0f} s): "
        + ", ".join(f"{j['name']}@{j['runner_name']}" for j in fan)
    )
