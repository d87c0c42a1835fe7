#!/usr/bin/env python3
"""A push touching one of N previewed stacks: the unprivileged run's work, cold and warm.

    .venv/bin/python hack/bench_incremental.py [--stacks 1000] [--seed 42] [--json FILE]

Issue 33 item 2: after a base-model change that affects every stack, the pull request
gets a second push that changes one stack. Every stack is still affected (the diff is
base...head), so the unprivileged run compiles, tests and checks all N at the head and
renders the offline preview of all N (the base and the merge). This measures what the
compile cache carried from the previous push's run saves (preview.yml restores
``konfig-verify-<shard>``'s ``compile-cache/`` into ``.cache/konfig/compile``):

- setup (not timed): N stacks of ``hack/gen_monorepo.py`` (3.3334 a project) with their
  goldens on ``main``; the base-side Specs of ``main`` as apply.yml's ``base-specs`` job
  leaves them (``konfig compile --all --out``); branch ``pr``: the base model's
  ``small`` limits raised (hack/bench_offline.py), every golden updated;
- the first push (``pr``), in a fresh work tree with an empty cache: the round below,
  whose ``.cache/konfig/compile`` is kept as the run's artifact;
- the second push (``pr2``: one stack's image changed, its golden updated), twice, each
  in a fresh work tree: **cold** (an empty cache: the peer, what every push cost before)
  and **warm** (the first push's entries restored);

where a round is what the changed job runs, each a fresh ``konfig`` process: ``konfig
preview --offline --base main --head H --base-specs DIR --base-cache EMPTY``, then
``konfig compile --out``, ``konfig test`` and ``konfig check`` of the N stacks (the
compile-test-check action). For each process: wall and CPU (user + system of it and its
compile workers, ``os.wait4``); the load average before and after. It checks that the
warm round's offline preview equals the cold one's and that the warm round compiled,
tested and checked (cache misses: new Spec, test and check entries) only the changed
stack: at the merge, at the head.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_offline import make_pr  # noqa: E402
from gen_monorepo import generate  # noqa: E402

KONFIG = [sys.executable, "-m", "konfig"]
PER_PROJECT = 3.3334
ENV = {**os.environ, "NO_COLOR": "1", "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x"}
ENV |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}


@dataclass
class Proc:
    name: str
    wall: float
    cpu: float
    code: int


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, env=ENV, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


def timed(name: str, args: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> Proc:
    """One konfig process, its own rusage (``os.wait4``: its compile workers included)."""
    with tempfile.TemporaryFile("w+") as log:
        began = time.perf_counter()
        child = subprocess.Popen([*KONFIG, *args], cwd=cwd, env=ENV, stdout=log, stderr=log)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - began
        code = os.waitstatus_to_exitcode(status)
        if code not in ok:
            log.seek(0)
            raise SystemExit(f"konfig {' '.join(args[:6])} exited {code}:\n{log.read()[-4000:]}")
    return Proc(name, wall, usage.ru_utime + usage.ru_stime, code)


def entries(root: Path, kind: str | None = None) -> set[str]:
    """The compile cache's entries (``kind`` None), or the result cache's of ``test`` or
    ``check`` (konfig.build.results: the same folder, a ``kind`` in the entry)."""
    found = set()
    for path in (root / ".cache/konfig/compile").glob("*/*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("kind") == kind:
            found.add(path.stem)
    return found


def one_round(
    repo: Path, tree: Path, head: str, base_specs: Path, restore: Path | None
) -> tuple[list[Proc], dict[str, Any], dict[str, int]]:
    """The changed job's work for ``head`` in a fresh work tree ``tree`` (``restore``:
    the cache entries restored first). Returns the processes, the offline preview and
    how many cache entries the round added: Specs (its compiles), test and check
    results (the stacks it tested and checked)."""
    git(repo, "worktree", "add", "--detach", "-q", str(tree), head)
    if restore is not None:
        shutil.copytree(restore, tree / ".cache/konfig/compile")
    kinds = {"compile": None, "test": "test", "check": "check"}
    before = {name: entries(tree, kind) for name, kind in kinds.items()}
    stacks = json.loads(
        subprocess.run(
            [*KONFIG, "changed", "--base", "main", "--head", head, "--json"],
            cwd=tree, env=ENV, capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    paths = [s["path"] for s in stacks["stacks"]]
    out = tree.parent / f"{tree.name}-out"
    out.mkdir()
    offline = ["preview", "--offline", "--base", "main", "--head", head, "--format", "json",
               "--base-specs", str(base_specs), "--base-cache", str(out / "base-cache"),
               "--out", str(out / "offline.json")]  # fmt: skip
    procs = [
        timed("offline preview (base + merge)", offline, tree, ok=(0, 1)),
        timed("compile --out (head)", ["compile", "--out", str(out / "specs"), "--", *paths], tree),
        timed("test", ["test", "--json", "--", *paths], tree, ok=(0, 1)),
        timed("check", ["check", "--format", "json", "--", *paths], tree, ok=(0, 1)),
    ]
    doc = json.loads((out / "offline.json").read_text(encoding="utf-8"))
    added = {name: len(entries(tree, kind) - before[name]) for name, kind in kinds.items()}
    return procs, doc, added


def comparable(offline: dict[str, Any]) -> Any:
    """The offline preview without what differs between two runs of it (timings)."""
    return [(s["path"], s["status"], s.get("changes")) for s in offline["stacks"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stacks", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    figures: dict[str, Any] = {"stacks": args.stacks, "load_before": os.getloadavg()}
    say(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-incremental-") as tmp_name:
        tmp = Path(tmp_name)
        projects = -(-args.stacks // PER_PROJECT)
        made = generate(
            tmp / "repo", projects=int(projects), stacks_per_project=PER_PROJECT, seed=args.seed
        )
        repo = made.root
        say(f"{made.stacks} stacks; goldens on main (konfig test --update --all)")
        timed("setup", ["test", "--update", "--all"], repo)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "goldens")
        base_specs = tmp / "base-specs"
        timed("setup", ["compile", "--all", "--out", str(base_specs), "--no-cache"], repo)
        make_pr(repo)  # branch pr: the base model's limits
        git(repo, "checkout", "-q", "pr")
        timed("setup", ["test", "--update", "--all"], repo)
        git(repo, "commit", "-qam", "pr: goldens")
        first = git(repo, "rev-parse", "HEAD")
        one = sorted(repo.glob("appops/*/*/main.k"))[0]
        text = one.read_text(encoding="utf-8")
        edited = text.replace('"ENV" = ', '"PUSH" = "two", "ENV" = ', 1)
        if edited == text:
            raise SystemExit(f"{one}: no ENV to add a variable beside")
        one.write_text(edited, encoding="utf-8")
        timed("setup", ["test", "--update", str(one.parent.relative_to(repo))], repo)
        git(repo, "commit", "-qam", "pr: one stack")
        second = git(repo, "rev-parse", "HEAD")
        git(repo, "checkout", "-q", "main")

        say("the first push, empty cache")
        procs1, _, added1 = one_round(repo, tmp / "push1", first, base_specs, None)
        artifact = tmp / "push1/.cache/konfig/compile"
        say(f"first push: cache entries added {added1} (the artifact)")
        say("the second push, cold (the peer)")
        cold, cold_offline, added_cold = one_round(repo, tmp / "cold", second, base_specs, None)
        load_mid = os.getloadavg()
        say("the second push, warm (the first push's entries restored)")
        warm, warm_offline, added_warm = one_round(repo, tmp / "warm", second, base_specs, artifact)
        same = comparable(cold_offline) == comparable(warm_offline)
        figures.update(
            first_push=[asdict(p) for p in procs1],
            cold=[asdict(p) for p in cold],
            warm=[asdict(p) for p in warm],
            entries={"first": added1, "cold": added_cold, "warm": added_warm},
            offline_same=same,
            stacks_previewed=len(warm_offline["stacks"]),
            load_mid=load_mid,
            load_after=os.getloadavg(),
        )
        git(repo, "worktree", "prune")
    rows = ["| step | cold wall | cold CPU | warm wall | warm CPU | warm/cold CPU |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for c, w in zip(cold, warm, strict=True):
        rows.append(
            f"| {c.name} | {c.wall:.2f} s | {c.cpu:.2f} s | {w.wall:.2f} s | {w.cpu:.2f} s "
            f"| {w.cpu / c.cpu:.2f} |"
        )
    cw, cc = sum(p.wall for p in cold), sum(p.cpu for p in cold)
    ww, wc = sum(p.wall for p in warm), sum(p.cpu for p in warm)
    rows.append(f"| all four | {cw:.2f} s | {cc:.2f} s | {ww:.2f} s | {wc:.2f} s | {wc / cc:.2f} |")
    print("\n".join(rows))
    print(
        f"stacks previewed: {figures['stacks_previewed']}; cache entries added (Specs, test "
        f"results, check results): first push {added1}, second push cold {added_cold}, "
        f"warm {added_warm}; the two offline previews equal: {same}"
    )
    print(
        f"load (1, 5, 15 min) before {tuple(round(x, 1) for x in figures['load_before'])}, "
        f"between {tuple(round(x, 1) for x in load_mid)}, "
        f"after {tuple(round(x, 1) for x in figures['load_after'])}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str) + "\n", encoding="utf-8")
    # the warm push compiles, tests and checks the changed stack only (at the merge = at
    # the head: one compile key)
    only_one = all(n <= 2 for n in added_warm.values())
    return 0 if same and only_one and figures["stacks_previewed"] == made.stacks else 1


if __name__ == "__main__":
    sys.exit(main())
