"""A pull request that adds an ignore rule, from its preview to its merge, against the real
control plane: the preview is made with the base branch's rules (the rule is listed, not
applied), the merge applies with the merged rules (the rule in force). Does the merge
apply what was reviewed, or block although nothing but the rule moved?"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.webstack import HIDE_REPLICAS, web_main
from kubeutil import unique

from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

STACK_YAML = "name: prod\nkubernetes:\n  context: admin\n"


def main_k(ns: str, *, replicas: int = 3, image: str = "nginx:1.27.3") -> str:
    return web_main(ns, replicas, image)


def applied(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, tmp_path: Path, ns: str
) -> Path:
    """The stack applied from main (3 replicas), and main's checkout as it is then (the
    default branch's checkout a pull request is previewed with: --rules-from)."""
    root = repo_builder.root
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(ns, "prod", main=main_k(ns), stack_yaml=STACK_YAML)
    git_init(root)
    git_commit(root, "main")
    res = konfig("--root", str(root), "apply", "--yes", f"{ns}/prod",
                 f"--kubeconfig={cluster.kubeconfig}")  # fmt: skip
    assert res.code == 0, res.out + res.err
    base = tmp_path / "base"
    shutil.copytree(root, base, ignore=shutil.ignore_patterns(".cache", ".git"))
    return base


def reviewed_comment(
    konfig: KonfigRunner, root: Path, cluster: Cluster, stack: str, base: Path, tmp: Path
) -> tuple[dict[str, Any], Path]:
    """The pull request's live preview with the base branch's rules, and the comment
    `konfig report` renders from it (the reviewed record hidden in it)."""
    res = konfig("--root", str(root), "preview", stack, "--format", "json",
                 "--rules-from", str(base), f"--kubeconfig={cluster.kubeconfig}")  # fmt: skip
    assert res.code == 0, res.out + res.err
    doc, body = tmp / "preview.json", tmp / "comment.md"
    doc.write_text(res.out, encoding="utf-8")
    made = konfig("report", "--preview", str(doc), "--sha", "b" * 40, "--out", str(body),
                  "--pr", "7")  # fmt: skip
    assert made.code == 0, made.out + made.err
    data: dict[str, Any] = json.loads(res.out)
    return data, body


def merge(konfig: KonfigRunner, root: Path, cluster: Cluster, stack: str, comment: Path) -> Any:
    """apply.yml after the merge: the merged tree (its rules), the reviewed record."""
    return konfig("--root", str(root), "apply", "--yes", "--reviewed", str(comment), stack,
                  f"--kubeconfig={cluster.kubeconfig}")  # fmt: skip


def deployment(kube: Kube, ns: str) -> dict[str, Any]:
    live = kube.get("apps/v1", "Deployment", "web", ns)
    assert live is not None
    return live


