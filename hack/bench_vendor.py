#!/usr/bin/env python3
"""Benchmark: konfig vs kubectl on the vendor corpus (tools/tests/fixtures/vendor/).

The four vendors' install manifests (metrics-server, ingress-nginx, flannel and a part
of prometheus-operator: 44 objects, 4 CRDs) as four ``frontend.Manifests`` stacks of a
temporary repository, and the same files for kubectl. Each round, interleaved (the tool
that goes first alternates), on an empty cluster:

    kubectl apply --server-side -f <files>         (per vendor; CRDs, kubectl wait
                                                    --for=condition=Established, the rest)
    kubectl diff --server-side -f <files>          (per vendor, after the apply)
    kubectl delete --wait -f <files>               (per vendor)

    konfig apply --all --yes [--no-wait]           (one process, the four stacks)
    konfig preview --all                           (after the apply)
    konfig destroy <the four stacks> --yes

and reports per operation the medians of wall and CPU seconds (user + system of the
processes, os.wait4), the ratios konfig/kubectl, and the load average before and after.
konfig's apply waits for health (Deployments available, the DaemonSet's pods, the Jobs
complete) unless --no-wait; kubectl's does not wait.

    .venv/bin/python hack/bench_vendor.py [--kubeconfig K --context C] [--rounds 3] [--no-wait]

Without --kubeconfig it starts the local control plane with `hack/cluster up` and stops
it afterwards if it was not running before.

Measured 2026-11-27 on the shared 2-core machine, load average 11.3 before and 10.4 after
(`hack/bench_vendor.py --kubeconfig <a hack/cluster> --context vend --rounds 2`;
medians; konfig's apply waits for health, kubectl's does not):

    operation        kubectl wall konfig wall  ratio  kubectl CPU  konfig CPU  ratio
    apply                  10.38s       7.51s   0.72        1.89s       0.87s   0.46
    preview/diff            3.57s       3.69s   1.04        0.67s       0.48s   0.72
    destroy/delete         16.10s      12.09s   0.75        0.58s       1.08s   1.86

destroy spent more CPU than kubectl delete: it plans (twice: to show, then to delete),
and each plan dumped every object as YAML to diff it against nothing, which no destroy
shows; without that (plan_stack details=False), the same command, load 10.4 before and
12.7 after:

    operation        kubectl wall konfig wall  ratio  kubectl CPU  konfig CPU  ratio
    apply                  11.75s       8.47s   0.72        1.99s       1.00s   0.50
    preview/diff            3.70s       3.50s   0.95        0.74s       0.55s   0.74
    destroy/delete         16.66s      11.37s   0.68        0.60s       0.66s   1.11

What is left: a GET per member, every namespaced kind listed in a Namespace before it is
deleted (the namespace-in-use guard), polls until each object is gone.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_apply import cluster, cluster_up

REPO = Path(__file__).resolve().parent.parent
VENDOR = REPO / "tools" / "tests" / "fixtures" / "vendor"
FILES: dict[str, list[str]] = {
    "metrics-server": ["components.yaml"],
    "ingress-nginx": ["deploy.yaml"],
    "flannel": ["kube-flannel.yml"],
    "prometheus-operator": [
        "monitoring.coreos.com_servicemonitors.yaml",
        "monitoring.coreos.com_podmonitors.yaml",
        "monitoring.coreos.com_probes.yaml",
        "monitoring.coreos.com_prometheusrules.yaml",
        "prometheus-operator-cluster-role.yaml",
        "prometheus-operator-cluster-role-binding.yaml",
        "prometheus-operator-service-account.yaml",
        "prometheus-operator-deployment.yaml",
        "prometheus-operator-service.yaml",
        "prometheus-operator-service-monitor.yaml",
    ],
}
MAIN = """\
import file
import yaml
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = sum([yaml.decode_all(file.read(f)) for f in {files}], [])
}}
"""
STACK_YAML = """\
name: {name}
kubernetes:
  context: {context}
policies:
  disable:
    - rule: resource-limits
      reason: the vendor's manifests as shipped
"""


class Measured:
    """Wall and CPU seconds of the processes of one operation."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def run(self, cmd: list[str], *, cwd: Path | None = None, ok: tuple[int, ...] = (0,)) -> str:
        start = time.perf_counter()
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=cwd)
            _, status, usage = os.wait4(proc.pid, 0)
            self.wall += time.perf_counter() - start
            self.cpu += usage.ru_utime + usage.ru_stime
            code = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        if code not in ok:
            raise SystemExit(f"{' '.join(cmd)} failed ({code}):\n{stdout}{stderr}")
        return stdout


