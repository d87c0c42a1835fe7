"""A cluster that never answers, and a credential plugin that hangs, stop konfig within
a bound with a message that names what did not answer (issue 19, item 2).

Real sockets and real processes: a TCP server that accepts connections and never
replies, and an ``exec`` credential plugin that sleeps. konfig runs as a separate
process so that a hang fails the test instead of holding it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.faults import (
    SilentServer,
    closed_port_url,
    exec_user,
    plugin_script,
    run_konfig,
    wait_until_gone,
    write_kubeconfig,
)
from fixtures.repos import RepoBuilder

# What the test allows konfig beyond the timeout it was given: interpreter and client
# start-up, compiling one small stack, and the exit. Generous for a loaded 2-core CI box.
SLACK = 25.0


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def _assert_clean(result: subprocess.CompletedProcess[str], leftovers: list[int]) -> None:
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert "ERROR:root" not in output, output
    assert leftovers == [], f"processes left running: {leftovers}"


@pytest.mark.parametrize("client", ["auto", "kubernetes"])
def test_preview_against_a_server_that_never_answers(
    repo_builder: RepoBuilder, silent_server: SilentServer, tmp_path: Path, client: str
) -> None:
    """On both paths: the kubeconfig read by konfig, and by the kubernetes client."""
    repo_builder.stack("shop", "dev")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", silent_server.url, {"token": "t"})

    result, seconds, leftovers = run_konfig(
        repo_builder.root,
        ["preview", "shop/dev", "--kubeconfig", str(kubeconfig), "--request-timeout", "3"],
        env={"KONFIG_KUBE_CLIENT": client},
    )

    assert result.returncode == 1, result.stdout + result.stderr
    assert seconds < 3 + SLACK, seconds
    assert silent_server.accepted >= 1
    output = result.stdout + result.stderr
    assert silent_server.url in output
    assert "did not answer within 3s" in output
    assert "kubectl" in output and "--request-timeout" in output  # how to check it
    _assert_clean(result, leftovers)


def test_apply_against_a_server_that_never_answers_uses_the_environment_timeout(
    repo_builder: RepoBuilder, silent_server: SilentServer, tmp_path: Path
) -> None:
    repo_builder.stack("shop", "dev")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", silent_server.url, {"token": "t"})

    result, seconds, leftovers = run_konfig(
        repo_builder.root,
        ["apply", "shop/dev", "--yes", "--allow-dirty", "--kubeconfig", str(kubeconfig)],
        env={"KONFIG_REQUEST_TIMEOUT": "2"},
    )

    assert result.returncode == 1, result.stdout + result.stderr
    assert seconds < 2 + SLACK, seconds
    output = result.stdout + result.stderr
    assert silent_server.url in output and "did not answer within 2s" in output
    _assert_clean(result, leftovers)


def test_a_credential_plugin_that_hangs_is_stopped_and_named(
    repo_builder: RepoBuilder, tmp_path: Path
) -> None:
    repo_builder.stack("shop", "dev")
    pid_file = tmp_path / "plugin.pid"
    plugin = plugin_script(
        tmp_path / "credential-plugin",
        f'echo $$ > "{pid_file}"\nsleep 600 &\necho $! >> "{pid_file}"\nwait\n',
    )
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", closed_port_url(), exec_user(plugin, "token")
    )

    result, seconds, leftovers = run_konfig(
        repo_builder.root,
        ["preview", "shop/dev", "--kubeconfig", str(kubeconfig)],
        env={"KONFIG_CREDENTIAL_TIMEOUT": "2"},
    )

    assert result.returncode == 1, result.stdout + result.stderr
    assert seconds < 2 + SLACK, seconds
    output = result.stdout + result.stderr
    assert str(plugin) in output
    assert "did not answer within 2s" in output
    assert "user 'ci'" in output
    assert "renew the credentials" not in output  # it was not a 401
    _assert_clean(result, leftovers)
    # the plugin and what it started are gone: nothing keeps running after konfig
    pids = [int(p) for p in pid_file.read_text().split()]
    assert wait_until_gone(pids) == [], pids


def test_a_credential_plugin_that_fails_or_prints_garbage(
    repo_builder: RepoBuilder, tmp_path: Path
) -> None:
    repo_builder.stack("shop", "dev")
    failing = plugin_script(tmp_path / "failing", 'echo "token expired, run: login" >&2\nexit 3\n')
    kubeconfig = write_kubeconfig(tmp_path / "kc1", closed_port_url(), exec_user(failing))
    result, _, leftovers = run_konfig(
        repo_builder.root, ["preview", "shop/dev", "--kubeconfig", str(kubeconfig)]
    )
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert str(failing) in output and "exited with 3" in output
    assert "token expired, run: login" in output
    _assert_clean(result, leftovers)

    garbage = plugin_script(tmp_path / "garbage", "echo not json\n")
    kubeconfig = write_kubeconfig(tmp_path / "kc2", closed_port_url(), exec_user(garbage))
    result, _, leftovers = run_konfig(
        repo_builder.root, ["preview", "shop/dev", "--kubeconfig", str(kubeconfig)]
    )
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert str(garbage) in output and "ExecCredential" in output
    _assert_clean(result, leftovers)
