"""Promotion order as plain data: which pending stacks are held, why and until when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from konfig.engine.inventory import Inventory
from konfig.errors import ConfigError
from konfig.pipeline.promotion import Promotion, holds, parse_duration

NOW = datetime(2026, 11, 27, 21, 0, tzinfo=UTC)
DEV, PROD, CANARY = "appops/shop/dev", "appops/shop/prod", "appops/shop/canary"


def _inv(stack: str, applied: datetime) -> Inventory:
    return Inventory(
        stack,
        (),
        commit="a" * 40,
        spec_digest="d",
        applyset_id="x",
        applied_at=applied.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def test_prod_is_never_applied_in_the_same_run_as_its_dev() -> None:
    held = holds([DEV, PROD], {PROD: Promotion((DEV,))}, [DEV, PROD], {}, NOW)
    assert list(held) == [PROD]
    assert held[PROD].waiting_for == DEV and held[PROD].until is None
    assert "not applied at this commit yet" in held[PROD].reason


def test_a_soak_holds_until_its_end_then_releases() -> None:
    promotion = {PROD: Promotion((DEV,), timedelta(minutes=10))}
    applied = {DEV: _inv(DEV, NOW - timedelta(minutes=4))}
    held = holds([PROD], promotion, [PROD], applied, NOW)
    assert held[PROD].until == NOW + timedelta(minutes=6)
    assert "2026-11-27T21:06:00Z" in held[PROD].message()
    assert holds([PROD], promotion, [PROD], applied, NOW + timedelta(minutes=6)) == {}


def test_a_never_applied_first_stack_holds_and_a_held_stack_holds_the_next() -> None:
    promotion = {PROD: Promotion((CANARY,)), CANARY: Promotion((DEV,))}
    held = holds([CANARY, PROD], promotion, [CANARY, PROD], {}, NOW)
    assert held[CANARY].reason == f"promotion.after {DEV}, which was never applied"
    assert held[PROD].waiting_for == CANARY


def test_stacks_without_promotion_are_never_held() -> None:
    assert holds([DEV, PROD], {}, [DEV, PROD], {}, NOW) == {}


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600), ("1h30m", 5400), ("45s", 45), ("0", 0)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "10", "m", "1d", "10 m"])
def test_bad_durations_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="is not a duration"):
        parse_duration(text)
