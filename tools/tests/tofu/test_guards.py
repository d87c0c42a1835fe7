"""``terraform/forbidden`` (konfig.tofu.guards) on plain data, and where it is asked:
compile and check (here), the OpenTofu runtime's configuration (here), preview and apply
(tools/tests/commands/test_terraform_trust.py, against the real cluster and OpenTofu)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.tofu import evil_repo

from konfig.spec import spec_from_items
from konfig.tofu import guards
from konfig.tofu.config import Backend, configuration
from konfig.tofu.model import TerraformSpecError, stack_terraform, terraform_resources
from konfig.tofu.policy import checked_against_policy, policy_from_data

PROVIDER = {"source": "registry.opentofu.org/cyrilgdn/postgresql", "version": "1.26.0"}


def _resource(rid: str, attributes: dict[str, Any], provider: dict[str, str] = PROVIDER) -> Any:
    return spec_from_items(
        [
            {
                "id": rid,
                "type": "Terraform",
                "attributes": attributes,
                "extensions": {"provider": provider},
            }
        ]
    ).resources[0]


EXEC = {"local-exec": {"command": "id > /tmp/pwned"}}


@pytest.mark.parametrize(
    ("rid", "attributes", "provider", "what"),
    [
        # finding 4: a terraform_data resource with a local-exec provisioner
        (
            "cyrilgdn/postgresql:terraform_data:x",
            {"input": "x", "provisioner": [EXEC]},
            PROVIDER,
            "resource type terraform_data; `provisioner` (local-exec)",
        ),
        (
            "cyrilgdn/postgresql:postgresql_role:r",
            {"name": "r", "provisioner": [EXEC]},
            PROVIDER,
            "`provisioner` (local-exec)",
        ),
        (
            "cyrilgdn/postgresql:postgresql_role:r",
            {"name": "r", "provisioner": {"remote-exec": {"inline": ["id"]}}},
            PROVIDER,
            "`provisioner` (remote-exec)",
        ),
        (
            "cyrilgdn/postgresql:postgresql_role:r",
            {
                "name": "r",
                "provisioner": [{"file": {"source": "/etc/passwd", "destination": "/x"}}],
            },
            PROVIDER,
            "`provisioner` (file)",
        ),
        (
            "cyrilgdn/postgresql:postgresql_role:r",
            {"name": "r", "connection": {"host": "h"}},
            PROVIDER,
            "`connection`",
        ),
        (
            "cyrilgdn/postgresql:postgresql_role:r",
            {"name": "r", "provider": "postgresql.other"},
            PROVIDER,
            "`provider`",
        ),
        (
            "cyrilgdn/postgresql:postgresql_role:r",
            {"name": "r", "lifecycle": {"precondition": [{"condition": "x"}]}},
            PROVIDER,
            "`lifecycle`",
        ),
        (
            "hashicorp/null:null_resource:x",
            {},
            {**PROVIDER, "source": "registry.opentofu.org/hashicorp/null"},
            "resource type null_resource",
        ),
        (
            "hashicorp/external:external_thing:x",
            {},
            {**PROVIDER, "source": "registry.opentofu.org/hashicorp/external"},
            "resource type external_thing",
        ),
        (
            "hashicorp/http:http_x:x",
            {},
            {**PROVIDER, "source": "registry.opentofu.org/hashicorp/http"},
            "resource type http_x",
        ),
        (
            "hashicorp/local:local_file:x",
            {"filename": "/x"},
            {**PROVIDER, "source": "registry.opentofu.org/hashicorp/local"},
            "resource type local_file",
        ),
        # a type of another provider than the resource's own
        ("cyrilgdn/postgresql:random_password:x", {}, PROVIDER, "resource type random_password"),
    ],
)
def test_each_forbidden_construct_is_named(
    rid: str, attributes: dict[str, Any], provider: dict[str, str], what: str
) -> None:
    found = guards.forbidden_in_resource(_resource(rid, attributes, provider))
    assert "; ".join(f.what for f in found) == what, found
    assert found[0].resource == rid
    assert guards.RULE in guards.refusal(found) and rid in guards.refusal(found)


def test_platform_resources_are_not_refused() -> None:
    role = _resource(
        "cyrilgdn/postgresql:postgresql_role:r",
        # an attribute *value* that merely mentions a provisioner is data
        {"name": "r", "login": True, "roles": ["provisioner"], "search_path": ["local-exec"]},
    )
    assert guards.forbidden_in_resource(role) == []
    assert guards.forbidden([role]) == []


def test_files_opentofu_would_read_besides_konfigs_own_are_foreign() -> None:
    names = [
        "main.tf.json",
        "override.tf.json",
        "backend_override.tf",
        "modules.tofu",
        "data.tofu.json",
        "terraform.tfvars",
        "x.auto.tfvars.json",
        ".terraform.lock.hcl",
        "konfig-1.tfplan",
        ".konfig-init",
    ]
    found = guards.foreign_files(names)
    assert [f.what for f in found] == [
        "backend_override.tf",
        "data.tofu.json",
        "modules.tofu",
        "override.tf.json",
        "terraform.tfvars",
        "x.auto.tfvars.json",
    ]
    assert "not Konfig's" in found[0].message


def test_the_runtime_never_writes_a_forbidden_configuration() -> None:
    spec = spec_from_items(
        [
            {
                "id": "cyrilgdn/postgresql:terraform_data:x",
                "type": "Terraform",
                "attributes": {"provisioner": [EXEC]},
                "extensions": {"provider": PROVIDER},
            }
        ]
    )
    raw: dict[str, Any] = {"terraform": {"providers": {"postgresql": {}}}}
    policy = policy_from_data({"providers": {"postgresql": {}}})
    terraform = checked_against_policy(
        stack_terraform(raw, "appops/a/b"), raw, "appops/a/b", policy
    )
    with pytest.raises(TerraformSpecError, match=r"refused \(terraform/forbidden"):
        configuration(terraform_resources(spec), terraform, Backend(suffix="s"))


# --- compile and check --------------------------------------------------------------------


def test_compile_and_check_refuse_a_provisioner_by_the_rule(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    stack = evil_repo(repo_builder, marker)
    root = repo_builder.root
    res = konfig("compile", stack, cwd=root)
    assert res.code == 1, res.out + res.err
    assert "terraform/forbidden" in res.err and "terraform_data" in res.err, res.err
    assert "local-exec" in res.err
    res = konfig("check", stack, "--format", "json", cwd=root)
    assert res.code == 1, res.out + res.err
    (found,) = [f for f in json.loads(res.out) if f["rule"] == "terraform/forbidden"]
    assert found["file"] == "appops/evil/dev/main.k", found
    assert "terraform_data" in found["message"] and "local-exec" in found["message"]
    assert not marker.exists()


def test_the_runtime_refuses_a_working_directory_with_a_file_it_did_not_write(
    tmp_path: Path,
) -> None:
    """A pull request can commit files under the working directory (a gitignored path
    is still checked out): a backend override, or a .tfvars that sets Konfig's own
    variables (the provider's host) with a higher precedence than TF_VAR_*."""
    from konfig.tofu.runner import TofuError, TofuSettings, Workdir

    workdir = Workdir(TofuSettings(), tmp_path, what="appops/shop/prod")
    workdir.write_config({"terraform": {}}, "main.tf.json")  # Konfig's own: fine
    (tmp_path / "terraform.tfvars").write_text('p_postgresql_host = "evil.example"\n')
    with pytest.raises(TofuError, match=r"terraform/forbidden.*terraform\.tfvars"):
        workdir.write_config({"terraform": {}}, "main.tf.json")
    (tmp_path / "terraform.tfvars").unlink()
    (tmp_path / "backend_override.tf.json").write_text('{"terraform": {"backend": {}}}')
    with pytest.raises(TofuError, match=r"backend_override\.tf\.json"):
        workdir.write_config({"resource": {}}, "main.tf.json")
    assert json.loads((tmp_path / "main.tf.json").read_text()) == {"terraform": {}}
