#!/usr/bin/env python3
"""A base-model change across N stacks on the local forge: push -> offline comment.

    .venv/bin/python hack/bench_forge_offline.py [--stacks 1000] [--seed 42]
        [--no-live] [--no-warm-up] [--no-second-push] [--timeout 2400] [--json FILE]
        [--keep]

Issue 29 item 5: a base-model change touching 1,000 stacks gets its offline comment
within 60 s of the push. This runs that round the way a team's repository would:

- a repository made by ``konfig init --no-examples`` (the unmodified workflows and
  actions), with N stacks of ``hack/gen_monorepo.py`` (3.3334 a project, ``--seed``),
  their goldens written (``konfig test --update``), on a real Gitea with five runners
  (``hack/forge up``, a forge of its own, taken down at the end);
- with ``--live`` (the default) a local control plane (``hack/cluster up``: etcd,
  kube-apiserver, kwok) whose kubeconfig is the repository's preview secret, so the
  privileged half also runs the live preview (every object new: nothing is applied);
- first (unless ``--no-warm-up``) a pull request changing one stack, timed the same
  way: the runners' shared dependency venv is built then, not in the big round, and
  it gives the one-stack figure at the same load;
- then the pull request: the base model's ``small`` limits raised
  (``base/pkg/models/frontend/container.k``, as hack/bench_offline.py), every stack's
  golden updated as its author would, pushed, opened. Timed from the API call that
  opens it (a push to a branch without a pull request runs nothing) to the first
  Konfig comment (the offline preview: its first line says so) and to the live one;
- then (unless ``--no-second-push``) a second push to that pull request changing one
  stack (issue 33 item 2): every stack is still affected, the unprivileged jobs restore
  the compile cache of the first push's run and (Gitea) the base-side Specs of
  ``apply.yml``'s run on main, the live preview re-uses the unchanged stacks. Timed
  from the ``git push`` to the offline comment for the new head and to the live one;
  the entries restored, the base-side Specs' run and the comment's re-use line are
  read from the runs' logs and the comment.

Printed: those times, the forge's CPU seconds over each (Gitea, PostgreSQL, the runners
and every job step: ``Forge.cpu_seconds``), the load average before, at each comment and
after, the critical path to each comment split by kind (``tools/tests/fixtures/
timeline.py``: waiting, job start, tools, artifacts, konfig, other) and the table of
every job. Checks that the offline comment counts every stack as changed and that the
live one replaces it in the same comment. It takes several minutes at 50 stacks and
tens of minutes at 1,000 on a loaded two-core machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tools" / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

from fixtures import timeline  # noqa: E402
from fixtures.cluster import Cluster  # noqa: E402
from fixtures.forge import Forge  # noqa: E402
from gen_monorepo import generate  # noqa: E402
from test_forge_e2e import (  # noqa: E402
    E2E,
    GIT_ENV,
    _offline_first,
    _preview_seen,
    _visible,
    konfig_cli,
)

PER_PROJECT = 3.3334
MODEL = "base/pkg/models/frontend/container.k"
OLD_LIMITS = 'cpuLimit = "250m", memoryLimit = "256Mi"}'
NEW_LIMITS = 'cpuLimit = "500m", memoryLimit = "512Mi"}'
# the base model's own unit test, which the change's author updates with it
MODEL_TEST = "base/pkg/models/backend/backend_test.k"
OLD_TEST = '_c.resources.limits.memory == "256Mi"'
NEW_TEST = '_c.resources.limits.memory == "512Mi"'
AFFECTED = re.compile(r"(\d[\d,]*) stacks? affected")


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def load() -> float:
    return round(os.getloadavg()[0], 1)


def script(name: str, command: str, env: dict[str, str], timeout: float) -> str:
    """``hack/<name> <command>``: its stdout, or SystemExit with its stderr."""
    done = subprocess.run(
        [str(HERE / name), command],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"hack/{name} {command} failed (exit {done.returncode}):\n{done.stderr}")
    return done.stdout


def konfig(*args: str, cwd: Path) -> str:
    done = konfig_cli(*args, cwd=cwd, kubeconfig=Path(os.devnull), extra_env={"CI": "1", **GIT_ENV})
    if done.returncode != 0:
        raise SystemExit(f"konfig {' '.join(args[:4])} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def make_repository(work: Path, scratch: Path, stacks: int, seed: int, admin: str) -> int:
    """``konfig init --no-examples`` at ``work`` plus ``stacks`` generated stacks with
    their goldens, committed on main; returns how many stacks it holds."""
    recipients = []
    for env in ("prod", "dev"):
        recipients.append(
            konfig("secrets", "keygen", "-o", str(scratch / f"{env}.key"), cwd=scratch)
        )
    konfig(
        "init",
        str(work),
        "--name",
        "bench",
        "--no-examples",
        *(arg for r in recipients for arg in ("--age-recipient", r.strip())),
        cwd=scratch,
    )
    projects = math.ceil(stacks / PER_PROJECT)
    made = generate(
        scratch / "gen", projects=projects, stacks_per_project=PER_PROJECT, seed=seed, git=False
    )
    for folder in sorted((made.root / "appops").iterdir()):
        shutil.copytree(folder, work / "appops" / folder.name)
    for lib in sorted((made.root / "base/pkg").glob("lib*")):
        shutil.copytree(lib, work / "base/pkg" / lib.name)
    settings = work / "konfig.yaml"
    text = settings.read_text(encoding="utf-8")
    line = "    platform-team: [platform-admin]\n"
    if line in text:  # the platform team is the forge's admin (owners.yml reads it)
        settings.write_text(text.replace(line, f"    platform-team: [{admin}]\n"), "utf-8")
    konfig("gen", "codeowners", cwd=work)
    say(f"writing the goldens of {made.stacks} stacks (konfig test --update --all)")
    konfig("test", "--update", "--all", cwd=work)
    return made.stacks


def wait_comments(
    state: E2E, number: int, head: str, t0: float, *, live: bool, timeout: float
) -> dict[str, Any]:
    """Poll the pull request's Konfig comment: when the offline one and (``live``) the
    live one for ``head`` appear (epoch seconds, forge CPU, load), and their bodies."""
    forge = state.forge
    cpu0 = forge.cpu_seconds()
    got: dict[str, Any] = {}
    deadline = time.time() + timeout
    while time.time() < deadline:
        comments = state.konfig_comments(number)
        if len(comments) > 1:
            raise SystemExit(f"more than one Konfig comment on #{number}")
        body = comments[0]["body"] if comments else ""
        now = time.time()
        if body and "offline" not in got and _offline_first(body, head):
            got["offline"] = {
                "at": now,
                "seconds": now - t0,
                "forge_cpu": forge.cpu_seconds() - cpu0,
                "load": load(),
                "body": body,
            }
            say(f"offline comment after {now - t0:.1f} s")
        if body and _preview_seen(body, head):
            got["final"] = {
                "at": now,
                "seconds": now - t0,
                "forge_cpu": forge.cpu_seconds() - cpu0,
                "load": load(),
                "body": body,
                "first_line": _visible(body)[0] if _visible(body) else "",
            }
            say(f"final comment after {now - t0:.1f} s: {got['final']['first_line']}")
            return got
        if not live and "offline" in got:
            return got
        time.sleep(0.5)
    got["timed_out"] = True
    return got


def breakdown(state: E2E, head: str, t0: float, ends: dict[str, float]) -> dict[str, Any]:
    """The round's jobs (preview.yml, and both privileged runs: preview-requested.yml's,
    which posts the first comment, and preview-cluster.yml's) and, for each end, its
    critical path split by kind."""
    runs = [state.wait_run("preview.yml", head, "pull_request"), *state.cluster_runs(head)]
    jobs = []
    # which runner took each job that ran (issue 29 item 5: the shards on every runner)
    runners: dict[str, str] = {}
    for run in runs:
        name = Path(str(run.get("path", "")).split("@")[0]).name
        for job in state.forge.jobs(state.repo, int(run["id"])):
            log = state.forge.job_log(state.repo, int(job["id"]))
            jobs.append(timeline.job_of(name, job, log))
            if job.get("runner_name"):
                runners[f"{name}: {job['name']}"] = str(job["runner_name"])
    out: dict[str, Any] = {"table": timeline.table(jobs, t0), "runners": runners}
    for what, end in ends.items():
        out[what] = {k: round(v, 1) for k, v in timeline.breakdown(jobs, t0, end).items()}
    return out


def one_round(
    state: E2E,
    branch: str,
    edits: dict[str, str],
    goldens: list[str],
    *,
    live: bool,
    timeout: float,
) -> dict[str, Any]:
    """Commit ``edits`` on ``branch`` with the goldens of the stacks ``goldens`` names
    (``--all``: every one) updated as their author would, push, open the pull request
    and time it."""
    state.git("checkout", "-q", "-B", branch, "main")
    for rel, text in edits.items():
        (state.work / rel).write_text(text, encoding="utf-8")
    say(f"{branch}: updating the goldens (konfig test --update {' '.join(goldens)})")
    konfig("test", "--update", *goldens, cwd=state.work)
    state.git("add", "-A")
    state.git("commit", "-qm", f"{branch}: the change")
    state.git("push", "-q", "origin", f"{branch}:{branch}")
    head = state.git("rev-parse", "HEAD")
    state.git("checkout", "-q", "main")
    result: dict[str, Any] = {"head": head, "load_at_open": load()}
    t0 = time.time()
    pr = state.open_pr(branch, branch, head)
    result["pr"] = pr.number
    result.update(wait_comments(state, pr.number, head, t0, live=live, timeout=timeout))
    ends = {k: result[k]["at"] for k in ("offline", "final") if k in result}
    if ends:
        result["breakdown"] = breakdown(state, head, t0, ends)
    return result


RESTORED = re.compile(r"(\d+) compile cache entries restored")
BASE_SPECS_RUN = re.compile(r"konfig-base-specs of a apply\.yml run on a push to \S+ at \w+: (\w+)")
REUSED = re.compile(r"♻️ ([\d,]+) stacks? re-used from `(\w+)`")


def push_again(
    state: E2E,
    branch: str,
    number: int,
    edits: dict[str, str],
    goldens: list[str],
    *,
    live: bool,
    timeout: float,
) -> dict[str, Any]:
    """A second push to pull request ``number`` (issue 33 item 2), timed from the push
    to its comments; what the runs re-used, from their logs and the comment."""
    state.git("checkout", "-q", branch)
    for rel, text in edits.items():
        (state.work / rel).write_text(text, encoding="utf-8")
    konfig("test", "--update", *goldens, cwd=state.work)
    state.git("add", "-A")
    state.git("commit", "-qm", f"{branch}: one stack again")
    head = state.git("rev-parse", "HEAD")
    result: dict[str, Any] = {"head": head, "load_at_open": load(), "from": "git push"}
    t0 = time.time()
    state.git("push", "-q", "origin", f"{branch}:{branch}")
    state.git("checkout", "-q", "main")
    result.update(wait_comments(state, number, head, t0, live=live, timeout=timeout))
    ends = {k: result[k]["at"] for k in ("offline", "final") if k in result}
    if ends:
        result["breakdown"] = breakdown(state, head, t0, ends)
    logs = state.logs(state.wait_run("preview.yml", head, "pull_request"))
    result["entries_restored"] = sum(int(n) for n in RESTORED.findall(logs))
    result["base_specs_runs"] = sorted(set(BASE_SPECS_RUN.findall(logs)))
    final = result.get("final", {}).get("body", "")
    reused = REUSED.search(final)
    result["live_reused"] = int(reused[1].replace(",", "")) if reused else 0
    return result


def report(name: str, stacks: int, result: dict[str, Any]) -> list[str]:
    lines = [f"== {name} ({stacks} stacks), load {result['load_at_open']} at the open"]
    for key, label in (("offline", "offline comment"), ("final", "final comment")):
        if key in result:
            got = result[key]
            lines.append(
                f"{result.get('from', 'PR opened')} -> {label}: {got['seconds']:.1f} s, forge CPU "
                f"{got['forge_cpu']:.1f} s, load {got['load']}"
            )
            path = result.get("breakdown", {}).get(key)
            if path:
                lines.append(
                    "  critical path: " + ", ".join(f"{k} {v:.1f} s" for k, v in path.items())
                )
    if "entries_restored" in result:
        lines.append(
            f"compile cache entries restored: {result['entries_restored']}; base-side Specs "
            f"from apply.yml run(s) {result['base_specs_runs'] or 'none'}; the live comment "
            f"says {result['live_reused']} stacks re-used"
        )
    if result.get("timed_out"):
        lines.append("timed out before the final comment")
    if "breakdown" in result:
        lines.append(result["breakdown"]["table"])
        taken: dict[str, list[str]] = {}
        for job, runner in sorted(result["breakdown"].get("runners", {}).items()):
            taken.setdefault(runner, []).append(job)
        lines.append(f"jobs per runner ({len(taken)} runners took jobs):")
        lines += [f"  {runner}: {len(jobs)}: {', '.join(jobs)}" for runner, jobs in taken.items()]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stacks", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--no-live", action="store_true", help="no cluster: offline comment only")
    parser.add_argument("--no-warm-up", action="store_true", help="no one-stack round first")
    parser.add_argument(
        "--no-second-push", action="store_true", help="no push changing one stack afterwards"
    )
    parser.add_argument("--timeout", type=float, default=2400, help="seconds a round may take")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep", action="store_true", help="leave the scratch folder")
    args = parser.parse_args()
    live = not args.no_live
    figures: dict[str, Any] = {"stacks": args.stacks, "live": live, "load_before": load()}
    say(f"load average before: {os.getloadavg()}")
    scratch = Path(tempfile.mkdtemp(prefix="bench-forge-offline-"))
    forge_env = {
        "KONFIG_FORGE_DIR": str(scratch / "forge"),
        "KONFIG_FORGE_OWNER_PID": str(os.getpid()),
    }
    cluster_env = {
        "KONFIG_CLUSTER_DIR": str(scratch / "cluster"),
        "KONFIG_CLUSTER_OWNER_PID": str(os.getpid()),
        # the name `local` (the default): its contexts are `admin` and `restricted`, the
        # ones the generated stacks name (another name names the contexts after it)
        "KONFIG_CLUSTER_NAME": "local",
    }
    try:
        (scratch / "forge").mkdir()
        say("hack/forge up")
        info = json.loads(script("forge", "up", forge_env, 5400).strip().splitlines()[-1])
        forge = Forge(
            api_url=info["api_url"],
            web_url=info["web_url"],
            root_url=info["root_url"],
            token=info["token"],
            admin=info["admin"],
            admin_password=info["admin_password"],
            runner_workdir=Path(info["runner_workdir"]),
            dir=scratch / "forge",
            info=info,
        )
        cluster = None
        if live:
            (scratch / "cluster").mkdir()
            say("hack/cluster up")
            kubeconfig = Path(script("cluster", "up", cluster_env, 3600).strip().splitlines()[-1])
            cluster = Cluster(kubeconfig, "admin", "restricted", scratch / "cluster")
        work = scratch / "config"
        t_setup = time.monotonic()
        count = make_repository(work, scratch, args.stacks, args.seed, forge.admin)
        figures["stacks"] = count
        state = E2E(forge, "", work, cluster, cluster, None, "")  # type: ignore[arg-type]
        state.git("add", "-A")
        state.git("commit", "-qm", f"{count} generated stacks")
        state.repo = forge.import_repo(f"bench{count}", work, state.git)
        forge.request(
            "PUT", f"/repos/{state.repo}/actions/workflows/drift.yml/disable", expect=(204,)
        )
        if cluster is not None:
            kube = cluster.kubeconfig.read_text(encoding="utf-8")
            for name in ("KONFIG_PREVIEW_KUBECONFIG", "KONFIG_APPLY_KUBECONFIG"):
                forge.set_secret(state.repo, name, kube)
        dev_key = (scratch / "dev.key").read_text(encoding="utf-8")
        forge.set_secret(state.repo, "KONFIG_PREVIEW_SOPS_AGE_KEY", dev_key)
        figures["setup_seconds"] = round(time.monotonic() - t_setup, 1)
        say(f"repository {state.repo}: {count} stacks, set up in {figures['setup_seconds']} s")

        rounds: list[tuple[str, int, dict[str, Any]]] = []
        if not args.no_warm_up:
            stack = sorted((work / "appops").glob("*/*/main.k"))[0]
            rel = str(stack.relative_to(work))
            text = stack.read_text(encoding="utf-8")
            edited = re.sub(r'("ENV" = "[^"]*")', r'\1, "WARM" = "up"', text, count=1)
            if edited == text:
                raise SystemExit(f"{rel}: no ENV to add a variable beside")
            say(f"warm-up round: {rel}")
            warm = one_round(
                state, "warm-up", {rel: edited}, [str(stack.parent.relative_to(work))],
                live=live, timeout=args.timeout,
            )  # fmt: skip
            rounds.append(("one-stack pull request (warm-up)", 1, warm))
            figures["one_stack"] = warm
        model = (work / MODEL).read_text(encoding="utf-8")
        model_test = (work / MODEL_TEST).read_text(encoding="utf-8")
        if OLD_LIMITS not in model or OLD_TEST not in model_test:
            raise SystemExit(f"{MODEL} or {MODEL_TEST}: not as expected: the model changed")
        say(f"the base-model round: {count} stacks")
        big = one_round(
            state,
            "base-model",
            {
                MODEL: model.replace(OLD_LIMITS, NEW_LIMITS),
                MODEL_TEST: model_test.replace(OLD_TEST, NEW_TEST),
            },
            ["--all"],
            live=live,
            timeout=args.timeout,
        )
        rounds.append(("base-model change", count, big))
        figures["base_model"] = big
        offline = big.get("offline", {}).get("body", "")
        found = AFFECTED.search(offline)
        figures["offline_counts_every_stack"] = (
            bool(found) and int(found[1].replace(",", "")) == count
        )
        if not figures["offline_counts_every_stack"]:
            say(f"the offline comment does not count {count} stacks:\n{offline[:3000]}")
        if not args.no_second_push and "pr" in big:
            stack = sorted((work / "appops").glob("*/*/main.k"))[-1]
            rel = str(stack.relative_to(work))
            text = stack.read_text(encoding="utf-8")
            edited = re.sub(r'("ENV" = "[^"]*")', r'\1, "PUSH" = "two"', text, count=1)
            say(f"the second push (one stack changed: {rel})")
            again = push_again(
                state, "base-model", big["pr"], {rel: edited},
                [str(stack.parent.relative_to(work))], live=live, timeout=args.timeout,
            )  # fmt: skip
            rounds.append(("second push changing one stack", count, again))
            figures["second_push"] = again
            say(
                f"second push: {again['entries_restored']} compile cache entries restored, "
                f"base-side Specs from run(s) {again['base_specs_runs']}, live comment "
                f"re-used {again['live_reused']} stacks"
            )
        figures["load_after"] = load()
        say(f"load average after: {os.getloadavg()}")
        for name, n, result in rounds:
            print("\n".join(report(name, n, result)))
        if args.json:
            slim = json.loads(json.dumps(figures, default=str))
            for key in ("one_stack", "base_model", "second_push"):
                for part in ("offline", "final"):
                    slim.get(key, {}).get(part, {}).pop("body", None)
            args.json.write_text(json.dumps(slim, indent=1) + "\n", encoding="utf-8")
        ok = "offline" in big and figures["offline_counts_every_stack"]
        if "second_push" in figures:
            again = figures["second_push"]
            ok = ok and "offline" in again and again["entries_restored"] > 0
        return 0 if ok else 1
    finally:
        say("taking the forge and the cluster down")
        subprocess.run(
            [str(HERE / "forge"), "down"], env={**os.environ, **forge_env}, capture_output=True,
            timeout=300, check=False,
        )  # fmt: skip
        if live:
            subprocess.run(
                [str(HERE / "cluster"), "down"], env={**os.environ, **cluster_env},
                capture_output=True, timeout=300, check=False,
            )  # fmt: skip
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
