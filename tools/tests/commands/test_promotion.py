"""Promotion order on the real control plane: prod waits for its dev (and its soak)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory as inv
from konfig.engine.kube import Kube, KubeTarget, connect

pytestmark = pytest.mark.cluster
SOAK = 4  # seconds


@pytest.fixture(scope="module")
def kube(cluster: Cluster) -> Iterator[Kube]:
    k = connect(KubeTarget(str(cluster.kubeconfig), cluster.admin_context))
    yield k
    k.close()


def test_prod_applies_after_dev_is_applied_and_soaked_never_in_the_same_run(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster, kube: Kube
) -> None:
    p = unique("promo")
    dev, prod = f"appops/{p}/dev", f"appops/{p}/prod"
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(p, "dev", stack_yaml="name: dev\nkubernetes:\n  context: admin\n")
    repo_builder.stack(
        p,
        "prod",
        stack_yaml="name: prod\nkubernetes:\n  context: admin\n"
        f"promotion:\n  after: [{dev}]\n  soak: {SOAK}s\n",
    )
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "dev and prod in one merge")
    root = str(repo_builder.root)
    kubecfg = ("--kubeconfig", str(cluster.kubeconfig))

    def pending() -> dict[str, object]:
        result = konfig("--root", root, "pending", "--json", *kubecfg)
        assert result.code == 0, result.err
        data: dict[str, object] = json.loads(result.out)
        return data

    # both changed in one merge: dev is applied, prod is held (no soak time yet)
    first = pending()
    assert [s["path"] for s in first["stacks"]] == [dev]  # type: ignore[attr-defined]
    assert first["held"] == [
        {
            "path": prod,
            "after": dev,
            "reason": f"promotion.after {dev}, which is not applied at this commit yet: it is "
            f"applied first, then this stack, soaking {SOAK}s in a later run",
            "until": None,
        }
    ]
    # an apply of both is refused before any write, naming the rule and the stack
    both = konfig("--root", root, "apply", "--yes", "--no-wait", dev, prod, *kubecfg)
    assert both.code == 1
    assert "promotion/held: nothing was applied" in both.err and f"{prod} is held" in both.err
    for stack in (dev, prod):
        assert kube.get("v1", "ConfigMap", inv.inventory_name(stack), "konfig-system") is None
    assert kube.get("v1", "Namespace", f"{p}-dev", None) is None

    # dev applied: prod is held until the soak ends, and said so
    applied = konfig("--root", root, "apply", "--yes", dev, *kubecfg)
    assert applied.code == 0, applied.err
    soaking = pending()
    assert soaking["stacks"] == []
    (hold,) = soaking["held"]  # type: ignore[misc]
    until = datetime.strptime(hold["until"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert 0 < (until - datetime.now(UTC)).total_seconds() <= SOAK + 1
    early = konfig("--root", root, "apply", "--yes", "--no-wait", prod, *kubecfg)
    assert early.code == 1 and f"{prod} is held until {hold['until']}" in early.err
    assert kube.get("v1", "Namespace", f"{p}-prod", None) is None

    # a later run, after the soak: prod is pending and applies
    time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 1)
    later = pending()
    assert [s["path"] for s in later["stacks"]] == [prod]  # type: ignore[attr-defined]
    assert later["held"] == []
    done = konfig("--root", root, "apply", "--yes", prod, *kubecfg)
    assert done.code == 0, done.err
    assert kube.get("v1", "Namespace", f"{p}-prod", None) is not None


def test_check_reports_an_unknown_or_cyclic_promotion_stack(
    konfig: KonfigRunner, repo_builder: RepoBuilder
) -> None:
    repo_builder.stack(
        "shop", "dev", stack_yaml="name: dev\npromotion:\n  after: [appops/shop/prod]\n"
    )
    repo_builder.stack(
        "shop",
        "prod",
        stack_yaml=(
            "name: prod\npromotion:\n  after:\n    - appops/shop/dev\n    - appops/shop/devv\n"
        ),
    )
    result = konfig("check", "--no-policies", cwd=repo_builder.root)
    assert result.code == 1
    assert "appops/shop/prod/stack.yaml:5:" in result.out
    assert "promotion.after names 'appops/shop/devv', which is no stack" in result.out
    assert (
        "promotion.after makes a cycle: appops/shop/dev -> appops/shop/prod -> appops/shop/dev"
        in result.out
    )
    bad = konfig("check", "--no-policies", cwd=repo_builder.root)
    assert "[promotion/unknown-stack]" in bad.out
