#!/usr/bin/env python3
"""Benchmark: `konfig preview` of a 100-object stack vs `kubectl diff --server-side`.

Builds a temporary Konfig repository with one stack of N objects (a Namespace, then
Deployments, Services and ConfigMaps in turn), applies them the way `konfig apply`
would (server-side apply, field manager konfig, ApplySet part-of label), edits a
few out of band so there is something to report, then times both tools on the same
objects, each run as a fresh process:

    konfig preview <stack> --format json --kubeconfig K
    kubectl diff --server-side --field-manager=konfig --force-conflicts -f <manifests>

and prints the median of --runs runs each, wall and CPU, and the ratios (goal: ≤ 1.0).
konfig runs twice in each round: with the kubeconfig read by konfig itself (the
default) and with ``KONFIG_KUBE_CLIENT=kubernetes`` (read by the kubernetes client's
loader, which konfig then imports): the cost of that import, measured in the same run.

    .venv/bin/python hack/bench_preview.py [--kubeconfig K] [--objects 100] [--runs 5]

Without --kubeconfig it starts the local control plane with `hack/cluster up`
(in $KONFIG_CLUSTER_DIR or its default directory) and stops it afterwards if it
was not running before.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "hack"))

from bench_apply import cluster, cluster_up  # noqa: E402

from konfig.build.compiler import compile_input, compile_one  # noqa: E402
from konfig.engine import inventory as inv  # noqa: E402
from konfig.engine import inventory_store  # noqa: E402
from konfig.engine.kube import KubeTarget, connect  # noqa: E402
from konfig.engine.planner import plan_stack  # noqa: E402
from konfig.pipeline.previewing import Preview, StackPreview  # noqa: E402
from konfig.repo.layout import discover  # noqa: E402
from konfig.report.previews import render_json  # noqa: E402

MAIN = """\
import base.pkg.models.frontend
import file
import yaml

