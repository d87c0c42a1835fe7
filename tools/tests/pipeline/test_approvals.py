"""Whose approval a change needs, through the import graph, with owners read at the base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder

from konfig import contracts
from konfig.detect.changeset import affected_stacks
from konfig.engine.plan import Change, Danger, StackPlan
from konfig.pipeline.approvals import (
    Approval,
    Override,
    Requirement,
    danger_overrides,
    owners_at,
    policy_overrides,
    requirements,
    verdict,
)
from konfig.repo.owners import Owners, resolve_owners
from konfig.repo.yamlio import load_yaml_text

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


# --- policy overrides (issue 32 item 2's last sentence) ------------------------------

POLICY_OWNERS = (
    OWNERS
    + """\
    sre: [sam]
    security: [sec]
  policies:
    prod-replicas: [sre]
    danger/rollout: [sre, '@lead']
"""
)
DISABLE = """\
name: {s}
policies:
  disable:
    - rule: {rule}
      reason: {reason}
"""


def _owners(platform: tuple[str, ...] = ("root",)) -> Owners:
    return Owners(
        True,
        platform,
        {"appops/shop": ("ann",)},
        {},
        {"prod-replicas": ("sam",), "danger/rollout": ("lead", "sam")},
    )


def _disable(rule: str, reason: str, resources: list[str] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"rule": rule, "reason": reason}
    if resources is not None:
        entry["resources"] = resources
    return {"name": "prod", "policies": {"disable": [entry]}}


def test_a_rule_the_change_disables_needs_the_policys_owners_with_its_reason() -> None:
    owners = _owners()
    stack = "appops/shop/prod"
    added = policy_overrides(stack, {"name": "prod"}, _disable("prod-replicas", "one pod"), owners)
    assert added == (Override(stack, "prod-replicas", "one pod", ("sam",)),)
    # a rule konfig.yaml names nobody for: the platform team's
    other = policy_overrides(stack, None, _disable("spec/catch-all-webhook", "mesh"), owners)
    assert other == (Override(stack, "spec/catch-all-webhook", "mesh", ("root",)),)
    # the same exemption at the merge base was approved when it came: nothing new
    same = _disable("prod-replicas", "one pod")
    assert policy_overrides(stack, same, same, owners) == ()
    # a new reason or a wider scope is another exemption
    wider = _disable("prod-replicas", "one pod", ["apps/v1:Deployment:shop:web"])
    assert len(policy_overrides(stack, wider, same, owners)) == 1
    assert len(policy_overrides(stack, same, _disable("prod-replicas", "two"), owners)) == 1
    # an entry without a reason is check's finding (policy/disable-without-reason), and
    # switches nothing off: no override
    assert policy_overrides(stack, None, _disable("prod-replicas", " "), owners) == ()


def _change(id_: str, *dangers: tuple[str, str]) -> Change:
    return Change(
        id=id_, api_version="apps/v1", kind="Deployment", namespace="shop", name=id_,
        action="update", reason="", validated=True, desired=None, live=None, fields=(),
        diff="", dangers=tuple(Danger(name, reason) for name, reason in dangers),  # type: ignore[arg-type]
    )  # fmt: skip


def _plan(path: str, *changes: Change) -> StackPlan:
    return StackPlan(path, None, False, None, None, None, changes)


def test_a_danger_class_konfig_yaml_confirms_needs_the_policys_owners() -> None:
    owners = _owners()
    plans = [
        _plan(
            "appops/shop/prod",
            _change("a", ("rollout", "pod template changed"), ("capacity", "replicas 0")),
            _change("b", ("rollout", "mounted ConfigMap changed")),
        ),
        _plan("appops/shop/dev", _change("c", ("capacity", "replicas 0"))),
        _plan("appops/data/prod", _change("d", ("data", "PVC deleted"))),
    ]
    found = danger_overrides(plans, ["rollout", "data"], owners)
    assert found == (
        Override(
            "appops/shop/prod",
            "danger/rollout",
            "pod template changed; mounted ConfigMap changed",
            ("lead", "sam"),
        ),
        Override("appops/data/prod", "danger/data", "PVC deleted", ("root",)),
    )
    assert danger_overrides(plans, [], owners) == ()  # nothing asks for a confirmation
    many = _plan("appops/x/dev", *(_change(str(i), ("data", f"pvc {i}")) for i in range(5)))
    (one,) = danger_overrides([many], ["data"], owners)
    assert one.reason == "pvc 0; pvc 1; pvc 2 (and 2 more)"


def test_an_override_is_satisfied_only_by_the_policys_owners_approving_the_change() -> None:
    stack = "appops/shop/dev"  # not production: only the override needs anyone
    override = Override(stack, "prod-replicas", "one pod", ("sam",))
    head, older = "c" * 40, "d" * 40
    nobody = verdict((), [], head, overridden=[override])
    assert not nobody.ok and nobody.stacks == ()
    assert nobody.summary() == "1 policy override(s) await the policy's owners: prod-replicas"
    # the project's owner is not the policy's; the policy's owner of an older commit neither
    assert not verdict(
        (), [Approval("ann", head), Approval("sam", older)], head, overridden=[override]
    ).ok
    # an earlier approval that holds for the stack's unchanged digest is no approval of
    # an exemption (stack.yaml changes no object: the digest cannot tell it came after)
    held = verdict((), [Approval("sam", older)], head, {stack: ("sam",)}, overridden=[override])
    assert not held.ok
    done = verdict((), [Approval("SAM", head)], head, overridden=[override])
    assert done.ok and done.overrides[0].approved_by == ("sam",)
    assert done.summary() == "owners approved all 1 policy override(s)"
    body = done.to_json()
    assert body["overrides"] == [
        {
            "stack": stack,
            "rule": "prod-replicas",
            "reason": "one pod",
            "owners": ["sam"],
            "approved_by": ["sam"],
        }
    ]
    contracts.validate("owners", body)
    # with a production stack too: both must be satisfied
    needed = (Requirement("appops/shop/prod", "appops/shop", ("ann",), ("x",)),)
    half = verdict(needed, [Approval("ann", head)], head, overridden=[override])
    assert not half.ok
    assert half.summary().endswith("await the policy's owners: prod-replicas")
    assert verdict(
        needed, [Approval("ann", head), Approval("sam", head)], head, overridden=[override]
    ).ok


def test_owners_policies_resolve_to_logins_and_an_unknown_team_is_a_problem() -> None:
    text = "owners:\n  platform: [platform]\n  teams:\n    platform: [root]\n    sre: [sam]\n"
    text += "  policies:\n    prod-replicas: [sre, '@lead']\n    danger/data: [ghosts]\n"
    data = load_yaml_text(text, file="konfig.yaml")
    owners, problems = resolve_owners(data["owners"], [], config_text=text)
    assert owners.of_policy("prod-replicas") == ("lead", "sam")
    assert owners.of_policy("danger/data") == ("root",)  # nobody valid named: the platform
    assert owners.of_policy("anything-else") == ("root",)
    (problem,) = problems
    assert "'ghosts' is no team" in problem.message
    assert problem.line == text.splitlines().index("    danger/data: [ghosts]") + 1


def test_konfig_owners_lists_a_disabled_policy_and_a_confirmed_danger_and_stays_red(
    teams: RepoBuilder, konfig: KonfigRunner
) -> None:
    """Through git and the offline preview: a dev stack's change (no production stack)
    that disables a policy and changes a Deployment's pod template (rollout, which
    konfig.yaml `dangers.confirm` lists at the base) needs the policies' owners."""
    root = teams.root
    config = root / "konfig.yaml"
    config.write_text(
        config.read_text().replace(OWNERS, POLICY_OWNERS) + "dangers:\n  confirm: [rollout]\n"
    )
    base = git_commit(root, "base")
    teams.write(
        "appops/shop/dev/stack.yaml",
        DISABLE.format(s="dev", rule="prod-replicas", reason="a canary of one pod"),
    )
    teams.write(
        "appops/shop/dev/main.k",
        SERVER_MAIN.format(p="shop", s="dev").replace("nginx:1.27.3", "nginx:1.27.4"),
    )
    head = git_commit(root, "shop dev: one replica, a new image")
    result = konfig("owners", "--base", base, "--json", cwd=root)
    assert result.code == 1, result.err
    body = json.loads(result.out)
    contracts.validate("owners", body)
    assert body["stacks"] == [] and body["change"] == head and body["ok"] is False
    by_rule = {o["rule"]: o for o in body["overrides"]}
    assert sorted(by_rule) == ["danger/rollout", "prod-replicas"]
    assert by_rule["prod-replicas"] == {
        "stack": "appops/shop/dev",
        "rule": "prod-replicas",
        "reason": "a canary of one pod",
        "owners": ["sam"],
        "approved_by": [],
    }
    assert by_rule["danger/rollout"]["owners"] == ["lead", "sam"]
    assert "Deployment" in by_rule["danger/rollout"]["reason"]
    # the owners workflow's --no-dangers compiles nothing: the stack.yaml exemption only
    quiet = konfig("owners", "--base", base, "--no-dangers", "--json", cwd=root)
    assert quiet.code == 1 and "the offline preview" not in quiet.err, quiet.err
    assert [o["rule"] for o in json.loads(quiet.out)["overrides"]] == ["prod-replicas"]
    text = konfig("owners", "--base", base, cwd=root)
    assert text.code == 1
    assert "appops/shop/dev: overrides prod-replicas (a canary of one pod): needs one of sam" in (
        text.out
    )
    # the change's own konfig.yaml cannot name its author the policy's owner, nor drop
    # the confirmation: the base's are read
    config.write_text(
        config.read_text().replace("prod-replicas: [sre]", "prod-replicas: ['@mallory']")
        .replace("confirm: [rollout]", "confirm: []")
    )  # fmt: skip
    git_commit(root, "hostile")
    again = json.loads(konfig("owners", "--base", base, "--json", cwd=root).out)
    assert {o["rule"]: o["owners"] for o in again["overrides"]} == {
        "prod-replicas": ["sam"],
        "danger/rollout": ["lead", "sam"],
    }
