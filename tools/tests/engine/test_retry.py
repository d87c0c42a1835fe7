"""Retries of API calls (konfig.engine.retry)."""

from __future__ import annotations

from typing import Any

import pytest

from konfig.engine import retry as retry_module
from konfig.engine.kube import ApiFailure, KubeApiError, KubeError
from konfig.engine.retry import Unreachable, retry
from konfig.engine.stackrun import ApplyOptions


def test_retry_backs_off_on_retryable_statuses_only(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(retry_module.time, "sleep", sleeps.append)
    options = ApplyOptions(attempts=4, backoff=0.5)

    def flaky(statuses: list[int]) -> Any:
        def call() -> str:
            if statuses:
                status = statuses.pop(0)
                raise KubeApiError(f"status {status}", ApiFailure(status, "x", "y"))
            return "ok"

        return call

    assert retry(flaky([429, 503, 409]), options) == "ok"
    assert sleeps == [0.5, 1.0, 2.0]
    sleeps.clear()
    with pytest.raises(KubeApiError, match="status 422"):
        retry(flaky([422]), options)  # a rejection is final at once
    assert sleeps == []
    with pytest.raises(KubeApiError, match="status 500"):
        retry(flaky([500, 500, 500, 500]), options)
    assert sleeps == [0.5, 1.0, 2.0]
    sleeps.clear()

    def down() -> str:
        raise KubeError("cannot reach the Kubernetes API server at https://127.0.0.1:1")

    with pytest.raises(Unreachable):
        retry(down, options)
    assert len(sleeps) == 3
