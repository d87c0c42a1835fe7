#!/usr/bin/env python3
"""Benchmark `konfig report` rendering: many stacks, large diffs, both budgets.

    .venv/bin/python hack/bench_report.py [--stacks 1000] [--lines 40]

Prints the time to build the report model and to render the comment (60,000
characters) and the step summary (1 MiB), and the sizes produced.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from konfig.report import budget, pull_request


def preview(stacks: int, lines: int) -> dict[str, Any]:
    items = []
    for i in range(stacks):
        ns = f"bench-{i:04d}"
        diff = f"--- live/v1:ConfigMap:{ns}:c\n+++ planned/v1:ConfigMap:{ns}:c\n@@ -1 +1 @@\n"
        diff += "".join(f"-  key{j}: old-{j}\n+  key{j}: new-{j}\n" for j in range(lines))
        counts = {"create": 0, "update": 1, "replace": 0, "delete": 0, "unchanged": 2}
        items.append(
            {
                "path": f"appops/p{i % 50:02d}/s{i:04d}",
                "deleted": False,
                "status": "ok",
                "error": None,
                "counts": counts,
                "changes": [
                    {
                        "id": f"v1:ConfigMap:{ns}:c",
                        "kind": "ConfigMap",
                        "namespace": ns,
                        "name": "c",
                        "action": "update",
                        "reason": "data changed",
                        "validated": True,
                        "diff": diff,
                    }
                ],
            }
        )
    return {"schemaVersion": 1, "kind": "KonfigPreview", "stacks": items}


def timed(fn: Any, repeat: int = 5) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stacks", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=40)
    args = parser.parse_args()
    inputs = pull_request.Inputs(previews=[preview(args.stacks, args.lines)])
    t_build, built = timed(lambda: pull_request.build(inputs, sha="0" * 40))
    t_comment, comment = timed(lambda: pull_request.render(built))
    t_summary, summary = timed(
        lambda: pull_request.render(
            built, budget=budget.SUMMARY_LIMIT_BYTES - 1024, measure=budget.utf8_bytes
        )
    )
    command = f"hack/bench_report.py --stacks {args.stacks} --lines {args.lines}"
    print(f"command: .venv/bin/python {command}")
    print(f"stacks: {args.stacks}, diff lines per stack: {2 * args.lines}")
    print(f"build:   {t_build * 1000:8.1f} ms (median of 5)")
    print(
        f"comment: {t_comment * 1000:8.1f} ms, {len(comment.text)} chars, "
        f"{args.stacks - len(comment.omitted)} stacks with full diffs, "
        f"{comment.text.count('<details')} sections"
    )
    print(
        f"summary: {t_summary * 1000:8.1f} ms, {len(summary.text.encode())} bytes, "
        f"{args.stacks - len(summary.omitted)} stacks with full diffs"
    )


if __name__ == "__main__":
    main()
