"""The pre-write refusals (konfig.pipeline.refusals): one list that preview shows
instead of a plan and apply raises before any write, each worded for both; and apply's
safety order (konfig.pipeline.applying.check_before_write) refusing before a runtime is
set up. Plain Specs, a real repository on disk, the real KCL compiler."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import RepoBuilder

from konfig.check.specrules import system_namespace_findings, system_namespace_refusal
from konfig.engine.applier import ApplyError
from konfig.pipeline.applying import check_before_write, check_refusals
from konfig.pipeline.connections import Connections
from konfig.pipeline.refusals import (
    PRE_WRITE_REFUSALS,
    first_refusal,
    privileges,
    promql,
    system_namespaces,
    terraform_forbidden,
    unordered,
)
from konfig.pipeline.runtime import NOTHING_SET_UP, Contexts
from konfig.repo.layout import Repository, discover
from konfig.spec import Spec, spec_from_items

# line 7: the ConfigMap in kube-system
MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {
    manifests = [
        {apiVersion = "v1", kind = "Namespace", metadata.name = "web-dev"}
        {apiVersion = "v1", kind = "ConfigMap", metadata = {name = "web-own", namespace = "web-dev"}, data.k = "v"}
        {apiVersion = "v1", kind = "ConfigMap", metadata = {name = "web-sys", namespace = "kube-system"}, data.k = "v"}
    ]
}
"""  # noqa: E501


def _config_map(name: str, namespace: str, *after: str) -> dict[str, object]:
    return {
        "id": f"v1:ConfigMap:{namespace}:{name}",
        "attributes": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
        },
        "dependsOn": list(after),
    }


SYSTEM = spec_from_items([_config_map("web-sys", "kube-system")])
CYCLE_ITEMS = [
    _config_map("a", "web-dev", "v1:ConfigMap:web-dev:b"),
    _config_map("b", "web-dev", "v1:ConfigMap:web-dev:a"),
]
CYCLE = spec_from_items(CYCLE_ITEMS)
BOTH = spec_from_items([*CYCLE_ITEMS, _config_map("web-sys", "kube-system")])


@pytest.fixture
def repo(repo_builder: RepoBuilder) -> Repository:
    repo_builder.stack("web", "dev", main=MAIN, stack_yaml="name: dev\n")
    return discover(repo_builder.root)


def test_one_list_for_preview_and_apply() -> None:
    assert (
        system_namespaces,
        privileges,
        promql,
        terraform_forbidden,
        unordered,
    ) == PRE_WRITE_REFUSALS


def test_a_provisioner_is_refused_by_preview_and_apply_by_checks_rule(repo: Repository) -> None:
    """terraform/forbidden (finding 4 of issue 26): compile refuses such a Spec, and a
    Spec that reached preview or apply any other way is refused before any write."""
    spec = spec_from_items(
        [
            {
                "id": "cyrilgdn/postgresql:terraform_data:x",
                "type": "Terraform",
                "attributes": {"provisioner": [{"local-exec": {"command": "id"}}]},
                "extensions": {
                    "provider": {
                        "source": "registry.opentofu.org/cyrilgdn/postgresql",
                        "version": "1.26.0",
                    }
                },
            }
        ]
    )
    found = first_refusal(repo, repo.stacks[0], spec)
    assert found is not None
    assert "terraform/forbidden" in found.preview and "local-exec" in found.preview
    assert "nothing was applied" in found.apply and "terraform_data" in found.apply


def test_a_system_namespace_is_refused_at_its_file_and_line(repo: Repository) -> None:
    stack = repo.stacks[0]
    found = first_refusal(repo, stack, SYSTEM)
    assert found is not None
    because = system_namespace_refusal(
        system_namespace_findings(repo.root, stack, SYSTEM, repo.config.allow_system_namespaces)
    )
    assert (found.file, found.line) == ("appops/web/dev/main.k", 7)
    assert found.preview == because
    assert found.apply == f"appops/web/dev/main.k:7: appops/web/dev: nothing was applied: {because}"
    with pytest.raises(ApplyError) as caught:
        check_refusals(repo, stack, SYSTEM)
    assert caught.value.message == found.apply
    assert "allowSystemNamespaces" in (caught.value.hint or "")


def test_a_spec_that_cannot_be_ordered_is_refused(repo: Repository) -> None:
    stack = repo.stacks[0]
    found = first_refusal(repo, stack, CYCLE)
    assert found is not None and found.file is None
    assert found.preview.startswith("cannot be applied: ")
    assert found.preview.endswith(" (`konfig check` shows where)")
    problem = found.preview.removeprefix("cannot be applied: ").removesuffix(
        " (`konfig check` shows where)"
    )
    assert "cycle" in problem
    assert found.apply == f"appops/web/dev: {problem}; nothing was applied"


def test_the_first_rule_of_the_list_is_the_one_said(repo: Repository) -> None:
    stack = repo.stacks[0]
    assert first_refusal(repo, stack, BOTH) == first_refusal(repo, stack, SYSTEM)
    assert first_refusal(repo, stack, Spec(())) is None


def _kubeconfig(path: Path) -> str:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: admin\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: admin, context: {cluster: c, user: u}}]\n",
        encoding="utf-8",
    )
    return str(path)


def test_apply_refuses_before_any_runtime_is_set_up(
    repo_builder: RepoBuilder, repo: Repository, tmp_path: Path
) -> None:
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "a stack in kube-system")
    set_up: list[bool] = []

    def runtimes(opentofu: bool) -> Contexts:
        set_up.append(opentofu)
        return NOTHING_SET_UP

    conns = Connections(repo, _kubeconfig(tmp_path / "kubeconfig"), None)
    with pytest.raises(ApplyError) as caught:
        check_before_write(repo, repo.stacks, conns, runtimes, keyring=None)
    assert caught.value.message.startswith(
        "appops/web/dev/main.k:7: appops/web/dev: nothing was applied: "
    )
    assert set_up == []  # refused before OpenTofu (or any runtime) is even asked for

    # the same stack without the object in kube-system passes every step
    repo_builder.write("appops/web/dev/main.k", MAIN.replace("kube-system", "web-dev"))
    git_commit(repo_builder.root, "its own namespace")
    inputs = check_before_write(repo, repo.stacks, conns, runtimes, keyring=None)
    assert set_up == [False]  # no stack of it uses OpenTofu
    assert inputs.contexts is NOTHING_SET_UP and inputs.saved is None
    assert {r.id for r in inputs.specs["appops/web/dev"].resources} >= {
        "v1:ConfigMap:web-dev:web-sys"
    }
    assert inputs.tree.commit and not inputs.tree.is_dirty("appops/web/dev")
