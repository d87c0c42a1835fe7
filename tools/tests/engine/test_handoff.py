"""A stack moving from push to pull delivery and back, against the real control plane,
without orphaning or deleting an object (engine/handoff.py, docs/pull.md Hand-off).

The controller's two moves are done here as the kustomize-controller does them (its
code: fluxcd/pkg/ssa ResourceManager.ApplyAll and DeleteAll): a forced server-side
apply of the published files with field manager ``kustomize-controller`` and its two
owner labels; and its prune, which deletes what left the source only when the live
object still carries those owner labels. The real controllers are built by
``hack/flux`` for the e2e test (tools/tests/test_flux_e2e.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.repos import AUTHOR, KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.handoff import managers_of
from konfig.engine.kube import Kube

FLUX = "kustomize-controller"
PUSH = "name: dev\nkubernetes:\n  context: admin\n"
OWNER_LABELS = ("kustomize.toolkit.fluxcd.io/name", "kustomize.toolkit.fluxcd.io/namespace")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **AUTHOR}, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip


def _commit(root: Path, message: str) -> None:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message)


def _published(root: Path, folder: str) -> list[dict[str, Any]]:
    names = _git(root, "ls-tree", "-r", "--name-only", "rendered", folder + "/").split()
    return [
        yaml.safe_load(_git(root, "show", f"rendered:{n}"))
        for n in names
        if not n.endswith("/kustomization.yaml")
    ]


def _controller_applies(kube: Kube, docs: list[dict[str, Any]]) -> None:
    for doc in sorted(docs, key=lambda d: d["kind"] != "Namespace"):  # namespaces first
        meta = doc.setdefault("metadata", {})
        labels = meta.setdefault("labels", {})
        labels[OWNER_LABELS[0]], labels[OWNER_LABELS[1]] = "apps", "flux-system"
        kube.apply(doc, dry_run=False, force=True, field_manager=FLUX)


def _controller_prunes(kube: Kube, docs: list[dict[str, Any]]) -> list[str]:
    deleted = []
    for doc in reversed(docs):
        meta = doc["metadata"]
        live = kube.get(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))
        labels = (live or {}).get("metadata", {}).get("labels") or {}
        if live is not None and all(labels.get(k) for k in OWNER_LABELS):
            kube.delete(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"),
                        uid=None, propagation="Background")  # fmt: skip
            deleted.append(meta["name"])
    return deleted


def _uids(kube: Kube, docs: list[dict[str, Any]]) -> dict[str, str]:
    out = {}
    for doc in docs:
        meta = doc["metadata"]
        live = kube.get(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))
        assert live is not None, f"{doc['kind']} {meta['name']} is gone"
        out[f"{doc['kind']}/{meta['name']}"] = live["metadata"]["uid"]
    return out


@pytest.mark.cluster
def test_push_to_pull_and_back_orphans_nothing(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    project = unique("handoff")
    root = repo_builder.root
    ns = f"{project}-dev"
    kc = f"--kubeconfig={cluster.kubeconfig}"
    push = "name: dev\nkubernetes:\n  context: admin\n"
    pull = push + "delivery:\n  mode: pull\n  target:\n    cluster: local\n"
    stack = f"appops/{project}/dev"
    repo_builder.stack(project, "dev", stack_yaml=push)
    _git(root, "init", "-q", "--initial-branch=main")
    _commit(root, "push")
    res = konfig("apply", f"{project}/dev", "--yes", "--no-wait", kc, cwd=root)
    assert res.code == 0, res.err
    before = inventory_store.read_inventory(kube, stack)
    assert before is not None and len(before.members) == 3

    # push -> pull: published; release waits until the controller holds every object
    (root / stack / "stack.yaml").write_text(pull)
    _commit(root, "pull")
    # apply-on-merge neither applies it nor destroys it (its inventory is still there)
    pending = konfig("pending", "--json", kc, cwd=root)
    assert pending.code == 0, pending.err
    assert stack not in [s["path"] for s in json.loads(pending.out)["stacks"]]
    assert stack not in json.loads(pending.out)["deleted_stacks"]
    assert konfig("publish", cwd=root).code == 0
    docs = _published(root, f"local/{project}/dev")
    assert len(docs) == 3
    uids = _uids(kube, docs)
    res = konfig("release", f"{project}/dev", kc, "--json", cwd=root)
    assert res.code == 1 and "not held by the other side yet; nothing changed" in res.err
    assert inventory_store.read_inventory(kube, stack) is not None  # nothing changed
    _controller_applies(kube, docs[:2])  # one object not reconciled yet
    assert konfig("release", f"{project}/dev", kc, cwd=root).code == 1
    _controller_applies(kube, docs)
    res = konfig("release", f"{project}/dev", kc, "--json", cwd=root)
    assert res.code == 0, res.err
    assert len(yaml.safe_load(res.out)[0]["released"]) == 3
    assert inventory_store.read_inventory(kube, stack) is None
    assert _uids(kube, docs) == uids  # the same objects: none deleted or made again
    deployment = kube.get("apps/v1", "Deployment", project, ns)
    assert deployment is not None
    labels = deployment["metadata"]["labels"]
    assert inv.LABEL_PART_OF not in labels and labels[OWNER_LABELS[0]] == "apps"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27.3"
    assert managers_of(deployment) >= {FLUX} and "konfig" not in managers_of(deployment)

    # pull -> push: apply adopts (adoptUnmanaged), release takes the objects back from the
    # controller, and the publish that removes the folder leaves them to konfig alone
    (root / stack / "stack.yaml").write_text(push + "apply:\n  adoptUnmanaged: true\n")
    _commit(root, "push again")
    res = konfig("release", f"{project}/dev", kc, cwd=root)
    assert res.code == 1  # konfig holds nothing yet: apply first
    res = konfig("apply", f"{project}/dev", "--yes", "--no-wait", kc, cwd=root)
    assert res.code == 0, res.err
    res = konfig("release", f"{project}/dev", kc, "--json", cwd=root)
    assert res.code == 0, res.err
    assert len(yaml.safe_load(res.out)[0]["released"]) == 3
    assert konfig("publish", cwd=root).code == 0
    assert _published(root, f"local/{project}/dev") == []
    assert _controller_prunes(kube, docs) == []  # its owner labels are gone: skipped
    assert _uids(kube, docs) == uids
    after = inventory_store.read_inventory(kube, stack)
    assert after is not None and after.ids() == before.ids()
    deployment = kube.get("apps/v1", "Deployment", project, ns)
    assert deployment is not None and FLUX not in managers_of(deployment)
    assert deployment["metadata"]["labels"][inv.LABEL_PART_OF] == after.applyset_id
    res = konfig("destroy", f"{project}/dev", "--yes", kc, cwd=root)
    assert res.code == 0, res.err


@pytest.mark.cluster
def test_without_the_hand_off_the_controller_prunes_what_konfig_adopted(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """Why reclaim exists: skip it and the controller's prune deletes the objects."""
    project = unique("handoff")
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    pull = PUSH + "delivery:\n  mode: pull\n  target:\n    cluster: local\n"
    repo_builder.stack(project, "dev", stack_yaml=pull)
    _git(root, "init", "-q", "--initial-branch=main")
    _commit(root, "pull")
    assert konfig("publish", cwd=root).code == 0
    docs = _published(root, f"local/{project}/dev")
    _controller_applies(kube, docs)
    (root / f"appops/{project}/dev/stack.yaml").write_text(
        "name: dev\nkubernetes:\n  context: admin\napply:\n  adoptUnmanaged: true\n"
    )
    _commit(root, "push")
    assert konfig("apply", f"{project}/dev", "--yes", "--no-wait", kc, cwd=root).code == 0
    assert konfig("publish", cwd=root).code == 0
    assert sorted(_controller_prunes(kube, docs)) == sorted(d["metadata"]["name"] for d in docs)
    konfig("destroy", f"{project}/dev", "--yes", kc, cwd=root)
