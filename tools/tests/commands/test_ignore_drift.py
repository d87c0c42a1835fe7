"""One set of ignore rules for drift, preview and apply, end to end: a Deployment scaled
by hand is drift until the stack ignores spec.replicas; then `konfig drift` does not
report it, `konfig preview` lists it as ignored (not a change) and `konfig apply` leaves
the hand-set value. Against the real control plane."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"
IGNORING = STACK_YAML + (
    "ignore:\n"
    "  - selector: {group: apps, kind: Deployment}\n"
    "    paths: [/spec/replicas]\n"
    "    reason: scaled by the on-call team\n"
)


def drift_of(konfig: KonfigRunner, root: str, cluster: Cluster, stack: str) -> Any:
    res = konfig("--root", root, "drift", "--json", f"--kubeconfig={cluster.kubeconfig}", stack)
    assert res.code == 0, res.err
    return json.loads(res.out)


def test_drift_preview_and_apply_follow_the_same_rule(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster
) -> None:
    p = unique("igdr")
    ns = f"{p}-dev"
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(p, "dev", stack_yaml=STACK_YAML)
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "one stack")
    root = str(repo_builder.root)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    assert konfig("--root", root, "apply", "--yes", f"{p}/dev", kc).code == 0
    cluster.kubectl("scale", "deployment", p, "-n", ns, "--replicas=4")

    found = drift_of(konfig, root, cluster, f"{p}/dev")
    deploy = {o["id"]: o for o in found["stacks"][0]["objects"]}[f"apps/v1:Deployment:{ns}:{p}"]
    assert [f["path"] for f in deploy["fields"]] == ["spec.replicas"]

    repo_builder.write(f"appops/{p}/dev/stack.yaml", IGNORING)
    git_commit(repo_builder.root, "ignore replicas")
    found = drift_of(konfig, root, cluster, f"{p}/dev")
    assert found["hasDrift"] is False, found

    preview = konfig("--root", root, "preview", f"{p}/dev", "--format", "json", kc)
    assert preview.code == 0, preview.err
    doc = json.loads(preview.out)
    change = {c["id"]: c for c in doc["stacks"][0]["changes"]}[f"apps/v1:Deployment:{ns}:{p}"]
    assert change["action"] == "unchanged" and doc["hasChanges"] is False
    assert [(f["path"], f["live"], f["declared"], f["applied"]) for f in change["ignored"]] == [
        ("/spec/replicas", 4, 1, "left out")
    ]
    assert change["ignored"][0]["rule"] == f"appops/{p}/dev/stack.yaml ignore[0]"
    text = konfig("--root", root, "preview", f"{p}/dev", kc)
    assert "1 field ignored by rules (not counted)" in text.out

    assert konfig("--root", root, "apply", "--yes", f"{p}/dev", kc).code == 0
    live = json.loads(cluster.kubectl("get", "deployment", p, "-n", ns, "-o", "json").stdout)
    assert live["spec"]["replicas"] == 4
    assert konfig("--root", root, "destroy", "--yes", f"{p}/dev", kc).code == 0


def test_drift_honours_a_rule_that_selects_by_labels(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster
) -> None:
    """A rule whose selector names labels ignores the drift of the objects carrying them
    (drift reads the live object's labels), and not of the others."""
    p = unique("iglb")
    ns = f"{p}-dev"
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(p, "dev", stack_yaml=STACK_YAML)
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "one stack")
    root = str(repo_builder.root)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    assert konfig("--root", root, "apply", "--yes", f"{p}/dev", kc).code == 0
    cluster.kubectl("scale", "deployment", p, "-n", ns, "--replicas=4")
    deployment = f"apps/v1:Deployment:{ns}:{p}"

    def rule(labels: str) -> str:
        return STACK_YAML + (
            "ignore:\n"
            f"  - selector: {{kind: Deployment, labels: {labels}}}\n"
            "    paths: [/spec/replicas]\n"
            "    reason: scaled by the on-call team\n"
        )

    # labels the Deployment does not carry: still drift
    repo_builder.write(f"appops/{p}/dev/stack.yaml", rule("{app.kubernetes.io/name: other}"))
    git_commit(repo_builder.root, "ignore another app's replicas")
    found = drift_of(konfig, root, cluster, f"{p}/dev")
    deploy = {o["id"]: o for o in found["stacks"][0]["objects"]}[deployment]
    assert [f["path"] for f in deploy["fields"]] == ["spec.replicas"]
    # its own labels: ignored
    repo_builder.write(f"appops/{p}/dev/stack.yaml", rule(f"{{app.kubernetes.io/name: {p}}}"))
    git_commit(repo_builder.root, "ignore this app's replicas")
    found = drift_of(konfig, root, cluster, f"{p}/dev")
    assert found["hasDrift"] is False, found
    assert konfig("--root", root, "destroy", "--yes", f"{p}/dev", kc).code == 0
