#!/usr/bin/env python3
"""Start-up cost of the konfig CLI: CPU seconds of short commands, and what they import.

Usage: .venv/bin/python hack/bench_startup.py [--runs 15] [--root DIR]

Runs each command ``--runs`` times as a child process (interleaved, so changes in
machine load hit all of them alike) and prints the median and minimum CPU seconds
(user + system, ``os.wait4``) and wall seconds:

* ``python -c pass`` and ``python -c "import click"``: the floor any Python CLI pays;
* ``konfig --version``; ``konfig list`` in ``--root`` (default: this repository);
* ``konfig compile --help`` (loads the compile command) and ``konfig preview --help``.

Then, for ``konfig --version`` and ``konfig list``, the heaviest imports by
``python -X importtime`` (cumulative microseconds, one run: indicative only).
Goal (issue #13): ``konfig --version`` and ``konfig list`` <= 0.08 s CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """CPU and wall seconds of one run of ``cmd``."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"failed: {' '.join(cmd)}\n{err.read().decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def heaviest(cmd: list[str], cwd: Path, top: int = 8) -> list[tuple[int, str]]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *cmd], cwd=cwd, capture_output=True, text=True
    )
    rows: list[tuple[int, str]] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        try:
            rows.append((int(cumulative), name.rstrip()))
        except ValueError:
            continue
    top_level = [(us, n) for us, n in rows if not n.startswith("  ")]
    return sorted(top_level, reverse=True)[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    konfig = [sys.executable, "-m", "konfig"]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import click'": [sys.executable, "-c", "import click"],
        "konfig --version": [*konfig, "--version"],
        "konfig list": [*konfig, "--root", str(args.root), "list"],
        "konfig compile --help": [*konfig, "compile", "--help"],
        "konfig preview --help": [*konfig, "preview", "--help"],
    }
    print(f"load average before: {os.getloadavg()}")
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    wall: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            c, w = run(cmd, args.root)
            cpu[name].append(c)
            wall[name].append(w)
    for name in commands:
        print(
            f"{name:<28} CPU median {statistics.median(cpu[name]):.3f} s "
            f"min {min(cpu[name]):.3f} s   wall median {statistics.median(wall[name]):.3f} s"
        )
    for name in ("konfig --version", "konfig list"):
        print(f"\nheaviest imports of `{name}` (python -X importtime, cumulative):")
        for us, module in heaviest(commands[name][1:], args.root):
            print(f"  {us / 1000:7.1f} ms  {module.strip()}")
    print(f"\nload average after: {os.getloadavg()}")
    goal = max(statistics.median(cpu["konfig --version"]), statistics.median(cpu["konfig list"]))
    print(f"goal: konfig --version and konfig list <= 0.080 s CPU: median max {goal:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