def test_a_rule_for_what_the_cluster_already_differs_in_merges_as_reviewed(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    """The team scales by hand (5 replicas); a pull request adds the rule that says so,
    with a new image. Nothing but the rule and the image moved: the merge applies it."""
    ns = unique("p27rl")
    base = applied(repo_builder, konfig, cluster, tmp_path, ns)
    root, stack = repo_builder.root, f"{ns}/prod"
    cluster.kubectl("scale", "deployment", "web", "-n", ns, "--replicas=5")
    repo_builder.stack(ns, "prod", main=main_k(ns, image="nginx:1.27.4"),
                       stack_yaml=STACK_YAML + HIDE_REPLICAS)  # fmt: skip
    git_commit(root, "pr: new image, and the team scales by hand")
    doc, comment = reviewed_comment(konfig, root, cluster, stack, base, tmp_path)
    assert [r["change"] for r in doc["ignoreRulesProposed"]] == ["added"]
    (entry,) = doc["stacks"]
    deploy = f"apps/v1:Deployment:{ns}:web"
    assert {"id": deploy, "path": "spec.replicas"} in entry["review"]["clusterDiffers"]
    (obj,) = [o for o in entry["review"]["objects"] if o["id"] == deploy]
    assert list(obj["fields"]) == ["spec.template.spec.containers[name=web].image"]

    res = merge(konfig, root, cluster, stack, comment)
    assert res.code == 0, res.out + res.err
    assert f"appops/{stack}: the reviewed change" in res.err, res.err
    live = deployment(kube, ns)
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27.4"
    assert live["spec"]["replicas"] == 5  # the rule is in force: kept as the team set it


def test_a_rule_that_hides_what_the_pull_request_changes(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    """A pull request sets replicas 3 -> 1 and adds a rule that ignores replicas: the
    reviewer saw 3 -> 1 (base rules), the merge keeps replicas as live (merged rules)."""
    ns = unique("p27rh")
    base = applied(repo_builder, konfig, cluster, tmp_path, ns)
    root, stack = repo_builder.root, f"{ns}/prod"
    repo_builder.stack(ns, "prod", main=main_k(ns, replicas=1, image="nginx:1.27.4"),
                       stack_yaml=STACK_YAML + HIDE_REPLICAS)  # fmt: skip
    git_commit(root, "pr: one replica, a new image, and a rule that hides replicas")
    doc, comment = reviewed_comment(konfig, root, cluster, stack, base, tmp_path)
    (entry,) = doc["stacks"]
    (obj,) = [o for o in entry["review"]["objects"] if o["id"].endswith(":web")]
    assert "spec.replicas" in obj["fields"]

    # the merge: the rule is in force, replicas is kept as live, so the change is no
    # longer the reviewed one (3 -> 1 was shown): production blocks, and says why
    res = merge(konfig, root, cluster, stack, comment)
    assert res.code == 1, res.out + res.err
    deploy = f"apps/v1:Deployment:{ns}:web"
    assert f"appops/{stack}: changed since the review" in res.err
    assert f"no longer: {deploy} spec.replicas" in res.err
    assert (
        f"because {deploy} spec.replicas is ignored now by appops/{stack}/stack.yaml ignore[0] "
        "(the team scales by hand; kept live), a rule the reviewed preview did not apply"
    ) in res.err, res.err
    live = deployment(kube, ns)
    assert live["spec"]["replicas"] == 3
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27.3"


def test_a_rule_the_pull_request_drops_sets_the_field_back_at_merge(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    """Main ignores replicas and the team scaled to 5; a pull request drops the rule
    (with a new image). Its preview still applies the rule (the base's): replicas is not
    shown as a change. At merge the rule is gone, and apply sets replicas back to what
    the repository declares: drift the pull request's change does not make, so it is
    not counted in the digest (docs/review.md), and the merge applies as reviewed."""
    ns = unique("p27rd")
    root, stack = repo_builder.root, f"{ns}/prod"
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(ns, "prod", main=main_k(ns), stack_yaml=STACK_YAML + HIDE_REPLICAS)
    git_init(root)
    git_commit(root, "main: the team scales by hand")
    res = konfig("--root", str(root), "apply", "--yes", stack,
                 f"--kubeconfig={cluster.kubeconfig}")  # fmt: skip
    assert res.code == 0, res.out + res.err
    base = tmp_path / "base"
    shutil.copytree(root, base, ignore=shutil.ignore_patterns(".cache", ".git"))
    cluster.kubectl("scale", "deployment", "web", "-n", ns, "--replicas=5")
    repo_builder.stack(ns, "prod", main=main_k(ns, image="nginx:1.27.4"), stack_yaml=STACK_YAML)
    git_commit(root, "pr: new image, and no more scaling by hand")
    doc, comment = reviewed_comment(konfig, root, cluster, stack, base, tmp_path)
    assert [r["change"] for r in doc["ignoreRulesProposed"]] == ["removed"]
    (entry,) = doc["stacks"]
    deploy = f"apps/v1:Deployment:{ns}:web"
    (obj,) = [o for o in entry["review"]["objects"] if o["id"] == deploy]
    assert list(obj["fields"]) == ["spec.template.spec.containers[name=web].image"]

    res = merge(konfig, root, cluster, stack, comment)
    assert res.code == 0, res.out + res.err
    assert f"appops/{stack}: the reviewed change" in res.err, res.err
    live = deployment(kube, ns)
    assert live["spec"]["replicas"] == 3  # the rule is gone: set back to the declared 3
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27.4"
