#!/usr/bin/env python3
"""Benchmark: `konfig apply` of 500 objects over 50 stacks vs `kubectl apply --server-side`.

Builds a temporary Konfig repository with --stacks stacks of --per-stack objects each
(a Namespace, then Deployments, Services and ConfigMaps in turn; every stack in its
own namespace) and applies the same objects with both tools, each run as a fresh
process, on fresh namespaces (kubectl's copies are suffixed ``-k``):

    konfig apply --all --yes --kubeconfig K [--no-wait]     (one process, all stacks)
    kubectl apply --server-side -f <stack>.yaml             (one process per stack, in sequence)

konfig is timed twice on fresh objects: with its health waits (every Deployment
Available, as kwok makes pods ready) and with --no-wait (what kubectl does: no wait).
Then a no-change re-apply of both. It prints wall times, the ratios
konfig/kubectl (goal <= 0.7) and the peak RSS of the processes (ru_maxrss).

    .venv/bin/python hack/bench_apply.py [--kubeconfig K] [--stacks 50] [--per-stack 10]

Without --kubeconfig it starts the local control plane with `hack/cluster up` (in
$KONFIG_CLUSTER_DIR or its default directory) and stops it afterwards if it was not
running before.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent

MAIN = """\
import base.pkg.models.frontend
import file
import yaml

extras: frontend.Manifests {
    manifests = yaml.decode_all(file.read("objects.yaml"))
}
"""


def manifests(ns: str, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    ]
    i = 0
    while len(out) < count:
        name = f"app-{i:02d}"
        labels = {"app": name}
        if i % 3 == 0:
            out.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": name, "namespace": ns, "labels": labels},
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": labels},
                        "template": {
                            "metadata": {"labels": labels},
                            "spec": {
                                "containers": [
                                    {
                                        "name": "app",
                                        "image": "nginx:1.27.3",
                                        "ports": [{"containerPort": 80}],
                                    }
                                ]
                            },
                        },
                    },
                }
            )
        elif i % 3 == 1:
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": name, "namespace": ns, "labels": labels},
                    "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 80}]},
                }
            )
        else:
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": ns, "labels": labels},
                    "data": {"index": str(i), "mode": "bench"},
                }
            )
        i += 1
    return out


def run_measured(cmd: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, int, str]:
    """Wall seconds, the child's own peak RSS in KiB (wait4 ru_maxrss), stdout."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stdout}{stderr}")
    return elapsed, int(usage.ru_maxrss), stdout


def cluster(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "hack" / "cluster"), command], capture_output=True, text=True)


