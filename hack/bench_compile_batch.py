#!/usr/bin/env python3
"""Cold compile of a large generated repository: batches vs a KCL process per stack.

Usage: .venv/bin/python hack/bench_compile_batch.py [--stacks 1000] [--projects 300]
       [--seed 42] [--jobs 2] [--sample 40] [--repo DIR]

Generates the repository with hack/gen_monorepo.py (unless ``--repo`` names one made
earlier) and runs, as child processes, CPU seconds (``getrusage`` of the children:
konfig and its worker processes), wall time and peak RSS (the largest process) each:

1. ``konfig compile --all --no-cache -jJ -o OUT``: the cold compile of every stack;
2. the same for the first quarter and half of the stacks (by address): peak RSS must
   stay flat as the number of stacks grows;
3. ``KONFIG_COMPILE_BATCH=0 konfig compile <sample> --no-cache -o OUT``: a sample of
   stacks with a KCL run per stack inside konfig (what konfig did before batches);
4. the peer: one process per sampled stack that loads kcl-lib and compiles the same
   entry files with the same options (``exec_program``), nothing else;

then checks that the sample's Specs from (1) and (3) are byte-identical and prints
the goals of issue #13: cold compile CPU per stack <= 50 ms; konfig's CPU per stack
<= 0.2x the peer's. Runs (3) and (4) alternate stack by stack so that load changes
hit both alike.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))

from gen_monorepo import generate  # noqa: E402

from konfig.build.compiler import compile_input  # noqa: E402
from konfig.repo.layout import discover  # noqa: E402

KONFIG = [sys.executable, "-m", "konfig"]
PEER = """\
import json, sys
import kcl_lib.api as api
files, work_dir, options = json.loads(sys.argv[1])
args = api.ExecProgramArgs(
    k_filename_list=files,
    work_dir=work_dir,
    args=[api.Argument(name=k, value=json.dumps(v)) for k, v in options],
)
result = api.API().exec_program(args)
sys.exit(1 if result.err_message else 0)
"""


@dataclass
class Run:
    cpu: float
    wall: float
    rss_mb: float


def child(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Run:
    """Run ``cmd``: CPU seconds of it and every process it waited for (konfig's workers),
    wall seconds, and the peak RSS of the largest of them (``os.wait4``)."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"failed: {' '.join(cmd)}\n{err.read().decode()[-3000:]}")
    return Run(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024)


def show(label: str, run: Run, stacks: int) -> None:
    print(
        f"{label:<46} {run.cpu:7.2f} s CPU {run.wall:7.2f} s wall "
        f"{run.cpu / stacks * 1000:7.1f} ms CPU/stack  peak RSS {run.rss_mb:5.0f} MB",
        flush=True,
    )


def same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    return all(same_tree(a / d, b / d) for d in cmp.common_dirs)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stacks", type=int, default=1000)
    parser.add_argument("--projects", type=int, default=300)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--repo", type=Path, default=None)
    args = parser.parse_args()

    if args.repo is None:
        root = Path(f"/tmp/konfig-bench-batch-{args.stacks}")
        shutil.rmtree(root, ignore_errors=True)
        made = generate(
            root,
            projects=args.projects,
            stacks_per_project=args.stacks / args.projects + 1e-9,
            seed=args.seed,
            git=False,
        )
        print(f"generated {made.projects} projects / {made.stacks} stacks in {root}")
    else:
        root = args.repo.resolve()
        if not (root / "appops").is_dir():
            parser.error(f"--repo {args.repo}: no generated repository there (no appops/); "
                         "leave --repo out to generate one")  # fmt: skip
    repo = discover(root)
    stacks = [s.path for s in repo.stacks]
    n = len(stacks)
    out = root.parent / f"{root.name}-out"
    shutil.rmtree(out, ignore_errors=True)
    print(f"load average before: {os.getloadavg()}", flush=True)

    base = [*KONFIG, "compile", "--no-cache", f"-j{args.jobs}"]
    for part in (n // 4, n // 2):
        run = child([*base, "-o", str(out / f"part{part}"), *stacks[:part]], root)
        show(f"cold, {part} stacks (batched)", run, part)
    cold = child([*base, "--all", "-o", str(out / "all")], root)
    show(f"cold, all {n} stacks (batched)", cold, n)

    step = max(1, n // args.sample)
    sample = stacks[::step][: args.sample]
    alone_env = {**os.environ, "KONFIG_COMPILE_BATCH": "0"}
    alone_cpu = peer_cpu = 0.0
    for stack in sample:  # interleaved: konfig alone, then the peer, stack by stack
        run = child([*base, "-o", str(out / "alone"), stack], root, alone_env)
        alone_cpu += run.cpu
        item = compile_input(repo, repo.stack(stack))
        payload = json.dumps([list(item.files), str(root / stack), list(item.options)])
        peer_cpu += child([sys.executable, "-c", PEER, payload], root).cpu
    k = len(sample)
    print(
        f"{'sample of ' + str(k) + ', a KCL run per stack in konfig':<46} {alone_cpu:7.2f} s CPU"
        f"{'':19}{alone_cpu / k * 1000:7.1f} ms CPU/stack"
    )
    print(
        f"{'sample of ' + str(k) + ', peer: a process per stack':<46} {peer_cpu:7.2f} s CPU"
        f"{'':19}{peer_cpu / k * 1000:7.1f} ms CPU/stack"
    )
    identical = all(same_tree(out / "alone" / s, out / "all" / s) for s in sample)
    per_stack = cold.cpu / n
    ratio = per_stack / (peer_cpu / k)
    print()
    print(f"sample Specs byte-identical, batched vs a run per stack: {identical}")
    print(f"cold compile CPU per stack: {per_stack * 1000:.1f} ms (goal <= 50 ms)")
    print(f"konfig vs a KCL process per stack: {ratio:.3f}x CPU (goal <= 0.2x)")
    print(f"load average after: {os.getloadavg()}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
