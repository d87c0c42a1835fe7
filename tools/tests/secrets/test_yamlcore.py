"""Plain scalars typed as sops (Go's yaml.v3) types them, and written back unambiguously."""

from __future__ import annotations

import math
from typing import Any

import pytest

from konfig.secrets import yamlcore
from konfig.secrets.yamlcore import GoTime


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("yes", "yes"),  # YAML 1.1 (PyYAML) would say True
        ("on", "on"),
        ("True", True),
        ("FALSE", False),
        ("~", None),
        ("0o17", 15),  # YAML 1.1 would say str
        ("0755", 493),  # Go's base-0 parse: a leading 0 is octal
        ("0x1F", 31),
        ("-0b101", -5),
        ("1_000", 1000),
        ("+12", 12),
        ("1:20", "1:20"),  # no sexagesimal numbers
        ("1e3", 1000.0),
        (".5", 0.5),
        ("2001-12-14", GoTime("2001-12-14T00:00:00Z")),
        ("2001-12-14 21:59:43.10", GoTime("2001-12-14T21:59:43.1Z")),
        ("2001-12-14T21:59:43-05:00", GoTime("2001-12-14T21:59:43-05:00")),
        ("2001-13-14", "2001-13-14"),
        ("18446744073709551615", 18446744073709551615),  # uint64 still an int
        ("18446744073709551616", 1.8446744073709552e19),  # beyond: a float
        ("ENC[AES256_GCM,data:x]", "ENC[AES256_GCM,data:x]"),
    ],
)
def test_plain_scalars_resolve_as_go_does(text: str, value: Any) -> None:
    loaded = yamlcore.construct(yamlcore.compose(f"v: {text}\n"))["v"]  # type: ignore[arg-type]
    assert loaded == value
    assert type(loaded) is type(value)


def test_special_floats() -> None:
    data = yamlcore.construct(yamlcore.compose("a: .nan\nb: -.Inf\n"))  # type: ignore[arg-type]
    assert math.isnan(data["a"]) and data["b"] == -math.inf


@pytest.mark.parametrize(
    "value", ["yes", "0o17", "0755", "2001-12-14", "1e3", "", "null", "1_0", "a: b", "#x", "x\ny\n"]
)
def test_strings_that_look_like_other_types_are_quoted(value: str) -> None:
    text = yamlcore.dump({"v": value})
    assert yamlcore.construct(yamlcore.compose(text)) == {"v": value}  # type: ignore[arg-type]


def test_times_stay_times_when_written() -> None:
    text = yamlcore.dump({"t": GoTime("2001-12-14T00:00:00Z")})
    assert text == "t: 2001-12-14T00:00:00Z\n"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a: 1 # c\n", 1),
        ("a: 1\n# c\n", 2),
        ("a: '# not'\nb: x#y\n", None),
        ("a: |\n  # inside a block\n", None),
        ('a: "x # y"  # z\n', 1),
    ],
)
def test_comments_are_found_outside_scalars(text: str, line: int | None) -> None:
    assert yamlcore.has_comments(text) == line


def test_explicit_tags() -> None:
    data = yamlcore.construct(yamlcore.compose("a: !!str 12\nb: !!float 1\n"))  # type: ignore[arg-type]
    assert data == {"a": "12", "b": 1.0} and isinstance(data["b"], float)
    with pytest.raises(yamlcore.LoadError, match="unsupported YAML tag"):
        yamlcore.construct(yamlcore.compose("a: !!binary aGk=\n"))  # type: ignore[arg-type]


def test_merge_keys_are_refused() -> None:
    with pytest.raises(yamlcore.LoadError, match="merge keys"):
        yamlcore.construct(yamlcore.compose("x: &x {a: 1}\ny:\n  <<: *x\n"))  # type: ignore[arg-type]
