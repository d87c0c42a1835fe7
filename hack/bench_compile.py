#!/usr/bin/env python3
"""Compile throughput of the example stacks, and konfig's overhead over bare kcl-lib.

Usage: .venv/bin/python hack/bench_compile.py [--rounds N] [--root DIR]

Reports, for every stack in the repository (repeated ``--rounds`` times so the
numbers are not dominated by a handful of stacks):
  * stacks/second through ``konfig.build.compiler.compile_many`` at -j1 and -j2;
  * stacks/second of the ``konfig compile --all`` command end to end (process start,
    discovery, compile, writing specs) at -j1 and -j2;
  * per-stack median time of a bare ``kcl_lib`` ``exec_program`` call on the same entry
    files and options vs ``konfig.build.compiler.compile_one`` (the tool's overhead: settings,
    error handling, Spec validation and canonicalisation).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kcl_lib.api as kcl_api

from konfig.build.compiler import compile_input, compile_many, compile_one
from konfig.repo.layout import discover


def bare_kcl(
    files: tuple[str, ...], work_dir: str, options: tuple[tuple[str, object], ...]
) -> None:
    api = kcl_api.API()
    args = kcl_api.ExecProgramArgs(
        k_filename_list=list(files),
        work_dir=work_dir,
        args=[kcl_api.Argument(name=k, value=json.dumps(v)) for k, v in options],
    )
    result = api.exec_program(args)
    if result.err_message:
        raise SystemExit(f"bare kcl-lib failed: {result.err_message}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ns = parser.parse_args()

    repo = discover(ns.root)
    inputs = [compile_input(repo, s) for s in repo.stacks]
    work = inputs * ns.rounds
    # warm up imports and the KCL runtime once
    compile_many(inputs, jobs=1)

    print(
        f"repository: {ns.root}  stacks: {len(inputs)}  rounds: {ns.rounds}  "
        f"compiles per run: {len(work)}"
    )
    for jobs in (1, 2):
        # compile_many keys results by stack path; run the rounds as separate batches
        started = time.perf_counter()
        for _ in range(ns.rounds):
            results = compile_many(inputs, jobs=jobs)
            assert all(r.ok for r in results), [str(r.error) for r in results if not r.ok]
        elapsed = time.perf_counter() - started
        print(
            f"compile_many -j{jobs}: {len(work) / elapsed:8.1f} stacks/s "
            f"({elapsed:.2f} s for {len(work)})"
        )

    konfig = Path(sys.executable).parent / "konfig"
    for jobs in (1, 2):
        runs = []
        for _ in range(5):
            with tempfile.TemporaryDirectory() as out:
                started = time.perf_counter()
                subprocess.run(
                    [
                        str(konfig),
                        "--root",
                        str(ns.root),
                        "compile",
                        "--all",
                        "-j",
                        str(jobs),
                        "-o",
                        out,
                        "--no-cache",
                    ]
                    if _has_no_cache(konfig)
                    else [
                        str(konfig),
                        "--root",
                        str(ns.root),
                        "compile",
                        "--all",
                        "-j",
                        str(jobs),
                        "-o",
                        out,
                    ],
                    check=True,
                    capture_output=True,
                )
                runs.append(time.perf_counter() - started)
        median = statistics.median(runs)
        print(
            f"konfig compile --all -j{jobs} (CLI, median of 5): {median:.3f} s = "
            f"{len(inputs) / median:.1f} stacks/s"
        )

    bare, tool = [], []
    for _ in range(ns.rounds):
        for item in inputs:
            t0 = time.perf_counter()
            bare_kcl(item.files, str(ns.root / item.stack_path), item.options)
            t1 = time.perf_counter()
            result = compile_one(item)
            t2 = time.perf_counter()
            assert result.ok
            bare.append(t1 - t0)
            tool.append(t2 - t1)
    b, t = statistics.median(bare), statistics.median(tool)
    print(
        f"per stack median: bare kcl-lib {b * 1000:.2f} ms, konfig compile_one "
        f"{t * 1000:.2f} ms, overhead {(t - b) * 1000:+.2f} ms ({(t / b - 1) * 100:+.0f} %)"
    )
    return 0


def _has_no_cache(konfig: Path) -> bool:
    out = subprocess.run([str(konfig), "compile", "--help"], capture_output=True, text=True)
    return "--no-cache" in out.stdout


if __name__ == "__main__":
    sys.exit(main())
