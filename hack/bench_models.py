#!/usr/bin/env python3
"""Compile time per example stack: how much the base models cost.

Usage: .venv/bin/python hack/bench_models.py [--rounds N] [--root DIR]

Compiles every stack of the repository at DIR (default: this one) ``--rounds`` times,
in process and one at a time (``konfig.build.compiler.compile_one``, the real kcl-lib
compiler), and prints the median seconds per stack and the median over all stacks.
KCL compiles every imported package for every stack, so this is the number that grows
when the models (and the generated Kubernetes schemas they import) grow. Run it on an
older checkout (``git archive <rev> | tar -x -C /tmp/before``) to compare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from konfig.build.compiler import compile_input, compile_one
from konfig.repo.layout import discover


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    repo = discover(args.root.resolve())
    print(f"$ {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"root {repo.root}, {len(repo.stacks)} stacks, {args.rounds} rounds")
    medians: list[float] = []
    for stack in repo.stacks:
        inputs = compile_input(repo, stack)
        times: list[float] = []
        for _ in range(args.rounds):
            result = compile_one(inputs)
            if result.error is not None:
                print(f"{stack.path}: compile failed: {result.error}", file=sys.stderr)
                return 1
            times.append(result.seconds)
        median = statistics.median(times)
        medians.append(median)
        count = len(result.spec.resources) if result.spec else 0
        print(f"  {stack.path:<28} {median * 1000:8.1f} ms  ({count} resources)")
    print(f"median per stack: {statistics.median(medians) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
