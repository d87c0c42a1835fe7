#!/usr/bin/env python3
"""Benchmark ``konfig changed`` on a large generated monorepo.

Usage: .venv/bin/python hack/bench_changed.py [--projects 1500] [--stacks 5000] [--seed 42]
       [--rounds 3] [--repo DIR]

Generates the repository with hack/gen_monorepo.py (unless ``--repo`` names one made
earlier), makes a "typical pull request" branch (a stack's main.k, a shared library, a
data file, a project base file, a new stack: 7 files), then measures:

* ``konfig changed --base main --head pr --json`` end to end as a child process, wall
  time and peak RSS (``os.wait4`` rusage of the child): cold (no .cache/konfig); warm
  with the same commits (the remembered answer); warm after a new push to the pull
  request (import-scan cache warm, the analysis itself runs again);
* the same analysis in process (``konfig.detect.changeset.affected_stacks``), cold and after a
  push, which leaves out interpreter start and the import of the CLI's modules;
* the import of ``konfig.cli`` alone (what every konfig command pays before it starts).

Targets (issue #5): cold <= 1.5 s, warm <= 0.3 s, peak RSS <= 300 MB. Prints the exact
commands and the figures; the machine's load average is printed too, because the
figures are only meaningful on an otherwise idle machine.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_monorepo import GIT_ENV, generate  # noqa: E402

KONFIG = [sys.executable, "-m", "konfig"]
CPU: list[float] = []


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT_ENV}, check=True)


def make_pr(root: Path) -> list[str]:
    """A branch ``pr`` with a typical change: 7 files in 5 places."""
    git(root, "checkout", "-q", "-B", "pr", "main")
    edits: list[str] = []

    def append(rel: str, text: str) -> None:
        with open(root / rel, "a", encoding="utf-8") as handle:
            handle.write(text)
        edits.append(rel)

    append("appops/p0007/dev/main.k", "# tweak\n")
    lib = root / "base/pkg/lib5/lib.k"
    if not lib.exists():  # small repositories have fewer libraries
        lib = sorted(root.glob("base/pkg/lib*/lib.k"))[-1]
    append(lib.relative_to(root).as_posix(), "# shared library edit\n")
    data = sorted(root.glob("appops/*/*/config.json"))[0]
    data.write_text('{"logLevel": "trace"}\n')
    edits.append(data.relative_to(root).as_posix())
    base = sorted(root.glob("appops/*/base/base.k"))[3]
    append(base.relative_to(root).as_posix(), "# project base edit\n")
    new = root / "appops/p0011/bench-new"
    shutil.copytree(root / "appops/p0011/dev", new)
    (new / "stack.yaml").write_text("name: bench-new\n")
    edits += [p.relative_to(root).as_posix() for p in sorted(new.rglob("*")) if p.is_file()]
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "typical pull request")
    git(root, "checkout", "-q", "main")
    return edits


def make_pushes(root: Path, count: int) -> list[str]:
    """Branches ``pr-push-<i>``: the pull request plus one more commit touching one stack."""
    names: list[str] = []
    for i in range(count):
        name = f"pr-push-{i}"
        git(root, "checkout", "-q", "-B", name, "pr")
        with open(root / f"appops/p{20 + i:04d}/dev/main.k", "a", encoding="utf-8") as handle:
            handle.write(f"# push {i}\n")
        git(root, "commit", "-q", "-am", f"push {i}")
        names.append(name)
    git(root, "checkout", "-q", "main")
    return names


def child_with_rss(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, the child's own peak RSS (MB, from os.wait4) and its stdout.

    The child's CPU seconds (user + system, its git subprocesses included) are appended
    to ``CPU`` as a load-independent figure.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{err.read().decode()}")
        CPU.append(usage.ru_utime + usage.ru_stime)
        return elapsed, usage.ru_maxrss / 1024, out.read().decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--projects", type=int, default=1500)
    parser.add_argument("--stacks", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repo", type=Path, default=None, help="reuse a generated repo")
    args = parser.parse_args()

    if args.repo is not None and (args.repo / ".git").is_dir():
        root = args.repo.resolve()
    else:
        root = (args.repo or Path("/tmp/konfig-bench-changed")).resolve()
        if root.exists():
            shutil.rmtree(root)
        started = time.perf_counter()
        made = generate(
            root,
            projects=args.projects,
            stacks_per_project=args.stacks / args.projects + 1e-9,
            seed=args.seed,
        )
        print(
            f"generated {made.projects} projects / {made.stacks} stacks / {made.libs} libs in "
            f"{time.perf_counter() - started:.1f} s: {root}"
        )
    edits = make_pr(root)
    print(f"pull request: {len(edits)} files: {', '.join(edits)}")
    print(f"load average before: {os.getloadavg()}")

    pushes = make_pushes(root, args.rounds)
    cmd = [*KONFIG, "changed", "--base", "main", "--head", "pr", "--json"]
    print(f"\ncommand: (cd {root} && {' '.join(cmd)})")
    cold: list[float] = []
    again: list[float] = []
    pushed: list[float] = []
    cold_cpu: list[float] = []
    again_cpu: list[float] = []
    pushed_cpu: list[float] = []
    rss: list[float] = []
    result: dict[str, object] = {}
    for push in pushes:
        shutil.rmtree(root / ".cache", ignore_errors=True)
        secs, mb, out = child_with_rss(cmd, root)
        cold.append(secs)
        cold_cpu.append(CPU[-1])
        rss.append(mb)
        result = json.loads(out)
        secs, mb, _ = child_with_rss(cmd, root)
        again.append(secs)
        again_cpu.append(CPU[-1])
        rss.append(mb)
        # a new push to the pull request: the import cache is warm, the answer is not
        secs, mb, _ = child_with_rss([*cmd[:-3], "--head", push, "--json"], root)
        pushed.append(secs)
        pushed_cpu.append(CPU[-1])
        rss.append(mb)
    stacks = result.get("stacks", [])
    deleted = result.get("deleted_stacks", [])
    assert isinstance(stacks, list) and isinstance(deleted, list)
    print(f"affected stacks: {len(stacks)}; deleted: {len(deleted)}")
    print(f"end to end  cold:                {_stats(cold)}")
    print(f"                     CPU seconds {_stats(cold_cpu)}")
    print(f"end to end  warm, same commits:  {_stats(again)}")
    print(f"                     CPU seconds {_stats(again_cpu)}")
    print(f"end to end  warm, after a push:  {_stats(pushed)}")
    print(f"                     CPU seconds {_stats(pushed_cpu)}")
    print(f"peak RSS (max of all runs): {max(rss):.0f} MB")

    probe = (
        "import time,sys; t=time.perf_counter(); import konfig.cli; print(time.perf_counter()-t)"
    )
    imports = [
        float(
            subprocess.run(
                [sys.executable, "-c", probe], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(args.rounds)
    ]
    print(f"import konfig.cli alone: median {statistics.median(imports):.3f} s")
    probe = probe.replace("konfig.cli", "konfig.commands.changed")
    own = [
        float(
            subprocess.run(
                [sys.executable, "-c", probe], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(args.rounds)
    ]
    print(
        f"import konfig.commands.changed (all `konfig changed` loads before networkx): "
        f"median {statistics.median(own):.3f} s"
    )

    code = (
        "import time,shutil,sys; from pathlib import Path; "
        "from konfig.detect.changeset import affected_stacks; "
        "from konfig.repo.layout import cache_dir; r=Path('.').resolve(); "
        "shutil.rmtree(r/'.cache', ignore_errors=True); "
        "import networkx; "
        "t=time.perf_counter(); u=time.process_time(); "
        "affected_stacks(r,'main','pr',cache=cache_dir(r)); "
        "c=time.perf_counter()-t; cu=time.process_time()-u; "
        "t=time.perf_counter(); u=time.process_time(); "
        "affected_stacks(r,'main','pr-push-0',cache=cache_dir(r)); "
        "print(c, time.perf_counter()-t, cu, time.process_time()-u)"
    )
    pairs = [
        subprocess.run(
            [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(args.rounds)
    ]
    in_cold = [float(p[0]) for p in pairs]
    in_warm = [float(p[1]) for p in pairs]
    print(f"in process  cold:                {_stats(in_cold)}")
    print(f"          CPU (no git children)  {_stats([float(p[2]) for p in pairs])}")
    print(f"in process  warm, after a push:  {_stats(in_warm)}")
    print(f"          CPU (no git children)  {_stats([float(p[3]) for p in pairs])}")
    print(f"load average after: {os.getloadavg()}")
    return 0


def _stats(values: list[float]) -> str:
    runs = ", ".join(f"{v:.3f}" for v in values)
    return f"median {statistics.median(values):.3f} s  (runs {runs})"


if __name__ == "__main__":
    sys.exit(main())
