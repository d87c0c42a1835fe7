"""Terraform configuration is data: nothing a stack writes is evaluated by OpenTofu.

Every string and key a stack contributes to ``main.tf.json`` (resource attributes,
provider settings, import ids) is escaped (``${`` -> ``$${``, ``%{`` -> ``%%{``), except
Konfig's own ``${konfig:...}`` references, which become OpenTofu's expressions. The
``tofu`` tests give the generated configuration to the real OpenTofu and provider
(issue 26, finding 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixtures.tofu import PG_ENVIRONMENT, Tofu

from konfig.spec import spec_from_items
from konfig.tofu.config import Backend, configuration, literal, provider_variable
from konfig.tofu.model import stack_terraform, terraform_resources
from konfig.tofu.policy import checked_against_policy, policy_from_data

PROVIDER = {"source": "registry.opentofu.org/cyrilgdn/postgresql", "version": "1.26.0"}
ROLE = "cyrilgdn/postgresql:postgresql_role:shop"


def _spec(role: dict[str, Any], *, import_id: str | None = None) -> Any:
    ext: dict[str, Any] = {"provider": PROVIDER}
    if import_id is not None:
        ext["importId"] = import_id
    return spec_from_items(
        [{"id": ROLE, "type": "Terraform", "attributes": role, "extensions": ext}]
    )


CREDENTIALS = PG_ENVIRONMENT


def _document(settings: dict[str, Any], role: dict[str, Any], **kw: Any) -> dict[str, Any]:
    raw = {
        "terraform": {
            "providers": {"postgresql": {"settings": settings, "environment": CREDENTIALS}}
        }
    }
    # a platform that lets stacks choose these settings (konfig.yaml `terraform`)
    policy = policy_from_data(
        {
            "providers": {"postgresql": {"settings": sorted(settings)}},
            "credentials": [
                {
                    "stacks": ["appops/shop/prod"],
                    "provider": "postgresql",
                    "environment": CREDENTIALS,
                }
            ],
        }
    )
    path = "appops/shop/prod"
    terraform = checked_against_policy(stack_terraform(raw, path), raw, path, policy)
    imports = kw.pop("imports", None)
    return configuration(
        terraform_resources(_spec(role, **kw)),
        terraform,
        Backend(kind="local", path="state.tfstate"),
        imports=imports,
    ).document


def test_literal_escapes_every_string_and_key() -> None:
    value = {"a${x}": ["%{if 1}y%{endif}", {"k": '${file("/etc/passwd")}'}], "n": 5}
    assert literal(value) == {
        "a$${x}": ["%%{if 1}y%%{endif}", {"k": '$${file("/etc/passwd")}'}],
        "n": 5,
    }
    # a literal that is already escaped stays literal: $${ -> $$${ reads back as $${
    assert literal("$${x}") == "$$${x}"


def test_provider_settings_import_ids_and_attribute_keys_are_literals() -> None:
    """Finding 2: a provider setting was written unescaped into main.tf.json."""
    doc = _document(
        {
            "connect_timeout": '${tonumber(file("/some/file"))}',
            "sslmode": "%{ if true }x%{ endif }",
        },
        {"name": "shop", "parameters": {'${file("/k")}': "v"}},
        import_id='${file("/etc/hostname")}',
        imports={ROLE: '${file("/etc/hostname")}'},
    )
    (block,) = doc["provider"]["postgresql"]
    assert block["connect_timeout"] == '$${tonumber(file("/some/file"))}'
    assert block["sslmode"] == "%%{ if true }x%%{ endif }"
    # the credentials stay Konfig's own variables
    assert block["password"] == "${var." + provider_variable("postgresql", "password") + "}"
    role = doc["resource"]["postgresql_role"]["shop"]
    assert role["parameters"] == {'$${file("/k")}': "v"}
    assert doc["import"] == [{"to": "postgresql_role.shop", "id": '$${file("/etc/hostname")}'}]


# --- the real OpenTofu -------------------------------------------------------------------


def _plan(tofu: Tofu, work: Path, doc: dict[str, Any]) -> tuple[int, str]:
    work.mkdir(parents=True, exist_ok=True)
    (work / "main.tf.json").write_text(json.dumps(doc, indent=2))
    creds = {
        "TF_VAR_" + provider_variable("postgresql", "host"): tofu.pg_host,
        "TF_VAR_" + provider_variable("postgresql", "port"): str(tofu.pg_port),
        "TF_VAR_" + provider_variable("postgresql", "username"): tofu.pg_superuser,
        "TF_VAR_" + provider_variable("postgresql", "password"): tofu.superuser_password,
    }
    init = tofu.run("init", "-no-color", "-input=false", cwd=work, env=creds)
    assert init.returncode == 0, init.stdout + init.stderr
    plan = tofu.run("plan", "-no-color", "-input=false", "-out=p.tfplan", cwd=work, env=creds)
    return plan.returncode, plan.stdout + plan.stderr


@pytest.mark.tofu
def test_opentofu_reads_a_provider_setting_as_the_literal_string(
    tofu: Tofu, tmp_path: Path
) -> None:
    """Finding 2 reproduced against the real OpenTofu: a setting that reads a file.
    OpenTofu evaluated it (the file's content reached its output); now it gets the
    literal string: a number is required, and nothing of the file is read."""
    canary = tmp_path / "canary"
    canary.write_text("canary-7d1e0f-not-a-number")
    setting = f'${{tonumber(file("{canary}"))}}'
    code, out = _plan(
        tofu, tmp_path / "number", _document({"connect_timeout": setting}, {"name": "shop"})
    )
    assert code != 0
    assert "canary-7d1e0f" not in out, out
    assert "connect_timeout" in out and "a number is required" in out, out

    # A string setting the provider quotes back when it refuses it: what the provider
    # received is the stack's text itself, not the file.
    text = f'${{file("{canary}")}} and %{{ if true }}x%{{ endif }}'
    # (an import makes the plan read the role: the provider connects)
    doc = _document({"sslmode": text}, {"name": "shop"}, imports={ROLE: "shop"})
    code, out = _plan(tofu, tmp_path / "string", doc)
    assert code != 0
    assert "canary-7d1e0f" not in out, out
    # the driver quotes the value it got (its quotes escaped): the stack's text, as written
    assert 'wrong value for "sslmode": "' + text.replace('"', '\\"') + '"' in out, out
