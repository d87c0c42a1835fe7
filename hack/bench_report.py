#!/usr/bin/env python3
"""Benchmark `konfig report` on many stacks: one repeated change plus exceptions.

    .venv/bin/python hack/bench_report.py [--stacks 2000] [--exceptions 5] [--runs 5]

Builds the preview JSON of ``--stacks`` stacks (``tools/tests/fleet.py``: each change
computed by the real comparison; every stack bumps one image, the exceptions are a
stack whose image moves from another version, stacks that also delete a ConfigMap and
a stack that does not compile), writes it with ``changed.json`` and ``compile.json``
to a temporary directory, then measures, each the median of ``--runs``, wall time and
CPU time side by side:

* in process: reading the JSON and building the report, grouping the changes, the
  grouped comment, the per-stack comment of the same report (the peer: what the
  comment cost before grouping), the job summary (grouped overview and every stack)
  and ``--json``;
* end to end: ``konfig report --results DIR --sha S --out F --full-out G`` as a
  fresh process (CPU time of the child from ``os.wait4``).

Goal (issue 17): the comment for 2,000 stacks in at most 2 s end to end.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools" / "tests"))

from fleet import Fleet, change, configmap, deployment, set_image  # noqa: E402

from konfig.report import comment, pull_request, records  # noqa: E402
from konfig.report.budget import SUMMARY_LIMIT_BYTES, chars  # noqa: E402

T = TypeVar("T")
NEW = "nginx:1.27.4"
ENVS = ("dev", "staging", "prod", "qa")


def older(project: str, env: str) -> list[dict[str, Any]]:
    live = deployment(project, env, image="nginx:1.26.0")
    planned = copy.deepcopy(live)
    set_image(NEW)(planned)
    return [change(live, planned)]


def drops(project: str, env: str) -> list[dict[str, Any]]:
    gone = configmap(project, env, "legacy", {"mode": "old"})
    return [*Fleet(0, edits=[set_image(NEW)]).standard(project, env), change(gone, None)]


def scenario(stacks: int, exceptions: int) -> tuple[Fleet, dict[str, str]]:
    fleet = Fleet(max(1, stacks // len(ENVS)), envs=ENVS, edits=[set_image(NEW)])
    paths = fleet.paths()
    step = max(1, len(paths) // (exceptions + 1))
    broken: dict[str, str] = {}
    for i in range(exceptions):
        path = paths[step * (i + 1) - 1]
        kind = i % 3
        if kind == 0:
            fleet.special[path] = older
        elif kind == 1:
            fleet.special[path] = drops
        else:
            message = f"compile failed: expected int, got str(two)\n  --> {path}/main.k:6:5"
            fleet.special[path] = {"message": message, "file": f"{path}/main.k", "line": 6}
            broken[path] = message
    return fleet, broken


def timed(fn: Callable[[], T], runs: int) -> tuple[float, float, T]:
    """Median wall and CPU seconds of ``runs`` calls, and the last result."""
    walls, cpus = [], []
    result: Any = None
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), result


def child(cmd: list[str], runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        cpus.append(usage.ru_utime + usage.ru_stime)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(
                f"{' '.join(cmd)} failed: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stacks", type=int, default=2000)
    parser.add_argument("--exceptions", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    fleet, broken = scenario(args.stacks, args.exceptions)
    work = Path(tempfile.mkdtemp(prefix="konfig-bench-report-"))
    compiled = [
        {"path": p, "ok": False, "error": {"message": m, "file": f"{p}/main.k", "line": 6}}
        for p, m in broken.items()
    ]
    (work / "preview.json").write_text(json.dumps(fleet.preview()))
    (work / "changed.json").write_text(json.dumps(fleet.changed()))
    (work / "compile.json").write_text(json.dumps(compiled))
    size = (work / "preview.json").stat().st_size
    sha = "0" * 40

    def load() -> records.Report:
        inputs = pull_request.Inputs(
            previews=[json.loads((work / "preview.json").read_text())],
            changed=json.loads((work / "changed.json").read_text()),
            compile=[json.loads((work / "compile.json").read_text())],
        )
        return pull_request.build(inputs, sha=sha)

    def grouped() -> Any:
        report = load()
        return report.grouping

    report = load()
    _ = report.grouping
    rows: list[tuple[str, float, float, str]] = []
    w, c, _ = timed(load, args.runs)
    rows.append(("read JSON + build report", w, c, f"{len(fleet.paths())} stacks, {size:,} bytes"))
    wg, cg, grouping = timed(grouped, args.runs)
    rows.append(("  + group the changes", wg - w, cg - c, f"{len(grouping.groups)} groups, "
                 f"{len(grouping.exceptions)} exceptions"))  # fmt: skip
    w, c, shown = timed(lambda: comment.render(report), args.runs)
    rows.append(("comment, grouped", w, c, f"{chars(shown.text):,} characters, "
                 f"truncated: {shown.truncated}"))  # fmt: skip
    w, c, peer = timed(lambda: comment.render(report, layout="stacks"), args.runs)
    rows.append(("comment, per stack (peer)", w, c, f"{chars(peer.text):,} characters, "
                 f"truncated: {peer.truncated}, {len(peer.omitted)} diffs left out"))  # fmt: skip
    w, c, full = timed(
        lambda: comment.render_full(report, budget=SUMMARY_LIMIT_BYTES - 1024), args.runs
    )
    rows.append(
        ("job summary (overview + every stack)", w, c, f"{len(full.text.encode()):,} bytes")
    )
    w, c, data = timed(lambda: json.dumps(comment.to_json(report)), args.runs)
    rows.append(("--json", w, c, f"{len(data):,} bytes"))

    konfig = str(Path(sys.executable).parent / "konfig")
    cmd = [konfig, "report", "--results", str(work), "--sha", sha,
           "--out", str(work / "comment.md"), "--full-out", str(work / "full.md")]  # fmt: skip
    w, c = child(cmd, args.runs)
    rows.append(("konfig report (process, end to end)", w, c, "comment + full report"))

    print(f"command: .venv/bin/python hack/bench_report.py --stacks {args.stacks} "
          f"--exceptions {args.exceptions} --runs {args.runs}")  # fmt: skip
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'':38} {'wall':>9} {'cpu':>9}")
    for name, wall, cpu, note in rows:
        print(f"{name:38} {wall * 1000:7.0f}ms {cpu * 1000:7.0f}ms   {note}")
    ratio = rows[2][1] / rows[3][1] if rows[3][1] else float("nan")
    print(f"grouped / per-stack comment, wall: {ratio:.2f}")
    for p in work.iterdir():
        p.unlink()
    work.rmdir()


if __name__ == "__main__":
    main()
