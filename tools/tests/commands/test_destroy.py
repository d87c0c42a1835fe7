"""``konfig destroy``: existing stacks and stacks whose directory is gone."""

from __future__ import annotations

import shutil

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory_store
from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"


def test_destroy_a_deleted_stack_by_path(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    project = unique("p7gone")
    repo_builder.stack(
        project,
        "dev",
        main=SIMPLE_MAIN.format(name=project, namespace=project),
        stack_yaml=STACK_YAML,
    )
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", "--allow-dirty", f"{project}/dev", "--yes", kc, cwd=repo_builder.root)
    assert res.code == 0, res.err
    stored = inventory_store.read_inventory(kube, f"appops/{project}/dev")
    assert stored is not None
    count = len(stored.members)

    shutil.rmtree(repo_builder.root / "appops" / project / "dev")
    # without confirmation and a TTY: refused
    res = konfig(
        "destroy",
        "--allow-dirty",
        f"appops/{project}/dev",
        "--deleted",
        kc,
        "--context",
        "admin",
        cwd=repo_builder.root,
    )
    assert res.code == 2
    assert inventory_store.read_inventory(kube, f"appops/{project}/dev") is not None

    res = konfig(
        "destroy",
        "--allow-dirty",
        f"appops/{project}/dev",
        "--deleted",
        "--yes",
        kc,
        "--context",
        "admin",
        cwd=repo_builder.root,
    )
    assert res.code == 0, res.err
    assert (
        f"Destroy complete: 0 created, 0 updated, 0 replaced, {count} deleted, 0 unchanged"
        in res.out
    )
    assert inventory_store.read_inventory(kube, f"appops/{project}/dev") is None
    assert kube.get("v1", "Namespace", project, None) is None
    assert kube.get("apps/v1", "Deployment", project, project) is None


def test_destroy_without_inventory_is_a_no_op(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    res = konfig(
        "destroy",
        "--allow-dirty",
        f"appops/{unique('p7none')}/dev",
        "--yes",
        f"--kubeconfig={cluster.kubeconfig}",
        "--context",
        "admin",
        cwd=repo_builder.root,
    )
    assert res.code == 0, res.err
    assert "no inventory in the cluster" in res.err
    assert "Destroy complete: 0 created, 0 updated, 0 replaced, 0 deleted, 0 unchanged" in res.out


def test_deleted_flag_refuses_an_existing_stack(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    project = unique("p7here")
    repo_builder.stack(project, "dev", stack_yaml=STACK_YAML)
    res = konfig(
        "destroy",
        "--allow-dirty",
        f"appops/{project}/dev",
        "--deleted",
        "--yes",
        f"--kubeconfig={cluster.kubeconfig}",
        cwd=repo_builder.root,
    )
    assert res.code == 2
    assert "still exists" in res.err