def repository(root: Path, context: str) -> list[str]:
    """The repository of the four stacks (committed); their addresses."""
    for name in ("kcl.mod", "konfig.yaml"):
        shutil.copy2(REPO / name, root / name)
    shutil.copytree(REPO / "base", root / "base")
    with (root / "konfig.yaml").open("a", encoding="utf-8") as f:
        f.write("allowSystemNamespaces: [kube-system, default]\n")
    (root / "appops" / "vendors").mkdir(parents=True)
    (root / "appops" / "vendors" / "project.yaml").write_text("name: vendors\n")
    for stack, files in FILES.items():
        d = root / "appops" / "vendors" / stack
        d.mkdir()
        (d / "stack.yaml").write_text(STACK_YAML.format(name=stack, context=context))
        (d / "main.k").write_text(MAIN.format(files=json.dumps(files)))
        for name in files:
            shutil.copy2(VENDOR / stack / name, d / name)
    (root / ".gitignore").write_text("/.cache/\n")
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@konfig.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@konfig.invalid",
    )
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"]):
        subprocess.run(cmd, cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "vendors"], cwd=root, check=True, env=env)
    return [f"vendors/{s}" for s in FILES]


def _f(stack: str, files: list[str]) -> list[str]:
    return [a for f in files for a in ("-f", str(VENDOR / stack / f))]


def kubectl_round(kubectl: list[str]) -> dict[str, Measured]:
    apply, diff, delete = Measured(), Measured(), Measured()
    for stack, files in FILES.items():
        crds = [f for f in files if f.startswith("monitoring.coreos.com_")]
        rest = [f for f in files if f not in crds]
        if crds:
            apply.run([*kubectl, "apply", "--server-side", *_f(stack, crds)])
            apply.run(
                [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", *_f(stack, crds)]
            )
        apply.run([*kubectl, "apply", "--server-side", *_f(stack, rest)])
    for stack, files in FILES.items():
        diff.run([*kubectl, "diff", "--server-side", *_f(stack, files)], ok=(0, 1))
    # metrics-server first: while its APIService is unavailable (no real server behind it
    # here) the namespace controller cannot finish deleting namespaces
    for stack, files in FILES.items():
        delete.run([*kubectl, "delete", "--wait=true", "--ignore-not-found", *_f(stack, files)])
    return {"apply": apply, "preview/diff": diff, "destroy/delete": delete}


def konfig_round(
    konfig: list[str], root: Path, stacks: list[str], wait: bool
) -> dict[str, Measured]:
    apply, preview, destroy = Measured(), Measured(), Measured()
    apply.run([*konfig, "apply", "--all", "--yes", *([] if wait else ["--no-wait"])], cwd=root)
    preview.run([*konfig, "preview", "--all"], cwd=root)
    destroy.run([*konfig, "destroy", *stacks, "--yes"], cwd=root)
    return {"apply": apply, "preview/diff": preview, "destroy/delete": destroy}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--context", default="admin")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-wait", action="store_true", help="konfig apply --no-wait")
    args = parser.parse_args()
    kubeconfig, started = cluster_up(args.kubeconfig)
    konfig_bin = str(Path(sys.executable).with_name("konfig"))
    target = [f"--kubeconfig={kubeconfig}", f"--context={args.context}"]
    kubectl = ["kubectl", *target]
    konfig = [konfig_bin]
    os.environ["KUBECONFIG"] = kubeconfig  # konfig's stacks name the context only
    results: dict[str, dict[str, list[Measured]]] = {"kubectl": {}, "konfig": {}}
    load_before = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-vendor-") as tmp:
            root = Path(tmp)
            stacks = repository(root, args.context)
            # a first konfig run fills the compile cache, as CI's cache would
            Measured().run([*konfig, "compile", "--all"], cwd=root)
            for n in range(args.rounds):
                order = ["kubectl", "konfig"] if n % 2 == 0 else ["konfig", "kubectl"]
                for tool in order:
                    got = (
                        kubectl_round(kubectl)
                        if tool == "kubectl"
                        else konfig_round(konfig, root, stacks, not args.no_wait)
                    )
                    for op, m in got.items():
                        results[tool].setdefault(op, []).append(m)
                    time.sleep(2)  # namespaces finish terminating
                print(f"round {n + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        if started:
            cluster("down")
    load_after = os.getloadavg()
    print(
        f"vendor corpus, {args.rounds} rounds, interleaved; konfig apply "
        f"{'--no-wait' if args.no_wait else 'waits for health'}; "
        f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}"
    )
    print(
        f"{'operation':<16}{'kubectl wall':>13}{'konfig wall':>12}{'ratio':>7}"
        f"{'kubectl CPU':>13}{'konfig CPU':>12}{'ratio':>7}"
    )
    for op in ("apply", "preview/diff", "destroy/delete"):
        kw = statistics.median(m.wall for m in results["kubectl"][op])
        fw = statistics.median(m.wall for m in results["konfig"][op])
        kc = statistics.median(m.cpu for m in results["kubectl"][op])
        fc = statistics.median(m.cpu for m in results["konfig"][op])
        walls = f"{kw:>12.2f}s{fw:>11.2f}s{fw / kw:>7.2f}"
        print(f"{op:<16}{walls}{kc:>12.2f}s{fc:>11.2f}s{fc / kc:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
