"""Whose approval a change needs, through the import graph, with owners read at the base."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import RepoBuilder

from konfig.detect.changeset import affected_stacks
from konfig.pipeline.approvals import Approval, owners_at, requirements, verdict

OWNERS = """
owners:
  platform: [platform]
  teams:
    platform: [root]
    shop: [ann]
    data: [dan]
"""

SERVER_MAIN = """\
import base.pkg.models.frontend
import base.pkg.lib.web

app: frontend.Server {{
    name = "{p}"
    namespace = "{p}-{s}"
    image = "nginx:1.27.3"
    labels = web.labels
}}
"""
JOB_MAIN = """\
import base.pkg.models.frontend

job: frontend.Job {{
    name = "{p}"
    namespace = "{p}-{s}"
    image = "busybox:1.36"
}}
"""


@pytest.fixture
def teams(repo_builder: RepoBuilder) -> RepoBuilder:
    """shop (Servers importing base/pkg/lib/web) and data (a Job) with dev and prod
    stacks; ops (a Server too) names no owners."""
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.write("base/pkg/lib/web/web.k", 'labels: {str:str} = {"tier" = "web"}\n')
    config = repo_builder.root / "konfig.yaml"
    config.write_text(config.read_text() + OWNERS)
    repo_builder.project("shop", yaml_text="name: shop\nowners: [shop]\n")
    repo_builder.project("data", yaml_text="name: data\nowners: [data]\n")
    for stack in ("dev", "prod"):
        repo_builder.stack("shop", stack, main=SERVER_MAIN.format(p="shop", s=stack))
        repo_builder.stack("data", stack, main=JOB_MAIN.format(p="data", s=stack))
    repo_builder.stack("ops", "prod", main=SERVER_MAIN.format(p="ops", s="prod"))
    git_init(repo_builder.root)
    return repo_builder


def _needed(root: Path, base: str) -> dict[str, tuple[str, ...]]:
    changes = affected_stacks(root, base, "HEAD", cache=root / ".cache/konfig")
    return {r.stack: r.owners for r in requirements(root, changes, owners_at(root, base))}


def test_a_base_model_change_needs_the_owners_of_every_production_stack_importing_it(
    teams: RepoBuilder,
) -> None:
    root = teams.root
    base = git_commit(root, "base")
    teams.write("base/pkg/lib/web/web.k", 'labels: {str:str} = {"tier" = "frontend"}\n')
    git_commit(root, "change the web labels")
    # data does not import base/pkg/lib/web: its stacks are not affected; dev stacks
    # need nobody; ops names no owners: the platform team owns it
    assert _needed(root, base) == {"appops/ops/prod": ("root",), "appops/shop/prod": ("ann",)}


def test_a_trigger_change_needs_every_project_and_a_stack_change_only_its_own(
    teams: RepoBuilder,
) -> None:
    root = teams.root
    base = git_commit(root, "base")
    (root / "kcl.mod").write_text((root / "kcl.mod").read_text() + "\n")
    git_commit(root, "kcl.mod")
    assert _needed(root, base) == {
        "appops/data/prod": ("dan",),
        "appops/ops/prod": ("root",),
        "appops/shop/prod": ("ann",),
    }
    second = git_commit(root, "again")
    teams.write("appops/data/prod/main.k", JOB_MAIN.format(p="data", s="prod") + "# x\n")
    git_commit(root, "data prod")
    assert _needed(root, second) == {"appops/data/prod": ("dan",)}


def test_a_pull_request_cannot_name_its_author_owner_nor_unmark_production(
    teams: RepoBuilder,
) -> None:
    root = teams.root
    base = git_commit(root, "base")
    teams.project("shop", yaml_text="name: shop\nowners: ['@mallory']\n")
    teams.write("appops/shop/prod/stack.yaml", "name: prod\nproduction: false\n")
    teams.write("appops/shop/prod/main.k", SERVER_MAIN.format(p="shop", s="prod") + "# x\n")
    git_commit(root, "hostile")
    assert _needed(root, base) == {"appops/shop/prod": ("ann",)}


def test_the_verdict_needs_an_owner_of_each_project_approving_the_current_change(
    teams: RepoBuilder,
) -> None:
    root = teams.root
    base = git_commit(root, "base")
    (root / "kcl.mod").write_text((root / "kcl.mod").read_text() + "\n")
    head = git_commit(root, "kcl.mod")
    changes = affected_stacks(root, base, "HEAD", cache=root / ".cache/konfig")
    needed = requirements(root, changes, owners_at(root, base))
    one = verdict(needed, [Approval("ann", head), Approval("root", head)], head)
    assert not one.ok
    assert [s.requirement.stack for s in one.missing] == ["appops/data/prod"]
    assert one.summary() == "1 of 3 production stacks await an owner: data"
    stale = verdict(
        needed, [Approval("ann", head), Approval("root", head), Approval("dan", base)], head
    )
    assert not stale.ok  # dan approved an earlier commit
    both = verdict(
        needed, [Approval("ANN", head), Approval("root", head), Approval("dan", head)], head
    )
    assert both.ok and both.summary() == "owners approved all 3 affected production stacks"
    # someone who owns nothing here approves nothing
    assert not verdict(needed, [Approval("mallory", head)], head).stacks[0].satisfied
