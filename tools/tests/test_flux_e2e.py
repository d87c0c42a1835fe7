"""Pull delivery end to end with the real Flux controllers (issue 31).

A repository with a stack in pull delivery lives on the local forge (Gitea); `konfig
publish` renders it onto the branch `rendered`, which is pushed there; Flux's
source-controller and kustomize-controller, built from their Go modules (hack/flux),
run against the local control plane with the template's `pull/flux/` manifests pointed
at that branch. The test waits until the Kustomization reports the published revision
applied and the objects match, changes the stack, publishes again and waits for the
new revision, and `konfig status` names the source commit live. The timings (merge to
published, published to reconciled) are printed and kept in hack/forge.d/README.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.flux import crds, run_controllers
from fixtures.forge import Forge
from fixtures.repos import AUTHOR, KonfigRunner, RepoBuilder
from kubeutil import unique

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.forge, pytest.mark.cluster, pytest.mark.slow]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **AUTHOR}, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip


def _kustomization(cluster: Cluster, name: str) -> dict[str, Any]:
    res = cluster.kubectl("get", "kustomization", name, "-n", "flux-system", "-o", "json")
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def _wait_applied(cluster: Cluster, name: str, revision: str, logs: list[Path]) -> float:
    start = time.monotonic()
    last: dict[str, Any] = {}
    while time.monotonic() - start < 300:
        last = _kustomization(cluster, name).get("status") or {}
        ready = [c for c in last.get("conditions") or [] if c.get("type") == "Ready"]
        if last.get("lastAppliedRevision") == revision and ready and ready[0]["status"] == "True":
            return time.monotonic() - start
        time.sleep(1)
    tails = "\n".join(f"--- {p.name}\n{p.read_text()[-4000:]}" for p in logs)
    raise AssertionError(f"{name} never applied {revision}: {last}\n{tails}")


def test_flux_reconciles_what_konfig_publishes(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    forge: Forge,
    flux_bin: Path,
    tmp_path: Path,
) -> None:
    project = unique("pulled")
    root = repo_builder.root
    stack_yaml = "name: dev\nkubernetes:\n  context: admin\n"
    stack_yaml += "delivery:\n  mode: pull\n  target:\n    cluster: local\n"
    repo_builder.stack(project, "dev", stack_yaml=stack_yaml)
    _git(root, "init", "-q", "--initial-branch=main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "a stack in pull delivery")
    name = unique("config")
    repo = f"{forge.admin}/{name}"
    forge.request("POST", "/user/repos", {"name": name, "default_branch": "main", "private": False})
    _git(root, "remote", "add", "origin", forge.git_url(repo))

    # merge -> published: publish and push, as the merge's publish job does
    start = time.monotonic()
    assert konfig("publish", cwd=root).code == 0
    _git(root, "push", "-q", "origin", "main", "rendered")
    published = time.monotonic() - start
    rendered = _git(root, "rev-parse", "rendered").strip()

    for crd in crds():
        cluster.kubectl("apply", "--server-side", "-f", crd)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    cluster.kubectl("create", "namespace", "flux-system", check=False)
    source, kustomization = yaml.safe_load_all((ROOT / "pull/flux/admin.yaml").read_text())
    source["spec"]["url"] = f"{forge.web_url}/{repo}.git"
    source["spec"]["interval"] = "5s"
    source["metadata"]["name"] = kustomization["spec"]["sourceRef"]["name"] = name
    kustomization["metadata"]["name"] = name
    kustomization["spec"]["path"] = "./local"
    kustomization["spec"]["interval"] = "5s"
    kustomization["spec"]["wait"] = False  # kwok's nodes run no containers
    workdir = tmp_path / "flux"
    workdir.mkdir()
    with run_controllers(flux_bin, cluster.kubeconfig, workdir) as logs:
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([source, kustomization]))
        first = _wait_applied(cluster, name, f"rendered@sha1:{rendered}", logs)
        deployment = json.loads(
            cluster.kubectl(
                "get",
                "deployment",
                project,
                "-n",
                f"{project}-dev",
                "-o",
                "json",
                "--show-managed-fields",
            ).stdout
        )
        path = f"local/{project}/dev/deployment.apps_{project}-dev_{project}.yaml"
        published_doc = yaml.safe_load(_git(root, "show", f"rendered:{path}"))
        live, want = deployment["spec"]["template"], published_doc["spec"]["template"]
        assert live["metadata"]["labels"] == want["metadata"]["labels"]
        assert live["spec"]["containers"][0]["image"] == want["spec"]["containers"][0]["image"]
        managers = {m["manager"] for m in deployment["metadata"]["managedFields"]}
        assert "kustomize-controller" in managers and "konfig" not in managers

        # a change: published, pushed, reconciled
        main = root / f"appops/{project}/dev/main.k"
        main.write_text(main.read_text().replace("ports = ", "replicas = 2\n    ports = "))
        _git(root, "commit", "-q", "-am", "two replicas")
        head = _git(root, "rev-parse", "HEAD").strip()
        start = time.monotonic()
        assert konfig("publish", cwd=root).code == 0
        _git(root, "push", "-q", "origin", "main", "rendered")
        published_again = time.monotonic() - start
        rendered = _git(root, "rev-parse", "rendered").strip()
        second = _wait_applied(cluster, name, f"rendered@sha1:{rendered}", logs)
        replicas = cluster.kubectl("get", "deployment", project, "-n", f"{project}-dev",
                                   "-o", "jsonpath={.spec.replicas}").stdout  # fmt: skip
        assert replicas == "2"
        status = konfig("status", f"{project}/dev", f"--kubeconfig={cluster.kubeconfig}",
                        "--json", cwd=root)  # fmt: skip
        pull = json.loads(status.out)["stacks"][0]["pull"]
        assert (pull["ready"], pull["sourceCommit"]) == ("True", head)
    print(
        f"\nmerge -> published: {published:.1f}s, {published_again:.1f}s; "
        f"published -> reconciled: {first:.1f}s (first), {second:.1f}s (change)"
    )
