#!/usr/bin/env python3
"""Benchmark: `konfig preview` / `konfig apply` of a stack with a database vs plain
`tofu plan` / `tofu apply` of the same OpenTofu configuration.

Starts the local control plane (`hack/cluster up`) and OpenTofu with PostgreSQL
(`hack/tofu up`) in directories of its own, builds a temporary Konfig repository with one
stack: a Server with a database (role, database, pgcrypto; a ConfigMap and a Secret).
Konfig applies it once; the configuration Konfig generated (`main.tf.json`) is copied to a
second working directory with its own state (another `secret_suffix` in the same
cluster, another role and database: `plainbench`) and applied once with plain tofu,
with the same provider mirror (`TF_CLI_CONFIG_FILE`), the same `kubernetes` backend and
the same PostgreSQL. The stack's Kubernetes objects as Konfig applied them (references
resolved), renamed `plainbench`, are applied once with `kubectl apply --server-side`.
Then, interleaved, each round (the role's connection limit changes each time: one
Terraform change, the Kubernetes objects unchanged):

    preview:  konfig preview bench/dev --format json --out P   (compile cached, tofu initialised)
              konfig preview bench/nodb --format json          (the same Server, no database)
              tofu plan -lock=false -out=p  +  tofu show -json p     (the same work in tofu)
              kubectl diff --server-side -f objects.json       (the same for the objects)
    apply:    konfig apply bench/dev --yes --plan P             (as on merge: what was previewed)
              tofu plan -out=p  +  tofu apply p                 (the same change)
              kubectl apply --server-side + rollout status      (the objects, health)
              konfig apply bench/dev --yes                      (another change)
              konfig apply bench/nodb --yes                     (no database, nothing to change)
              tofu plan -out=p  +  tofu apply p,  kubectl apply + rollout status

With --drift, each round also times what `konfig drift` / `konfig status` add for
the stack's Terraform resources against the refresh OpenTofu itself would run:

    drift:    konfig drift bench/dev --json               (Kubernetes drift + tofu plan
                                                           -refresh-only of the state)
              konfig drift bench/nodb --json              (the same Server, no database)
              tofu plan -refresh-only -lock=false -out=p  +  tofu show -json p

A first round, not counted, warms the compile cache. Each command is a fresh process;
wall time, and CPU as user+sys of the process and its children (tofu, the provider
plugin). It prints medians, min-max and the ratios
(issue 20's goal: <= 1.2): konfig against tofu alone (the issue's peer), against tofu
plus kubectl (the same work: the stack also has Kubernetes objects), and the database's
share (konfig with the database minus without, against tofu).

    .venv/bin/python hack/bench_tofu.py [--rounds 5] [--drift] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
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

app: frontend.Server {{
    name = "bench"
    namespace = "bench"
    image = "nginx:1.27.3"
    ports = [{{port = 80}}]
    database = {{name = "bench", extensions = ["pgcrypto"], connectionLimit = {limit}}}
}}
"""
STACK = """\
name: dev
kubernetes:
  context: admin
terraform:
  providers:
    postgresql:
      settings: {sslmode: disable, superuser: true, connect_timeout: 10}
      environment:
        host: BENCH_PGHOST
        port: BENCH_PGPORT
        username: BENCH_PGUSER
        password: BENCH_PGPASSWORD
"""


def run(
    cmd: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    ok: tuple[int, ...] = (0,),
) -> tuple[float, float, str]:
    """Wall and CPU (user+sys of the process and its descendants) seconds, stdout."""
    before = os.times()
    start = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = os.times()
    if res.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu, res.stdout