extras: frontend.Manifests {
    manifests = yaml.decode_all(file.read("objects.yaml"))
}
"""


def manifests(ns: str, count: int) -> list[dict]:
    out: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}]
    i = 0
    while len(out) < count:
        name = f"app-{i:03d}"
        labels = {"app": name}
        kind = i % 3
        if kind == 0:
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
        elif kind == 1:
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


def timed(cmd: list[str], env: dict[str, str], ok: tuple[int, ...]) -> tuple[float, float]:
    """Wall-clock seconds and CPU seconds (user + system) of one run of ``cmd``."""
    before = os.times()
    start = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    if res.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return elapsed, cpu


def engine_once(root: Path, kubeconfig: str, context: str, workers: int) -> float:
    """In process, modules already imported: discover, compile, connect, read the
    inventory, plan, render JSON. What `konfig preview` costs beyond Python start-up."""
    start = time.perf_counter()
    repo = discover(root)
    stack = repo.stack("bench/big")
    result = compile_one(compile_input(repo, stack))
    assert result.spec is not None, result.error
    with connect(KubeTarget(kubeconfig, context)) as kube:
        prior = inventory_store.read_inventory(kube, stack)
        plan = plan_stack(kube, stack, result.spec, prior, workers=workers)
    render_json(Preview.of([StackPreview(stack.path, plan=plan)]))
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--context", default="admin")
    parser.add_argument("--objects", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()

    kubeconfig, started_cluster = cluster_up(args.kubeconfig)

    work = Path(tempfile.mkdtemp(prefix="konfig-bench-"))
    try:
        root = work / "repo"
        root.mkdir()
        for name in ("kcl.mod", "konfig.yaml"):
            shutil.copy2(REPO / name, root / name)
        shutil.copytree(REPO / "base", root / "base")
        stack_dir = root / "appops" / "bench" / "big"
        stack_dir.mkdir(parents=True)
        (root / "appops" / "bench" / "project.yaml").write_text("name: bench\n")
        (stack_dir / "stack.yaml").write_text(
            f"name: big\nkubernetes:\n  context: {args.context}\n"
        )
        (stack_dir / "main.k").write_text(MAIN)
        ns = f"bench-{os.getpid()}"
        objs = manifests(ns, args.objects)
        (stack_dir / "objects.yaml").write_text(yaml.safe_dump_all(objs))

        # Apply as konfig apply would, then drift a few objects out of band.
        set_id = inv.applyset_id(inv.inventory_name("appops/bench/big"))
        labelled = [inv.label_member(m, set_id) for m in objs]
        with connect(KubeTarget(kubeconfig, args.context)) as kube:
            for m in labelled:
                kube.apply(m, dry_run=False)
            for m in [o for o in objs if o["kind"] == "ConfigMap"][:3]:
                edited = {**m, "data": {"index": "edited", "mode": "bench"}}
                kube.apply(edited, dry_run=False, field_manager="by-hand", force=True)
        manifest_file = work / "manifests.yaml"
        manifest_file.write_text(yaml.safe_dump_all(labelled))

        env = dict(os.environ)
        konfig_bin = str(Path(sys.executable).parent / "konfig")
        konfig_cmd = [
            konfig_bin,
            "--root",
            str(root),
            "preview",
            "bench/big",
            "--format",
            "json",
            "--workers",
            str(args.workers),
            "--kubeconfig",
            kubeconfig,
        ]
        kubectl_cmd = [
            "kubectl",
            f"--kubeconfig={kubeconfig}",
            f"--context={args.context}",
            "diff",
            "--server-side",
            "--field-manager=konfig",
            "--force-conflicts",
            "-f",
            str(manifest_file),
        ]
        check = subprocess.run(konfig_cmd, env=env, capture_output=True, text=True)
        if check.returncode != 0:
            raise SystemExit(f"konfig preview failed:\n{check.stdout}{check.stderr}")
        counts = json.loads(check.stdout)["counts"]
        konfig_runs: list[tuple[float, float]] = []
        loader_runs: list[tuple[float, float]] = []
        kubectl_runs: list[tuple[float, float]] = []
        loader_env = {**env, "KONFIG_KUBE_CLIENT": "kubernetes"}
        load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
        for _ in range(args.runs):  # interleaved, so drift in machine load hits all
            konfig_runs.append(timed(konfig_cmd, env, (0,)))
            kubectl_runs.append(timed(kubectl_cmd, env, (0, 1)))
            loader_runs.append(timed(konfig_cmd, loader_env, (0,)))
        engine = [
            engine_once(root, kubeconfig, args.context, args.workers) for _ in range(args.runs)
        ]
        k = statistics.median(t for t, _ in konfig_runs)
        c = statistics.median(t for t, _ in kubectl_runs)
        k_cpu = statistics.median(u for _, u in konfig_runs)
        c_cpu = statistics.median(u for _, u in kubectl_runs)
        lo = statistics.median(t for t, _ in loader_runs)
        lo_cpu = statistics.median(u for _, u in loader_runs)
        print(f"objects: {len(objs)} (preview counts: {counts})")
        print(f"konfig:  {' '.join(konfig_cmd)}")
        print(f"kubectl: {' '.join(kubectl_cmd)}")
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"load average (1, 5, 15 min) before the runs: {load_before}, after: {load}")
        print(f"konfig preview wall (s): {', '.join(f'{t:.2f}' for t, _ in konfig_runs)}")
        print(f"kubectl diff wall (s):   {', '.join(f'{t:.2f}' for t, _ in kubectl_runs)}")
        print(f"konfig preview CPU (s):  {', '.join(f'{u:.2f}' for _, u in konfig_runs)}")
        print(f"kubectl diff CPU (s):    {', '.join(f'{u:.2f}' for _, u in kubectl_runs)}")
        print(f"median wall: konfig preview {k:.2f}s, kubectl diff --server-side {c:.2f}s")
        print(f"median client CPU: konfig preview {k_cpu:.2f}s, kubectl diff {c_cpu:.2f}s")
        print(
            f"konfig preview, KONFIG_KUBE_CLIENT=kubernetes: median wall {lo:.2f}s, "
            f"CPU {lo_cpu:.2f}s"
        )
        e = statistics.median(engine)
        print(
            f"in-process engine (compile + inventory + plan + JSON) runs (s): "
            f"{', '.join(f'{t:.2f}' for t in engine)}; median {e:.2f}s"
        )
        print(f"ratio konfig/kubectl (wall): {k / c:.2f} (goal <= 1.0)")
        print(f"ratio konfig/kubectl (CPU): {k_cpu / c_cpu:.2f}")
        print(f"ratio in-process engine/kubectl (wall): {e / c:.2f}")
        with connect(KubeTarget(kubeconfig, args.context)) as kube:
            kube.delete("v1", "Namespace", ns, None, uid=None, propagation="Background")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if started_cluster:
            cluster("down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
