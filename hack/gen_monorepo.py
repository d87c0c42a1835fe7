#!/usr/bin/env python3
"""Generate a Konfig monorepo of N projects for tests and benchmarks (deterministic per seed).

Usage: .venv/bin/python hack/gen_monorepo.py --projects N --stacks-per-project M --seed S OUT

``M`` may be fractional: project ``i`` gets ``floor((i+1)*M) - floor(i*M)`` stacks (at
least one), so ``--projects 1500 --stacks-per-project 3.3334`` gives 5,000 stacks.

What it writes, using the template's real ``kcl.mod``, ``konfig.yaml`` and ``base/``:

* ``base/pkg/lib<k>/`` shared libraries (labels and replica helpers). ``lib<k>`` imports
  ``lib<k+1>`` for the first few, so there is a transitive chain three packages deep; a
  project's ``base/base.k`` imports one library, so each library is used by a subset of
  projects;
* ``appops/p<i>/project.yaml`` and, for most projects, ``appops/p<i>/base/base.k``
  declaring the project's Server;
* stacks ``appops/p<i>/<env>/`` with ``stack.yaml``, ``main.k`` and
  ``ci-test/settings.yaml``; some read a data file (``config.json``) with ``file.read``,
  some import a second library directly.

Then ``git init``, one commit with a pinned author and date (unless ``--no-git``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
ENVS = ("dev", "staging", "prod", "qa", "perf", "canary", "sandbox", "eu", "us", "ap")
CHAIN = 3  # lib0 -> lib1 -> lib2: a deep transitive import
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Konfig Generator",
    "GIT_AUTHOR_EMAIL": "gen@konfig.invalid",
    "GIT_COMMITTER_NAME": "Konfig Generator",
    "GIT_COMMITTER_EMAIL": "gen@konfig.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


@dataclass(frozen=True)
class Generated:
    root: Path
    projects: int
    stacks: int
    libs: int


def lib_text(k: int, libs: int) -> str:
    chained = k + 1 < min(CHAIN, libs)
    head = f"import base.pkg.lib{k + 1} as next\n\n" if chained else ""
    extra = " | next.labels" if chained else ""
    return (
        f'"""Shared library {k}: labels and replica rules used by a subset of projects."""\n\n'
        f"{head}"
        f'labels: {{str:str}} = {{"konfig.dev/lib{k}" = "v1"}}{extra}\n\n'
        "replicas_for = lambda env: str -> int {\n"
        '    3 if env == "prod" else 1\n'
        "}\n"
    )


def project_base_text(name: str, lib: int, image_tag: int) -> str:
    return (
        "import base.pkg.models.frontend\n"
        f"import base.pkg.lib{lib} as lib\n\n"
        "# Shared by every stack of the project; stacks set what differs.\n"
        "app: frontend.Server {\n"
        f'    name = "{name}"\n'
        f'    image = "registry.example.com/{name}:1.{image_tag}.0"\n'
        "    labels = lib.labels\n"
        "    ports = [{port = 8080}]\n"
        "}\n"
    )


def stack_main_text(
    project: str, env: str, *, has_base: bool, data_file: bool, extra_lib: int | None, tag: int
) -> str:
    imports = ["import base.pkg.models.frontend"]
    if data_file:
        imports += ["import file", "import json"]
    if extra_lib is not None:
        imports.append(f"import base.pkg.lib{extra_lib} as extra")
    body: list[str] = []
    if data_file:
        body.append('_config = json.decode(file.read("config.json"))')
    body.append("app: frontend.Server {")
    if not has_base:
        body.append(f'    name = "{project}"')
        body.append(f'    image = "registry.example.com/{project}:2.{tag}.0"')
    body.append(f'    namespace = "{project}-{env}"')
    if extra_lib is not None:
        body.append('    replicas = extra.replicas_for(option("env"))')
    env_vars = [f'"ENV" = "{env}"']
    if data_file:
        env_vars.append('"LOG_LEVEL" = _config.logLevel')
    body.append("    env = {" + ", ".join(env_vars) + "}")
    body.append("}")
    return "\n".join(imports) + "\n\n" + "\n".join(body) + "\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def generate(
    out: Path,
    *,
    projects: int,
    stacks_per_project: float,
    seed: int,
    libs: int | None = None,
    git: bool = True,
    template: Path = TEMPLATE,
) -> Generated:
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} exists and is not empty")
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("kcl.mod", "konfig.yaml"):
        shutil.copy2(template / name, out / name)
    shutil.copytree(
        template / "base", out / "base", ignore=shutil.ignore_patterns("*_test.k", "_kcl_test_*")
    )
    write(out / ".gitignore", "/.cache/\n")
    n_libs = libs if libs is not None else max(CHAIN + 1, projects // 40)
    for k in range(n_libs):
        write(out / f"base/pkg/lib{k}/lib.k", lib_text(k, n_libs))
    total = 0
    width = max(4, len(str(projects)))
    for i in range(projects):
        name = f"p{i:0{width}d}"
        pdir = out / "appops" / name
        write(pdir / "project.yaml", f"name: {name}\ndescription: generated project {i}\n")
        has_base = rng.random() < 0.8
        if has_base:
            write(pdir / "base/base.k", project_base_text(name, rng.randrange(n_libs), i))
        count = max(
            1, math.floor((i + 1) * stacks_per_project) - math.floor(i * stacks_per_project)
        )
        for j in range(count):
            env = ENVS[j] if j < len(ENVS) else f"env{j}"
            sdir = pdir / env
            data_file = rng.random() < 0.2
            extra_lib = rng.randrange(n_libs) if rng.random() < 0.25 else None
            write(sdir / "stack.yaml", f"name: {env}\nkubernetes:\n  context: admin\n")
            write(
                sdir / "main.k",
                stack_main_text(
                    name, env, has_base=has_base, data_file=data_file, extra_lib=extra_lib, tag=j
                ),
            )
            write(sdir / "ci-test/settings.yaml", f"kcl_options:\n  - key: env\n    value: {env}\n")
            if data_file:
                level = rng.choice(["debug", "info", "warn"])
                write(sdir / "config.json", json.dumps({"logLevel": level}) + "\n")
            total += 1
    if git:
        env = {**os.environ, **GIT_ENV}
        for args in (
            ["init", "-q", "-b", "main"],
            ["add", "-A"],
            ["commit", "-q", "-m", f"generated monorepo (seed {seed})"],
        ):
            subprocess.run(["git", *args], cwd=out, env=env, check=True)
    return Generated(out, projects, total, n_libs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--projects", type=int, required=True)
    parser.add_argument("--stacks-per-project", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--libs", type=int, default=None, help="shared libraries (default N/40)")
    parser.add_argument("--no-git", action="store_true", help="do not make a git repository")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    made = generate(
        args.out,
        projects=args.projects,
        stacks_per_project=args.stacks_per_project,
        seed=args.seed,
        libs=args.libs,
        git=not args.no_git,
    )
    print(
        f"generated {made.projects} projects, {made.stacks} stacks, {made.libs} libraries "
        f"in {made.root}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
