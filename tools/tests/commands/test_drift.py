"""Drift made with kubectl, found and labelled by `konfig drift` and `konfig preview`, set
back by `konfig apply`; the drift issue created, updated and closed through the forge
client (the local GitHub API server) by the drift action."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.github_server import FakeGitHub
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique
from test_actions import run_action

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"
MARK = "<!-- konfig:drift -->"


def drift_json(konfig: KonfigRunner, root: str, cluster: Cluster, *args: str) -> tuple[int, Any]:
    res = konfig(
        "--root", root, "drift", "--json", "--detailed-exitcode",
        f"--kubeconfig={cluster.kubeconfig}", *args,
    )  # fmt: skip
    assert res.code in (0, 2), res.err
    return res.code, json.loads(res.out)


def test_drift_found_labelled_and_set_back(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster
) -> None:
    p = unique("p15dr")
    ns = f"{p}-dev"
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(p, "dev", stack_yaml=STACK_YAML)
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "one stack")
    root = str(repo_builder.root)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    assert konfig("--root", root, "apply", "--yes", f"{p}/dev", kc).code == 0

    code, clean = drift_json(konfig, root, cluster, f"{p}/dev")
    assert code == 0 and clean["hasDrift"] is False
    assert clean["stacks"][0]["state"] == "in-sync"

    # Someone changes the cluster by hand: scales, re-images, relabels.
    cluster.kubectl("scale", "deployment", p, "-n", ns, "--replicas=4")
    cluster.kubectl("set", "image", f"deployment/{p}", f"{p}=nginx:1.27.4", "-n", ns)
    cluster.kubectl(
        "label", "service", p, "-n", ns, "app.kubernetes.io/name=hand-made", "--overwrite"
    )
    cluster.kubectl("label", "service", p, "-n", ns, "team=extra")  # added, not drift

    code, found = drift_json(konfig, root, cluster, f"{p}/dev")
    assert code == 2 and found["hasDrift"] is True and found["kind"] == "KonfigDrift"
    (stack,) = found["stacks"]
    assert stack["state"] == "drifted"
    objects = {o["id"]: o for o in stack["objects"]}
    deploy = objects[f"apps/v1:Deployment:{ns}:{p}"]
    assert deploy["state"] == "drifted"
    assert {(f["path"], f["live"], f["planned"]) for f in deploy["fields"]} == {
        ("spec.replicas", 4, 1),
        (f"spec.template.spec.containers[name={p}].image", "nginx:1.27.4", "nginx:1.27.3"),
    }
    service = objects[f"v1:Service:{ns}:{p}"]
    assert [(f["path"], f["live"]) for f in service["fields"]] == [
        ('metadata.labels["app.kubernetes.io/name"]', "hand-made")
    ]

    # The text a person reads says drift, per object, with the fields.
    text = konfig("--root", root, "drift", f"{p}/dev", kc)
    assert text.code == 0, text.err
    assert f"~ apps/v1:Deployment:{ns}:{p}: 2 fields changed outside Konfig" in text.out
    assert "spec.replicas: 4 (live), 1 (repository)" in text.out
    assert "Drift: " in text.out and "`konfig apply <stack>` sets them back" in text.out

    # Preview tells drift ("someone changed the cluster") from repository changes.
    main = repo_builder.root / f"appops/{p}/dev/main.k"
    main.write_text(main.read_text().replace("ports = [", "replicas = 2\n    ports = ["))
    preview = konfig("--root", root, "preview", f"{p}/dev", "--format", "json", kc)
    assert preview.code == 0, preview.err
    doc = json.loads(preview.out)
    changes = {c["id"]: c for c in doc["stacks"][0]["changes"]}
    fields = {f["path"]: f for f in changes[f"apps/v1:Deployment:{ns}:{p}"]["fields"]}
    assert fields["spec.replicas"] == {
        "path": "spec.replicas",
        "before": 4,
        "after": 2,
        "drift": True,
    }
    assert fields[f"spec.template.spec.containers[name={p}].image"]["drift"] is True
    assert doc["hasDrift"] is True and doc["stacks"][0]["drift"]["objects"] >= 2
    shown = konfig("--root", root, "preview", f"{p}/dev", kc)
    assert "(drift: changed in the cluster since the last apply)" in shown.out
    assert "drifted (changed in the cluster since the last apply)" in shown.out

    # Apply sets it back (and takes the repository's new value); drift is gone.
    main.write_text(main.read_text().replace("replicas = 2\n    ", ""))
    assert konfig("--root", root, "apply", "--yes", f"{p}/dev", kc).code == 0
    code, after = drift_json(konfig, root, cluster, f"{p}/dev")
    assert code == 0 and after["hasDrift"] is False
    live = json.loads(cluster.kubectl("get", "service", p, "-n", ns, "-o", "json").stdout)
    assert live["metadata"]["labels"]["team"] == "extra"  # never Konfig's: left alone


def test_the_drift_issue_is_created_updated_and_closed(
    konfig: KonfigRunner,
    repo_builder: RepoBuilder,
    cluster: Cluster,
    github_server: FakeGitHub,
    tmp_path: Path,
) -> None:
    p = unique("p15is")
    ns = f"{p}-dev"
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(p, "dev", stack_yaml=STACK_YAML)
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "one stack")
    root = str(repo_builder.root)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    assert konfig("--root", root, "apply", "--yes", f"{p}/dev", kc).code == 0
    github_server.tokens["ghs_actions"] = None  # like GITHUB_TOKEN: no GET /user
    repo = "acme/config"
    inputs = {
        "config-path": root,
        "stacks": json.dumps([f"appops/{p}/dev"]),
        "kubeconfig": str(cluster.kubeconfig),
        "repository": repo,
        "token": "ghs_actions",
        "api-url": github_server.url,
    }

    def run(step: str) -> Any:
        result = run_action("drift", inputs, tmp_path / step)
        assert result.code == 0, result.log
        return result

    quiet = run("0-clean")
    assert quiet.outputs["has-drift"] == "false" and github_server.issues_of(repo) == []
    assert "no drift" in quiet.summary

    cluster.kubectl("scale", "deployment", p, "-n", ns, "--replicas=3")
    opened = run("1-drift")
    assert opened.outputs["has-drift"] == "true"
    (issue,) = github_server.issues_of(repo)
    assert (issue.state, issue.author) == ("open", "github-actions[bot]")
    assert issue.body.startswith(MARK) and "spec.replicas" in issue.body and "`3`" in issue.body
    assert "## Konfig: drift in 1 stack" in opened.summary

    again = run("2-same")  # the same drift: nothing written
    writes_before = len(github_server.writes)
    assert again.outputs["has-drift"] == "true"
    run("2-same-again")
    assert len(github_server.writes) == writes_before

    cluster.kubectl("scale", "deployment", p, "-n", ns, "--replicas=5")
    run("3-more")
    (issue,) = github_server.issues_of(repo)
    assert issue.state == "open" and "`5`" in issue.body  # updated in place

    assert konfig("--root", root, "apply", "--yes", f"{p}/dev", kc).code == 0
    closed = run("4-gone")
    assert closed.outputs["has-drift"] == "false"
    (issue,) = github_server.issues_of(repo)  # still one issue: closed, not a new one
    assert issue.state == "closed"
    (comment,) = github_server.comments_on(repo, issue.number)
    assert "No drift any more" in comment.body