def cluster_up(given: str | None) -> tuple[str, bool]:
    """The kubeconfig to measure against: ``given``, else hack/cluster's (started when it
    was not running); and whether this benchmark started it (then it stops it again)."""
    if given is not None:
        return given, False
    was_running = cluster("status").returncode == 0
    up = cluster("up")
    if up.returncode != 0:
        raise SystemExit(f"hack/cluster up failed:\n{up.stderr}")
    return up.stdout.strip().splitlines()[-1], not was_running


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--context", default="admin")
    parser.add_argument("--stacks", type=int, default=50)
    parser.add_argument("--per-stack", type=int, default=10)
    parser.add_argument("--stack-concurrency", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=5)
    args = parser.parse_args()

    kubeconfig, started_cluster = cluster_up(args.kubeconfig)

    work = Path(tempfile.mkdtemp(prefix="konfig-bench-apply-"))
    tag = f"b{os.getpid()}"
    konfig_bin = str(Path(sys.executable).parent / "konfig")
    kubectl = ["kubectl", f"--kubeconfig={kubeconfig}", f"--context={args.context}"]
    addresses: list[str] = []
    kubectl_files: list[Path] = []
    try:
        root = work / "repo"
        root.mkdir()
        for name in ("kcl.mod", "konfig.yaml"):
            shutil.copy2(REPO / name, root / name)
        shutil.copytree(REPO / "base", root / "base")
        project = root / "appops" / "bench"
        project.mkdir(parents=True)
        (project / "project.yaml").write_text("name: bench\n")
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
            kfile = work / f"{name}-kubectl.yaml"
            kfile.write_text(yaml.safe_dump_all(manifests(f"{tag}-{name}-k", args.per_stack)))
            kubectl_files.append(kfile)
            addresses.append(f"bench/{name}")
        total = args.stacks * args.per_stack

        base = [konfig_bin, "--root", str(root)]
        flags = [
            "--yes",
            "--kubeconfig",
            kubeconfig,
            "--stack-concurrency",
            str(args.stack_concurrency),
            "--concurrency",
            str(args.concurrency),
            "--json",
            "--commit",
            "bench",
        ]
        apply_cmd = [*base, "apply", "--all", *flags]
        destroy_cmd = [
            *base,
            "destroy",
            *addresses,
            "--yes",
            "--kubeconfig",
            kubeconfig,
            "--stack-concurrency",
            str(args.stack_concurrency),
            "--json",
        ]

        def konfig_counts(stdout: str) -> dict[str, int]:
            data = json.loads(stdout)
            if not data["ok"]:
                raise SystemExit(f"konfig reported failures:\n{stdout[:4000]}")
            totals: dict[str, int] = {}
            for st in data["stacks"]:
                for k, v in st["counts"].items():
                    totals[k] = totals.get(k, 0) + v
            return {k: v for k, v in totals.items() if v}

        # 1. konfig with health waits, fresh objects
        t_wait, rss_wait, out = run_measured(apply_cmd)
        counts_wait = konfig_counts(out)
        # 2. no-change re-apply
        t_noop, rss_noop, out = run_measured(apply_cmd)
        counts_noop = konfig_counts(out)
        # 3. destroy (waits until everything is gone), then konfig --no-wait on fresh objects
        t_destroy, rss_destroy, out = run_measured(destroy_cmd)
        counts_destroy = konfig_counts(out)
        t_nowait, rss_nowait, out = run_measured([*apply_cmd, "--no-wait"])
        counts_nowait = konfig_counts(out)

        # 4. kubectl, one process per stack in sequence, fresh objects; then a re-apply
        def kubectl_all() -> tuple[float, int]:
            started = time.perf_counter()
            peak = 0
            for f in kubectl_files:
                _, rss, _ = run_measured(
                    [
                        *kubectl,
                        "apply",
                        "--server-side",
                        "--field-manager=bench-kubectl",
                        "-f",
                        str(f),
                    ]
                )
                peak = max(peak, rss)
            return time.perf_counter() - started, peak

        k_create, k_rss = kubectl_all()
        k_noop, k_rss2 = kubectl_all()

        print(f"objects: {total} in {args.stacks} stacks ({args.per_stack} each); tag {tag}")
        print(f"konfig:  {' '.join(apply_cmd)}  [and --no-wait]")
        print(
            "kubectl: for each stack in sequence: kubectl apply --server-side "
            "--field-manager=bench-kubectl -f <stack>.yaml"
        )

        def row(label: str, seconds: float, rss_kib: int, extra: object = "") -> None:
            print(f"{label:<50} {seconds:7.2f}s  peak RSS {rss_kib / 1024:6.1f} MiB  {extra}")

        n = args.stacks
        row("konfig apply (create, waits for health):", t_wait, rss_wait, counts_wait)
        row("konfig apply --no-wait (create):", t_nowait, rss_nowait, counts_nowait)
        row("konfig apply (no change):", t_noop, rss_noop, counts_noop)
        row("konfig destroy (waits until gone):", t_destroy, rss_destroy, counts_destroy)
        row(f"kubectl apply --server-side x{n} (create):", k_create, k_rss, "(per process)")
        row(f"kubectl apply --server-side x{n} (no change):", k_noop, k_rss2, "(per process)")
        print(
            f"ratio konfig --no-wait / kubectl (create):   {t_nowait / k_create:.2f} (goal <= 0.7)"
        )
        print(f"ratio konfig with waits / kubectl (create):  {t_wait / k_create:.2f}")
        print(f"ratio konfig / kubectl (no change):          {t_noop / k_noop:.2f} (goal <= 0.7)")
    finally:
        subprocess.run(
            [*base_destroy(konfig_bin, work, addresses, kubeconfig)], capture_output=True
        )
        subprocess.run(
            [
                *kubectl,
                "delete",
                "namespace",
                "--wait=false",
                "--ignore-not-found",
                *[f"{tag}-s{s:02d}-k" for s in range(args.stacks)],
            ],
            capture_output=True,
        )
        shutil.rmtree(work, ignore_errors=True)
        if started_cluster:
            cluster("down")
    return 0


def base_destroy(konfig_bin: str, work: Path, addresses: list[str], kubeconfig: str) -> list[str]:
    """Clean up whatever konfig applied (also after a failure)."""
    return [
        konfig_bin,
        "--root",
        str(work / "repo"),
        "destroy",
        *addresses,
        "--yes",
        "--no-wait",
        "--kubeconfig",
        kubeconfig,
        "--json",
    ]


if __name__ == "__main__":
    sys.exit(main())
