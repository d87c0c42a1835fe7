"""A built konfig package carries the template, and ``konfig init`` from it makes the
same repository as from the checkout it was built from (setup.py, konfig.repo.template).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from fixtures.repos import AUTHOR

from konfig.repo.template import RENDERED, render, template_paths, tracked_files

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_carries_the_template_and_init_copies_it_from_there(tmp_path: Path) -> None:
    # a clone: the wheel is built from what git tracks, and the build writes into it
    clone = tmp_path / "src"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), "."],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("konfig-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    expected = template_paths(tracked_files(clone))
    packaged = sorted(
        n.removeprefix("konfig/data/template/")
        for n in names
        if n.startswith("konfig/data/template/")
    )
    assert packaged == expected
    # installed (pip keeps the scripts' modes), first on the path, it makes a repository
    site = tmp_path / "site"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    dest = tmp_path / "acme"
    env = {**os.environ, **AUTHOR, "PYTHONPATH": str(site)}
    env.pop("CI", None)
    made = subprocess.run(
        [sys.executable, "-m", "konfig", "init", str(dest), "--name", "acme", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    data = json.loads(made.stdout)
    assert data["template"] == {
        "source": "package",
        "path": str(site / "konfig" / "data" / "template"),
    }
    assert data["files"] == template_paths(expected)
    for rel in expected:
        mine, theirs = dest / rel, clone / rel
        if rel == "kcl.mod":  # the one file the answers change here
            continue
        # the README and the Makefile without their project-only lines
        want = render(rel, theirs.read_text()).encode() if rel in RENDERED else theirs.read_bytes()
        assert mine.read_bytes() == want, rel
        assert (mine.stat().st_mode & 0o111 != 0) == (theirs.stat().st_mode & 0o111 != 0), rel
