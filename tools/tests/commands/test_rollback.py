"""Rollback is a `git revert` applied like any merge: the cluster returns to the earlier
state (changed fields back, added objects pruned, removed objects back) and the
inventory records the revert commit, so status and pending agree it is up to date."""

from __future__ import annotations

import json
import subprocess

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory_store
from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster


MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
{objects}
    ]
}}
"""


def configmap(ns: str, name: str, value: str) -> str:
    return (
        f'        {{apiVersion = "v1", kind = "ConfigMap", '
        f'metadata = {{name = "{name}", namespace = "{ns}"}}, data = {{level = "{value}"}}}}'
    )


def state(kube: Kube, ns: str) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["data"]["level"]
        for o in kube.list("v1", "ConfigMap", ns)
        if "level" in (o.get("data") or {})
    }


def test_git_revert_rolls_the_cluster_back(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster, kube: Kube
) -> None:
    p = unique("p15rb")
    ns = f"{p}-dev"
    path = f"appops/{p}/dev"
    root = str(repo_builder.root)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(
        p,
        "dev",
        main=MAIN.format(
            ns=ns, objects="\n".join([configmap(ns, "a", "1"), configmap(ns, "b", "1")])
        ),
        stack_yaml="name: dev\nkubernetes:\n  context: admin\n",
    )
    git_init(repo_builder.root)
    v1 = git_commit(repo_builder.root, "v1: a=1, b=1")
    assert konfig("--root", root, "apply", "--yes", f"{p}/dev", kc).code == 0
    assert state(kube, ns) == {"a": "1", "b": "1"}

    # v2 changes a, removes b, adds c: merged and applied.
    repo_builder.write(
        f"{path}/main.k",
        MAIN.format(ns=ns, objects="\n".join([configmap(ns, "a", "2"), configmap(ns, "c", "2")])),
    )
    v2 = git_commit(repo_builder.root, "v2: a=2, c=2, no b")
    assert konfig("--root", root, "apply", "--yes", f"{p}/dev", kc).code == 0
    assert state(kube, ns) == {"a": "2", "c": "2"}

    # Roll back: revert v2 on main, and apply what the pipeline would apply.
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@konfig.invalid",
            "revert",
            "--no-edit",
            v2,
        ],
        cwd=root,
        check=True,
        capture_output=True,
    )
    v3 = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()
    pending = json.loads(konfig("--root", root, "pending", "--json", kc).out)
    assert [s["path"] for s in pending["stacks"] if s["path"] == path] == [path]
    preview = konfig("--root", root, "preview", f"{p}/dev", kc)
    assert f"- delete  v1:ConfigMap:{ns}:c" in preview.out
    assert f"+ create  v1:ConfigMap:{ns}:b" in preview.out
    applied = konfig("--root", root, "apply", "--yes", f"{p}/dev", kc)
    assert applied.code == 0, applied.out + applied.err

    assert state(kube, ns) == {"a": "1", "b": "1"}  # the cluster is as at v1 again
    recorded = inventory_store.read_inventory(kube, path)
    assert recorded is not None and recorded.commit == v3 != v1
    assert recorded.ids() == {
        f"v1:Namespace:{ns}",
        f"v1:ConfigMap:{ns}:a",
        f"v1:ConfigMap:{ns}:b",
    }
    status = json.loads(konfig("--root", root, "status", "--json", f"{p}/dev", kc).out)
    (stack,) = status["stacks"]
    assert (stack["commit"], stack["upToDate"], stack["drift"]["state"]) == (v3, True, "none")
    after = json.loads(konfig("--root", root, "pending", "--json", kc).out)
    assert path not in [s["path"] for s in after["stacks"]]
