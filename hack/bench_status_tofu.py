#!/usr/bin/env python3
"""Benchmark: what the Terraform refresh costs `konfig status` and `konfig drift` over
several stacks with a database, against `--terraform state` and `--terraform skip`.

Starts the local control plane (`hack/cluster up`) and OpenTofu with PostgreSQL
(`hack/tofu up`) in directories of its own, builds a temporary Konfig repository with
N stacks (`--stacks`, default 4), each a Server with a database (role, database,
pgcrypto), applies them once, then times, interleaved, each a fresh process:

    konfig status --json --terraform refresh   (every stack: N OpenTofu refreshes,
                                                two stacks at a time, the default)
    konfig status --json --terraform-concurrency 1, and 4   (one at a time, four)
    konfig status bench0/dev --json            (one stack: one refresh)
    konfig status --json --terraform state     (the state Secrets only: no OpenTofu)
    konfig status --json --terraform skip      (no Terraform at all)
    konfig drift --json [--terraform skip]     (the same for drift)

It prints medians (min-max) of wall time and of CPU (user+sys of konfig and its
children: tofu, the provider plugin) and the load average.

    .venv/bin/python hack/bench_status_tofu.py [--stacks 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "hack"))

from bench_tofu import MAIN, STACK, repository, run, start, summary, teardown  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stacks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="konfig-bench-status-tofu-"))
    env = dict(
        os.environ, KONFIG_CLUSTER_DIR=str(work / "cluster"), KONFIG_TOFU_DIR=str(work / "tofu")
    )
    env.pop("KUBECONFIG", None)
    try:
        kubeconfig, _ = start(work, env)
        root = repository(work)
        addresses = []
        for i in range(args.stacks):
            project = root / "appops" / f"bench{i}"
            (project / "dev").mkdir(parents=True)
            (project / "project.yaml").write_text(f"name: bench{i}\n")
            (project / "dev" / "stack.yaml").write_text(STACK)
            (project / "dev" / "main.k").write_text(
                MAIN.format(limit=10).replace('"bench"', f'"bench{i}"')
            )
            addresses.append(f"bench{i}/dev")
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@konfig.invalid"]
        subprocess.run([*git, "init", "-q"], cwd=root, check=True)
        subprocess.run([*git, "add", "-A"], cwd=root, check=True)
        subprocess.run([*git, "commit", "-q", "-m", "bench"], cwd=root, check=True)
        konfig = [str(Path(sys.executable).parent / "konfig"), "--root", str(root)]
        kc = ["--kubeconfig", kubeconfig]
        run([*konfig, "apply", "--all", "--yes", *kc], env=env)

        commands = {
            "status, refresh (all stacks)": ["status", "--json"],
            "status, refresh, 1 at a time": ["status", "--json", "--terraform-concurrency", "1"],
            "status, refresh, 4 at a time": ["status", "--json", "--terraform-concurrency", "4"],
            "status, refresh (one stack)": ["status", addresses[0], "--json"],
            "status --terraform state": ["status", "--json", "--terraform", "state"],
            "status --terraform skip": ["status", "--json", "--terraform", "skip"],
            "drift, refresh (all stacks)": ["drift", "--json"],
            "drift --terraform skip": ["drift", "--json", "--terraform", "skip"],
        }
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
        for index in range(args.rounds + 1):
            for label, argv in commands.items():
                wall, cpu, _ = run([*konfig, *argv, *kc], env=env)
                if index:  # the first round warms the working directories: not counted
                    samples[label].append((wall, cpu))
        load = os.getloadavg()
        print(
            f"bench_status_tofu: {args.stacks} stacks with a database, {args.rounds} "
            f"interleaved rounds, load {load[0]:.1f} (1 min) {load[2]:.1f} (15 min)"
        )
        for label, kept in samples.items():
            summary(label, kept)
        return 0
    finally:
        teardown(work, env)


if __name__ == "__main__":
    raise SystemExit(main())
