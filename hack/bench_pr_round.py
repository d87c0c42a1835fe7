#!/usr/bin/env python3
"""The pull-request round on the local forge: push -> comment, and where the time goes.

    .venv/bin/python hack/bench_pr_round.py [--keep-log FILE]

Runs the forge end-to-end test of a one-stack pull request
(``tools/tests/test_forge_e2e.py -k one_stack``: a real Gitea, five act_runners, the
repository's unmodified workflows, a local control plane), which opens the pull request,
pushes once more and merges, and prints what it timed: PR opened -> placeholder and
-> comment, second push -> comment, merge -> apply, the forge's CPU seconds, and each
round split over its critical path (waiting, job start, tools, artifacts, konfig,
other: ``tools/tests/fixtures/timeline.py``), with the load average before and after.
It takes 10 minutes or more and starts (and stops) its own forge and clusters.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "forge e2e timings (s):"
PYTEST = (sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider")


def timings(output: str) -> dict[str, float]:
    """The JSON object the test module prints after ``MARK``."""
    start = output.rfind(MARK)
    if start < 0:
        raise ValueError("the test printed no timings")
    text = output[start + len(MARK) :]
    data, _ = json.JSONDecoder().raw_decode(text.lstrip())
    return {str(k): float(v) for k, v in data.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep-log", type=Path, help="write the test's whole output here")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    res = subprocess.run(
        [*PYTEST, "tools/tests/test_forge_e2e.py", "-k", "one_stack"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    output = res.stdout + res.stderr
    if args.keep_log:
        args.keep_log.write_text(output, encoding="utf-8")
    print(f"load average after: {os.getloadavg()}")
    if res.returncode != 0:
        print(output[-4000:], file=sys.stderr)
        print(f"the test failed (exit {res.returncode})", file=sys.stderr)
        return 1
    for name, value in timings(output).items():
        print(f"{value:10.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
