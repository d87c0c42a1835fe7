"""Retries of Kubernetes API calls: backoff on 409/429/5xx, dropped connections and kinds
discovery does not serve yet, a clear stop when the server is unreachable or does not
answer within the request timeout."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from konfig.engine.kube import Kube, KubeApiError, KubeError, KubeTimeoutError, UnknownKindError
from konfig.engine.stackrun import ApplyOptions
from konfig.ids import ObjectRef

RETRYABLE_STATUS = frozenset({409, 429, 500, 502, 503, 504})


_T = TypeVar("_T")


class Unreachable(Exception):
    """The API server stopped answering: stop this stack, keep the union inventory."""

    def __init__(self, error: KubeError) -> None:
        super().__init__(str(error))
        self.error = error


class PreconditionFailed(KubeApiError):
    """The server refused a write whose ``metadata.resourceVersion`` (the version the plan
    read) is no longer the object's: someone changed it in between. Never retried: the
    same write would be refused again, and a newer version is not what was planned."""


def retryable(exc: KubeError) -> bool:
    if isinstance(exc, PreconditionFailed):
        return False
    if isinstance(exc, KubeApiError):
        return exc.failure.status in RETRYABLE_STATUS
    return True  # unreachable, connection reset


def retry(fn: Callable[[], _T], options: ApplyOptions) -> _T:
    """Call ``fn``, retrying with exponential backoff on 409/429/5xx and dropped
    connections; a request that timed out stops the stack at once (:class:`Unreachable`)."""
    delay = options.backoff
    for attempt in range(1, options.attempts + 1):
        try:
            return fn()
        except KubeApiError as exc:
            if not retryable(exc) or attempt == options.attempts:
                raise
        except UnknownKindError:
            # Discovery does not serve the kind (yet: a CRD applied a moment ago may be
            # established before it is served). That says nothing about the server being
            # reachable: retry, then fail this object alone.
            if attempt == options.attempts:
                raise
        except KubeTimeoutError as exc:
            # the server took the request and went silent for the whole request timeout:
            # asking again would only wait as long again, so stop the stack at once
            raise Unreachable(exc) from exc
        except KubeError as exc:
            if attempt == options.attempts:
                raise Unreachable(exc) from exc
        time.sleep(delay)
        delay = min(delay * 2, 8.0)
    raise AssertionError("unreachable")  # pragma: no cover


def delete_object(
    kube: Kube, ref: ObjectRef, *, uid: str, propagation: str, options: ApplyOptions
) -> None:
    """Delete one object (only that incarnation, when ``uid`` is known), with retries."""
    retry(
        lambda: kube.delete(
            ref.api_version,
            ref.kind,
            ref.name,
            ref.namespace,
            uid=uid or None,
            propagation=propagation,
        ),
        options,
    )
