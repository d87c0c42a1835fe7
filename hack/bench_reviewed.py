#!/usr/bin/env python3
"""Benchmark: the cost of the merge-time re-verification (``konfig apply --reviewed``).

A temporary repository of N stacks (a frontend.Server each: Deployment, Service,
PodDisruptionBudget), applied once, then changed (a new image in every stack) and
previewed; ``konfig report --reviewed-out`` writes the reviewed record. Each round,
interleaved (which command goes first alternates), on the same cluster state (the
change applied by neither: both commands run with --no-wait against a fresh change):

    konfig apply --all --yes --no-wait                     (plans under each Lease, applies)
    konfig apply --all --yes --no-wait --reviewed rec.json (plans every stack first, compares
                                                            the change digests, then the same)

Before each measured command the previous commit is applied again (not measured), so
each apply has the same change to make and the digests are equal. Reports the medians
of wall and CPU seconds (os.wait4),
the difference per stack and the ratio, and the load average before and after.

    .venv/bin/python hack/bench_reviewed.py --kubeconfig K [--context admin] \
        [--stacks 10] [--rounds 3]
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
from bench_vendor import Measured

REPO = Path(__file__).resolve().parent.parent
KONFIG = [sys.executable, "-m", "konfig"]
MAIN = """\
import base.pkg.models.frontend

app: frontend.Server {{
    name = "{name}"
    namespace = "{name}"
    image = "{image}"
    ports = [{{port = 80}}]
}}
"""


def git(work: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b.invalid"}  # fmt: skip
    subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--context", default="admin")
    parser.add_argument("--stacks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="konfig-bench-reviewed-"))
    tag = f"r{os.getpid()}"
    for name in ("kcl.mod", "konfig.yaml"):
        shutil.copy2(REPO / name, work / name)
    shutil.copytree(REPO / "base", work / "base")
    (work / ".gitignore").write_text("/.cache/\n", encoding="utf-8")
    names = [f"{tag}-{i}" for i in range(args.stacks)]
    (work / "appops" / tag).mkdir(parents=True)
    (work / "appops" / tag / "project.yaml").write_text(f"name: {tag}\n", encoding="utf-8")

    def write(image: str) -> None:
        for name in names:
            d = work / "appops" / tag / name
            (d / "ci-test").mkdir(parents=True, exist_ok=True)
            (d / "stack.yaml").write_text(
                f"name: {name}\nkubernetes:\n  context: {args.context}\n", encoding="utf-8"
            )
            (d / "main.k").write_text(MAIN.format(name=name, image=image), encoding="utf-8")
            (d / "ci-test" / "settings.yaml").write_text(
                "kcl_options:\n  - key: env\n    value: dev\n", encoding="utf-8"
            )

    env = {**os.environ, "KUBECONFIG": args.kubeconfig, "PYTHONPATH": str(REPO / "tools")}
    os.environ.update(env)
    write("nginx:1.27.3")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "one")
    Measured().run([*KONFIG, "apply", "--all", "--yes", "--no-wait"], cwd=work)
    write("nginx:1.27.4")
    git(work, "commit", "-qam", "two")
    preview = Measured().run([*KONFIG, "preview", "--all", "--format", "json"], cwd=work)
    (work / "preview.json").write_text(preview, encoding="utf-8")
    Measured().run(
        [*KONFIG, "report", "--preview", "preview.json", "--sha", "0" * 40, "--out",
         "comment.md", "--reviewed-out", "rec.json"], cwd=work,
    )  # fmt: skip

    def set_back() -> None:
        git(work, "checkout", "-q", "HEAD~1")
        Measured().run([*KONFIG, "apply", "--all", "--yes", "--no-wait", "--allow-dirty"], cwd=work)
        git(work, "checkout", "-q", "main")

    commands = {
        "apply": [*KONFIG, "apply", "--all", "--yes", "--no-wait"],
        "apply --reviewed": [
            *KONFIG,
            "apply",
            "--all",
            "--yes",
            "--no-wait",
            "--reviewed",
            "rec.json",
        ],
    }
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
    load_before = os.getloadavg()[0]
    for round_ in range(args.rounds):
        order = list(commands) if round_ % 2 == 0 else list(reversed(commands))
        for key in order:
            set_back()
            m = Measured()
            m.run(commands[key], cwd=work)
            results[key].append((m.wall, m.cpu))
    load_after = os.getloadavg()[0]
    # what was measured compared equal digests: every stack is "the reviewed change"
    set_back()
    seen = subprocess.run(commands["apply --reviewed"], cwd=work, capture_output=True, text=True)
    reviewed_ok = seen.stderr.count(": the reviewed change (digest")
    if seen.returncode != 0 or reviewed_ok != args.stacks:
        raise SystemExit(f"the reviewed apply did not compare equal:\n{seen.stderr}")
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in results.items()}  # fmt: skip
    plain, reviewed = med["apply"], med["apply --reviewed"]
    print(f"every stack compared equal to the record ({reviewed_ok} of {args.stacks})")
    print(f"{args.stacks} stacks, {args.rounds} rounds, load {load_before:.1f} before, "
          f"{load_after:.1f} after")  # fmt: skip
    print(f"{'command':<20}{'wall':>10}{'CPU':>10}")
    for key, (wall, cpu) in med.items():
        print(f"{key:<20}{wall:>9.2f}s{cpu:>9.2f}s")
    print(
        f"ratio reviewed/plain: wall {reviewed[0] / plain[0]:.2f}, CPU {reviewed[1] / plain[1]:.2f}"
    )
    print(f"per stack: +{(reviewed[0] - plain[0]) / args.stacks:.3f} s wall, "
          f"+{(reviewed[1] - plain[1]) / args.stacks:.3f} s CPU")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
