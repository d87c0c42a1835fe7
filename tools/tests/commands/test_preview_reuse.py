"""``konfig preview --specs DIR --reuse PREVIOUS.json`` against the real control plane:
a stack whose Spec and live objects are unchanged since the previous preview takes its
result; a changed Spec, or a live object someone edited, is previewed again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from commands.test_preview import RAW_MAIN, preview
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import configmap, namespace, unique

from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster


def two_stacks(builder: RepoBuilder, ns: str) -> tuple[str, str]:
    project = unique("reuse")
    builder.write(".gitignore", "/.cache/\n")
    paths = []
    for name, objects in (("a", [namespace(ns), configmap(ns, "a")]), ("b", [configmap(ns, "b")])):
        stack_yaml = f"name: {name}\nkubernetes:\n  context: admin\n"
        path = builder.stack(project, name, main=RAW_MAIN, stack_yaml=stack_yaml)
        (path / "objects.yaml").write_text(yaml.safe_dump_all(objects))
        paths.append(f"appops/{project}/{name}")
    return paths[0], paths[1]


def compiled(konfig: KonfigRunner, root: Path, out: Path, *stacks: str) -> Path:
    shutil.rmtree(out, ignore_errors=True)
    res = konfig("--root", str(root), "compile", *stacks, "--out", str(out))
    assert res.code == 0, res.err
    return out


def stacks_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["path"]: s for s in doc["stacks"]}


def test_reuse_when_unchanged_and_not_when_the_spec_or_a_live_object_changed(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    root = repo_builder.root
    ns = unique("reu")
    a, b = two_stacks(repo_builder, ns)
    git_init(root)
    first_sha = git_commit(root, "two stacks")
    kc = ("--kubeconfig", str(cluster.kubeconfig))
    for stack in (a, b):  # live objects to fingerprint (and to edit below)
        applied = konfig("apply", stack, "--yes", *kc, cwd=root)
        assert applied.code == 0, applied.err
    (root / a / "objects.yaml").write_text(
        yaml.safe_dump_all([namespace(ns), configmap(ns, "a", k="v2")])
    )
    (root / b / "objects.yaml").write_text(yaml.safe_dump(configmap(ns, "b", k="v2")))
    push1 = git_commit(root, "the pull request's first push: both stacks change")
    assert push1 != first_sha
    specs = compiled(konfig, root, tmp_path / "specs1", a, b)

    # The first push: previewed, and what each preview was computed from is recorded.
    out1 = tmp_path / "preview1.json"
    res = preview(konfig, root, cluster, a, b, "--specs", str(specs), "--format", "json")
    assert res.code == 0, res.err
    out1.write_text(res.out)
    doc1 = json.loads(res.out)
    assert doc1["commits"]["head"] == push1
    for s in doc1["stacks"]:
        assert len(s["reuseKey"]) == 64 and s["reusedFrom"] is None
        assert s["counts"]["update"] == 1, s

    # A second preview of the same Specs with nothing live changed: both re-used, the
    # same results, and the reused stacks say from which commit.
    res = preview(
        konfig, root, cluster, a, b, "--specs", str(specs), "--reuse", str(out1), "--format", "json"
    )
    assert res.code == 0, res.err
    again = json.loads(res.out)
    assert "2 of 2 stacks re-used from " + push1[:12] in res.err
    for path, s in stacks_of(again).items():
        before = stacks_of(doc1)[path]
        assert s["reusedFrom"] == push1 and s["reuseKey"] == before["reuseKey"]
        assert {k: v for k, v in s.items() if k != "reusedFrom"} == {
            k: v for k, v in before.items() if k != "reusedFrom"
        }
    assert again["counts"] == doc1["counts"] and again["hasChanges"] is True

    # The second push changes stack a only: a is previewed again, b re-used.
    (root / a / "objects.yaml").write_text(
        yaml.safe_dump_all([namespace(ns), configmap(ns, "a", k="v3")])
    )
    push2 = git_commit(root, "the second push: stack a only")
    specs2 = compiled(konfig, root, tmp_path / "specs2", a, b)
    res = preview(
        konfig, root, cluster, a, b, "--specs", str(specs2), "--reuse", str(out1),
        "--format", "json",
    )  # fmt: skip
    assert res.code == 0, res.err
    doc2 = json.loads(res.out)
    assert doc2["commits"]["head"] == push2
    now = stacks_of(doc2)
    assert now[a]["reusedFrom"] is None and now[a]["reuseKey"] != stacks_of(doc1)[a]["reuseKey"]
    (change,) = [c for c in now[a]["changes"] if c["action"] == "update"]
    assert [f["after"] for f in change["fields"] if f["path"] == "data.k"] == ["v3"]
    assert now[b]["reusedFrom"] == push1
    assert "1 of 2 stacks re-used from " + push1[:12] + f": {b}" in res.err

    # Chained: the third preview re-uses b from the commit where it was previewed.
    out2 = tmp_path / "preview2.json"
    out2.write_text(res.out)
    res = preview(
        konfig, root, cluster, a, b, "--specs", str(specs2), "--reuse", str(out2),
        "--format", "json",
    )  # fmt: skip
    assert res.code == 0, res.err
    chained = stacks_of(json.loads(res.out))
    assert chained[a]["reusedFrom"] == push2 and chained[b]["reusedFrom"] == push1

    # Someone edits b's live ConfigMap (another field manager): the fingerprint moved,
    # b is previewed again and the preview shows what the cluster now holds.
    edited = configmap(ns, "b", k="by-hand")
    kube.apply(edited, dry_run=False, field_manager="kubectl-edit")
    res = preview(
        konfig, root, cluster, a, b, "--specs", str(specs2), "--reuse", str(out2),
        "--format", "json",
    )  # fmt: skip
    assert res.code == 0, res.err
    after_edit = stacks_of(json.loads(res.out))
    assert after_edit[a]["reusedFrom"] == push2
    assert after_edit[b]["reusedFrom"] is None
    assert after_edit[b]["reuseKey"] != stacks_of(json.loads(out2.read_text()))[b]["reuseKey"]
    (change,) = [c for c in after_edit[b]["changes"] if c["action"] == "update"]
    assert [f["before"] for f in change["fields"] if f["path"] == "data.k"] == ["by-hand"]


def test_a_previous_preview_that_breaks_its_contract_is_refused(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, tmp_path: Path
) -> None:
    root = repo_builder.root
    ns = unique("reu")
    a, b = two_stacks(repo_builder, ns)
    git_init(root)
    git_commit(root, "two stacks")
    specs = compiled(konfig, root, tmp_path / "specs", a, b)
    res = preview(konfig, root, cluster, a, "--specs", str(specs), "--format", "json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    (entry,) = doc["stacks"]
    # a forged result: the key of a real stack, but changes the contract does not allow
    entry["changes"] = [{"id": "v1:ConfigMap:x:y", "action": "explode"}]
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc, indent=2))
    res = preview(konfig, root, cluster, a, "--specs", str(specs), "--reuse", str(forged))
    assert res.code == 1, res.out + res.err
    assert f"{forged}:" in res.err and "explode" in res.err
