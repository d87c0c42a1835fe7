#!/usr/bin/env python3
"""Benchmark: `konfig preview` / `konfig apply` of a stack with a database vs plain
`tofu plan` / `tofu apply` of the same OpenTofu configuration.

Starts the local control plane (`hack/cluster up`) and OpenTofu with PostgreSQL
(`hack/tofu up`) in directories of its own, builds a temporary Konfig repository with one
stack: a Server with a database (role, database, pgcrypto; a ConfigMap and a Secret).
Konfig applies it once; the configuration Konfig generated (`main.tf.json`) is copied to a
second working directory with its own state (another `secret_suffix` in the same
cluster, another role and database) and applied once with plain tofu. Then, interleaved,
each round:

    preview:  konfig preview bench/dev --format json       (compile cached, tofu initialised)
              konfig preview bench/nodb --format json      (the same Server, no database)
              tofu plan -lock=false -out=p  +  tofu show -json p      (the same work in tofu)
    apply:    konfig apply bench/dev --yes                  (connection limit toggled)
              tofu plan -out=p  +  tofu apply p             (the same toggle)

With --drift, each round also times what `konfig drift` / `konfig status` add for
the stack's Terraform resources against the refresh OpenTofu itself would run:

    drift:    konfig drift bench/dev --json               (Kubernetes drift + tofu plan
                                                           -refresh-only of the state)
              konfig drift bench/nodb --json              (the same Server, no database)
              tofu plan -refresh-only -lock=false -out=p  +  tofu show -json p

Each command is a fresh process; wall time, and CPU as user+sys of the process and its
children (tofu, the provider plugin). It prints medians, min-max and the ratios
konfig/tofu (issue 20's goal: <= 1.2).

    .venv/bin/python hack/bench_tofu.py [--rounds 5] [--drift]
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
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="konfig-bench-tofu-"))
    env = dict(
        os.environ, KONFIG_CLUSTER_DIR=str(work / "cluster"), KONFIG_TOFU_DIR=str(work / "tofu")
    )
    env.pop("KUBECONFIG", None)
    try:
        kubeconfig = script("cluster", "up", env).strip().splitlines()[-1]
        facts = json.loads(script("tofu", "up", env).strip().splitlines()[-1])
        password = Path(facts["pg_passfile"]).read_text().strip().splitlines()[0].split(":", 4)[4]
        env.update(
            KONFIG_TOFU=facts["tofu"],
            TF_CLI_CONFIG_FILE=facts["cli_config"],
            BENCH_PGHOST=facts["pg_host"],
            BENCH_PGPORT=str(facts["pg_port"]),
            BENCH_PGUSER=facts["pg_superuser"],
            BENCH_PGPASSWORD=password,
            NO_COLOR="1",
            KONFIG_TOFU_WORKDIR=str(work / "konfig-tofu"),
        )
        root = work / "repo"
        root.mkdir()
        for name in ("kcl.mod", "konfig.yaml"):
            shutil.copy2(REPO / name, root / name)
        shutil.copytree(REPO / "base", root / "base")
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

        samples: dict[str, list[tuple[float, float]]] = {
            k: [] for k in ("kp", "tp", "ka", "ta", "np", "kd", "nd", "td")
        }
        konfig_limit = 10
        for _ in range(args.rounds):
            w, c, _ = run([*konfig, "preview", "bench/dev", "--format", "json", *kc], env=env)
            samples["kp"].append((w, c))
            w, c, _ = run([*konfig, "preview", "bench/nodb", "--format", "json", *kc], env=env)
            samples["np"].append((w, c))
            w1, c1, _ = run(
                [tofu, "plan", "-lock=false", "-input=false", "-no-color", "-out=p"],
                ok=(0, 2),
                cwd=plain,
                env=tf_env,
            )
            w2, c2, _ = run([tofu, "show", "-json", "p"], cwd=plain, env=tf_env)
            samples["tp"].append((w1 + w2, c1 + c2))

            if args.drift:
                w, c, _ = run([*konfig, "drift", "bench/dev", "--json", *kc], env=env)
                samples["kd"].append((w, c))
                w, c, _ = run([*konfig, "drift", "bench/nodb", "--json", *kc], env=env)
                samples["nd"].append((w, c))
                w1, c1, _ = run(
                    [tofu, "plan", "-refresh-only", "-lock=false", "-input=false", "-out=p"],
                    ok=(0, 2),
                    cwd=plain,
                    env=tf_env,
                )
                w2, c2, _ = run([tofu, "show", "-json", "p"], cwd=plain, env=tf_env)
                samples["td"].append((w1 + w2, c1 + c2))

            konfig_limit = 30 - konfig_limit
            (stack / "main.k").write_text(MAIN.format(limit=konfig_limit))
            # what konfig applies is a commit (not timed)
            subprocess.run([*git, "commit", "-q", "-am", "toggle"], cwd=root, check=True)
            w, c, _ = run([*konfig, "apply", "bench/dev", "--yes", *kc], env=env)
            samples["ka"].append((w, c))
            limits["plain"] = 30 - limits["plain"]
            write_plain()
            w1, c1, _ = run(
                [tofu, "plan", "-input=false", "-no-color", "-out=p"], cwd=plain, env=tf_env
            )
            w2, c2, _ = run(
                [tofu, "apply", "-input=false", "-no-color", "p"], cwd=plain, env=tf_env
            )
            samples["ta"].append((w1 + w2, c1 + c2))

        print(f"bench_tofu: {args.rounds} interleaved rounds, load {os.getloadavg()[0]:.1f}")
        kp = summary("konfig preview (both runtimes)", samples["kp"])
        npv = summary("konfig preview, no database", samples["np"])
        tp = summary("tofu plan + show -json", samples["tp"])
        ka = summary("konfig apply (both runtimes)", samples["ka"])
        ta = summary("tofu plan + apply", samples["ta"])
        print(
            f"  ratio konfig/tofu: preview wall {kp[0] / tp[0]:.2f} CPU {kp[1] / tp[1]:.2f}; "
            f"apply wall {ka[0] / ta[0]:.2f} CPU {ka[1] / ta[1]:.2f}"
        )
        print(
            "  the database's share of konfig preview (with minus without) / tofu plan+show: "
            f"wall {(kp[0] - npv[0]) / tp[0]:.2f} CPU {(kp[1] - npv[1]) / tp[1]:.2f}"
        )
        if args.drift:
            kd = summary("konfig drift (both runtimes)", samples["kd"])
            nd = summary("konfig drift, no database", samples["nd"])
            td = summary("tofu plan -refresh-only + show", samples["td"])
            print(
                "  the database's share of konfig drift (with minus without) / tofu refresh: "
                f"wall {(kd[0] - nd[0]) / td[0]:.2f} CPU {(kd[1] - nd[1]) / td[1]:.2f}"
            )
    finally:
        script_env = dict(env)
        subprocess.run(
            [str(REPO / "hack" / "tofu"), "down"], env=script_env, capture_output=True, check=False
        )
        subprocess.run(
            [str(REPO / "hack" / "cluster"), "down"],
            env=script_env,
            capture_output=True,
            check=False,
        )
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
