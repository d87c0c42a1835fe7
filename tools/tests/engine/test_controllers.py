"""konfig status of a stack in pull delivery reads the Flux Kustomization reconciling its
folder (engine/controllers.py), on the real control plane with the CRDs of the Flux
release hack/flux pins. The Kustomization's status is written here through the status
subresource in the shape kustomize-controller v1.9.6 writes it (the controllers
themselves: tools/tests/test_pull_manifests.py and hack/flux)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import AUTHOR, KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine.controllers import ControllerStatus, reconciling

ROOT = Path(__file__).resolve().parents[3]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **AUTHOR}, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip


def test_the_deepest_kustomization_above_the_folder_reconciles_it() -> None:
    found = [
        ControllerStatus("flux", "f/all", "", "True"),
        ControllerStatus("flux", "f/local", "local", "True"),
        ControllerStatus("flux", "f/other", "local-2", "True"),
        ControllerStatus("flux", "f/stack", "local/shop/dev", "False"),
    ]
    assert reconciling(found, "local/shop/dev") == found[3]
    assert reconciling(found, "local/shop/prod") == found[1]
    assert reconciling(found, "edge/shop/dev") == found[0]
    assert reconciling(found[1:3], "edge/shop/dev") is None
    assert ControllerStatus("flux", "a", "", "", revision="rendered@sha1:abc").rendered_commit == (
        "abc"
    )


@pytest.mark.cluster
def test_status_says_which_source_commit_the_controller_applied(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    for crd in subprocess.run(
        [str(ROOT / "hack/flux"), "crds"], capture_output=True, text=True, check=True, timeout=600
    ).stdout.split():
        cluster.kubectl("apply", "--server-side", "-f", crd)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    cluster.kubectl("create", "namespace", "flux-system", check=False)
    project = unique("pullstatus")
    cluster_folder = unique("c")
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    repo_builder.stack(
        project,
        "dev",
        stack_yaml="name: dev\nkubernetes:\n  context: admin\n"
        f"delivery:\n  mode: pull\n  target:\n    cluster: {cluster_folder}\n",
    )
    _git(root, "init", "-q", "--initial-branch=main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "pull")
    source = _git(root, "rev-parse", "HEAD").strip()
    assert konfig("publish", cwd=root).code == 0
    rendered = _git(root, "rev-parse", "rendered").strip()

    res = konfig("status", f"{project}/dev", kc, "--json", cwd=root)
    (stack,) = json.loads(res.out)["stacks"]
    assert (
        stack["pull"]["error"]
        == f"no Flux Kustomization reconciles {cluster_folder}/{project}/dev/"
    )

    name = unique("konfig")
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "1m", "path": f"./{cluster_folder}", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "konfig-rendered"}},
    }))  # fmt: skip
    status = {
        "status": {
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                "message": f"Applied revision: rendered@sha1:{rendered}",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1,
            }],
            "lastAppliedRevision": f"rendered@sha1:{rendered}",
            "observedGeneration": 1,
        }
    }  # fmt: skip
    cluster.kubectl("patch", "kustomization", name, "-n", "flux-system", "--type=merge",
                    "--subresource=status", "-p", json.dumps(status))  # fmt: skip
    res = konfig("status", f"{project}/dev", kc, "--json", cwd=root)
    assert res.code == 0, res.err
    (stack,) = json.loads(res.out)["stacks"]
    pull = stack["pull"]
    assert (pull["controller"], pull["object"], pull["ready"]) == (
        "flux", f"flux-system/{name}", "True",
    )  # fmt: skip
    assert pull["revision"] == f"rendered@sha1:{rendered}"
    assert (pull["renderedCommit"], pull["sourceCommit"]) == (rendered, source)
    text = konfig("status", f"{project}/dev", kc, cwd=root)
    assert f"Flux Kustomization flux-system/{name} ready at rendered@sha1:{rendered}" in text.out
    assert f"source commit {source[:12]} live" in text.out
    cluster.kubectl("delete", "kustomization", name, "-n", "flux-system")
