"""konfig.yaml settings: path patterns and production-like stacks."""

from __future__ import annotations

import pytest

from konfig.errors import ConfigError
from konfig.repo.settings import (
    DEFAULT_PRODUCTION_STACKS,
    is_production,
    path_matches,
    repo_config_from_data,
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("appops/shop/prod", True),
        ("appops/shop/prod-eu", True),
        ("appops/shop/production", True),
        ("appops/shop/eu/prod", True),  # a nested stack
        ("appops/shop/dev", False),
        ("appops/shop/preprod", False),
        ("appops/shop/product", False),
        ("appops/prod/dev", False),  # a project named prod is not a production stack
    ],
)
def test_default_production_patterns(path: str, expected: bool) -> None:
    assert is_production(path, None, DEFAULT_PRODUCTION_STACKS) is expected


def test_stack_yaml_decides_before_the_patterns() -> None:
    assert is_production("appops/shop/dev", True, DEFAULT_PRODUCTION_STACKS)
    assert not is_production("appops/shop/prod", False, DEFAULT_PRODUCTION_STACKS)
    assert is_production("appops/shop/prod", "yes", DEFAULT_PRODUCTION_STACKS)  # not a bool


def test_production_stacks_from_konfig_yaml() -> None:
    config = repo_config_from_data({"productionStacks": ["appops/*/live", "appops/bank/**"]})
    assert config.production_stacks == ("appops/*/live", "appops/bank/**")
    assert path_matches("appops/shop/live", "appops/*/live")
    assert path_matches("appops/bank/eu/dev", "appops/bank/**")
    assert not path_matches("appops/shop/prod", "appops/*/live")
    assert repo_config_from_data({}).production_stacks == DEFAULT_PRODUCTION_STACKS
    assert repo_config_from_data({"productionStacks": []}).production_stacks == ()
    with pytest.raises(ConfigError, match="`productionStacks` must be a list"):
        repo_config_from_data({"productionStacks": "appops/*/prod"})
