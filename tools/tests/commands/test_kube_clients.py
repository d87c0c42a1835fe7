"""konfig's own kubeconfig reader and the kubernetes client's loader give the same
results end to end: preview, apply, status and their errors, on the real local control
plane (``KONFIG_KUBE_CLIENT=kubernetes`` makes konfig use the loader for every
kubeconfig; the default reads the kubeconfigs konfig understands itself)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine.kube import CLIENT_AUTO, CLIENT_KUBERNETES

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"
CLIENTS = (CLIENT_AUTO, CLIENT_KUBERNETES)


def _both(
    konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch, *args: str
) -> dict[str, tuple[int, str, str]]:
    """The command run once with each client: (exit code, stdout, stderr) by client."""
    out = {}
    for client in CLIENTS:
        monkeypatch.setenv("KONFIG_KUBE_CLIENT", client)
        res = konfig(*args)
        out[client] = (res.code, res.out, res.err)
    monkeypatch.delenv("KONFIG_KUBE_CLIENT")
    return out


def _same(results: dict[str, tuple[int, str, str]], code: int) -> tuple[int, str, str]:
    auto, loader = results[CLIENT_AUTO], results[CLIENT_KUBERNETES]
    assert auto[0] == code, auto
    assert auto == loader
    return auto


def _status(text: str) -> Any:
    data = json.loads(text)
    for stack in data.get("stacks", []):
        stack.pop("age", None)  # "applied N seconds ago" moves between the two runs
    return data


def test_preview_apply_status_and_errors_are_the_same_on_both_paths(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = unique("p13kc")
    main = SIMPLE_MAIN.format(name=project, namespace=project)
    repo_builder.stack(project, "dev", main=main, stack_yaml=STACK_YAML)
    repo_builder.write(".gitignore", "/.cache/\n")
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "a stack")
    root = str(repo_builder.root)
    address = f"{project}/dev"
    kc = f"--kubeconfig={cluster.kubeconfig}"

    # nothing applied: every object to create
    first = _both(konfig, monkeypatch, "--root", root, "preview", address, "--format", "json", kc)
    _, out, _ = _same(first, 0)
    assert json.loads(out)["counts"]["create"] >= 3

    # apply through the kubernetes client's loader, then preview and status on both
    monkeypatch.setenv("KONFIG_KUBE_CLIENT", CLIENT_KUBERNETES)
    applied = konfig("apply", address, "--yes", kc, cwd=repo_builder.root)
    assert applied.code == 0, applied.out + applied.err
    monkeypatch.delenv("KONFIG_KUBE_CLIENT")
    again = _both(konfig, monkeypatch, "--root", root, "preview", address, "--format", "json", kc)
    _, out, _ = _same(again, 0)
    counts = json.loads(out)["counts"]
    assert counts["create"] == 0 and counts["unchanged"] >= 3, counts
    status = _both(konfig, monkeypatch, "--root", root, "status", "--json", kc)
    auto, loader = status[CLIENT_AUTO], status[CLIENT_KUBERNETES]
    assert auto[0] == loader[0] == 0, (auto, loader)
    assert _status(auto[1]) == _status(loader[1])
    assert any(s["path"] == f"appops/{address}" for s in json.loads(auto[1])["stacks"])

    # apply again on konfig's own path: nothing to do, the same on the cluster
    applied = konfig("apply", address, "--yes", kc, cwd=repo_builder.root)
    assert applied.code == 0, applied.out + applied.err

    # a 403: the restricted identity may not read the stack's objects
    denied = _both(
        konfig, monkeypatch, "--root", root, "preview", address, "--context", "restricted", kc
    )
    _, out, _ = _same(denied, 1)
    assert "user 'restricted' of context 'restricted' may not" in out

    # an unknown client is a usage error
    monkeypatch.setenv("KONFIG_KUBE_CLIENT", "kubectl")
    wrong = konfig("--root", root, "preview", address, kc)
    assert wrong.code == 2
    assert "KONFIG_KUBE_CLIENT='kubectl'" in wrong.out + wrong.err
