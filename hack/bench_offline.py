#!/usr/bin/env python3
"""The offline preview of a base-model change touching 1,000 stacks, and its comment.

Usage: .venv/bin/python hack/bench_offline.py [--projects 300] [--stacks-per-project 3.3334]
       [--seed 42] [--sample 20] [--repo DIR]

Generates the repository with hack/gen_monorepo.py (unless ``--repo`` names one made
earlier), makes a branch ``pr`` that raises the base model's ``small`` resource limits
(every stack changes), and runs as child processes, CPU seconds (``getrusage`` of the
children: konfig and its compile workers) and wall time each:

1. ``konfig preview --offline --base main --head pr --no-cache``: every affected stack
   compiled at the base and at the merge, no cache (2 x 1,000 compiles), diffed;
2. ``konfig compile --all --out DIR`` on main (the base-side Specs a trusted run of the
   default branch caches, apply.yml ``base-specs``; not timed), then ``konfig preview
   --offline --no-cache --base-specs DIR``: a fresh runner with that cache, the base side
   read from it (each file checked against the spec contract), the merge side compiled;
   its JSON must equal (1)'s;
3. ``konfig compile --all`` on main (what a trusted run on main leaves in the compile
   cache; not timed), then ``konfig preview --offline --base main --head pr``: the base
   side from the compile cache, the merge side compiled;
4. ``konfig report --offline-preview ... --pr-from fork``: the comment from (2);
5. the peer, alternating with nothing else: the render-then-diff tools' way (one render
   per app and commit), here one process per sampled stack and side that loads kcl-lib
   and compiles the stack's entry files at that commit, nothing else; its CPU per
   stack and side times 2 x the stacks is the peer's figure for the whole change.

It checks that the preview shows every stack changed and the comment states the one
change once, then prints the figures, the ratio to the peer and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))

from bench_compile_batch import PEER  # noqa: E402
from gen_monorepo import GIT_ENV, generate  # noqa: E402

from konfig.build.compiler import compile_input  # noqa: E402
from konfig.repo.layout import discover  # noqa: E402

KONFIG = [sys.executable, "-m", "konfig"]


def run(cmd: list[str], cwd: Path, *, ok: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    """Run ``cmd``; (wall seconds, CPU seconds of the child and its children, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in ok:
        raise SystemExit(
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    return wall, cpu, proc.stdout


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **GIT_ENV}, check=True, capture_output=True
    )
    return done.stdout.decode().strip()


def make_pr(root: Path) -> None:
    git(root, "checkout", "-q", "-B", "pr", "main")
    path = root / "base/pkg/models/frontend/container.k"
    text = path.read_text(encoding="utf-8")
    old = 'cpuLimit = "250m", memoryLimit = "256Mi"}'
    if old not in text:
        raise SystemExit(f"{path}: {old!r} not found: the model changed")
    path.write_text(text.replace(old, 'cpuLimit = "500m", memoryLimit = "512Mi"}'), "utf-8")
    git(root, "commit", "-qam", "frontend: larger small limits")
    git(root, "checkout", "-q", "main")


def peer(root: Path, sample: list[str], tmp: Path) -> tuple[float, float]:
    """(wall, CPU) of one kcl-lib process per sampled stack and side, both commits
    written out from git (``git archive``) as a render-then-diff tool checks them out."""
    sides = {}
    for ref in ("main", "pr"):
        dest = tmp / f"peer-{ref}"
        dest.mkdir()
        archive = subprocess.run(["git", "archive", ref], cwd=root, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
        sides[ref] = discover(dest)
    wall = cpu = 0.0
    for path in sample:
        for repo in sides.values():
            stack = next(s for s in repo.stacks if s.path == path)
            item = compile_input(repo, stack)
            arg = json.dumps([list(item.files), str(repo.root), list(item.options)])
            w, c, _ = run([sys.executable, "-c", PEER, arg], repo.root)
            wall += w
            cpu += c
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", type=int, default=300)
    parser.add_argument("--stacks-per-project", type=float, default=3.3334)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--repo", type=Path, default=None)
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-offline-") as tmp_name:
        tmp = Path(tmp_name)
        root = args.repo or tmp / "repo"
        if args.repo is None:
            generate(
                root, projects=args.projects, stacks_per_project=args.stacks_per_project,
                seed=args.seed,
            )  # fmt: skip
        make_pr(root)
        n = len(discover(root).stacks)
        out = tmp / "offline.json"
        offline = [*KONFIG, "preview", "--offline", "--base", "main", "--head", "pr"]
        cold = run([*offline, "--no-cache", "--format", "json", "--out", str(out)], root)
        cold_doc = json.loads(out.read_text(encoding="utf-8"))
        specs = tmp / "base-specs"
        run([*KONFIG, "compile", "--all", "--no-cache", "--out", str(specs)], root)
        cached_specs = run(
            [*offline, "--no-cache", "--base-specs", str(specs), "--format", "json",
             "--out", str(out)],
            root,
        )  # fmt: skip
        same = json.loads(out.read_text(encoding="utf-8")) == cold_doc
        run([*KONFIG, "compile", "--all"], root)  # main's cache, as a trusted run leaves it
        warm = run([*offline, "--format", "json", "--out", str(out)], root)
        doc = json.loads(out.read_text(encoding="utf-8"))
        changed = sum(1 for s in doc["stacks"] if s["counts"]["update"])
        head = doc["mode"]["head"]
        comment = tmp / "comment.md"
        report = run(
            [*KONFIG, "report", "--offline-preview", str(out), "--pr-from", "fork",
             "--sha", head, "--out", str(comment)],
            root,
        )  # fmt: skip
        text = comment.read_text(encoding="utf-8")
        sample = random.Random(args.seed).sample(
            sorted(s["path"] for s in doc["stacks"]), args.sample
        )
        peer_wall, peer_cpu = peer(root, sample, tmp)
    per_side = peer_cpu / (2 * len(sample))
    peer_total = per_side * 2 * n
    print(f"stacks: {n}; changed in the offline preview: {changed}")
    print(f"comment: {len(text):,} characters; first line: {text.splitlines()[0]}")
    for what, (wall, cpu, _) in (
        ("offline preview, no cache (2 x compile)", cold),
        ("offline preview, base-side Specs cached (--base-specs)", cached_specs),
        ("offline preview, base from the cache", warm),
        ("konfig report --offline-preview (the comment)", report),
    ):
        print(f"{what:<56} {wall:7.1f} s wall {cpu:7.1f} s CPU")
    print(
        f"{'peer: a kcl-lib process per stack and side':<48} "
        f"{per_side * 1000:7.1f} ms CPU each ({len(sample)} stacks x 2 sampled, "
        f"{peer_wall:.1f} s wall); for {n} x 2: {peer_total:7.1f} s CPU"
    )
    print(f"konfig offline (no cache) vs the peer: {cold[1] / peer_total:.3f}x CPU")
    print(
        f"base-side Specs cached vs no cache: {cached_specs[1] / cold[1]:.3f}x CPU, "
        f"{cached_specs[0] / cold[0]:.3f}x wall; the same preview JSON: {same}"
    )
    print(f"konfig offline + comment, base cached: {warm[0] + report[0]:.1f} s wall")
    print(f"load average before: {load}, after: {os.getloadavg()}")
    ok = changed == n and "**1** distinct change" in text and same
    print(f"every stack changed and one distinct change in the comment: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
