"""konfig.tofu.refresh's translation of a refresh-only plan (``resource_drift``) and
the state's resource ids; the real ``tofu plan -refresh-only`` runs in
commands/test_terraform.py."""

from __future__ import annotations

from konfig.tofu.refresh import drift_of
from konfig.tofu.state import state_ids

ROLE = "cyrilgdn/postgresql:postgresql_role:shop"
DB = "cyrilgdn/postgresql:postgresql_database:shop"
EXT = "cyrilgdn/postgresql:postgresql_extension:shop_pgcrypto"
IDS = {
    "postgresql_role.shop": ROLE,
    "postgresql_database.shop": DB,
    "postgresql_extension.shop_pgcrypto": EXT,
}
PROVIDER = "registry.opentofu.org/cyrilgdn/postgresql"


def _entry(address: str, actions: list[str], before: object, after: object) -> dict[str, object]:
    kind, name = address.split(".")
    return {
        "address": address,
        "mode": "managed",
        "type": kind,
        "name": name,
        "provider_name": PROVIDER,
        "change": {
            "actions": actions,
            "before": before,
            "after": after,
            "before_sensitive": {"password": True},
            "after_sensitive": {"password": True},
        },
    }


def test_refresh_drift_per_resource_changed_deleted_and_in_sync() -> None:
    shown = {
        "resource_drift": [
            _entry(
                "postgresql_role.shop",
                ["update"],
                {"name": "shop", "login": True, "password": "s3cret-recorded"},
                {"name": "shop", "login": False, "password": "s3cret-live"},
            ),
            _entry("postgresql_extension.shop_pgcrypto", ["delete"], {"name": "pgcrypto"}, None),
        ]
    }
    found = {d.id: d for d in drift_of(shown, IDS)}
    assert [d.id for d in drift_of(shown, IDS)] == sorted(IDS.values())
    assert found[DB].state == "in_sync" and found[DB].fields == ()
    assert found[EXT].state == "deleted"
    role = found[ROLE]
    assert role.state == "drifted" and role.address == "postgresql_role.shop"
    assert [(f.path, f.before, f.after) for f in role.fields] == [
        ("login", True, False),
        ("password", "*** (before)", "*** (after)"),  # changed, never shown
    ]
    assert "s3cret" not in repr(found)


def test_equal_sensitive_values_and_unset_arguments_are_no_drift() -> None:
    shown = {
        "resource_drift": [
            _entry(
                "postgresql_role.shop",
                ["update"],
                {"name": "shop", "password": "same", "roles": []},
                {"name": "shop", "password": "same", "roles": None},
            )
        ]
    }
    assert {d.id: d.state for d in drift_of(shown, IDS)}[ROLE] == "in_sync"


def test_state_ids_name_the_provider_namespace() -> None:
    state = {
        "resources": [
            {
                "mode": "managed",
                "type": "postgresql_role",
                "name": "shop",
                "provider": f'provider["{PROVIDER}"]',
            },
            {
                "mode": "managed",
                "type": "x_thing",
                "name": "a",
                "module": "module.m",
                "provider": 'provider["registry.opentofu.org/acme/x"]',
            },
            {"mode": "data", "type": "x_data", "name": "d", "provider": 'provider["a/b"]'},
            {
                "mode": "managed",
                "type": "x_thing",
                "name": "b",
                "provider": 'provider["registry.opentofu.org/acme/x"].eu',
            },
        ]
    }
    assert state_ids(state) == {"postgresql_role.shop": ROLE, "x_thing.b": "acme/x:x_thing:b"}
    assert state_ids(None) == {}