def script(name: str, command: str, env: dict[str, str]) -> str:
    res = subprocess.run(
        [str(REPO / "hack" / name), command], env=env, capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        raise SystemExit(f"hack/{name} {command} failed:\n{res.stderr}")
    return res.stdout


def start(work: Path, env: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The control plane and OpenTofu with PostgreSQL started in ``work`` (``env`` names
    their directories); ``env`` gains what konfig and tofu run with, the database's
    credentials as ``BENCH_PG*``. Returns the kubeconfig and what hack/tofu printed."""
    kubeconfig = script("cluster", "up", env).strip().splitlines()[-1]
    return kubeconfig, start_tofu(work, env)


def start_tofu(work: Path, env: dict[str, str]) -> dict[str, Any]:
    """OpenTofu with PostgreSQL started (``env`` names its directory); ``env`` gains
    what konfig and tofu run with, the database's credentials as ``BENCH_PG*``.
    Returns what hack/tofu printed."""
    facts = json.loads(script("tofu", "up", env).strip().splitlines()[-1])
    password = Path(facts["pg_passfile"]).read_text().strip().splitlines()[0].split(":", 4)[4]
    env.update(
        KONFIG_TOFU=facts["tofu"],
        TF_CLI_CONFIG_FILE=facts["cli_config"],
        KONFIG_TOFU_LOCK_FILE=facts["lock_file"],
        BENCH_PGHOST=facts["pg_host"],
        BENCH_PGPORT=str(facts["pg_port"]),
        BENCH_PGUSER=facts["pg_superuser"],
        BENCH_PGPASSWORD=password,
        NO_COLOR="1",
        KONFIG_TOFU_WORKDIR=str(work / "konfig-tofu"),
    )
    return facts


def repository(work: Path) -> Path:
    """A Konfig repository without stacks yet (``work/repo``): kcl.mod, konfig.yaml, base."""
    root = work / "repo"
    root.mkdir()
    for name in ("kcl.mod", "konfig.yaml"):
        shutil.copy2(REPO / name, root / name)
    shutil.copytree(REPO / "base", root / "base")
    # the platform grants the bench's stacks the BENCH_PG* variables (docs/terraform.md)
    config = yaml.safe_load((root / "konfig.yaml").read_text()) or {}
    config.setdefault("terraform", {})["credentials"] = [
        {
            "stacks": ["appops/**"],
            "provider": "postgresql",
            "environment": {
                "host": "BENCH_PGHOST",
                "port": "BENCH_PGPORT",
                "username": "BENCH_PGUSER",
                "password": "BENCH_PGPASSWORD",
            },
        }
    ]
    (root / "konfig.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def summary(label: str, samples: list[tuple[float, float]]) -> tuple[float, float]:
    walls = [s[0] for s in samples]
    cpus = [s[1] for s in samples]
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(
        f"  {label:<34} wall {wall:6.2f} s ({min(walls):.2f}-{max(walls):.2f})   "
        f"CPU {cpu:6.2f} s ({min(cpus):.2f}-{max(cpus):.2f})"
    )
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--drift", action="store_true", help="also time konfig drift")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="set up, apply once, then print the environment and commands to profile with "
        "and leave everything running (stop with hack/tofu down, hack/cluster down)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="konfig-bench-tofu-"))
    env = dict(
        os.environ, KONFIG_CLUSTER_DIR=str(work / "cluster"), KONFIG_TOFU_DIR=str(work / "tofu")
    )
    env.pop("KUBECONFIG", None)
    try:
        kubeconfig, facts = start(work, env)
        root = repository(work)
        stack = root / "appops" / "bench" / "dev"
        stack.mkdir(parents=True)
        (root / "appops" / "bench" / "project.yaml").write_text("name: bench\n")
        (stack / "stack.yaml").write_text(STACK)
        (stack / "main.k").write_text(MAIN.format(limit=10))
        # the same Server without a database: what Konfig costs without OpenTofu
        nodb = root / "appops" / "bench" / "nodb"
        nodb.mkdir()
        (nodb / "stack.yaml").write_text("name: nodb\nkubernetes:\n  context: admin\n")
        plain_main = re.sub(r"    database = .*\n", "", MAIN.format(limit=10))
        (nodb / "main.k").write_text(plain_main.replace('"bench"', '"benchnodb"'))
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@konfig.invalid"]
        subprocess.run([*git, "init", "-q"], cwd=root, check=True)
        subprocess.run([*git, "add", "-A"], cwd=root, check=True)
        subprocess.run([*git, "commit", "-q", "-m", "bench"], cwd=root, check=True)
        konfig = [str(Path(sys.executable).parent / "konfig"), "--root", str(root)]
        kc = ["--kubeconfig", kubeconfig]
        run([*konfig, "apply", "bench/dev", "bench/nodb", "--yes", *kc], env=env)

        # The same configuration for plain tofu: another state and other object names.
        generated = json.loads(
            (work / "konfig-tofu" / "appops-bench-dev" / "main.tf.json").read_text()
        )
        text = re.sub(r"\bbench\b", "plainbench", json.dumps(generated))
        plain = work / "plain"
        plain.mkdir()
        tf_env = dict(env)
        credentials = {"host": "HOST", "port": "PORT", "username": "USER", "password": "PASSWORD"}
        for var in generated.get("variable") or {}:
            argument = var.removeprefix("p_postgresql_")
            if argument in credentials:
                tf_env[f"TF_VAR_{var}"] = env[f"BENCH_PG{credentials[argument]}"]
            else:  # the role's write-only password
                tf_env[f"TF_VAR_{var}"] = "plain-bench-password-0123456789ab"
        tf_env.update(KUBE_CONFIG_PATHS=kubeconfig, KUBE_CTX="admin", TF_IN_AUTOMATION="1")
        tofu = facts["tofu"]
        limits = {"plain": 10}

        def write_plain() -> None:
            doc = json.loads(text)
            doc["resource"]["postgresql_role"]["plainbench"]["connection_limit"] = limits["plain"]
            (plain / "main.tf.json").write_text(json.dumps(doc, indent=2))

        write_plain()
        run([tofu, "init", "-input=false", "-no-color"], cwd=plain, env=tf_env)
        run([tofu, "apply", "-auto-approve", "-input=false", "-no-color"], cwd=plain, env=tf_env)
        if args.keep:
            keep(work, env, tf_env, konfig, kc, plain)
            return 0

        # The Kubernetes part for the peer: the stack's objects as konfig applied them
        # (references resolved), renamed like the tofu configuration, applied by kubectl.
        kubectl = ["kubectl", f"--kubeconfig={kubeconfig}", "--context=admin"]
        manifests = plain / "objects.json"
        manifests.write_text(peer_objects(kubectl))
        run([*kubectl, "apply", "--server-side", "-f", str(manifests)])

        samples: dict[str, list[tuple[float, float]]] = {
            k: [] for k in ("kp", "np", "tp", "kd", "kap", "ka", "na", "ta", "kk", "dk", "dn", "dt")
        }
        following = {10: 20, 20: 30, 30: 10}  # three values: each compiled once, then cached
        konfig_limit = 10

        def konfig_toggle() -> None:
            nonlocal konfig_limit
            konfig_limit = following[konfig_limit]
            (stack / "main.k").write_text(MAIN.format(limit=konfig_limit))
            # what konfig applies is a commit (not timed)
            subprocess.run([*git, "commit", "-q", "-am", "toggle"], cwd=root, check=True)

        def tofu_plan_apply() -> None:
            limits["plain"] = following[limits["plain"]]
            write_plain()
            w1, c1, _ = run(
                [tofu, "plan", "-input=false", "-no-color", "-out=p"], cwd=plain, env=tf_env
            )
            w2, c2, _ = run(
                [tofu, "apply", "-input=false", "-no-color", "p"], cwd=plain, env=tf_env
            )
            samples["ta"].append((w1 + w2, c1 + c2))
            w1, c1, _ = run([*kubectl, "apply", "--server-side", "-f", str(manifests)])
            w2, c2, _ = run(
                [*kubectl, "-n", "plainbench", "rollout", "status", "deployment/plainbench"]
            )
            samples["kk"].append((w1 + w2, c1 + c2))

        saved = work / "preview.json"
        for index in range(args.rounds + 1):
            if index == 1:  # the first round compiles each connection limit once: not counted
                for kept in samples.values():
                    kept.clear()
            # preview: one change (the role's connection limit), as in a pull request
            konfig_toggle()
            w, c, _ = run(
                [*konfig, "preview", "bench/dev", "--format", "json", "--out", str(saved), *kc],
                env=env,
            )
            samples["kp"].append((w, c))
            w, c, _ = run([*konfig, "preview", "bench/nodb", "--format", "json", *kc], env=env)
            samples["np"].append((w, c))
            limits["plain"] = following[limits["plain"]]
            write_plain()
            w1, c1, _ = run(
                [tofu, "plan", "-lock=false", "-input=false", "-no-color", "-out=p"],
                ok=(0, 2),
                cwd=plain,
                env=tf_env,
            )
            w2, c2, _ = run([tofu, "show", "-json", "p"], cwd=plain, env=tf_env)
            samples["tp"].append((w1 + w2, c1 + c2))
            w, c, _ = run([*kubectl, "diff", "--server-side", "-f", str(manifests)], ok=(0, 1))
            samples["kd"].append((w, c))
            limits["plain"] = following[following[limits["plain"]]]  # back: the same change

            if args.drift:
                w, c, _ = run([*konfig, "drift", "bench/dev", "--json", *kc], env=env)
                samples["dk"].append((w, c))
                w, c, _ = run([*konfig, "drift", "bench/nodb", "--json", *kc], env=env)
                samples["dn"].append((w, c))
                w1, c1, _ = run(
                    [tofu, "plan", "-refresh-only", "-lock=false", "-input=false", "-out=p"],
                    ok=(0, 2),
                    cwd=plain,
                    env=tf_env,
                )
                w2, c2, _ = run([tofu, "show", "-json", "p"], cwd=plain, env=tf_env)
                samples["dt"].append((w1 + w2, c1 + c2))

            # apply what was previewed (--plan, as on merge), then a plain apply --yes
            w, c, _ = run(
                [*konfig, "apply", "bench/dev", "--yes", "--plan", str(saved), *kc], env=env
            )
            samples["kap"].append((w, c))
            tofu_plan_apply()
            konfig_toggle()
            w, c, _ = run([*konfig, "apply", "bench/dev", "--yes", *kc], env=env)
            samples["ka"].append((w, c))
            w, c, _ = run([*konfig, "apply", "bench/nodb", "--yes", *kc], env=env)
            samples["na"].append((w, c))
            tofu_plan_apply()

        load = os.getloadavg()
        print(
            f"bench_tofu: {args.rounds} interleaved rounds, load {load[0]:.1f} "
            f"(1 min) {load[2]:.1f} (15 min)"
        )
        kp = summary("konfig preview (both runtimes)", samples["kp"])
        npv = summary("konfig preview, no database", samples["np"])
        tp = summary("tofu plan + show -json", samples["tp"])
        kd = summary("kubectl diff --server-side", samples["kd"])
        kap = summary("konfig apply --plan (as on merge)", samples["kap"])
        ka = summary("konfig apply --yes", samples["ka"])
        na = summary("konfig apply --yes, no database", samples["na"])
        ta = summary("tofu plan + apply", samples["ta"])
        kk = summary("kubectl apply + rollout status", samples["kk"])

        def ratio(label: str, a: tuple[float, float], b: tuple[float, float]) -> None:
            print(f"  {label:<58} wall {a[0] / b[0]:5.2f}   CPU {a[1] / b[1]:5.2f}")

        def plus(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
            return (a[0] + b[0], a[1] + b[1])

        def minus(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
            return (a[0] - b[0], a[1] - b[1])

        print("  ratios (issue 20's goal: <= 1.2)")
        ratio("konfig preview / tofu plan+show", kp, tp)
        ratio("konfig preview / (tofu plan+show + kubectl diff)", kp, plus(tp, kd))
        ratio("the database's share of konfig preview / tofu plan+show", minus(kp, npv), tp)
        ratio("konfig apply --yes / tofu plan+apply", ka, ta)
        ratio("konfig apply --plan / tofu plan+apply", kap, ta)
        ratio("konfig apply --yes / (tofu plan+apply + kubectl apply+rollout)", ka, plus(ta, kk))
        ratio("the database's share of konfig apply --yes / tofu plan+apply", minus(ka, na), ta)
        if args.drift:
            dk = summary("konfig drift (both runtimes)", samples["dk"])
            dn = summary("konfig drift, no database", samples["dn"])
            dt = summary("tofu plan -refresh-only + show", samples["dt"])
            ratio("the database's share of konfig drift / tofu refresh", minus(dk, dn), dt)
    finally:
        if not args.keep:
            teardown(work, env)
    return 0


def peer_objects(kubectl: list[str]) -> str:
    """The bench stack's Kubernetes objects as konfig applied them, renamed ``plainbench``
    and without konfig's labels: what kubectl applies for the peer (a JSON List)."""
    names = "namespace/bench configmap/bench-db secret/bench-db service/bench deployment/bench"
    res = subprocess.run(
        [*kubectl, "-n", "bench", "get", *names.split(), "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    items = []
    for item in json.loads(res.stdout)["items"]:
        meta = item["metadata"]
        labels = {
            k: v
            for k, v in (meta.get("labels") or {}).items()
            if not k.startswith("applyset.") and k != "app.kubernetes.io/managed-by"
        }
        item["metadata"] = {"name": meta["name"], "labels": labels}
        if meta.get("namespace"):
            item["metadata"]["namespace"] = meta["namespace"]
        item.pop("status", None)
        if item["kind"] == "Service":
            for key in ("clusterIP", "clusterIPs"):
                item["spec"].pop(key, None)
        items.append(item)
    text = re.sub(
        r"\bbench\b", "plainbench", json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    return text


def keep(
    work: Path,
    env: dict[str, str],
    tf_env: dict[str, str],
    konfig: list[str],
    kc: list[str],
    plain: Path,
) -> None:
    """Print how to run each measured command by hand (secrets stay in files under work)."""
    (work / "konfig.env").write_text(_exports(env))
    (work / "tofu.env").write_text(_exports(tf_env))
    print(f"kept in {work} (stop: KONFIG_CLUSTER_DIR={work}/cluster KONFIG_TOFU_DIR={work}/tofu")
    print("  hack/tofu down; hack/cluster down; then remove the directory)")
    print(f"konfig:  (. {work}/konfig.env; {' '.join(konfig)} preview bench/dev {' '.join(kc)})")
    print(f"tofu:    (. {work}/tofu.env; cd {plain}; $KONFIG_TOFU plan -out=p)")


def _exports(env: dict[str, str]) -> str:
    import shlex

    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))


def teardown(work: Path, env: dict[str, str]) -> None:
    for script_name in ("tofu", "cluster"):
        subprocess.run(
            [str(REPO / "hack" / script_name), "down"], env=env, capture_output=True, check=False
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
