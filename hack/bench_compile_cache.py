#!/usr/bin/env python3
"""Benchmark the compile cache and parallel compile on a generated monorepo.

Usage: .venv/bin/python hack/bench_compile_cache.py [--projects 60] [--stacks 200]
       [--seed 42] [--repo DIR] [--warm-runs 9]

Runs, as child processes in the generated repository, each writing every Spec to a
directory:

1. ``konfig compile --all -j1 --out cold``      empty cache: compiles and fills it
2. ``konfig compile --all -j1 --out warm``      unchanged repository: every Spec from cache,
   then ``--warm-runs`` more times (median and min CPU: the issue #13 figure)
3. one stack's ``main.k`` edited, then ``konfig compile --all -j1 --out edit``: one
   stack recompiles, the rest come from the cache
4. ``konfig compile --all --no-cache -j1`` and ``-j2``: the parallel speed-up

each with wall seconds, CPU seconds (konfig and its worker processes) and peak RSS, and
checks that cold, warm and the uncached runs wrote byte-identical Specs. Targets: warm
>= 20x faster than cold (issue #5); warm <= 0.4 s CPU for 200 stacks (issue #13).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_monorepo import generate  # noqa: E402

KONFIG = [sys.executable, "-m", "konfig"]


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float  # konfig and its worker processes (os.wait4)
    rss_mb: float  # the largest of them

    def __str__(self) -> str:
        return f"{self.wall:8.2f} s wall {self.cpu:7.2f} s CPU  peak RSS {self.rss_mb:4.0f} MB"


def timed(cmd: list[str], cwd: Path) -> Run:
    print(f"$ (cd {cwd} && {' '.join(cmd)})", flush=True)
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        err.seek(0)
        text = err.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({status}):\n{text[-3000:]}")
    run = Run(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
    last = text.strip().splitlines()[-1:] or [""]
    print(f"  {run}  {last[0]}", flush=True)
    return run


def same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    return all(same_tree(a / d, b / d) for d in cmp.common_dirs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--projects", type=int, default=60)
    parser.add_argument("--stacks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repo", type=Path, default=Path("/tmp/konfig-bench-compile"))
    parser.add_argument(
        "--warm-runs", type=int, default=9, help="further warm runs for the median (issue #13)"
    )
    args = parser.parse_args()

    root = args.repo.resolve()
    if root.exists():
        shutil.rmtree(root)
    made = generate(
        root,
        projects=args.projects,
        stacks_per_project=args.stacks / args.projects + 1e-9,
        seed=args.seed,
    )
    print(f"generated {made.projects} projects / {made.stacks} stacks in {root}")
    print(f"load average before: {os.getloadavg()}")
    out = root.parent / f"{root.name}-out"
    shutil.rmtree(out, ignore_errors=True)

    base = [*KONFIG, "compile", "--all"]
    cold = timed([*base, "-j1", "--out", str(out / "cold")], root)
    warm = timed([*base, "-j1", "--out", str(out / "warm")], root)
    again = [timed([*base, "-j1", "--out", str(out / "warm")], root) for _ in range(args.warm_runs)]
    stack = sorted(root.glob("appops/*/*/main.k"))[0]
    stack.write_text(stack.read_text().replace('namespace = "', 'namespace = "edited-', 1))
    edit = timed([*base, "-j1", "--out", str(out / "edit")], root)
    stack.write_text(stack.read_text().replace('namespace = "edited-', 'namespace = "', 1))
    j1 = timed([*base, "--no-cache", "-j1", "--out", str(out / "j1")], root)
    j2 = timed([*base, "--no-cache", "-j2", "--out", str(out / "j2")], root)

    identical = all(same_tree(out / "cold", out / other) for other in ("warm", "j1", "j2"))

    print(f"\nstacks: {made.stacks}")
    print(f"cold (empty cache, -j1):  {cold}")
    print(f"warm (unchanged, -j1):    {warm}  -> {cold.wall / warm.wall:.1f}x faster than cold")
    if again:
        cpu = sorted(r.cpu for r in again)
        wall = sorted(r.wall for r in again)
        print(
            f"warm, {len(again)} more runs:     CPU median {statistics.median(cpu):.2f} s "
            f"(min {cpu[0]:.2f}, max {cpu[-1]:.2f}), wall median {statistics.median(wall):.2f} s"
        )
    print("                          (goal, issue #13: warm <= 0.4 s CPU)")
    print(f"warm with 1 stack edited: {edit}")
    print(f"no cache -j1:             {j1}")
    print(f"no cache -j2:             {j2}  -> {j1.wall / j2.wall:.2f}x faster wall than -j1")
    print(f"cold, warm, -j1 and -j2 Specs byte-identical: {identical}")
    print(f"load average after: {os.getloadavg()}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
