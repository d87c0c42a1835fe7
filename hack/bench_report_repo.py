#!/usr/bin/env python3
"""The grouped PR comment for a base-model change, end to end on a generated repository.

    .venv/bin/python hack/bench_report_repo.py [--projects 300] [--stacks-per-project 3.5]
        [--kubeconfig K] [--keep DIR]

What it does, all with the real components:

1. generates a monorepo with ``hack/gen_monorepo.py`` (about projects × stacks-per-project
   stacks, each a Namespace, a Deployment and a Service);
2. applies every stack to the local control plane (``hack/cluster up`` unless
   ``--kubeconfig`` is given) with ``konfig apply --all --yes --no-wait``: the live state;
3. makes a pull request on a branch ``pr``: the base model's ``small`` resource template
   gets higher limits (every stack), the shared library ``lib2`` a new label value (the
   projects that import it, a second distinct change), and three stacks change on their
   own: one asks for ``medium`` resources (its change differs), one drops its ports (its
   Service is deleted), one no longer compiles;
4. runs the pull-request pipeline on it: ``konfig changed``, ``konfig compile``,
   ``konfig preview --changed-from main`` against the cluster, and ``konfig report``
   (the comment, the full report for the job summary and ``--json``);
5. checks the comment: at most 20,000 characters, every distinct change (group) and
   every exception named, and prints the sizes and the time of each step (wall and the
   CPU time of the child process).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_apply import cluster, cluster_up  # noqa: E402
from gen_monorepo import GIT_ENV, generate  # noqa: E402

from konfig.report.budget import chars  # noqa: E402

KONFIG = [str(Path(sys.executable).parent / "konfig")]
COMMENT_GOAL = 20_000


def run(
    cmd: list[str], cwd: Path, *, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None
) -> tuple[float, float, str]:
    """Run ``cmd``; (wall seconds, CPU seconds of the child, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in ok:
        raise SystemExit(
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    return wall, cpu, proc.stdout


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT_ENV}, check=True)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    if old not in text:
        raise SystemExit(f"{path}: {old!r} not found: the generator or the model changed")
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def make_pr(root: Path) -> dict[str, str]:
    """The pull request; returns the exceptional stacks by what makes them one."""
    git(root, "checkout", "-q", "-B", "pr", "main")
    edit(
        root / "base/pkg/models/frontend/container.k",
        'cpuLimit = "250m", memoryLimit = "256Mi"}',
        'cpuLimit = "500m", memoryLimit = "512Mi"}',
    )
    edit(root / "base/pkg/lib2/lib.k", '"konfig.dev/lib2" = "v1"', '"konfig.dev/lib2" = "v2"')
    with_base = sorted(p.parent.parent for p in root.glob("appops/*/base/base.k"))
    stacks = [
        d
        for project in with_base
        for d in sorted(project.iterdir())
        if (d / "stack.yaml").is_file()
    ]
    differs, drops, broken = stacks[5], stacks[40], stacks[80]
    head = "app: frontend.Server {"
    edit(differs / "main.k", head, head + '\n    resources = "medium"')
    edit(drops / "main.k", head, head + "\n    ports = []")
    edit(broken / "main.k", head, head + '\n    replicas = "two"')
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base: higher default limits; lib2 v2; three stacks")
    rel = {k: v.relative_to(root).as_posix() for k, v in
           {"differs": differs, "drops": drops, "broken": broken}.items()}  # fmt: skip
    return rel


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--projects", type=int, default=300)
    parser.add_argument("--stacks-per-project", type=float, default=3.5)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--keep", type=Path, default=None, help="work in DIR and keep it")
    args = parser.parse_args()

    kubeconfig, started = cluster_up(args.kubeconfig)
    work = args.keep or Path(tempfile.mkdtemp(prefix="konfig-bench-report-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {"KUBECONFIG": kubeconfig, "NO_COLOR": "1"}
    timings: list[tuple[str, float, float]] = []
    try:
        root = work / "repo"
        made = generate(
            root, projects=args.projects, stacks_per_project=args.stacks_per_project, seed=args.seed
        )
        print(f"generated {made.stacks} stacks in {made.projects} projects: {root}")
        out = work / "results"
        out.mkdir(exist_ok=True)

        def step(name: str, cmd: list[str], ok: tuple[int, ...] = (0,)) -> str:
            wall, cpu, stdout = run(cmd, root, ok=ok, env=env)
            timings.append((name, wall, cpu))
            print(f"{name:<34} wall {wall:7.1f} s   cpu {cpu:7.1f} s")
            return stdout

        step("apply --all (live state)", [*KONFIG, "apply", "--all", "--yes", "--no-wait",
             "--stack-concurrency", "8", "--json"])  # fmt: skip
        special = make_pr(root)
        changed = step("changed", [*KONFIG, "changed", "--base", "main", "--head", "pr", "--json"])
        (out / "changed.json").write_text(changed)
        affected = len(json.loads(changed)["stacks"])
        compiled = step(
            "compile --changed-from main",
            [*KONFIG, "compile", "--changed-from", "main", "--json"],
            ok=(0, 1),
        )
        (out / "compile.json").write_text(compiled)
        step(
            "preview --changed-from main",
            [*KONFIG, "preview", "--changed-from", "main", "--format", "json",
             "--out", str(out / "preview.json")],
            ok=(0, 1),
        )  # fmt: skip
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        report = [*KONFIG, "report", "--results", str(out), "--sha", sha]
        step("report (comment + full)", [*report, "--out", str(work / "comment.md"),
             "--full-out", str(work / "full.md")])  # fmt: skip
        data = json.loads(step("report --json", [*report, "--json"]))
        comment = (work / "comment.md").read_text(encoding="utf-8")
        full = (work / "full.md").read_text(encoding="utf-8")
    finally:
        if started:
            cluster("down")
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
            work = Path("(removed)")

    problems: list[str] = []
    if chars(comment) > COMMENT_GOAL:
        problems.append(f"comment has {chars(comment)} characters (goal ≤ {COMMENT_GOAL})")
    for group in data["groups"]:
        if not group["exceptional"] and f"#### {group['number']}. " not in comment:
            problems.append(f"change {group['number']} ({group['id']}) not in the comment")
    for exc in data["exceptions"]:
        if f"<code>{exc['stack']}</code>" not in comment:
            problems.append(f"exception {exc['stack']} not in the comment")
    for what, path in special.items():
        if path not in comment:
            problems.append(f"the stack that {what} ({path}) is not named")
    shared = [g for g in data["groups"] if not g["exceptional"]]
    print(f"affected stacks: {affected}; changes across stacks: {len(shared)}; "
          f"exceptions: {len(data['exceptions'])}; comment: {chars(comment)} characters; "
          f"full report: {len(full.encode())} bytes")  # fmt: skip
    for g in shared:
        fields = ", ".join(f["path"] for f in g["fields"][:3]) or g["action"]
        print(f"  change {g['number']}: {g['action']} {g['kind']} {g['name']} in "
              f"{len(g['stacks'])} stacks: {fields}")  # fmt: skip
    for e in data["exceptions"]:
        print(f"  exception: {e['stack']} (failed: {e['failed']}, groups: {e['groups']})")
    print(f"work directory: {work}")
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
