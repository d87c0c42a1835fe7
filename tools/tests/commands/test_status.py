"""`konfig status` on the real control plane: applied, never applied, behind, drifted,
orphaned and unhealthy stacks, as JSON and as the table a person reads."""

from __future__ import annotations

import json
import shutil
import time
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"
# Raw manifests through the frontend model's escape hatch (as hack/bench_apply.py does).
MANIFESTS_MAIN = """\
import base.pkg.models.frontend
import file
import yaml

extras: frontend.Manifests {
    manifests = yaml.decode_all(file.read("objects.yaml"))
}
"""


def never_ready(ns: str) -> list[dict[str, Any]]:
    """A Deployment no node can run, with a 1 s progress deadline: it fails (kstatus)."""
    labels = {"app": "stuck"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "stuck", "namespace": ns, "labels": labels},
            "spec": {
                "replicas": 1,
                "progressDeadlineSeconds": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"konfig.test/no-such-node": "true"},
                        "containers": [{"name": "app", "image": "nginx:1.27.3"}],
                    },
                },
            },
        },
    ]


def status(konfig: KonfigRunner, root: str, cluster: Cluster, *args: str) -> dict[str, Any]:
    res = konfig("--root", root, "status", "--json", f"--kubeconfig={cluster.kubeconfig}", *args)
    assert res.code == 0, res.err
    data: dict[str, Any] = json.loads(res.out)
    return data


def test_status_of_every_kind_of_stack(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster
) -> None:
    p = unique("p15st")
    names = ("ok", "never", "behind", "drifted", "sick", "gone")
    repo_builder.write(".gitignore", "/.cache/\n")
    for name in names:
        repo_builder.stack(p, name, stack_yaml=STACK_YAML.replace("dev", name))
    repo_builder.write(f"appops/{p}/sick/main.k", MANIFESTS_MAIN)
    repo_builder.write(
        f"appops/{p}/sick/objects.yaml", yaml.safe_dump_all(never_ready(f"{p}-sick"))
    )
    git_init(repo_builder.root)
    first = git_commit(repo_builder.root, "six stacks")
    root = str(repo_builder.root)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    applied = [f"{p}/{n}" for n in names if n != "never"]
    res = konfig("--root", root, "apply", "--yes", "--no-wait", *applied, kc)
    assert res.code == 0, res.out + res.err

    # behind: a later commit changes the stack; gone: its directory is removed.
    repo_builder.write(f"appops/{p}/behind/notes.yaml", "x: 1\n")
    shutil.rmtree(repo_builder.root / "appops" / p / "gone")
    head = git_commit(repo_builder.root, "change behind, remove gone")
    # drifted: someone scales the Deployment and deletes the Service by hand.
    cluster.kubectl("scale", "deployment", p, "-n", f"{p}-drifted", "--replicas=3")
    cluster.kubectl("delete", "service", p, "-n", f"{p}-drifted")

    deadline = time.monotonic() + 90
    while True:  # the controller marks the stuck Deployment failed after its deadline
        data = status(konfig, root, cluster)
        by_path = {s["path"]: s for s in data["stacks"]}
        if by_path[f"appops/{p}/sick"]["health"]["state"] == "failed":
            break
        assert time.monotonic() < deadline, by_path[f"appops/{p}/sick"]
        time.sleep(2)

    assert data["kind"] == "KonfigStatus" and data["schemaVersion"] == 1
    assert data["head"] == head
    stack = {n: by_path[f"appops/{p}/{n}"] for n in names}
    ok = stack["ok"]
    assert (ok["state"], ok["commit"], ok["upToDate"], ok["commitsBehind"]) == (
        "applied", first, True, 1,
    )  # fmt: skip
    assert ok["health"]["state"] == "healthy" and ok["drift"]["state"] == "none"
    assert ok["objects"] == 3 and ok["inventory"] == f"konfig.{p}.ok"
    assert ok["context"] == "admin" and ok["appliedAt"]

    assert stack["never"]["state"] == "never-applied" and stack["never"]["objects"] == 0

    behind = stack["behind"]
    assert (behind["state"], behind["upToDate"], behind["commitsBehind"]) == ("applied", False, 1)
    assert any("notes.yaml" in r for r in behind["pendingReasons"]), behind["pendingReasons"]

    drifted = stack["drifted"]
    assert drifted["drift"] == {"state": "drifted", "objects": 2, "fields": 1, "unknown": 0}
    assert drifted["health"]["state"] == "missing"  # the deleted Service
    details = {d["id"]: d for d in drifted["details"]}
    deploy = details[f"apps/v1:Deployment:{p}-drifted:{p}"]["drift"]
    assert deploy["state"] == "drifted"
    assert deploy["fields"] == [{"path": "spec.replicas", "live": 3, "removed": False}]
    assert details[f"v1:Service:{p}-drifted:{p}"]["drift"]["state"] == "deleted"

    sick = stack["sick"]
    assert sick["health"]["failed"] == 1 and sick["drift"]["state"] == "none"
    failed = [d for d in sick["details"] if d["health"]["state"] == "failed"]
    assert "progress deadline exceeded" in failed[0]["health"]["message"]

    gone = stack["gone"]
    assert (gone["state"], gone["orphan"], gone["commit"]) == ("orphaned", "deleted", first)

    counts = data["summary"]
    assert counts["orphaned"] >= 1 and counts["neverApplied"] >= 1 and counts["drifted"] >= 1

    # The table a person reads: one per cluster, one row per stack.
    text = konfig("--root", root, "status", kc)
    assert text.code == 0, text.err
    rows = {line.split()[0]: line for line in text.out.splitlines() if line.startswith(p)}
    assert f"{head[:7]} (HEAD)" not in rows[f"{p}/ok"]  # applied at the first commit
    assert f"{first[:7]} (1 commit behind, unaffected)" in rows[f"{p}/ok"]
    assert f"{first[:7]} (1 commit behind, changed)" in rows[f"{p}/behind"]
    assert "never applied" in rows[f"{p}/never"]
    assert "yes: 2 objects, 1 field" in rows[f"{p}/drifted"]
    assert "1 failed" in rows[f"{p}/sick"]
    assert "stack deleted from the repository" in rows[f"{p}/gone"]
    assert text.out.startswith("cluster admin (https://127.0.0.1:")

    # Named stacks only: no orphans listed.
    only = status(konfig, root, cluster, f"{p}/ok")
    assert [s["path"] for s in only["stacks"]] == [f"appops/{p}/ok"]

    # Status read nothing it should not: one list per kind, whatever the stack count,
    # is shown by the benchmark (hack/bench_status.py); here: it wrote nothing.
    assert (
        stack["ok"]["appliedAt"]
        == status(konfig, root, cluster, f"{p}/ok")["stacks"][0]["appliedAt"]
    )


def test_status_when_the_cluster_is_unreachable(
    konfig: KonfigRunner, repo_builder: RepoBuilder, tmp_path: Any
) -> None:
    repo_builder.stack(unique("p15down"), "dev", stack_yaml=STACK_YAML)
    broken = tmp_path / "kubeconfig"
    broken.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
        "    server: https://127.0.0.1:9\ncontexts:\n- name: admin\n  context:\n"
        "    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n"
        "current-context: admin\n"
    )
    res = konfig("--root", str(repo_builder.root), "status", f"--kubeconfig={broken}")
    assert res.code == 1
    assert "cluster admin: cannot be read" in res.out
    assert "cannot reach the Kubernetes API server at https://127.0.0.1:9" in res.out
