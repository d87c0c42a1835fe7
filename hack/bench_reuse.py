#!/usr/bin/env python3
"""Benchmark: the incremental re-preview (``konfig preview --specs DIR --reuse PREV.json``).

A temporary repository of N stacks (a frontend.Server each: Deployment, Service,
PodDisruptionBudget), applied once, then changed (a new image in every stack), compiled
(``konfig compile --all --out specs``) and previewed once with ``--specs`` (the
previous push's preview, whose JSON records each stack's reuse key). Then, interleaved
(the order alternates each round), on the same cluster state:

    fresh      konfig preview --specs specs --all              (every stack planned)
    reuse all  ... --reuse prev.json                           (nothing changed: every
                                                                stack's key recomputed
                                                                and equal, re-used)
    reuse N-1  ... --reuse prev.json, one stack's Spec changed (that one planned, the
                                                                other N-1 re-used)

Each is checked (how many stacks it says it re-used). Prints the medians of wall and
CPU seconds (os.wait4: konfig and what it waited for, tofu and the provider included)
and the ratios to ``fresh`` (the peer: the same preview without re-use, measured in the
same run), and the load average before and after.

``--database`` adds a stack with a database through OpenTofu (``hack/tofu up``, started
and stopped here, in a directory of its own: a role, a database and an extension on a
local PostgreSQL, next to the stack's Deployment, Service, ConfigMap and Secret),
applied, then its connection limit changed (the previous push), compiled and previewed:

    db fresh   konfig preview --specs specs-db DB/dev          (tofu plan run, warm)
    db reuse   ... --reuse prev-db.json                        (the key recomputed:
                                                                the state's lineage and
                                                                serial read, no tofu run)

    .venv/bin/python hack/bench_reuse.py --kubeconfig K [--context admin] \
        [--stacks 20] [--rounds 3] [--database]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_tofu
from bench_reviewed import MAIN, git
from bench_vendor import Measured

REPO = Path(__file__).resolve().parent.parent
KONFIG = [sys.executable, "-m", "konfig"]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--context", default="admin")
    parser.add_argument("--stacks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--database", action="store_true", help="also a stack with a database (OpenTofu)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="konfig-bench-reuse-"))
    tag = f"u{os.getpid()}"
    for name in ("kcl.mod", "konfig.yaml"):
        shutil.copy2(REPO / name, work / name)
    shutil.copytree(REPO / "base", work / "base")
    (work / ".gitignore").write_text("/.cache/\n/specs*/\n/*.json\n", encoding="utf-8")
    names = [f"{tag}-{i}" for i in range(args.stacks)]
    (work / "appops" / tag).mkdir(parents=True)
    (work / "appops" / tag / "project.yaml").write_text(f"name: {tag}\n", encoding="utf-8")

    def write(image: str, only: list[str] | None = None) -> None:
        for name in only or names:
            d = work / "appops" / tag / name
            (d / "ci-test").mkdir(parents=True, exist_ok=True)
            (d / "stack.yaml").write_text(
                f"name: {name}\nkubernetes:\n  context: {args.context}\n", encoding="utf-8"
            )
            (d / "main.k").write_text(MAIN.format(name=name, image=image), encoding="utf-8")
            (d / "ci-test" / "settings.yaml").write_text(
                "kcl_options:\n  - key: env\n    value: dev\n", encoding="utf-8"
            )

    os.environ.update({"KUBECONFIG": args.kubeconfig, "PYTHONPATH": str(REPO / "tools")})
    write("nginx:1.27.3")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "one")
    # (waits until the Deployments are ready: a rollout still moving changes their
    # resourceVersions, which no preview may re-use across)
    Measured().run([*KONFIG, "apply", "--all", "--yes"], cwd=work)
    write("nginx:1.27.4")
    git(work, "commit", "-qam", "two: the pull request's first push")
    Measured().run([*KONFIG, "compile", "--all", "--out", "specs"], cwd=work)
    prev = Measured().run(
        [*KONFIG, "preview", "--all", "--specs", "specs", "--format", "json"], cwd=work, ok=(0,)
    )
    (work / "prev.json").write_text(prev, encoding="utf-8")
    write("nginx:1.27.5", only=names[:1])
    git(work, "commit", "-qam", "three: one stack changed")
    Measured().run([*KONFIG, "compile", "--all", "--out", "specs-one"], cwd=work)

    base = [*KONFIG, "preview", "--all", "--format", "json"]
    commands = {
        "fresh": ([*base, "--specs", "specs"], 0),
        "reuse all": ([*base, "--specs", "specs", "--reuse", "prev.json"], args.stacks),
        "reuse N-1": ([*base, "--specs", "specs-one", "--reuse", "prev.json"], args.stacks - 1),
    }
    print(f"{args.stacks} stacks (3 objects each), {args.rounds} rounds")
    report(measure(commands, work, args.rounds), "fresh")
    shutil.rmtree(work, ignore_errors=True)
    if args.database:
        database(args, tag)
    return 0


Commands = dict[str, tuple[list[str], int]]


def measure(commands: Commands, work: Path, rounds: int) -> dict[str, tuple[float, float]]:
    """The medians of wall and CPU of ``commands``, interleaved (the order alternates
    each round), each checked by how many stacks it re-used; prints the load."""
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
    load_before = os.getloadavg()[0]
    for round_ in range(rounds):
        order = list(commands) if round_ % 2 == 0 else list(reversed(commands))
        for key in order:
            cmd, reused = commands[key]
            m = Measured()
            m.run([*cmd, "--out", f"{key.replace(' ', '-')}.json"], cwd=work)
            results[key].append((m.wall, m.cpu))
            text = (work / f"{key.replace(' ', '-')}.json").read_text(encoding="utf-8")
            found = text.count('"reusedFrom": "')
            if found != reused:
                raise SystemExit(f"{key}: {found} stacks re-used, expected {reused}")
    load_after = os.getloadavg()[0]
    print(f"load {load_before:.1f} before, {load_after:.1f} after (1 min)")
    return {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for k, v in results.items()
    }


def report(med: dict[str, tuple[float, float]], peer: str) -> None:
    fresh = med[peer]
    print(f"{'command':<12}{'wall':>10}{'CPU':>10}{'wall/fresh':>12}{'CPU/fresh':>11}")
    for key, (wall, cpu) in med.items():
        print(f"{key:<12}{wall:>9.2f}s{cpu:>9.2f}s{wall / fresh[0]:>12.2f}{cpu / fresh[1]:>11.2f}")


def database(args: argparse.Namespace, tag: str) -> None:
    """The ``--database`` case (the module): OpenTofu and PostgreSQL of its own."""
    work = Path(tempfile.mkdtemp(prefix="konfig-bench-reuse-db-"))
    env = dict(
        os.environ,
        KONFIG_TOFU_DIR=str(work / "tofu"),
        KONFIG_TOFU_OWNER_PID=str(os.getpid()),
    )
    try:
        bench_tofu.start_tofu(work, env)
        os.environ.update(env)
        root = bench_tofu.repository(work)
        (root / ".gitignore").write_text("/.cache/\n/specs*/\n/*.json\n", encoding="utf-8")
        name = f"{tag}db"
        stack = root / "appops" / name / "dev"
        stack.mkdir(parents=True)
        (root / "appops" / name / "project.yaml").write_text(f"name: {name}\n")
        (stack / "stack.yaml").write_text(
            bench_tofu.STACK.replace("context: admin", f"context: {args.context}")
        )

        def write(limit: int) -> None:
            main = bench_tofu.MAIN.format(limit=limit).replace('"bench"', f'"{name}"')
            (stack / "main.k").write_text(main, encoding="utf-8")

        write(10)
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "one")
        address = f"{name}/dev"
        Measured().run([*KONFIG, "apply", address, "--yes"], cwd=root)
        write(11)
        git(root, "commit", "-qam", "two: the pull request's first push")
        Measured().run([*KONFIG, "compile", address, "--out", "specs-db"], cwd=root)
        base = [*KONFIG, "preview", address, "--specs", "specs-db", "--format", "json"]
        prev = Measured().run(base, cwd=root)
        (root / "prev-db.json").write_text(prev, encoding="utf-8")
        commands = {"db fresh": (base, 0), "db reuse": ([*base, "--reuse", "prev-db.json"], 1)}
        print(f"1 stack with a database through OpenTofu, {args.rounds} rounds")
        report(measure(commands, root, args.rounds), "db fresh")
    finally:
        subprocess.run(
            [str(REPO / "hack" / "tofu"), "down"], env=env, capture_output=True, check=False
        )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
