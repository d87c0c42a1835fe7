"""The kernel's layer under the source rules: a KCL worker given a repository reads
only the repository (not .git) and its Python, writes only its temporary folder, and
opens nothing of /proc, whatever KCL function it finds (Linux Landlock)."""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from pathlib import Path

import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, RepoBuilder

from konfig.build import kcl, sandbox, workers
from konfig.build.limits import Limits


def _attempt(results: dict[str, str], name: str, action: object) -> None:
    try:
        action()  # type: ignore[operator]
    except OSError as exc:
        results[name] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    else:
        results[name] = "allowed"


def _probe(task: tuple[str, str, int]) -> dict[str, str]:
    root, outside, port = Path(task[0]), Path(task[1]), task[2]
    results: dict[str, str] = {}
    _attempt(results, "read a stack", lambda: (root / "appops/p/dev/main.k").read_text())
    _attempt(results, "read kcl.mod", lambda: (root / "kcl.mod").read_text())
    _attempt(results, "read .git/config", lambda: (root / ".git/config").read_text())
    _attempt(results, "read outside", lambda: outside.read_text())
    _attempt(results, "read own environ", lambda: Path("/proc/self/environ").read_bytes())
    parent = f"/proc/{os.getppid()}/environ"
    _attempt(results, "read konfig's environ", lambda: Path(parent).read_bytes())
    _attempt(results, "write the work tree", lambda: (root / "appops/p/dev/x").write_text("x"))
    _attempt(results, "write /tmp", lambda: Path("/tmp/konfig-sandbox-probe").write_text("x"))
    _attempt(results, "write its temporary folder", lambda: tempfile.mkstemp())
    _attempt(results, "connect", lambda: socket.create_connection(("127.0.0.1", port), 2))
    return results


def test_a_worker_of_a_repository_is_confined(repo_builder: RepoBuilder, tmp_path: Path) -> None:
    assert sandbox.abi_version() >= 1, "this kernel offers no Landlock"
    repo_builder.stack("p", "dev", main=SIMPLE_MAIN.format(name="p", namespace="p-dev"))
    root = repo_builder.root
    git_init(root)
    git_commit(root, "a stack")
    outside = tmp_path / "outside.txt"
    outside.write_text("CANARY\n")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    with listener, workers.Pool[tuple[str, str, int]](1, Limits(), root=root) as pool:
        pool.submit(_probe, (str(root), str(outside), port))
        [(_, outcome)] = list(pool.outcomes())
    assert isinstance(outcome, workers.Done), outcome
    assert outcome.value == {
        "read a stack": "allowed",
        "read kcl.mod": "allowed",
        "read .git/config": "EACCES",
        "read outside": "EACCES",
        "read own environ": "EACCES",
        "read konfig's environ": "EACCES",
        "write the work tree": "EACCES",
        "write /tmp": "EACCES",
        "write its temporary folder": "allowed",
        # TCP is the kernel's to refuse from Landlock ABI 4 (Linux 6.7) on
        "connect": "EACCES" if sandbox.abi_version() >= 4 else "allowed",
    }
    assert not (root / "appops/p/dev/x").exists()
    assert not Path("/tmp/konfig-sandbox-probe").exists()


def _kcl_writes(task: tuple[str, str]) -> str:
    work = task[0]
    main = Path(work) / "main.k"
    try:
        kcl.run([str(main)], work_dir=Path(work))
    except kcl.KclError as exc:
        return exc.summary()
    return "ran"


@pytest.mark.parametrize(
    "program",
    [
        'import json\n\nx = json.dump_to_file({{"a": 1}}, "{target}")\n',
        'import crypto\n\nx = crypto.filesha256("{secret}")\n',
    ],
)
def test_kcl_in_a_worker_cannot_reach_past_the_rules(
    repo_builder: RepoBuilder, tmp_path: Path, program: str
) -> None:
    """What the source rules refuse, run anyway (kcl.run directly): the kernel stops it."""
    root = repo_builder.root
    work = root / "appops" / "w"
    work.mkdir(parents=True)
    target = tmp_path / "written.json"
    secret = tmp_path / "secret.txt"
    secret.write_text("CANARY\n")
    (work / "main.k").write_text(program.format(target=target, secret=secret))
    with workers.Pool[tuple[str, str]](1, Limits(), root=root) as pool:
        pool.submit(_kcl_writes, (str(work), str(target)))
        [(_, outcome)] = list(pool.outcomes())
    assert isinstance(outcome, workers.Done), outcome
    assert outcome.value != "ran"
    assert "ermission denied" in outcome.value
    assert not target.exists()


def test_a_worker_reads_packages_a_pth_file_adds(repo_builder: RepoBuilder, tmp_path: Path) -> None:
    """The setup action's layout: a venv without packages whose ``.pth`` files name the
    cached dependencies' site-packages and konfig's source, both outside its prefix (the
    forge e2e failed with "Permission denied: .../kcl_lib/__init__.py" before)."""
    import subprocess
    import sys
    import sysconfig

    import konfig

    repo_builder.stack("p", "dev", main=SIMPLE_MAIN.format(name="p", namespace="p-dev"))
    root = repo_builder.root
    git_init(root)
    git_commit(root, "a stack")
    venv = tmp_path / "konfig-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "konfig-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    Path(site, "konfig-tools.pth").write_text(str(Path(konfig.__file__).parents[1]) + "\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1"}
    run = subprocess.run(
        [str(python), "-m", "konfig", "--root", str(root), "compile", "p/dev"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    assert sandbox.abi_version() >= 1, "this kernel offers no Landlock"
    assert run.returncode == 0, run.stderr
    assert "kind: Namespace" in run.stdout
