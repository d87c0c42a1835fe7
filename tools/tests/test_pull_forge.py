"""Pull delivery through the real forge, consumed as the Flux controllers consume it
(the next-best real consumer while the controllers themselves are not built here:
tools/tests/test_flux_e2e.py runs them once hack/flux build has finished).

`konfig publish` renders a pull stack onto `rendered`, which is pushed to the local
forge (Gitea); a fresh clone of that branch over HTTP (source-controller's fetch) is
built by kustomize and server-side applied with the field manager
`kustomize-controller` (kustomize-controller's apply, here kubectl's kustomize and
apply) to the real control plane; a change published and pushed the same way is
applied in its turn. The timings (merge -> published, published -> applied) are
printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.forge import Forge
from fixtures.repos import AUTHOR, KonfigRunner, RepoBuilder
from kubeutil import unique

pytestmark = [pytest.mark.forge, pytest.mark.cluster]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **AUTHOR}, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip


def _consume(cluster: Cluster, url: str, work: Path) -> str:
    """Clone the rendered branch afresh and apply the cluster folder; its commit."""
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    _git(work.parent, "clone", "-q", "--depth=1", "--branch=rendered", url, str(work))
    cluster.kubectl("apply", "--server-side", "--field-manager=kustomize-controller",
                    "--force-conflicts", "-k", str(work / "local"))  # fmt: skip
    return _git(work, "rev-parse", "HEAD").strip()


def test_the_rendered_branch_on_the_forge_applies_as_published(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, forge: Forge,
    tmp_path: Path,
) -> None:  # fmt: skip
    project = unique("pulled")
    root = repo_builder.root
    repo_builder.stack(
        project,
        "dev",
        stack_yaml="name: dev\nkubernetes:\n  context: admin\n"
        "delivery:\n  mode: pull\n  target:\n    cluster: local\n",
    )
    _git(root, "init", "-q", "--initial-branch=main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "a stack in pull delivery")
    name = unique("config")
    repo = f"{forge.admin}/{name}"
    forge.request("POST", "/user/repos", {"name": name, "default_branch": "main"})
    url = forge.git_url(repo)
    _git(root, "remote", "add", "origin", url)
    ns = f"{project}-dev"

    start = time.monotonic()
    assert konfig("publish", cwd=root).code == 0
    _git(root, "push", "-q", "origin", "main", "rendered")
    published = time.monotonic() - start
    start = time.monotonic()
    assert _consume(cluster, url, tmp_path / "clone") == _git(root, "rev-parse", "rendered").strip()
    applied = time.monotonic() - start
    deployment = json.loads(
        cluster.kubectl(
            "get", "deployment", project, "-n", ns, "-o", "json", "--show-managed-fields"
        ).stdout
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1.27.3"
    managers = {m["manager"] for m in deployment["metadata"]["managedFields"]}
    assert "kustomize-controller" in managers and "konfig" not in managers

    main = root / f"appops/{project}/dev/main.k"
    main.write_text(main.read_text().replace("ports = ", "replicas = 3\n    ports = "))
    _git(root, "commit", "-q", "-am", "three replicas")
    start = time.monotonic()
    assert konfig("publish", cwd=root).code == 0
    _git(root, "push", "-q", "origin", "main", "rendered")
    published_again = time.monotonic() - start
    message = _git(root, "log", "-1", "--format=%B", "rendered")
    assert f"Source-Commit: {_git(root, 'rev-parse', 'HEAD').strip()}" in message
    start = time.monotonic()
    _consume(cluster, url, tmp_path / "clone")
    applied_again = time.monotonic() - start
    replicas = cluster.kubectl(
        "get", "deployment", project, "-n", ns, "-o", "jsonpath={.spec.replicas}"
    ).stdout
    assert replicas == "3"
    print(
        f"\nmerge -> published: {published:.1f}s, {published_again:.1f}s; "
        f"published -> applied: {applied:.1f}s, {applied_again:.1f}s"
    )
    cluster.kubectl("delete", "namespace", ns, "--wait=false")
