#!/usr/bin/env python3
"""Cost of `konfig check` and `konfig test` per stack, by stage, on a generated monorepo.

Usage: .venv/bin/python hack/bench_check.py [--projects N] [--stacks-per-project M]

Generates a monorepo (hack/gen_monorepo.py, no git), compiles every stack once, then
times each check stage per stack in process (structure for the whole repository;
spec rules, Kubernetes schema, KCL policies one stack per run, golden comparison per
stack), the batched policy evaluation `konfig check` uses, and finally the commands
end to end (`konfig check --all`, `konfig test --all`, -j1 and the default). Prints
the command, the medians and the totals.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))

from konfig.build import golden  # noqa: E402
from konfig.build.compiler import compile_input, compile_many  # noqa: E402
from konfig.check.kinds import scan_repository  # noqa: E402
from konfig.check.policy import PolicyJob, check_policies, check_policies_many  # noqa: E402
from konfig.check.schema import check_schema  # noqa: E402
from konfig.check.specrules import check_spec  # noqa: E402
from konfig.check.structure import check_structure  # noqa: E402
from konfig.repo.layout import discover  # noqa: E402


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.2f} ms, total {sum(values):.2f} s"


def _run(cmd: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=False, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--stacks-per-project", type=float, default=3)
    args = parser.parse_args()
    print("$ " + " ".join([sys.executable, *sys.argv]))
    with tempfile.TemporaryDirectory(prefix="konfig-bench-check-") as tmp:
        root = Path(tmp) / "repo"
        subprocess.run(
            [
                sys.executable,
                str(HERE / "gen_monorepo.py"),
                "--projects",
                str(args.projects),
                "--stacks-per-project",
                str(args.stacks_per_project),
                "--no-git",
                str(root),
            ],
            check=True,
            capture_output=True,
        )
        repo = discover(root)
        stacks = {s.path: s for s in repo.stacks}
        results = compile_many([compile_input(repo, s) for s in repo.stacks], jobs=1)
        ok = [r for r in results if r.spec is not None]
        resources = sum(len(r.spec.resources) for r in ok if r.spec)
        print(f"{len(repo.stacks)} stacks ({len(ok)} compiled), {resources} resources")
        print(f"per stack compile: {_ms([r.seconds for r in results])} (for scale)")

        started = time.perf_counter()
        check_structure(repo)
        kinds = scan_repository(root)
        print(f"structure + CRD scan (whole repo): {time.perf_counter() - started:.3f} s")
        timings: dict[str, list[float]] = {"spec": [], "schema": [], "policy": [], "golden": []}
        for r in ok:
            assert r.spec is not None
            stack = stacks[r.stack_path]
            for name, fn in (
                ("spec", lambda: check_spec(root, stack, r.spec, kinds)),  # noqa: B023
                ("schema", lambda: check_schema(root, stack, r.spec, kinds, "1.32")),  # noqa: B023
                (
                    "policy",
                    lambda: check_policies(root, stack, r.spec, dict(r.inputs.options)),  # noqa: B023
                ),
                ("golden", lambda: golden.compare(stack.path, r.spec, r.spec.to_yaml())),  # noqa: B023
            ):
                t0 = time.perf_counter()
                fn()
                timings[name].append(time.perf_counter() - t0)
        for name, values in timings.items():
            print(f"per stack {name:7}: {_ms(values)}")
        jobs = [
            PolicyJob(stacks[r.stack_path], r.spec, dict(r.inputs.options))
            for r in ok
            if r.spec is not None and r.inputs is not None
        ]
        t0 = time.perf_counter()
        check_policies_many(root, jobs)
        batched = time.perf_counter() - t0
        print(
            f"policies batched ({len(jobs)} stacks, 50 per KCL run): {batched:.2f} s "
            f"({batched / max(1, len(jobs)) * 1000:.2f} ms/stack)"
        )

        konfig = str(Path(sys.executable).with_name("konfig"))
        subprocess.run(
            [konfig, "test", "--all", "--update", "--no-unit"],
            cwd=root,
            check=False,
            capture_output=True,
        )
        for cmd in (
            [konfig, "check", "--all", "-j", "1"],
            [konfig, "check", "--all"],
            [konfig, "test", "--all", "-j", "1"],
            [konfig, "test", "--all"],
        ):
            seconds = _run(cmd, root)
            per = seconds / max(1, len(repo.stacks)) * 1000
            print(f"{' '.join(['konfig', *cmd[1:]])}: {seconds:.2f} s ({per:.1f} ms/stack)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
