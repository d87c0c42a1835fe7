"""hack/forge's errors: each names what is missing, where it looked and how to fix it.

Run against the real script; the cases that get past the build use the cached
binaries (`hack/forge build`, which ``make test`` runs first).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.forge

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "forge"


def forge(
    *args: str, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def forge_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "forge"
    yield path
    res = forge("down", env={"KONFIG_FORGE_DIR": str(path)})
    assert res.returncode == 0, res.stderr


def test_missing_sources_say_where_and_how(tmp_path: Path) -> None:
    res = forge("build", env={"KONFIG_FORGE_SOURCES": str(tmp_path / "nowhere")})
    assert res.returncode == 1
    assert str(tmp_path / "nowhere") in res.stderr
    assert "KONFIG_FORGE_SOURCES" in res.stderr and "KONFIG_FORGE_RUNNER_SRC" in res.stderr
    missing = forge("build", env={"KONFIG_FORGE_RUNNER_SRC": str(tmp_path / "absent")})
    assert missing.returncode == 1 and "KONFIG_FORGE_RUNNER_SRC" in missing.stderr


def test_missing_go_is_named(tmp_path: Path) -> None:
    # A runner source not built yet, and no Go on PATH.
    src = tmp_path / "act_runner-x"
    src.mkdir()
    (src / "go.mod").write_text("module example.invalid/runner\n\ngo 1.22\n")
    (src / "main.go").write_text("package main\n\nfunc main() {}\n")
    env = {"KONFIG_FORGE_RUNNER_SRC": str(src), "PATH": "/usr/bin:/bin"}
    if shutil.which("go", path=env["PATH"]):
        pytest.fail("go is in /usr/bin or /bin here; this test needs a PATH without it")
    res = forge("build", env=env)
    assert res.returncode == 1
    assert "`go` is not on PATH" in res.stderr and "golang" in res.stderr


def test_missing_postgres_names_the_package(forge_dir: Path, tmp_path: Path) -> None:
    env = {"KONFIG_FORGE_DIR": str(forge_dir), "KONFIG_FORGE_PG_BIN": str(tmp_path / "pg")}
    res = forge("up", env=env)
    assert res.returncode == 1
    assert str(tmp_path / "pg") in res.stderr
    assert "postgresql" in res.stderr and "KONFIG_FORGE_PG_BIN" in res.stderr


def test_port_in_use_is_named(forge_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        forge_dir.mkdir()
        (forge_dir / "state.json").write_text(
            json.dumps(
                {
                    "http_port": port,
                    "pg_port": _free_port(),
                    "cache_ports": [_free_port() for _ in range(3)],
                    "secret_key": "k",
                    "internal_token": "t",
                    "admin_password": "p4ssw0rd-p4ssw0rd",
                    "run_user": getpass.getuser(),
                    "root_url": f"http://forge.localhost:{port}",
                }
            )
        )
        res = forge("up", env={"KONFIG_FORGE_DIR": str(forge_dir)})
    assert res.returncode == 1
    assert f"127.0.0.1:{port} is in use" in res.stderr, res.stderr
    assert "hack/forge down" in res.stderr


def test_status_and_down_of_nothing(tmp_path: Path) -> None:
    env = {"KONFIG_FORGE_DIR": str(tmp_path / "none")}
    status = forge("status", env=env)
    assert status.returncode == 1 and "not running" in status.stderr
    down = forge("down", env=env)
    assert down.returncode == 0 and "nothing to stop" in down.stderr
    usage = forge("sideways", env=env)
    assert usage.returncode == 2 and "unknown command" in usage.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
