"""One severity per finding (issue 14): a layout problem that makes a stack unusable is an
error in every command, reported first with file and line and how to fix it; the other
stacks keep working and the exit code is 1.

The repository: ``hello/dev`` whose project.yaml says ``name: helo``, ``orphan/dev``
without a project.yaml, and a good stack ``good/dev``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory_store
from konfig.engine.kube import KubeTarget, connect

HELO = "appops/hello/project.yaml:1: name 'helo' does not match the directory name 'hello'"
HELO_FIX = "set `name: hello`, or rename the directory to 'helo'"
ORPHAN = "appops/orphan/dev/stack.yaml: stack is not inside a project"
ORPHAN_FIX = "add appops/orphan/project.yaml with `name: orphan`"
CONTEXT = "name: dev\nkubernetes:\n  context: {}\n"


def broken_repo(repo: RepoBuilder, good: str = "good", context: str | None = None) -> Path:
    stack_yaml = CONTEXT.format(context) if context else None
    repo.stack(good, "dev", stack_yaml=stack_yaml)
    repo.stack("hello", "dev")
    repo.project("hello", yaml_text="name: helo\n")
    repo.stack("orphan", "dev")
    (repo.root / "appops/orphan/project.yaml").unlink()
    return repo.root


def assert_reported_first(err: str) -> None:
    """Both errors (file:line, message, fix) come before anything else on stderr."""
    lines = err.splitlines()
    assert lines[0].startswith("error: "), err
    head = "\n".join(lines[:4])
    assert f"error: {HELO}" in head and HELO_FIX in head, err
    assert f"error: {ORPHAN}" in head and ORPHAN_FIX in head, err
    assert "warning:" not in err


def test_list_errors_and_lists_the_rest(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    root = broken_repo(repo_builder)
    res = konfig("list", "--json", cwd=root)
    assert res.code == 1
    assert_reported_first(res.err)
    assert [s["path"] for s in json.loads(res.out)] == ["appops/good/dev"]


def test_compile_names_the_broken_stack_with_its_file(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    """Before: a warning, then `unknown stack 'hello/dev'` (exit 2)."""
    root = broken_repo(repo_builder)
    res = konfig("compile", "hello/dev", cwd=root)
    assert res.code == 1, res.err
    assert_reported_first(res.err)
    assert "unknown stack" not in res.err
    assert "hello/dev: unusable because of the layout errors above" in res.err
    assert "appops/hello/project.yaml:1" in res.err.splitlines()[-2]
    assert res.out == ""

    # the other stacks keep working, and the exit code still says something is wrong
    res = konfig("compile", "--all", "--json", cwd=root)
    assert res.code == 1
    assert_reported_first(res.err)
    assert [(s["path"], s["ok"]) for s in json.loads(res.out)] == [("appops/good/dev", True)]
    res = konfig("compile", "good/dev", "hello/dev", cwd=root)
    assert res.code == 1
    assert "id: apps/v1:Deployment:good-dev:good" in res.out


def test_test_and_check_agree(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    root = broken_repo(repo_builder)
    assert konfig("test", "good/dev", "--update", "--no-unit", cwd=root).code == 1
    res = konfig("test", "good/dev", "--no-unit", "--json", cwd=root)
    assert res.code == 1
    assert_reported_first(res.err)
    assert [s["status"] for s in json.loads(res.out)["stacks"]] == ["passed"]

    # check reports them as findings, whatever stacks it was asked about
    for args in ((), ("good/dev",)):
        res = konfig("check", *args, "--format", "json", cwd=root)
        assert res.code == 1, res.out
        found = {(f["rule"], f["file"], f["line"], f["severity"]) for f in json.loads(res.out)}
        assert ("structure/project-name", "appops/hello/project.yaml", 1, "error") in found
        assert (
            "structure/stack-outside-project",
            "appops/orphan/dev/stack.yaml",
            None,
            "error",
        ) in found
        messages = " ".join(f["message"] for f in json.loads(res.out))
        assert HELO_FIX in messages and ORPHAN_FIX in messages


def test_changed_reports_the_changed_broken_stacks(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    root = repo_builder.root
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack("good", "dev")
    git_init(root)
    base = git_commit(root, "good")
    broken_repo(repo_builder)
    git_commit(root, "hello and orphan")
    res = konfig("changed", "--base", base, "--json", cwd=root)
    assert res.code == 1, res.err
    assert_reported_first(res.err)
    data = json.loads(res.out)
    assert data["stacks"] == []  # neither broken stack is affected, nor deleted
    assert data["deleted_stacks"] == []
    assert {(p["rule"], p["file"], p["line"]) for p in data["problems"]} == {
        ("project-name", "appops/hello/project.yaml", 1),
        ("stack-outside-project", "appops/orphan/dev/stack.yaml", None),
    }
    # a broken project.yaml is never a deleted stack either
    (root / "appops/good/project.yaml").unlink()
    git_commit(root, "good loses its project.yaml")
    res = konfig("changed", "--base", base, "--json", cwd=root)
    assert res.code == 1
    data = json.loads(res.out)
    assert data["deleted_stacks"] == [] and "appops/good/dev/stack.yaml" in res.err


@pytest.mark.cluster
def test_preview_apply_and_pending(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    good = unique("p14lay")
    root = broken_repo(repo_builder, good, cluster.admin_context)
    # a second good stack on the same cluster, never applied: pending lists that cluster's
    # inventories through it once the first one is broken
    second = unique("p14lay")
    repo_builder.stack(second, "dev", stack_yaml=CONTEXT.format(cluster.admin_context))
    repo_builder.write(".gitignore", "/.cache/\n")
    git_init(root)
    git_commit(root, "a good stack and two broken ones")
    kc = f"--kubeconfig={cluster.kubeconfig}"

    res = konfig("preview", "--all", kc, "--format", "json", cwd=root)
    assert res.code == 1, res.err
    assert_reported_first(res.err)
    assert f"appops/{good}/dev" in [s["path"] for s in json.loads(res.out)["stacks"]]

    res = konfig("apply", "hello/dev", "--yes", kc, cwd=root)
    assert res.code == 1
    assert_reported_first(res.err)
    assert "nothing was done" in res.err

    res = konfig("apply", "--all", "--yes", "--no-wait", kc, cwd=root)
    assert res.code == 1, res.err
    assert_reported_first(res.err)
    kube = connect(KubeTarget(str(cluster.kubeconfig), cluster.admin_context))
    try:
        applied = inventory_store.read_inventory(kube, f"appops/{good}/dev")
        assert applied is not None and applied.commit

        # pending: the broken stacks are errors; an inventory of a stack still at HEAD
        # is never a deleted stack, whatever its layout
        res = konfig("pending", "--json", kc, cwd=root)
        assert res.code == 1
        assert_reported_first(res.err)
        assert f"appops/{good}/dev" in json.loads(res.out)["up_to_date"]
        (root / f"appops/{good}/project.yaml").write_text("name: typo\n")
        git_commit(root, "a typo in the project's name")
        res = konfig("pending", "--json", kc, cwd=root)
        assert res.code == 1
        data = json.loads(res.out)
        assert data["deleted_stacks"] == [] and data["unusable"] == [f"appops/{good}/dev"]
        (root / f"appops/{good}/project.yaml").write_text(f"name: {good}\n")
        git_commit(root, "the name fixed")
        res = konfig("destroy", f"{good}/dev", f"{second}/dev", "--yes", "--no-wait", kc, cwd=root)
        assert res.code == 1  # destroyed, but the layout errors remain
        assert inventory_store.read_inventory(kube, f"appops/{good}/dev") is None
    finally:
        kube.close()
