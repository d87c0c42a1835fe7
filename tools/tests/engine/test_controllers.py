"""konfig status of a stack in pull delivery reads the Flux Kustomization reconciling its
folder (engine/controllers.py), on the real control plane with the CRDs of the Flux
release hack/flux pins. The Kustomization's status is written here through the status
subresource in the shape kustomize-controller v1.9.6 writes it (the controllers
themselves: tools/tests/test_pull_manifests.py and hack/flux)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
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
    folder = f"{cluster_folder}/{project}/dev/"
    assert stack["pull"]["error"] == (
        f"no Flux Kustomization or Argo CD Application reconciles {folder}"
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


ARGOCD = Path(__file__).resolve().parents[1] / "fixtures/argocd"


def _application_status(
    rendered: str, sync: str, health: str, deployed: list[str]
) -> dict[str, Any]:
    """The status argocd-application-controller (v3.5) writes on an Application: the
    comparison (sync: status, the revision compared with), the health, and one history
    entry per sync that succeeded (the revision deployed)."""
    source = {"repoURL": "https://forge.example/acme/config.git", "targetRevision": "rendered"}
    return {
        "status": {
            "sync": {"status": sync, "revision": rendered,
                     "comparedTo": {"source": source, "destination": {"name": "in-cluster"}}},
            "health": {"status": health, "lastTransitionTime": "2026-01-01T00:00:00Z"},
            "history": [
                {"id": i, "revision": rev, "deployedAt": "2026-01-01T00:00:00Z",
                 "deployStartedAt": "2026-01-01T00:00:00Z", "source": source}
                for i, rev in enumerate(deployed)
            ],
            "reconciledAt": "2026-01-01T00:00:00Z",
            "sourceType": "Directory",
            "operationState": {
                "phase": "Succeeded", "message": "successfully synced (all tasks run)",
                "startedAt": "2026-01-01T00:00:00Z",
                "operation": {"sync": {"revision": deployed[-1] if deployed else rendered}},
                "syncResult": {"revision": deployed[-1] if deployed else rendered,
                               "source": source},
            },
        }
    }  # fmt: skip


@pytest.mark.cluster
def test_status_reads_the_argo_cd_application_of_the_folder(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    """Argo CD's controller cannot be built here (the Go module proxy refuses its
    gitops-engine), so it is emulated: its Application CRD, vendored from Argo CD v3.5.1
    (fixtures/argocd/ORIGIN.md), is installed on the real control plane; the Application
    is the one pull/argocd/applicationset.yaml generates for the stack's folder; its
    status is written as the application controller writes it (a merge patch of the
    object: the CRD has no status subresource), and konfig status reads it back."""
    cluster.kubectl("apply", "--server-side", "-f", str(ARGOCD / "application-crd.yaml"))
    established = ""
    for _ in range(120):  # (kubectl wait fails on a CRD whose status is not written yet)
        crd = json.loads(
            cluster.kubectl("get", "crd", "applications.argoproj.io", "-o", "json").stdout
        )
        conditions = (crd.get("status") or {}).get("conditions") or []
        established = next((c["status"] for c in conditions if c["type"] == "Established"), "")
        if established == "True":
            break
        time.sleep(0.5)
    assert established == "True"
    cluster.kubectl("create", "namespace", "argocd", check=False)
    project = unique("argostatus")
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
    first_source = _git(root, "rev-parse", "HEAD").strip()
    assert konfig("publish", cwd=root).code == 0
    first = _git(root, "rev-parse", "rendered").strip()
    main = root / f"appops/{project}/dev/main.k"
    main.write_text(main.read_text().replace("nginx:1.27.3", "nginx:1.27.4"))
    _git(root, "commit", "-q", "-am", "1.27.4")
    second_source = _git(root, "rev-parse", "HEAD").strip()
    assert konfig("publish", cwd=root).code == 0
    second = _git(root, "rev-parse", "rendered").strip()

    folder = f"{cluster_folder}/{project}/dev"
    name = f"konfig-{cluster_folder}-{project}-dev"  # as the ApplicationSet names it
    appset = yaml.safe_load((ROOT / "pull/argocd/applicationset.yaml").read_text())
    spec = json.loads(
        json.dumps(appset["spec"]["template"]["spec"])
        .replace("{{ .path.path }}", folder)
        .replace("{{ index .path.segments 0 }}", cluster_folder)
    )
    cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"}, "spec": spec,
    }))  # fmt: skip

    def status() -> dict[str, Any]:
        res = konfig("status", f"{project}/dev", kc, "--json", cwd=root)
        assert res.code == 0, res.err
        (stack,) = json.loads(res.out)["stacks"]
        return cast("dict[str, Any]", stack["pull"])

    def write(body: dict[str, Any]) -> None:
        cluster.kubectl("patch", "application", name, "-n", "argocd", "--type=merge",
                        "--field-manager=argocd-application-controller",
                        "-p", json.dumps(body))  # fmt: skip

    pull = status()  # not reconciled yet: no status
    assert (pull["controller"], pull["object"], pull["ready"]) == (
        "argocd", f"argocd/{name}", "Unknown",
    )  # fmt: skip
    assert pull["sourceCommit"] is None and pull["revision"] is None

    write(_application_status(first, "Synced", "Healthy", [first]))
    pull = status()
    assert (pull["sync"], pull["health"], pull["ready"]) == ("Synced", "Healthy", "True")
    assert (pull["revision"], pull["renderedCommit"], pull["sourceCommit"]) == (
        first, first, first_source,
    )  # fmt: skip
    text = " ".join(konfig("status", f"{project}/dev", kc, cwd=root).out.split())  # unwrapped
    assert f"Argo CD Application argocd/{name} Synced, Healthy at {first}" in text
    assert f"source commit {first_source[:12]} live" in text

    # the second publish: compared, not synced yet; what is live is still the first
    write(_application_status(second, "OutOfSync", "Progressing", [first]))
    pull = status()
    assert (pull["sync"], pull["health"], pull["ready"]) == ("OutOfSync", "Progressing", "False")
    assert (pull["renderedCommit"], pull["sourceCommit"]) == (first, first_source)
    assert f"the branch is at {second}" in pull["message"]

    write(_application_status(second, "Synced", "Healthy", [first, second]))
    pull = status()
    assert (pull["ready"], pull["renderedCommit"], pull["sourceCommit"]) == (
        "True", second, second_source,
    )  # fmt: skip
    cluster.kubectl("delete", "application", name, "-n", "argocd")
