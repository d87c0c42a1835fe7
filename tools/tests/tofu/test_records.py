"""The OpenTofu state's name (:func:`konfig.tofu.records.state_suffix`): one a stack
path, a valid label value and Secret name, unchanged where it always was unambiguous."""

from __future__ import annotations

import re

from konfig.tofu.config import Backend
from konfig.tofu.records import legacy_state_suffix, state_suffix

# Paths that shared a state name before (each run of characters other than lowercase
# letters and digits became one '-'), and some that look like a hashed name
TRICKY = [
    "appops/p-a/db",
    "appops/p/a-db",
    "appops/p/a/db",
    "appops/p.a/db",
    "appops/p_a/db",
    "appops/P-a/db",
    "appops/p/a--db",
    "appops/p/A-db",
    "appops/webshop/prod",
    "appops/konfig-0123456789abcdef/x",
    "appops/" + "x" * 80 + "/prod",
    "appops/" + "x" * 80 + "/prod2",
    "appops/" + "x" * 29 + "y/" + "z" * 20,
]
_LABEL_VALUE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def test_state_names_are_injective_label_values_and_secret_names() -> None:
    """Before: appops/p-a/db and appops/p/a-db both had tfstate-default-appops-p-a-db."""
    names = {path: state_suffix(path) for path in TRICKY}
    assert len(set(names.values())) == len(TRICKY), names
    for path, suffix in names.items():
        assert len(suffix) <= 63 and _LABEL_VALUE.fullmatch(suffix), (path, suffix)
        for name in (Backend(suffix=suffix).secret_name, Backend(suffix=suffix).lease_name):
            assert len(name) <= 253 and _DNS.fullmatch(name), name
    assert legacy_state_suffix("appops/p-a/db") == legacy_state_suffix("appops/p/a-db")


def test_names_that_were_unambiguous_stay_as_they_were() -> None:
    for path in ("appops/webshop/prod", "appops/p/a-db", "appops/shop2/dev-eu-1"):
        assert state_suffix(path) == legacy_state_suffix(path)
    for path in ("appops/p-a/db", "appops/p.a/db", "appops/p/a/db", "appops/" + "x" * 80 + "/p"):
        assert state_suffix(path).startswith("konfig-")
        assert state_suffix(path) != legacy_state_suffix(path)
