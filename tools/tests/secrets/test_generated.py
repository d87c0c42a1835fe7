"""The ``generated`` extension of a Secret, read as plain data."""

from __future__ import annotations

from typing import Any

import pytest

from konfig.secrets.generated import Generated, GeneratedKeyError, generated_keys
from konfig.spec import Resource


def _resource(kind: str, generated: Any) -> Resource:
    attributes = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "db", "namespace": "n"}}
    return Resource(f"v1:{kind}:n:db", attributes, extensions={"generated": generated})


def test_a_secret_lists_its_generated_keys_with_their_length() -> None:
    res = _resource("Secret", [{"key": "password"}, {"key": "token", "length": 64}])
    assert generated_keys(res) == (Generated("password", 32), Generated("token", 64))
    assert generated_keys(Resource("v1:Secret:n:x", {"kind": "Secret"})) == ()


@pytest.mark.parametrize(
    ("kind", "generated", "message"),
    [
        ("ConfigMap", [{"key": "k"}], "only a v1 Secret can have generated values"),
        ("Secret", {"key": "k"}, r"must be a list of \{key, length\}"),
        ("Secret", [{"length": 32}], r"generated`\[0\] needs `key`"),
        ("Secret", [{"key": "k", "length": 8}], r"\[0\]\.length must be 16\.\.128, got 8"),
        ("Secret", [{"key": "k", "length": True}], r"length must be 16\.\.128, got True"),
    ],
)
def test_an_unusable_generated_extension_is_a_clear_error(
    kind: str, generated: Any, message: str
) -> None:
    with pytest.raises(GeneratedKeyError, match=message):
        generated_keys(_resource(kind, generated))
