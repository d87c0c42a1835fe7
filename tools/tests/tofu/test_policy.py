"""The platform's Terraform policy (konfig.tofu.policy): where OpenTofu connects and with
which credentials comes from konfig.yaml, not from a stack (issue 26, findings 2 and 3)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from fixtures.repos import KonfigRunner, RepoBuilder

from konfig.errors import ConfigError
from konfig.repo.settings import repo_config_from_data
from konfig.tofu.model import stack_terraform
from konfig.tofu.policy import (
    CREDENTIALS_RULE,
    POLICY_RULE,
    TerraformPolicy,
    checked_against_policy,
    policy_from_data,
    policy_violations,
)

POLICY: dict[str, Any] = {
    "providers": {
        "postgresql": {"settings": ["sslmode", "connect_timeout"], "references": ["host", "port"]}
    },
    "credentials": [
        {
            "stacks": ["appops/shop/prod"],
            "provider": "postgresql",
            "environment": {
                "host": "SHOP_PGHOST",
                "port": "SHOP_PGPORT",
                "username": "SHOP_PGUSER",
                "password": "SHOP_PGPASSWORD",
            },
        },
        {
            "stacks": ["appops/other/*"],
            "provider": "postgresql",
            "environment": {"host": "OTHER_PGHOST", "password": "OTHER_PGPASSWORD"},
        },
    ],
}


def _stack(settings: dict[str, Any], environment: dict[str, str]) -> dict[str, Any]:
    return {
        "terraform": {
            "providers": {"postgresql": {"settings": settings, "environment": environment}}
        }
    }


OWN = {"host": "SHOP_PGHOST", "port": "SHOP_PGPORT", "password": "SHOP_PGPASSWORD"}


def test_konfig_yaml_holds_the_policy_and_its_contract_checks_it() -> None:
    config = repo_config_from_data({"terraform": POLICY})
    policy = policy_from_data(config.terraform)
    assert policy.providers["postgresql"].settings == ("sslmode", "connect_timeout")
    assert policy.granted("appops/other/dev", "postgresql") == {
        "host": {"OTHER_PGHOST"},
        "password": {"OTHER_PGPASSWORD"},
    }
    assert policy.granted("appops/shop/dev", "postgresql") == {}
    with pytest.raises(ConfigError, match="terraform"):
        repo_config_from_data({"terraform": {"credentials": [{"stacks": ["a"], "provider": "p"}]}})
    with pytest.raises(ConfigError, match="terraform"):
        repo_config_from_data({"terraform": {"providers": {"postgresql": {"settings": "host"}}}})


def test_the_stack_may_use_what_the_platform_grants_it() -> None:
    raw = _stack({"sslmode": "disable", "connect_timeout": 10}, OWN)
    policy = policy_from_data(POLICY)
    assert policy_violations(raw, "appops/shop/prod", policy) == []
    terraform = checked_against_policy(
        stack_terraform(raw, "appops/shop/prod"), raw, "appops/shop/prod", policy
    )
    assert terraform.checked and terraform.providers["postgresql"].references == ("host", "port")


@pytest.mark.parametrize(
    ("settings", "environment", "rule", "path", "words"),
    [
        # finding 2: the connection target moved into settings
        (
            {"host": "evil.example", "port": 5432},
            {"password": "SHOP_PGPASSWORD"},
            POLICY_RULE,
            ("terraform", "providers", "postgresql", "settings", "host"),
            "`host` is not a setting",
        ),
        (
            {"sslmode": "disable", "sslrootcert": "/proc/self/environ"},
            {},
            POLICY_RULE,
            ("terraform", "providers", "postgresql", "settings", "sslrootcert"),
            "sslrootcert",
        ),
        # finding 3: another stack's password under an argument a reference may copy
        (
            {},
            {"host": "OTHER_PGPASSWORD"},
            CREDENTIALS_RULE,
            ("terraform", "providers", "postgresql", "environment", "host"),
            "OTHER_PGPASSWORD is not granted to appops/shop/prod for argument `host`",
        ),
        # its own password under `host` (a reference would copy it)
        (
            {},
            {"host": "SHOP_PGPASSWORD"},
            CREDENTIALS_RULE,
            ("terraform", "providers", "postgresql", "environment", "host"),
            "SHOP_PGPASSWORD is not granted",
        ),
        # any variable of the job (the age key, the forge token)
        (
            {},
            {"password": "SOPS_AGE_KEY"},
            CREDENTIALS_RULE,
            ("terraform", "providers", "postgresql", "environment", "password"),
            "SOPS_AGE_KEY",
        ),
    ],
)
def test_what_the_platform_does_not_allow_is_refused_with_its_place(
    settings: dict[str, Any],
    environment: dict[str, str],
    rule: str,
    path: tuple[str, ...],
    words: str,
) -> None:
    raw = _stack(settings, environment)
    policy = policy_from_data(POLICY)
    found, *_ = policy_violations(raw, "appops/shop/prod", policy)
    assert (found.rule, found.path) == (rule, path)
    assert words in found.message
    text = yaml.safe_dump(raw, sort_keys=False)
    with pytest.raises(ConfigError) as info:
        checked_against_policy(
            stack_terraform(raw, "appops/shop/prod"), raw, "appops/shop/prod", policy, text=text
        )
    err = info.value
    assert err.file == "appops/shop/prod/stack.yaml"
    assert err.line == next(
        n for n, line in enumerate(text.splitlines(), 1) if line.strip().startswith(path[-1])
    )
    assert rule in err.message


def test_without_a_policy_no_provider_configuration_is_offered() -> None:
    raw = _stack({"sslmode": "disable"}, {})
    (found,) = policy_violations(raw, "appops/shop/prod", TerraformPolicy())
    assert found.rule == POLICY_RULE and "not one the platform offers" in found.message


def test_a_credential_is_never_referable_whatever_konfig_yaml_lists() -> None:
    policy = policy_from_data(
        {
            "providers": {"postgresql": {"references": ["host", "password", "api_token"]}},
            "credentials": POLICY["credentials"],
        }
    )
    raw = _stack({}, OWN)
    terraform = checked_against_policy(
        stack_terraform(raw, "appops/shop/prod"), raw, "appops/shop/prod", policy
    )
    assert terraform.providers["postgresql"].references == ("host",)


STACK_YAML = """\
name: prod
kubernetes:
  context: admin
terraform:
  providers:
    postgresql:
      settings:
        sslmode: disable
        host: db.attacker.example
      environment:
        port: SHOP_PGPORT
        password: OTHER_PGPASSWORD
"""


def test_check_reports_the_policy_with_file_and_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    config = yaml.safe_load((repo_builder.root / "konfig.yaml").read_text())
    config["terraform"] = POLICY
    repo_builder.write("konfig.yaml", yaml.safe_dump(config))
    repo_builder.stack("shop", "prod", stack_yaml=STACK_YAML)
    res = konfig("check", "shop/prod", "--format", "json", cwd=repo_builder.root)
    assert res.code == 1, res.out + res.err
    found = sorted(
        (f["rule"], f["line"], f["file"])
        for f in json.loads(res.out)
        if f["rule"].startswith("terraform/")
    )
    assert found == [
        (CREDENTIALS_RULE, 12, "appops/shop/prod/stack.yaml"),
        (POLICY_RULE, 9, "appops/shop/prod/stack.yaml"),
    ], res.out
