"""What a failed Kubernetes API call raises, and the server's error ``Status`` as data.

Every API failure leaves :mod:`konfig.engine.kube` as a :class:`KubeError` with a
readable message (what was attempted, on which object, as whom, and how to fix it); one
the server answered carries an :class:`ApiFailure`, parsed from its ``Status`` body by
:func:`failure_from`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from konfig.errors import KonfigError


@dataclass(frozen=True)
class Cause:
    field: str
    message: str
    reason: str = ""


@dataclass(frozen=True)
class ApiFailure:
    """A request the API server answered with an error Status."""

    status: int
    reason: str
    message: str
    causes: tuple[Cause, ...] = ()
    details_kind: str = ""
    details_name: str = ""

    @property
    def immutable_fields(self) -> tuple[str, ...]:
        """Fields the server refused to change because they are immutable (422 Invalid)."""
        if self.status != 422:
            return ()
        found = [c.field for c in self.causes if _says_immutable(c.message)]
        if not found and _says_immutable(self.message):
            found = ["(unknown field)"]
        return tuple(dict.fromkeys(found))

    @property
    def namespace_missing(self) -> str | None:
        """The namespace name when the failure is "namespaces <x> not found"."""
        if self.status == 404 and self.details_kind == "namespaces":
            return self.details_name
        return None


# How API validation words "you cannot change this field" (field is immutable: most
# kinds; Service clusterIP(s): "may not change once set").
_IMMUTABLE_PHRASES = ("field is immutable", "may not change once set")


def _says_immutable(message: str) -> bool:
    return any(phrase in message for phrase in _IMMUTABLE_PHRASES)


class KubeError(KonfigError):
    """The cluster cannot be reached, refused a request, or the kubeconfig is unusable."""


class KubeTimeoutError(KubeError):
    """The API server did not answer a request within the request timeout."""


class KubeApiError(KubeError):
    """The API server answered a request with an error."""

    def __init__(self, message: str, failure: ApiFailure, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.failure = failure


class UnknownKindError(KubeError):
    """The server has no resource for ``apiVersion``/``kind`` (yet)."""

    def __init__(self, api_version: str, kind: str, server: str) -> None:
        super().__init__(
            f"the API server at {server} has no resource of kind {kind} in {api_version}",
            hint="install its CustomResourceDefinition first (or add it to the stack), "
            "or fix apiVersion/kind",
        )
        self.api_version = api_version
        self.kind = kind


def failure_from(status: int, reason: str, body: Any) -> ApiFailure:
    """Parse a ``Status`` body (JSON) into an :class:`ApiFailure`."""
    data: Any = None
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body.strip():
        try:
            data = json.loads(body)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        return ApiFailure(status, reason, str(body or reason).strip()[:500])
    details = data.get("details") or {}
    causes = tuple(
        Cause(str(c.get("field", "")), str(c.get("message", "")), str(c.get("reason", "")))
        for c in details.get("causes") or []
        if isinstance(c, dict)
    )
    return ApiFailure(
        status=int(data.get("code") or status),
        reason=str(data.get("reason") or reason),
        message=str(data.get("message") or reason),
        causes=causes,
        details_kind=str(details.get("kind") or ""),
        details_name=str(details.get("name") or ""),
    )
