#!/usr/bin/env python3
"""Benchmark: `konfig status` over 50 applied stacks vs the kubectl lists it replaces.

Builds a temporary Konfig repository (a git repository, so the applied commit is
HEAD) of --stacks stacks with --per-stack objects each (a Namespace, then
Deployments, Services and ConfigMaps in turn), applies them once with
`konfig apply --all --yes --no-wait`, then times, alternating, --runs times each:

    konfig status --kubeconfig K                      (one process: inventories, one
                                                       list per kind, health, drift,
                                                       commits behind HEAD)
    kubectl get configmaps -n konfig-system -l ...    (the peer: the same lists with
    kubectl get deploy,svc,cm,ns -A -l part-of        kubectl, two processes)

and prints the median and maximum wall time, the median CPU seconds (user+system of
the child, from wait4), and the konfig/kubectl ratio of the medians. Goal: konfig
status ≤ 2 s wall on the local control plane. The stacks are destroyed afterwards.

    .venv/bin/python hack/bench_status.py [--kubeconfig K] [--stacks 50] [--per-stack 10] [--runs 7]

Without --kubeconfig it starts the local control plane with `hack/cluster up` (in
$KONFIG_CLUSTER_DIR or its default directory) and stops it afterwards if it was not
running before.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_apply import MAIN, cluster, cluster_up, manifests

REPO = Path(__file__).resolve().parent.parent


def measured(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system of the child), stdout."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({code}):\n{stdout}{stderr}")
    return wall, usage.ru_utime + usage.ru_stime, stdout


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@konfig.invalid", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--context", default="admin")
    parser.add_argument("--stacks", type=int, default=50)
    parser.add_argument("--per-stack", type=int, default=10)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--keep", action="store_true", help="keep the repository and the applied stacks"
    )
    args = parser.parse_args()

    kubeconfig, started_cluster = cluster_up(args.kubeconfig)

    work = Path(tempfile.mkdtemp(prefix="konfig-bench-status-"))
    tag = f"s{os.getpid()}"
    konfig_bin = str(Path(sys.executable).parent / "konfig")
    addresses: list[str] = []
    root = work / "repo"
    base = [konfig_bin, "--root", str(root)]
    kube = ["--kubeconfig", kubeconfig]
    applied = False
    try:
        root.mkdir()
        for name in ("kcl.mod", "konfig.yaml"):
            shutil.copy2(REPO / name, root / name)
        shutil.copytree(REPO / "base", root / "base")
        project = root / "appops" / tag
        project.mkdir(parents=True)
        (project / "project.yaml").write_text(f"name: {tag}\n")
        for s in range(args.stacks):
            name = f"s{s:02d}"
            stack_dir = project / name
            stack_dir.mkdir()
            (stack_dir / "stack.yaml").write_text(
                f"name: {name}\nkubernetes:\n  context: {args.context}\n"
            )
            (stack_dir / "main.k").write_text(MAIN)
            (stack_dir / "objects.yaml").write_text(
                yaml.safe_dump_all(manifests(f"{tag}-{name}", args.per_stack))
            )
            addresses.append(f"{tag}/{name}")
        (root / ".gitignore").write_text("/.cache/\n")
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "bench")

        print(f"applying {args.stacks} stacks x {args.per_stack} objects ...", file=sys.stderr)
        wall, cpu, _ = measured([*base, "apply", "--all", "--yes", "--no-wait", "--json", *kube])
        applied = True
        print(f"  apply --no-wait: {wall:.1f} s wall, {cpu:.1f} s CPU", file=sys.stderr)

        status_cmd = [*base, "status", "--json", *kube]
        selector = "applyset.kubernetes.io/part-of"
        kubectl = ["kubectl", f"--kubeconfig={kubeconfig}", f"--context={args.context}"]
        peer = [
            [*kubectl, "get", "configmaps", "-n", "konfig-system", "-o", "json",
             "-l", "app.kubernetes.io/managed-by=konfig"],
            [*kubectl, "get", "deployments,services,configmaps,namespaces", "-A", "-o", "json",
             "-l", selector],
        ]  # fmt: skip
        wall, cpu, out = measured(status_cmd)  # warm-up (and a check of what it says)
        doc = json.loads(out)
        ours = [s for s in doc["stacks"] if s["path"].startswith(f"appops/{tag}/")]
        assert len(ours) == args.stacks, f"status listed {len(ours)} of {args.stacks} stacks"
        assert all(s["state"] == "applied" and s["upToDate"] for s in ours), ours[:1]
        assert sum(s["objects"] for s in ours) == args.stacks * args.per_stack

        konfig_runs: list[tuple[float, float]] = []
        kubectl_runs: list[tuple[float, float]] = []
        for _ in range(args.runs):
            w, c, _ = measured(status_cmd)
            konfig_runs.append((w, c))
            w = c = 0.0
            for cmd in peer:
                pw, pc, _ = measured(cmd)
                w += pw
                c += pc
            kubectl_runs.append((w, c))

        def show(label: str, runs: list[tuple[float, float]]) -> float:
            walls = [r[0] for r in runs]
            cpus = [r[1] for r in runs]
            median = statistics.median(walls)
            print(
                f"{label:38} wall median {median:5.2f} s, max {max(walls):5.2f} s; "
                f"CPU median {statistics.median(cpus):5.2f} s  ({len(runs)} runs)"
            )
            return median

        total = args.stacks * args.per_stack
        print(f"konfig status over {args.stacks} applied stacks ({total} objects), "
              f"{len(doc['stacks'])} stacks in the cluster's inventories")  # fmt: skip
        k = show("konfig status --json", konfig_runs)
        p = show("kubectl get (inventories + 4 kinds)", kubectl_runs)
        print(f"ratio konfig/kubectl (median wall): {k / p:.2f}")
        print(f"goal: konfig status <= 2.0 s wall: {'met' if k <= 2.0 else 'MISSED'}")
        return 0 if k <= 2.0 else 1
    finally:
        if args.keep:
            print(f"kept: repository {root} (its stacks stay applied)", file=sys.stderr)
        elif applied:
            subprocess.run(
                [*base, "destroy", *addresses, "--yes", "--no-wait", "--json", *kube],
                capture_output=True,
            )
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        if started_cluster:
            cluster("down")


if __name__ == "__main__":
    sys.exit(main())
