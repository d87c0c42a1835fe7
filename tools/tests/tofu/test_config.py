"""konfig.tofu.model / config / plans and konfig.outputs: the pure parts of the Terraform
runtime (Spec resources, stack.yaml, the JSON configuration, OpenTofu's JSON plan)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from konfig import outputs
from konfig.check.terraform import check_terraform
from konfig.errors import ConfigError
from konfig.masking import MASK, MASK_AFTER, MASK_BEFORE, mask_sensitive
from konfig.repo.layout import Stack
from konfig.spec import SpecError, spec_from_items
from konfig.tofu import plans
from konfig.tofu.config import Backend, configuration
from konfig.tofu.model import (
    StackTerraform,
    TerraformSpecError,
    stack_terraform,
    terraform_resources,
)
from konfig.tofu.policy import checked_against_policy, policy_from_data

PROVIDER = {"source": "registry.opentofu.org/cyrilgdn/postgresql", "version": "1.26.0"}
ROLE = "cyrilgdn/postgresql:postgresql_role:shop"
DB = "cyrilgdn/postgresql:postgresql_database:shop"
SECRET = "v1:Secret:shop:shop-db"


def _items() -> list[dict[str, Any]]:
    return [
        {
            "id": ROLE,
            "type": "Terraform",
            "attributes": {"name": "shop", "login": True},
            "extensions": {
                "provider": PROVIDER,
                "writeOnly": [
                    {
                        "attribute": "password_wo",
                        "version": "password_wo_version",
                        "secret": SECRET,
                        "key": "PGPASSWORD",
                    }
                ],
            },
        },
        {
            "id": DB,
            "type": "Terraform",
            "attributes": {
                "name": "shop",
                "owner": f"${{konfig:{ROLE}.name}}",
                "template": "a${b}",
            },
            "extensions": {"provider": PROVIDER},
        },
        {
            "id": "v1:ConfigMap:shop:shop-db",
            "attributes": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "shop-db", "namespace": "shop"},
                "data": {"PGDATABASE": f"${{konfig:{DB}.name}}"},
            },
        },
    ]


STACK = {
    "terraform": {
        "providers": {
            "postgresql": {
                "settings": {"sslmode": "disable"},
                "environment": {"host": "SHOP_PGHOST", "password": "SHOP_PGPASSWORD"},
            }
        },
        "allowDestroy": ["cyrilgdn/postgresql:postgresql_extension:*"],
    }
}

# konfig.yaml's `terraform`: what the platform lets stack.yaml say (konfig.tofu.policy)
POLICY = policy_from_data(
    {
        "providers": {"postgresql": {"settings": ["sslmode"], "references": ["host", "port"]}},
        "credentials": [
            {
                "stacks": ["appops/shop/prod"],
                "provider": "postgresql",
                "environment": {"host": "SHOP_PGHOST", "password": "SHOP_PGPASSWORD"},
            }
        ],
    }
)


def _terraform(raw: dict[str, Any], path: str = "appops/shop/prod") -> StackTerraform:
    return checked_against_policy(stack_terraform(raw, path), raw, path, POLICY)


def test_references_add_edges_and_become_opentofu_expressions() -> None:
    spec = spec_from_items(_items())
    by_id = spec.by_id()
    assert by_id[DB].depends_on == (ROLE,)
    assert by_id["v1:ConfigMap:shop:shop-db"].depends_on == (DB,)
    assert [r.id for r in spec.terraform()] == [DB, ROLE]
    terraform = _terraform(STACK)
    config = configuration(
        terraform_resources(spec),
        terraform,
        Backend(suffix="appops-shop-prod"),
        versions={(ROLE, "password_wo"): "42"},
    )
    doc = config.document
    assert doc["terraform"]["backend"] == {
        "kubernetes": {"secret_suffix": "appops-shop-prod", "namespace": "konfig-state"}
    }
    db = doc["resource"]["postgresql_database"]["shop"]
    assert db["owner"] == "${postgresql_role.shop.name}"
    assert db["template"] == "a$${b}"  # a literal ${ is escaped
    assert db["depends_on"] == ["postgresql_role.shop"]
    role = doc["resource"]["postgresql_role"]["shop"]
    assert role["password_wo"] == "${var.wo_0}" and role["password_wo_version"] == "42"
    # credentials and the write-only value are ephemeral, sensitive variables
    assert doc["provider"]["postgresql"] == [
        {
            "sslmode": "disable",
            "host": "${var.p_postgresql_host}",
            "password": "${var.p_postgresql_password}",
        }
    ]
    assert all(
        v == {"type": "string", "sensitive": True, "ephemeral": True}
        for v in doc["variable"].values()
    )
    assert {v.env for v in config.variables if v.env} == {"SHOP_PGHOST", "SHOP_PGPASSWORD"}
    # a value unknown to the run: its version is ignored, never guessed
    unknown = configuration(terraform_resources(spec), terraform, Backend(suffix="s"))
    role = unknown.document["resource"]["postgresql_role"]["shop"]
    assert "password_wo" not in role and role["lifecycle"] == {
        "ignore_changes": ["password_wo_version"]
    }
    assert terraform.may_destroy("cyrilgdn/postgresql:postgresql_extension:shop_x")
    assert not terraform.may_destroy(DB)


def test_bad_terraform_input_is_named() -> None:
    with pytest.raises(SpecError, match="malformed Terraform resource id"):
        spec_from_items(
            [{"id": "cyrilgdn/postgresql:postgresql_role:", "type": "Terraform", "attributes": {}}]
        )
    with pytest.raises(SpecError, match="set `type: Terraform`"):
        spec_from_items([{"id": ROLE, "attributes": {}}])
    with pytest.raises(SpecError, match="unknown type 'Helm'"):
        spec_from_items([{"id": ROLE, "type": "Helm", "attributes": {}}])
    spec = spec_from_items([{"id": ROLE, "type": "Terraform", "attributes": {}, "extensions": {}}])
    with pytest.raises(TerraformSpecError, match=r"extensions\.provider` is missing"):
        terraform_resources(spec)
    spec = spec_from_items(
        [
            {
                "id": ROLE,
                "type": "Terraform",
                "attributes": {},
                "extensions": {"provider": PROVIDER | {"config": "other"}},
            }
        ]
    )
    with pytest.raises(TerraformSpecError, match=r"'other', which stack\.yaml does not define"):
        configuration(terraform_resources(spec), _terraform(STACK), Backend(suffix="s"))
    with pytest.raises(ConfigError, match="values never go in the repository"):
        stack_terraform(
            {"terraform": {"providers": {"pg": {"environment": {"password": "hunter2!"}}}}}, "s"
        )
    with pytest.raises(outputs.BadReference, match="names no attribute"):
        outputs.parse_reference(ROLE)


def test_references_are_substituted_and_unknowns_reported() -> None:
    attrs = {"data": {"A": f"db=${{konfig:{DB}.name}}", "B": "${konfig:provider/postgresql.port}"}}
    values = {DB: {"name": "shop"}}

    def lookup(ref: outputs.Reference) -> Any:
        if ref.is_provider:
            return outputs.UNKNOWN
        return values[ref.target][ref.path[0]]

    out, unknown = outputs.substitute(attrs, lookup)
    assert out == {"data": {"A": "db=shop", "B": outputs.UNKNOWN}}
    assert [str(u) for u in unknown] == ["provider/postgresql.port"]
    assert outputs.unresolved_in(out) == ["data.B"]


def _plan(actions: list[str], before: Any, after: Any, **change: Any) -> dict[str, Any]:
    return {
        "resource_changes": [
            {
                "address": "postgresql_role.shop",
                "mode": "managed",
                "type": "postgresql_role",
                "name": "shop",
                "provider_name": "registry.opentofu.org/cyrilgdn/postgresql",
                "change": {"actions": actions, "before": before, "after": after, **change},
            }
        ]
    }


def test_plan_json_becomes_masked_changes() -> None:
    ids = {"postgresql_role.shop": ROLE}
    created = plans.translate(
        _plan(
            ["create"],
            None,
            {"name": "shop", "password": "canary-pw", "roles": None, "password_wo_version": 7},
            after_unknown={"id": True},
            after_sensitive={"password": True},
        ),
        ids,
        write_only={ROLE: ("password_wo",)},
        versions={ROLE: ("password_wo_version",)},
    )
    (c,) = created.changes
    assert (c.id, c.action, c.runtime, c.kind, c.api_version) == (
        ROLE,
        "create",
        "Terraform",
        "postgresql_role",
        "cyrilgdn/postgresql",
    )
    fields = {f.path: f.after for f in c.fields}
    assert fields == {
        "id": outputs.UNKNOWN,
        "name": "shop",
        "password": MASK,
        "password_wo": "(write-only)",
        "password_wo_version": MASK,
    }
    assert "canary-pw" not in c.diff and "canary-pw" not in str(c.to_dict())
    assert created.values[ROLE]["id"] == outputs.UNKNOWN

    drift = plans.translate(
        _plan(
            ["update"],
            {"name": "shop", "login": False, "roles": []},
            {"name": "shop", "login": True, "roles": None},
        ),
        ids,
        write_only={ROLE: ("password_wo",)},
    )
    (d,) = drift.changes
    assert d.action == "update" and [(f.path, f.before, f.after) for f in d.fields] == [
        ("login", False, True)
    ]

    gone = plans.translate(
        _plan(
            ["delete"], {"name": "shop"}, None, action_reason="delete_because_no_resource_config"
        ),
        ids,
    )
    assert gone.changes[0].action == "delete" and "removed from the stack" in gone.changes[0].reason
    replaced = plans.translate(_plan(["delete", "create"], {"name": "a"}, {"name": "b"}), ids)
    assert replaced.changes[0].action == "replace"


def test_a_plan_that_creates_and_updates_only_is_told_from_its_messages() -> None:
    ids = {"postgresql_role.shop": ROLE, "postgresql_database.shop": DB}
    told = plans.from_actions({"postgresql_role.shop": "update"}, ids)
    assert [(c.id, c.action, c.runtime, c.kind, c.api_version, c.fields) for c in told.changes] == [
        (DB, "unchanged", "Terraform", "postgresql_database", "cyrilgdn/postgresql", ()),
        (ROLE, "update", "Terraform", "postgresql_role", "cyrilgdn/postgresql", ()),
    ]
    assert told.has_changes and told.values == {}
    assert "konfig preview" in told.changes[1].reason
    created = plans.from_actions({"postgresql_database.shop": "create"}, ids)
    assert [c.action for c in created.changes] == ["create", "unchanged"]
    assert not plans.from_actions({}, ids).has_changes
    # what only the plan JSON tells: a destroy, a replacement, an import, an address
    # that is not in the configuration
    for actions in (
        {"postgresql_role.shop": "delete"},
        {"postgresql_role.shop": "replace"},
        {"postgresql_role.shop": "import"},
        {"postgresql_role.gone": "update"},
    ):
        with pytest.raises(ValueError):
            plans.from_actions(actions, ids)


def test_sensitive_values_that_change_say_so_without_the_values() -> None:
    before, after = mask_sensitive({"p": "one"}, {"p": "two"}, {"p": True}, {"p": True})
    assert (before, after) == ({"p": MASK_BEFORE}, {"p": MASK_AFTER})
    before, after = mask_sensitive({"p": "one"}, {"p": "one"}, True, True)
    assert (before, after) == ({"p": MASK}, {"p": MASK})


def _check(tmp_path: Path, items: list[dict[str, Any]], raw: dict[str, Any]) -> list[str]:
    stack = Stack("shop", "prod", "appops/shop/prod", "appops/shop", raw)
    (tmp_path / stack.path).mkdir(parents=True, exist_ok=True)
    (tmp_path / stack.path / "main.k").write_text('name = "shop"\n')
    findings = check_terraform(tmp_path, stack, spec_from_items(items), POLICY)
    return sorted(f"{f.rule}: {f.message}" for f in findings)


def test_check_validates_terraform_resources_against_the_provider_schema(tmp_path: Path) -> None:
    assert _check(tmp_path, _items(), STACK) == []
    items = _items()
    items[0]["attributes"] |= {"login": "yes", "nickname": "x", "password_wo": "pw"}
    items[1]["attributes"]["owner"] = f"${{konfig:{ROLE}.colour}}"
    items.append(
        {
            "id": "cyrilgdn/postgresql:postgresql_table:t",
            "type": "Terraform",
            "attributes": {},
            "extensions": {"provider": PROVIDER},
        }
    )
    items.append(
        {
            "id": "cyrilgdn/postgresql:postgresql_schema:s",
            "type": "Terraform",
            "attributes": {"name": "s"},
            "extensions": {"provider": PROVIDER | {"version": "9.9.9", "config": "replica"}},
        }
    )
    found = _check(tmp_path, items, STACK)
    expected = [
        f"terraform/schema: {ROLE}: login: expected bool, got 'yes'",
        f"terraform/schema: {ROLE}: password_wo: a write-only argument takes a secret",
        "terraform/schema: cyrilgdn/postgresql:postgresql_table:t: provider "
        "registry.opentofu.org/cyrilgdn/postgresql 1.26.0 has no resource type 'postgresql_table'",
        f"terraform/reference: {DB}: owner refers to {ROLE}.colour: {ROLE} has no attribute "
        "'colour'",
        "terraform/invalid-resource: cyrilgdn/postgresql:postgresql_schema:s uses provider "
        "configuration 'replica', which stack.yaml does not define",
        "terraform/unknown-provider: cyrilgdn/postgresql:postgresql_schema:s: Konfig has no "
        "schema of provider registry.opentofu.org/cyrilgdn/postgresql 9.9.9",
    ]
    for text in expected:
        assert any(f.startswith(text) for f in found), (text, found)
    assert any(f.startswith(f"terraform/schema: {ROLE}: nickname: unknown argument") for f in found)
    assert len(found) == len(expected) + 1, found


def test_only_a_plan_that_creates_and_updates_is_not_read_back(tmp_path: Path) -> None:
    from konfig.tofu.plan_apply import PlannedActions, PlannedStack, plan_from_actions
    from konfig.tofu.runner import TofuSettings, Workdir

    quiet = {"add": 0, "change": 1, "import": 0, "remove": 0, "forget": 0}

    def planned(actions: dict[str, str], summary: dict[str, int] | None, **kw: Any) -> Any:
        return PlannedStack(
            [],
            plans.TerraformPlan((), {}, True),
            "konfig-1.tfplan",
            Workdir(TofuSettings(), tmp_path, what="appops/shop/prod"),
            {},
            {"postgresql_role.shop": ROLE, "postgresql_database.shop": DB},
            {},
            PlannedActions(actions, summary),
            **kw,
        )

    told = plan_from_actions(planned({"postgresql_role.shop": "update"}, quiet))
    assert told is not None
    assert [(c.id, c.action) for c in told.plan.changes] == [(DB, "unchanged"), (ROLE, "update")]
    update = {"postgresql_role.shop": "update"}
    for not_told in (
        planned(update, None),  # no change_summary seen
        planned(update, quiet | {"import": 1}),  # adopts an object: the plan JSON says so
        planned({"postgresql_role.shop": "delete"}, quiet | {"remove": 1}),
        planned({"postgresql_role.shop": "replace"}, quiet),
        planned(update, quiet, destroy=True),
    ):
        assert plan_from_actions(not_told) is None


def test_the_plan_files_of_a_konfig_that_is_gone_are_found(tmp_path: Path) -> None:
    import os
    import subprocess

    from konfig.tofu.plan_apply import _orphaned_plans

    gone = subprocess.Popen(["true"])
    gone.wait()
    names = [
        f"konfig-{gone.pid}.tfplan",
        f"konfig-{gone.pid}.tfplan.jsonl",
        f"konfig-{os.getpid()}.tfplan",
        f"konfig-{os.getpid()}.tfplan.jsonl",
        f"konfig-{gone.pid}.tfplan.other",
        "konfig-x.tfplan",
    ]
    for name in names:
        (tmp_path / name).write_text("")
    assert sorted(p.name for p in _orphaned_plans(tmp_path)) == sorted(names[:2])
