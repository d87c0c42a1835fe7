"""The preview of a stack in pull delivery (issue 31 item 3, docs/pull.md "Review").

On the real control plane with the Flux CRDs hack/flux pins: a stack is published, its
folder applied as kustomize-controller applies it (server-side apply, forced, field
manager ``kustomize-controller``, its owner labels) and reconciled by a Kustomization
whose status names the rendered commit. A pull request then changes the image and
drops the ports. ``konfig preview`` shows (1) the rendered output's diff, byte for byte
what ``konfig publish`` writes (the same digest as ``publish --diff``) and (2) the live
preview of what the controller changes: the Deployment's image updated, the Service
pruned, nothing else (no konfig label, no ownership conflict). ``konfig report``
renders both into the comment: golden ``golden/pull-preview.md`` (the section of the
stack, with the random names replaced; ``KONFIG_UPDATE_GOLDEN=1`` rewrites it), and its
hidden reviewed record the folder's digest, which ``konfig publish --reviewed`` (the
merge) accepts.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.repos import AUTHOR, KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig import contracts
from konfig.pipeline.reviewed import read_reviewed

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).parent / "golden" / "pull-preview.md"
SHA = "0123456789abcdef0123456789abcdef01234567"

pytestmark = pytest.mark.cluster


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **AUTHOR}, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip


def _apply_as_flux(cluster: Cluster, root: Path, folder: str, kustomization: str) -> None:
    """The folder on ``rendered`` applied as kustomize-controller does it."""
    files = _git(root, "ls-tree", "-r", "--name-only", "rendered", folder + "/").split()
    docs = []
    for name in files:
        if name.endswith("/kustomization.yaml"):
            continue
        obj = yaml.safe_load(_git(root, "show", f"rendered:{name}"))
        obj["metadata"].setdefault("labels", {}).update(
            {
                "kustomize.toolkit.fluxcd.io/name": kustomization,
                "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
            }
        )
        docs.append(obj)
    docs.sort(key=lambda o: o["kind"] != "Namespace")  # Flux applies them first too
    cluster.kubectl(
        "apply", "--server-side", "--field-manager=kustomize-controller", "--force-conflicts",
        "-f", "-", input=yaml.safe_dump_all(docs),
    )  # fmt: skip


def test_the_preview_shows_the_rendered_diff_and_what_the_controller_changes(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, tmp_path: Path
) -> None:
    for crd in subprocess.run(
        [str(ROOT / "hack/flux"), "crds"], capture_output=True, text=True, check=True, timeout=600
    ).stdout.split():
        cluster.kubectl("apply", "--server-side", "-f", crd)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    cluster.kubectl("create", "namespace", "flux-system", check=False)
    project = unique("pullprev")
    folder_cluster = unique("c")
    name = unique("ks")
    origin = repo_builder.root
    repo_builder.stack(
        project,
        "dev",
        stack_yaml="name: dev\nkubernetes:\n  context: admin\n"
        f"delivery:\n  mode: pull\n  target:\n    cluster: {folder_cluster}\n",
    )
    _git(origin, "init", "-q", "--initial-branch=main")
    _git(origin, "add", "-A")
    _git(origin, "commit", "-q", "-m", "pull")
    assert konfig("publish", cwd=origin).code == 0
    folder = f"{folder_cluster}/{project}/dev"
    _apply_as_flux(cluster, origin, folder, name)
    kustomization = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "1m", "path": f"./{folder_cluster}", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "rendered"}},
    }  # fmt: skip
    cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(kustomization))

    # the pull request, in a clone that has origin/rendered as CI fetches it
    work = tmp_path / "work"
    _git(tmp_path, "clone", "-q", str(origin), str(work))
    main = work / f"appops/{project}/dev/main.k"
    text = main.read_text()
    main.write_text(
        text.replace("nginx:1.27.3", "nginx:1.27.4").replace("    ports = [{port = 80}]\n", "")
    )
    _git(work, "commit", "-q", "-am", "new image, no ports")

    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("preview", f"{project}/dev", kc, "--format", "json", cwd=work)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    contracts.validate("preview", doc)
    (stack,) = doc["stacks"]
    pull = stack["pull"]
    review = json.loads(konfig("publish", "--diff", "--json", cwd=work).out)
    (published,) = review["stacks"]
    # (1) the rendered output: what publish will write, byte for byte
    assert pull["digest"] == published["digest"] and pull["diff"] == published["diff"]
    assert pull["base"] == "refs/remotes/origin/rendered"
    assert "\n-        - image: nginx:1.27.3\n+        - image: nginx:1.27.4\n" in pull["diff"]
    assert f"--- a/{folder}/service_{project}-dev_{project}.yaml\n+++ /dev/null" in pull["diff"]
    # (2) the live preview: what kustomize-controller changes
    assert pull["controller"] == f"flux flux-system/{name}"
    changing = {c["kind"]: c for c in stack["changes"] if c["action"] != "unchanged"}
    assert set(changing) == {"Deployment", "Service"}, stack["changes"]
    assert changing["Service"]["action"] == "delete"
    assert "kustomize-controller prunes it" in changing["Service"]["reason"]
    deployment = changing["Deployment"]
    assert deployment["action"] == "update"
    paths = [f["path"] for f in deployment["fields"]]
    assert any(p.endswith(".image") for p in paths), paths
    assert not any("labels" in p for p in paths), paths  # the owner labels are kept
    assert all(c["action"] != "conflict" for c in stack["changes"])

    # the comment: both, for the reviewer
    (tmp_path / "preview.json").write_text(res.out)
    report = konfig(
        "report", "--preview", str(tmp_path / "preview.json"), "--sha", SHA,
        "--out", str(tmp_path / "comment.md"), cwd=work,
    )  # fmt: skip
    assert report.code == 0, report.err
    comment = (tmp_path / "comment.md").read_text()
    start = comment.index("**Pull delivery**")
    end = comment.index("</details>", start) + len("</details>")
    section = (
        comment[start:end]
        .replace(pull["digest"], "sha256:DIGEST")
        .replace(name, "KUSTOMIZATION")
        .replace(folder_cluster, "CLUSTER")
        .replace(project, "PROJECT")
    ) + "\n"
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(section, encoding="utf-8")
    assert GOLDEN.is_file(), f"{GOLDEN} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert section == GOLDEN.read_text(encoding="utf-8")
    assert pull["digest"] in comment  # the full digest: what publish --expect takes

    # the comment's hidden record carries the digest; the merge publishes against it
    (tmp_path / "comment-body.md").write_text(comment)
    assert read_reviewed(comment, where="the comment").published == {stack["path"]: pull["digest"]}
    merged = konfig("publish", "--reviewed", str(tmp_path / "comment-body.md"), cwd=work)
    assert merged.code == 0, merged.err
    assert f"{stack['path']}: the reviewed rendered folder ({pull['digest']})" in merged.err
