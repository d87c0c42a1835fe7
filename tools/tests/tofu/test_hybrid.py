"""The OpenTofu runtime's pure parts: references into Kubernetes objects, refusals,
state names, the SCRAM verifier."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from konfig import outputs
from konfig.engine.kube import Kube
from konfig.engine.plan import Change
from konfig.errors import KonfigError
from konfig.repo.layout import Stack
from konfig.spec import Spec, spec_from_items
from konfig.tofu.context import TofuContext
from konfig.tofu.hybrid import not_previewed, refuse_destroys
from konfig.tofu.model import StackTerraform, TerraformSpecError, stack_terraform
from konfig.tofu.policy import checked_against_policy, policy_from_data
from konfig.tofu.preflight import missing_credentials, read_states, require_credentials
from konfig.tofu.records import state_suffix
from konfig.tofu.references import kubernetes_spec, live_where_unknown, lookup_of
from konfig.tofu.runner import TofuSettings
from konfig.tofu.state import state_configs, state_ids
from konfig.tofu.values import scram_verifier

DB = "cyrilgdn/postgresql:postgresql_database:shop"
PROVIDER = {"source": "registry.opentofu.org/cyrilgdn/postgresql", "version": "1.26.0"}
STACK = {
    "terraform": {
        "providers": {
            "postgresql": {
                "settings": {"port": 5432},
                "environment": {"host": "PGH", "password": "PGP"},
            }
        },
        "allowDestroy": ["cyrilgdn/postgresql:postgresql_extension:*"],
    }
}


# konfig.yaml's Terraform policy for these stacks (a platform that lets them choose the
# port; host and password only from the variables granted)
POLICY = policy_from_data(
    {
        "providers": {
            "postgresql": {"settings": ["port"], "references": ["host", "port", "password"]},
            "admin": {},
        },
        "credentials": [
            {
                "stacks": ["appops/shop/*", "s"],
                "provider": "postgresql",
                "environment": {"host": "PGH", "password": "PGP"},
            },
            {
                "stacks": ["appops/shop/*"],
                "provider": "admin",
                "environment": {"password": "ADMIN_PGP"},
            },
        ],
    }
)


def _terraform(raw: dict[str, Any] = STACK, path: str = "s") -> StackTerraform:
    return checked_against_policy(stack_terraform(raw, path), raw, path, POLICY)


def _ctx(environment: dict[str, str]) -> TofuContext:
    return TofuContext(TofuSettings(), Path(), environment, policy=POLICY)


def _spec(data: dict[str, str]) -> Spec:
    return spec_from_items(
        [
            {
                "id": DB,
                "type": "Terraform",
                "attributes": {"name": "shop"},
                "extensions": {"provider": PROVIDER},
            },
            {
                "id": "v1:ConfigMap:shop:db",
                "attributes": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "db", "namespace": "shop"},
                    "data": data,
                },
            },
        ]
    )


def test_references_resolve_into_kubernetes_objects_and_edges_to_terraform_go() -> None:
    terraform = _terraform()
    spec = _spec(
        {
            "DB": f"${{konfig:{DB}.name}}",
            "HOST": "${konfig:provider/postgresql.host}",
            "PORT": "${konfig:provider/postgresql.port}",
        }
    )
    lookup = lookup_of(terraform, {"PGH": "db.example"}, {DB: {"name": "shop"}}, known={DB})
    (cm,) = kubernetes_spec(spec, lookup).resources
    assert cm.attributes["data"] == {"DB": "shop", "HOST": "db.example", "PORT": "5432"}
    assert cm.depends_on == ()  # the edge to the database: OpenTofu runs first
    # before OpenTofu knows it: a placeholder, which apply never sends
    unknown = lookup_of(terraform, {"PGH": "h"}, {}, known={DB})
    (cm,) = kubernetes_spec(spec, unknown).resources
    assert cm.attributes["data"]["DB"] == outputs.UNKNOWN
    assert outputs.unresolved_in(cm.attributes) == ["data.DB"]


@pytest.mark.parametrize(
    ("data", "environment", "message"),
    [
        ({"P": "${konfig:provider/postgresql.password}"}, {"PGP": "x"}, "is a credential"),
        ({"H": "${konfig:provider/postgresql.host}"}, {}, "PGH is not set"),
        ({"H": "${konfig:provider/replica.host}"}, {}, "'replica', which stack.yaml"),
        ({"N": f"${{konfig:{DB}.colour}}"}, {}, "has no attribute 'colour'"),
        (
            {"N": "${konfig:cyrilgdn/postgresql:postgresql_role:x.name}"},
            {},
            "not a Terraform resource",
        ),
    ],
)
def test_bad_references_are_named(
    data: dict[str, str], environment: dict[str, str], message: str
) -> None:
    lookup = lookup_of(_terraform(), environment, {DB: {"name": "shop"}}, known={DB})
    with pytest.raises(TerraformSpecError, match=message):
        kubernetes_spec(_spec(data), lookup)


def test_a_reference_copies_only_what_konfig_yaml_lets_it() -> None:
    """Item 5 of issue 26: an argument konfig.yaml does not list under `references`
    (username: no word of the old filter matched it) is never resolved, and one that
    looks like a credential not even when listed (`password` above)."""
    terraform = _terraform(
        {
            "terraform": {
                "providers": {"postgresql": {"environment": {"host": "PGH", "password": "PGP"}}}
            }
        }
    )
    assert terraform.providers["postgresql"].references == ("host", "port")
    env = {"PGH": "db.example", "PGP": "s3cret"}
    lookup = lookup_of(terraform, env, {}, known=set())
    (cm,) = kubernetes_spec(_spec({"H": "${konfig:provider/postgresql.host}"}), lookup).resources
    assert cm.attributes["data"] == {"H": "db.example"}
    for argument in ("username", "sslmode"):
        with pytest.raises(TerraformSpecError, match=f"copy argument '{argument}'"):
            kubernetes_spec(_spec({"U": f"${{konfig:provider/postgresql.{argument}}}"}), lookup)
    # a stack.yaml never held to the policy lets nothing through
    raw = stack_terraform(STACK, "s")
    assert raw.providers["postgresql"].references == ()
    with pytest.raises(TerraformSpecError, match="copy argument 'host'"):
        kubernetes_spec(
            _spec({"H": "${konfig:provider/postgresql.host}"}),
            lookup_of(raw, env, {}, known=set()),
        )


def test_destroys_are_refused_unless_the_stack_allows_them() -> None:
    base = Change(
        id=DB,
        api_version="cyrilgdn/postgresql",
        kind="postgresql_database",
        namespace=None,
        name="shop",
        action="delete",
        reason="removed from the stack",
        validated=True,
        desired=None,
        live=None,
        fields=(),
        diff="",
        runtime="Terraform",
    )
    ext = replace(base, id="cyrilgdn/postgresql:postgresql_extension:shop_x", action="replace")
    kept = replace(base, id="cyrilgdn/postgresql:postgresql_role:shop", action="update")
    out = {c.id: c.refused for c in refuse_destroys((base, ext, kept), stack_terraform(STACK, "s"))}
    assert "terraform.allowDestroy" in out[DB] and "destroy postgresql_database shop" in out[DB]
    assert out[ext.id] == "" and out[kept.id] == ""


def test_state_names_are_label_values_and_dns_names() -> None:
    assert state_suffix("appops/webshop/prod") == "appops-webshop-prod"  # unchanged
    long = state_suffix("appops/" + "x" * 80 + "/Prod_2")
    assert len(long) <= 63 and long == long.lower() and not long.endswith("-")


def test_scram_verifier_is_what_postgresql_checks_a_login_against() -> None:
    verifier = scram_verifier("s3cret-pw")
    method, rest = verifier.split("$", 1)
    params, keys = rest.split("$")
    iterations, salt = params.split(":")
    stored, server = (base64.b64decode(k) for k in keys.split(":"))
    assert method == "SCRAM-SHA-256" and iterations == "4096"
    salted = hashlib.pbkdf2_hmac("sha256", b"s3cret-pw", base64.b64decode(salt), 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert hashlib.sha256(client_key).digest() == stored
    assert hmac.new(salted, b"Server Key", "sha256").digest() == server
    assert "s3cret-pw" not in verifier and scram_verifier("s3cret-pw") != verifier  # salted


STATE = {
    "resources": [
        {
            "mode": "managed",
            "type": "postgresql_role",
            "name": "old",
            "provider": 'provider["registry.opentofu.org/cyrilgdn/postgresql"]',
            "instances": [{"attributes": {"name": "old"}}],
        },
        {"mode": "data", "type": "x", "name": "y", "provider": 'provider["a/b/c"]'},
    ]
}


def test_missing_credentials_are_named_for_the_configs_the_spec_and_state_use() -> None:
    terraform = stack_terraform(STACK, "s")
    spec = _spec({})
    assert missing_credentials(terraform, spec, None, {}) == ("PGH", "PGP")
    assert missing_credentials(terraform, spec, None, {"PGH": "h", "PGP": ""}) == ("PGP",)
    assert missing_credentials(terraform, spec, None, {"PGH": "h", "PGP": "p"}) == ()
    # only the state uses the configuration (the stack removed its resources)
    assert missing_credentials(terraform, None, STATE, {"PGH": "h"}) == ("PGP",)
    assert missing_credentials(terraform, None, None, {}) == ()


def test_not_previewed_lists_the_spec_and_state_resources_with_the_variables() -> None:
    assert state_ids(STATE) == {"postgresql_role.old": "cyrilgdn/postgresql:postgresql_role:old"}
    skipped = not_previewed(_spec({}), STATE, ("PGH", "PGP"))
    assert [n.id for n in skipped] == [DB, "cyrilgdn/postgresql:postgresql_role:old"]
    assert {n.reason for n in skipped} == {"not previewed: credentials PGH, PGP missing"}
    assert {n.runtime for n in skipped} == {"Terraform"}


def test_without_credentials_a_provider_argument_is_unknown_and_keeps_the_live_value() -> None:
    terraform = _terraform()
    spec = _spec({"HOST": "${konfig:provider/postgresql.host}", "DB": f"${{konfig:{DB}.name}}"})
    lookup = lookup_of(terraform, {}, {DB: {"name": "shop"}}, known={DB}, unset_unknown=True)
    (cm,) = kubernetes_spec(spec, lookup).resources
    assert cm.attributes["data"] == {"HOST": outputs.UNKNOWN, "DB": "shop"}
    live = {"data": {"HOST": "db.example", "DB": "other"}}
    assert live_where_unknown(cm.attributes, live)["data"] == {"HOST": "db.example", "DB": "shop"}
    # no live object (not created yet): still unknown, never sent by apply
    assert live_where_unknown(cm.attributes, {})["data"]["HOST"] == outputs.UNKNOWN


def test_apply_requires_every_credential_of_the_stacks_before_any_write() -> None:
    shop = Stack("shop", "prod", "appops/shop/prod", "appops/shop", raw=STACK)
    plain = Stack("web", "dev", "appops/web/dev", "appops/web", raw={})
    specs = {shop.path: _spec({}), plain.path: Spec(())}
    require_credentials([shop, plain], specs, _ctx({"PGH": "h", "PGP": "p"}))  # all set
    with pytest.raises(KonfigError) as caught:
        require_credentials([shop, plain], specs, _ctx({"PGH": "h"}))
    assert caught.value.message == (
        "the provider credentials come from the environment and these variables are not "
        "set: appops/shop/prod: PGP (provider postgresql, argument password); nothing was "
        "changed"
    )
    assert "workflow's secrets" in (caught.value.hint or "")


TWO_CONFIGS = {
    "terraform": {
        "providers": {
            "postgresql": {"environment": {"host": "PGH", "password": "PGP"}},
            "admin": {"environment": {"password": "ADMIN_PGP"}},
        }
    }
}
ADMIN_STATE = {
    "resources": [
        {
            "mode": "managed",
            "type": "postgresql_role",
            "name": "reader",
            "provider": 'provider["registry.opentofu.org/cyrilgdn/postgresql"].admin',
            "instances": [{"attributes": {"name": "reader"}}],
        },
        *STATE["resources"],
    ]
}


def test_state_configs_map_each_provider_configuration_to_its_resources() -> None:
    assert state_configs(ADMIN_STATE) == {
        "admin": ("cyrilgdn/postgresql:postgresql_role:reader",),
        "postgresql": ("cyrilgdn/postgresql:postgresql_role:old",),
    }
    assert state_configs(STATE) == {"postgresql": ("cyrilgdn/postgresql:postgresql_role:old",)}
    assert state_configs(None) == {}


def test_require_credentials_covers_what_only_the_state_records() -> None:
    shop = Stack("shop", "prod", "appops/shop/prod", "appops/shop", raw=TWO_CONFIGS)
    specs = {shop.path: _spec({})}  # its Spec uses `postgresql` only
    env = {"PGH": "h", "PGP": "p"}
    require_credentials([shop], specs, _ctx(env))  # without the state: nothing missing
    with pytest.raises(KonfigError) as caught:
        require_credentials([shop], specs, _ctx(env), states={shop.path: ADMIN_STATE})
    assert caught.value.message == (
        "the provider credentials come from the environment and these variables are not "
        "set: appops/shop/prod: ADMIN_PGP (provider admin, argument password; to delete "
        "what only the Terraform state records: cyrilgdn/postgresql:postgresql_role:reader); "
        "nothing was changed"
    )
    # destroy: no Spec, every configuration the state uses
    with pytest.raises(KonfigError) as caught:
        require_credentials([shop], {}, _ctx({}), states={shop.path: STATE}, verb="destroy")
    assert "appops/shop/prod: PGH (provider postgresql, argument host; to delete" in (
        caught.value.message
    )
    assert "set them in the destroy environment" in (caught.value.hint or "")
    require_credentials([shop], {}, _ctx(env), states={shop.path: STATE}, verb="destroy")
    require_credentials([shop], {}, _ctx({}), states={shop.path: None}, verb="destroy")


def test_a_configuration_only_the_state_uses_must_still_be_defined() -> None:
    shop = Stack("shop", "prod", "appops/shop/prod", "appops/shop", raw=STACK)
    state = {"resources": ADMIN_STATE["resources"][:1]}
    with pytest.raises(KonfigError) as caught:
        require_credentials([shop], {}, _ctx({"PGH": "h", "PGP": "p"}), states={shop.path: state})
    assert (
        "appops/shop/prod: provider configuration admin (stack.yaml `terraform.providers` "
        "no longer defines it; to delete what only the Terraform state records: "
        "cyrilgdn/postgresql:postgresql_role:reader)"
    ) in caught.value.message


def test_a_state_that_cannot_be_read_is_left_to_its_stacks_own_run() -> None:
    shop = Stack("shop", "prod", "appops/shop/prod", "appops/shop", raw=STACK)

    def unreachable(stack: Stack) -> Kube:
        raise KonfigError(f"{stack.path}: the API server at https://127.0.0.1:1 did not answer")

    assert read_states([shop], unreachable) == {}
    assert read_states([], unreachable) == {}
