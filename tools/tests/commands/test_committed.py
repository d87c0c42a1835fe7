"""What is applied is a commit (issue 14): `konfig apply` and `konfig destroy` refuse
uncommitted changes to the stacks they act on; with --allow-dirty the inventory records
the apply as dirty and `konfig pending` and `konfig preview` say it matches no commit."""

from __future__ import annotations

import json
import shutil

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.build.compiler import compile_input, compile_one
from konfig.engine import inventory_store
from konfig.engine.kube import Kube
from konfig.repo.layout import discover

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"


def write_stack(repo: RepoBuilder, project: str, image: str = "nginx:1.27.3") -> None:
    main = SIMPLE_MAIN.format(name=project, namespace=project).replace("nginx:1.27.3", image)
    repo.stack(project, "dev", main=main, stack_yaml=STACK_YAML)


def digest(repo: RepoBuilder, address: str) -> str:
    r = discover(repo.root)
    result = compile_one(compile_input(r, r.stack(address)))
    assert result.spec is not None, result.error
    return result.spec.digest()


def image_of(kube: Kube, project: str) -> str:
    deploy = kube.get("apps/v1", "Deployment", project, project)
    assert deploy is not None
    return str(deploy["spec"]["template"]["spec"]["containers"][0]["image"])


def test_apply_refuses_uncommitted_changes_and_records_a_dirty_apply(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """Before: apply wrote the uncommitted edit and recorded HEAD; pending said up to date."""
    project, other = unique("p14cl"), unique("p14ot")
    root = repo_builder.root
    write_stack(repo_builder, project)
    write_stack(repo_builder, other)
    repo_builder.write(".gitignore", "/.cache/\n")
    git_init(root)
    head = git_commit(root, "two stacks")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    address, path = f"{project}/dev", f"appops/{project}/dev"

    def apply(*args: str) -> tuple[int, str]:
        res = konfig("apply", address, "--yes", "--no-wait", kc, *args, cwd=root)
        return res.code, res.err

    def pending() -> dict[str, list[str]]:
        res = konfig("pending", "--json", kc, cwd=root)
        assert res.code == 0, res.err
        data = json.loads(res.out)
        return {s["path"]: s["reasons"] for s in data["stacks"]}

    assert apply()[0] == 0
    clean = inventory_store.read_inventory(kube, path)
    assert clean is not None
    assert (clean.commit, clean.dirty, clean.spec_digest) == (
        head,
        False,
        digest(repo_builder, address),
    )
    assert path not in pending()

    # an uncommitted edit of the stack: refused before anything is written
    write_stack(repo_builder, project, image="nginx:1.27.4")
    code, err = apply()
    assert code == 1
    assert f"refusing to apply uncommitted changes (HEAD is {head[:12]}); nothing was done" in err
    assert f"{path}: {path}/main.k changed" in err
    assert "--allow-dirty" in err
    assert image_of(kube, project) == "nginx:1.27.3"
    assert inventory_store.read_inventory(kube, path) == clean
    # an untracked file in the stack counts too; a change elsewhere does not
    write_stack(repo_builder, project)
    (root / path / "notes.json").write_text("{}\n")
    assert "notes.json changed" in apply()[1]
    (root / path / "notes.json").unlink()
    write_stack(repo_builder, other, image="nginx:1.27.4")
    assert apply()[0] == 0  # the other stack's edit does not make this one dirty
    write_stack(repo_builder, other)

    # --allow-dirty: applied, recorded as dirty with the digest of what was applied
    write_stack(repo_builder, project, image="nginx:1.27.4")
    code, err = apply("--allow-dirty")
    assert code == 0, err
    assert image_of(kube, project) == "nginx:1.27.4"
    dirty = inventory_store.read_inventory(kube, path)
    assert dirty is not None and dirty.dirty and dirty.commit == head
    assert dirty.spec_digest == digest(repo_builder, address) != clean.spec_digest
    # pending and preview agree: it matches no commit
    assert pending()[path] == [
        f"applied from uncommitted changes (on top of {head[:12]}, --allow-dirty): it matches "
        "no commit"
    ]
    res = konfig("preview", address, kc, "--format", "json", cwd=root)
    (stack,) = json.loads(res.out)["stacks"]
    assert (stack["priorCommit"], stack["priorDirty"]) == (head, True)
    res = konfig("preview", address, kc, cwd=root)
    assert f"last applied from uncommitted changes (on top of {head[:12]})" in res.out

    # committed and applied: clean again, up to date
    second = git_commit(root, "nginx 1.27.4")
    assert pending()[path]  # still: the cluster runs what no commit held
    assert apply()[0] == 0
    applied = inventory_store.read_inventory(kube, path)
    assert applied is not None and (applied.commit, applied.dirty) == (second, False)
    assert path not in pending()

    # destroy: an uncommitted deletion is refused; once committed, destroyed
    shutil.rmtree(root / path)
    res = konfig("destroy", "--deleted", path, "--yes", "--no-wait", kc, cwd=root)
    assert res.code == 1
    assert "refusing to destroy uncommitted changes" in res.err
    assert "its directory is deleted in the work tree, not in a commit" in res.err
    assert inventory_store.read_inventory(kube, path) is not None
    git_commit(root, "remove the stack")
    res = konfig("destroy", "--deleted", path, "--yes", "--no-wait", kc, cwd=root)
    assert res.code == 0, res.err
    assert inventory_store.read_inventory(kube, path) is None
    res = konfig("destroy", f"{other}/dev", "--yes", "--no-wait", kc, cwd=root)
    assert res.code == 0, res.err


def test_outside_git_there_is_no_commit_to_apply(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    project = unique("p14ng")
    write_stack(repo_builder, project)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", f"{project}/dev", "--yes", kc, cwd=repo_builder.root)
    assert res.code == 1
    assert "refusing to apply: the repository is not a git repository" in res.err
    assert inventory_store.read_inventory(kube, f"appops/{project}/dev") is None
    res = konfig("apply", f"{project}/dev", "--yes", "--commit", "abc", kc, cwd=repo_builder.root)
    assert res.code == 2 and "--commit abc: the repository is not a git repository" in res.err
    res = konfig(
        "apply", f"{project}/dev", "--yes", "--no-wait", "--allow-dirty", kc, cwd=repo_builder.root
    )
    assert res.code == 0, res.err
    stored = inventory_store.read_inventory(kube, f"appops/{project}/dev")
    assert stored is not None and stored.dirty and stored.commit == ""
    res = konfig("destroy", f"{project}/dev", "--yes", "--no-wait", kc, cwd=repo_builder.root)
    assert res.code == 1 and "refusing to destroy" in res.err
    res = konfig(
        "destroy",
        f"{project}/dev",
        "--yes",
        "--no-wait",
        "--allow-dirty",
        kc,
        cwd=repo_builder.root,
    )
    assert res.code == 0, res.err
