"""A pull request is previewed with the base branch's rules (``konfig preview
--rules-from DIR``): an ignore rule it adds cannot hide its own change (the change is
shown and counted, the rule listed as proposed), and it cannot relax konfig.yaml's
``dangers`` policy for itself. Against the real control plane."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.webstack import HIDE_REPLICAS, web_main
from kubeutil import unique

from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"


def applied_stack(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, tmp_path: Path
) -> tuple[str, Path]:
    """A stack applied with 3 replicas, and a copy of the repository as it is then: the
    base branch's checkout the pull request is previewed against."""
    ns = unique("bsrules")
    root = repo_builder.root
    repo_builder.stack(ns, "dev", main=web_main(ns, 3), stack_yaml=STACK_YAML)
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty",
                 f"--kubeconfig={cluster.kubeconfig}", cwd=root)  # fmt: skip
    assert res.code == 0, res.out + res.err
    base = tmp_path / "base"
    shutil.copytree(root, base, ignore=shutil.ignore_patterns(".cache", ".git"))
    return ns, base


def test_a_rule_the_pull_request_adds_cannot_hide_its_own_change(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    ns, base = applied_stack(repo_builder, konfig, cluster, tmp_path)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    # the pull request: replicas 3 -> 1, and a rule that ignores replicas
    repo_builder.stack(ns, "dev", main=web_main(ns, 1), stack_yaml=STACK_YAML + HIDE_REPLICAS)
    deployment = f"apps/v1:Deployment:{ns}:web"

    # with its own rules the change is gone: the rule hides it (kept live, not counted)
    res = konfig("preview", f"{ns}/dev", kc, "--format", "json", cwd=root)
    own = json.loads(res.out)
    (stack,) = own["stacks"]
    change = {c["id"]: c for c in stack["changes"]}[deployment]
    assert change["action"] == "unchanged", change
    assert [f["path"] for f in change["ignored"]] == ["/spec/replicas"]
    assert "ignoreRulesProposed" not in own

    # with the base branch's rules: shown and counted, the rule listed as proposed
    res = konfig("preview", f"{ns}/dev", kc, "--rules-from", str(base), "--format", "json",
                 "--detailed-exitcode", cwd=root)  # fmt: skip
    assert res.code == 2, res.out + res.err  # changes
    doc = json.loads(res.out)
    (stack,) = doc["stacks"]
    change = {c["id"]: c for c in stack["changes"]}[deployment]
    assert change["action"] == "update" and change.get("ignored", []) == [], change
    assert [(f["path"], f["before"], f["after"]) for f in change["fields"]] == [
        ("spec.replicas", 3, 1)
    ]
    assert stack["counts"]["update"] == 1 and doc["counts"]["update"] == 1
    assert doc["ignoreRulesProposed"] == [
        {
            "change": "added",
            "source": f"appops/{ns}/dev/stack.yaml ignore[0]",
            "reason": "the team scales by hand",
            "selector": {"kind": "Deployment"},
            "paths": ["/spec/replicas"],
            "managers": [],
            "stacks": [f"appops/{ns}/dev"],
        }
    ]
    assert "ignore rule appops/" in res.err and "added: listed, not applied" in res.err

    # the terminal says so too, and the comment built from the JSON has its section
    text = konfig("preview", f"{ns}/dev", kc, "--rules-from", str(base), cwd=root)
    assert text.code == 0, text.out + text.err
    assert "spec.replicas: 3 → 1" in text.out
    assert "Ignore rules this change proposes" in text.out
    assert f"added appops/{ns}/dev/stack.yaml ignore[0]: Deployment /spec/replicas" in text.out
    (tmp_path / "preview.json").write_text(json.dumps(doc), encoding="utf-8")
    res = konfig("report", "--preview", str(tmp_path / "preview.json"), "--sha", "a" * 40,
                 cwd=root)  # fmt: skip
    assert res.code == 0, res.out + res.err
    assert "### 🙈 Ignore rules this change proposes" in res.out
    assert "1 to update" in res.out or "**1** to update" in res.out
    # nothing was written: the Deployment still has 3 replicas
    live = kube.get("apps/v1", "Deployment", "web", ns)
    assert live is not None and live["spec"]["replicas"] == 3


def test_a_pull_request_cannot_relax_the_danger_policy_for_itself(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, tmp_path: Path
) -> None:
    root = repo_builder.root
    config = root / "konfig.yaml"
    config.write_text(
        config.read_text(encoding="utf-8") + "dangers:\n  confirm: [capacity]\n", encoding="utf-8"
    )
    ns, base = applied_stack(repo_builder, konfig, cluster, tmp_path)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    # the pull request scales to 0 (capacity) and drops capacity from the policy
    repo_builder.stack(ns, "dev", main=web_main(ns, 0), stack_yaml=STACK_YAML)
    config.write_text(
        config.read_text(encoding="utf-8").replace("  confirm: [capacity]\n", "  confirm: []\n"),
        encoding="utf-8",
    )
    deployment = f"apps/v1:Deployment:{ns}:web"

    def refused(*extra: str) -> str | None:
        res = konfig("preview", f"{ns}/dev", kc, "--format", "json", *extra, cwd=root)
        assert res.code == 0, res.out + res.err
        (stack,) = json.loads(res.out)["stacks"]
        change = {c["id"]: c for c in stack["changes"]}[deployment]
        assert [d["class"] for d in change["dangers"]] == ["capacity"], change
        found: str | None = change["refused"]
        return found

    assert refused() is None  # its own konfig.yaml asks for nothing
    held = refused("--rules-from", str(base))
    assert held is not None and held.startswith(
        f"danger/confirm: capacity needs a confirmation (`konfig apply --confirm appops/{ns}/dev="
    ), held


def test_rules_from_must_be_a_checkout(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    repo_builder.stack("shop", "dev")
    res = konfig("preview", "shop/dev", "--rules-from", str(tmp_path), cwd=repo_builder.root)
    assert res.code == 2, res.out + res.err
    assert "--rules-from" in res.err and "not a checkout of a Konfig repository" in res.err
    res = konfig("preview", "--offline", "--base", "HEAD", "--rules-from", str(tmp_path),
                 cwd=repo_builder.root)  # fmt: skip
    assert res.code == 2 and "--rules-from" in res.err, res.err


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
         *args],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_a_merged_change_is_held_to_the_policy_before_it(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """apply.yml's --policy-from: the merge drops capacity from dangers.confirm and
    scales to 0; the policy before the push still asks for the confirmation."""
    root = repo_builder.root
    config = root / "konfig.yaml"
    config.write_text(
        config.read_text(encoding="utf-8") + "dangers:\n  confirm: [capacity]\n", encoding="utf-8"
    )
    ns = unique("bspolicy")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    repo_builder.stack(ns, "dev", main=web_main(ns, 3), stack_yaml=STACK_YAML)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "base")
    before = _git(root, "rev-parse", "HEAD")
    res = konfig("apply", f"{ns}/dev", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    repo_builder.stack(ns, "dev", main=web_main(ns, 0), stack_yaml=STACK_YAML)
    config.write_text(
        config.read_text(encoding="utf-8").replace("  confirm: [capacity]\n", "  confirm: []\n"),
        encoding="utf-8",
    )
    _git(root, "commit", "-q", "-am", "scale to 0, and no confirmation for it")

    res = konfig("apply", f"{ns}/dev", "--yes", kc, "--policy-from", before, cwd=root)
    assert res.code == 1, res.out + res.err
    assert f"appops/{ns}/dev: nothing was applied: danger/confirm: capacity needs a" in res.err
    live = kube.get("apps/v1", "Deployment", "web", ns)
    assert live is not None and live["spec"]["replicas"] == 3
    res = konfig("apply", f"{ns}/dev", "--yes", kc, "--policy-from", "no-such-ref", cwd=root)
    assert res.code != 0 and "no-such-ref" in res.err, res.out + res.err
    # without it (a scheduled run): the merged policy only
    res = konfig("apply", f"{ns}/dev", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
