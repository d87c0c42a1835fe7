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
- that trigger never closes a deadlock with Gitea's own transactions: a run insert and a
  job hand-out of the same repository, interleaved as Gitea orders their updates, both
  commit (an aborted run insert is a push with no run at all).
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
import uuid
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


def _psql_cmd(forge: Forge, database: str) -> list[str]:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))
    assert found, "psql of the forge's PostgreSQL not found"
    return [
        str(found[-1]), "-h", "127.0.0.1", "-p", str(forge.info["postgres_port"]),
        "-U", "postgres", "-d", database,
    ]  # fmt: skip


def _psql(forge: Forge, sql: str, database: str = "gitea") -> str:
    cmd = [*_psql_cmd(forge, database), "-v", "ON_ERROR_STOP=1", "-qAtc", sql]
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


class _Session:
    """One psql connection fed a statement at a time; ``mark`` waits until every
    statement sent before it has finished (psql runs them in order)."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(
            [*cmd, "-qAtX", "-v", "ON_ERROR_STOP=0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, sql: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(sql + "\n")
        self.proc.stdin.flush()

    def mark(self, name: str, timeout: float = 30) -> None:
        self.send(f"\\echo MARK {name}")
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            self.seen.append(line.rstrip("\n"))
            if line.strip() == f"MARK {name}":
                return

    def close(self) -> str:
        self.send("\\q")
        self.proc.wait(timeout=30)
        while not self.lines.empty():
            self.seen.append(self.lines.get().rstrip("\n"))
        return "\n".join(self.seen)


def test_the_requeue_trigger_never_deadlocks_a_run_insert(forge: Forge) -> None:
    """Gitea's InsertRun updates the repository's run counts first and its tasks-version
    row last; a job hand-out updates the job (the trigger fires), then the run and the
    repository's counts. Both, interleaved on a copy of the three tables with the trigger
    `hack/forge up` installed on Gitea's database, must commit: PostgreSQL aborts one of
    a deadlocked pair, and an aborted InsertRun is a pull request's push with no run."""
    fn = _psql(forge, "SELECT pg_get_functiondef('konfig_requeue_idle_runners'::regproc)")
    trigger = _psql(
        forge,
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger "
        "WHERE tgname = 'konfig_requeue_idle_runners'",
    )
    assert "konfig_requeue_idle_runners" in fn and trigger.strip(), (fn, trigger)
    db = f"requeue_{uuid.uuid4().hex[:8]}"
    _psql(forge, f"CREATE DATABASE {db}")
    try:
        _psql(
            forge,
            "CREATE TABLE repository (id bigint PRIMARY KEY, num_action_runs int);"
            "CREATE TABLE action_run_job (id bigint PRIMARY KEY, task_id bigint, status int);"
            "CREATE TABLE action_tasks_version (id bigint PRIMARY KEY, version bigint);"
            "INSERT INTO repository VALUES (1, 0);"
            # the job handed out, and one still waiting (status 5) behind it
            "INSERT INTO action_run_job VALUES (1, 0, 5), (2, 0, 5);"
            "INSERT INTO action_tasks_version VALUES (1, 10), (2, 20);",
            database=db,
        )
        _psql(forge, fn, database=db)
        _psql(forge, trigger.strip(), database=db)
        insert, handout = _Session(_psql_cmd(forge, db)), _Session(_psql_cmd(forge, db))
        insert.send("BEGIN; UPDATE repository SET num_action_runs = num_action_runs + 1;")
        insert.mark("counts")
        handout.send("BEGIN; UPDATE action_run_job SET task_id = 7, status = 6 WHERE id = 1;")
        handout.mark("job")
        # neither waits for its mark from here: either may block on the other
        insert.send("UPDATE action_tasks_version SET version = version + 1 WHERE id = 1;")
        time.sleep(0.5)
        handout.send("UPDATE repository SET num_action_runs = num_action_runs + 1;")
        time.sleep(0.5)
        insert.send("COMMIT;")
        insert.mark("committed")
        handout.send("COMMIT;")
        handout.mark("committed")
        out = insert.close() + "\n" + handout.close()
        assert "deadlock" not in out.lower() and "ERROR" not in out, out
        counts = _psql(forge, "SELECT num_action_runs FROM repository", database=db)
        versions = _psql(forge, "SELECT version FROM action_tasks_version ORDER BY id", db)
        job = _psql(forge, "SELECT task_id FROM action_run_job WHERE id = 1", database=db)
        # both transactions committed: the run insert's count and bump, the hand-out's
        # count and job, and the trigger moved every version row once at the hand-out's
        # commit (so a runner that lost the race asks again)
        assert counts.split() == ["2"], counts
        assert job.split() == ["7"], job
        assert versions.split() == ["12", "21"], versions
    finally:
        _psql(forge, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
