"""The Kubernetes API: the one module that talks to the API server.

``connect(KubeTarget)`` reads a kubeconfig context and returns a :class:`Kube`: lazy
discovery (a kind's group version is read again on a miss, so kinds whose
CustomResourceDefinition appeared mid-plan are found), server-side apply (also as
``dryRun=All``), get, list and delete, over the standard library's ``http.client``
(thread-safe: a pool of keep-alive connections, one per concurrent request; through a
proxy, which only the ``kubernetes`` client's loader reads from a kubeconfig, over
urllib3 instead, imported only then: it costs about 0.06 s CPU to import). Every API
failure becomes a :class:`KubeError` with a readable message (what was attempted, on
which object, as whom, and how to fix it); a failed request carries an
:class:`ApiFailure`. No raw ``http.client``, ssl, urllib3 or ``kubernetes`` exception
leaves this module.

Reading the kubeconfig: konfig reads the kubeconfigs it fully understands itself (a
server, a certificate authority as file or data or ``insecure-skip-tls-verify``,
``tls-server-name``, a client certificate and key as files or data, a bearer token or
``tokenFile``, a user name and password, an ``exec`` credential plugin). Any other
entry in the context's cluster, user or context (``auth-provider``, ``proxy-url``,
impersonation, a key konfig does not know) is read by the ``kubernetes`` client's
kubeconfig loader instead, imported only then (it costs about 0.8 s CPU to import), as
is every kubeconfig when the caller asks for ``client="kubernetes"``. Either way the
requests go through the same transport, discovery and error handling here. ``exec``
plugins are run by konfig (credentials.py) on both paths.

The kubeconfig path is given by the caller (``--kubeconfig``, the stack's
``kubernetes.kubeconfig``, ``KUBECONFIG``, in that order, resolved by the CLI):
this module never reads the environment.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import select
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import yaml

from konfig import __version__
from konfig.engine import credentials
from konfig.errors import KonfigError
from konfig.ids import describe

FIELD_MANAGER = "konfig"
DEFAULT_KUBECONFIG = "~/.kube/config"
# kube-apiserver ends a request after 60 s itself (its --request-timeout): a server that
# answers at all answers within that.
DEFAULT_REQUEST_TIMEOUT = 60.0
# A connection that is not even accepted within this is not coming.
CONNECT_TIMEOUT = 10.0
# Concurrent requests one Kube serves without opening throw-away connections.
MAX_WORKERS = 32
USER_AGENT = f"konfig/{__version__}"

# How a kubeconfig is read: ``auto`` (konfig's own reader when it understands the
# context's entries, else the ``kubernetes`` client's loader) or ``kubernetes`` (always
# the loader; ``KONFIG_KUBE_CLIENT=kubernetes``, read by the CLI).
CLIENT_AUTO = "auto"
CLIENT_KUBERNETES = "kubernetes"
CLIENTS = (CLIENT_AUTO, CLIENT_KUBERNETES)
# Which reader a connection used (``Kube.client``).
READ_BY_KONFIG = "konfig"
READ_BY_KUBERNETES = "kubernetes"

_T = TypeVar("_T")


@dataclass(frozen=True)
class KubeTarget:
    """Which cluster to talk to: a kubeconfig (None: the default) and a context in it."""

    kubeconfig: str | None = None
    context: str | None = None


@dataclass(frozen=True)
class Timeouts:
    """How long konfig waits for the cluster before it names what did not answer.

    ``request``: seconds for one API request, connecting included (a read that times out
    is not retried: a server that took the request and went silent will not answer the
    next one either); ``credential``: seconds for the kubeconfig user's ``exec``
    credential plugin.
    """

    request: float = DEFAULT_REQUEST_TIMEOUT
    credential: float = credentials.DEFAULT_TIMEOUT

    @property
    def connect(self) -> float:
        """Seconds to open a connection (TCP and TLS): at most ``request``."""
        return min(CONNECT_TIMEOUT, self.request)


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


@dataclass(frozen=True)
class ResourceInfo:
    """A REST mapping: where objects of one kind live."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


@dataclass
class Kube:
    """A connection to one cluster context. Thread-safe for get/apply/delete/list."""

    http: _Transport
    server: str
    context: str
    user: str
    kubeconfig: str
    timeouts: Timeouts = field(default_factory=Timeouts)
    # READ_BY_KONFIG or READ_BY_KUBERNETES: who read the kubeconfig
    client: str = READ_BY_KONFIG
    _mappings: dict[tuple[str, str], ResourceInfo] = field(default_factory=dict)
    # group version -> kind -> mapping, as last read from the server
    _served: dict[str, dict[str, ResourceInfo]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- discovery ---------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """The REST mapping of a kind; reads its group version again on a miss (new CRDs)."""
        key = (api_version, kind)
        with self._lock:
            found = self._mappings.get(key)
            if found is not None:
                return found
            res = self._discover(api_version, kind)
            if res is None:
                raise UnknownKindError(api_version, kind, self.server)
            self._mappings[key] = res
            return res

    def _discover(self, api_version: str, kind: str) -> ResourceInfo | None:
        """The kind's mapping from its group version's resource list (read once, and
        again when the kind is not in it: a CustomResourceDefinition may be new)."""
        served = self._served.get(api_version)
        if served is not None and kind in served:
            return served[kind]
        if "/" in api_version:
            path = f"/apis/{api_version}"
        elif api_version:
            path = f"/api/{api_version}"
        else:
            return None
        try:
            data = self._request("get", path, what=f"discover {kind} ({api_version})")
        except KubeApiError as exc:
            if exc.failure.status == 404:  # the group version is not served (yet)
                return None
            raise
        served = {}
        for res in data.get("resources") or []:
            name = str(res.get("name") or "")
            res_kind = str(res.get("kind") or "")
            if name and "/" not in name and res_kind and res_kind not in served:
                served[res_kind] = ResourceInfo(
                    api_version, res_kind, name, bool(res.get("namespaced"))
                )
        self._served[api_version] = served
        return served.get(kind)

    def has_kind(self, api_version: str, kind: str) -> bool:
        try:
            self.resource(api_version, kind)
        except UnknownKindError:
            return False
        return True

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        return self.resource(api_version, kind).namespaced

    def namespaced_kinds(self) -> list[tuple[str, str]]:
        """(apiVersion, kind) of every listable namespaced resource, preferred versions.

        Used before a Namespace is pruned (the namespace-in-use guard, guards.py). A
        group whose discovery fails (an unavailable aggregated API) is left out.
        """
        lists: list[tuple[str, Any]] = [
            ("v1", self._request("get", "/api/v1", what="discover the core API"))
        ]
        groups = self._request("get", "/apis", what="discover the API groups")
        for group in groups.get("groups") or []:
            gv = (group.get("preferredVersion") or {}).get("groupVersion")
            if not gv:
                continue
            try:
                lists.append((gv, self._request("get", f"/apis/{gv}", what=f"discover {gv}")))
            except KubeApiError:
                continue
        found: list[tuple[str, str]] = []
        for gv, data in lists:
            for res in data.get("resources") or []:
                name = str(res.get("name", ""))
                if res.get("namespaced") and "/" not in name and "list" in (res.get("verbs") or []):
                    found.append((gv, str(res.get("kind"))))
        return found

    def _path(self, info: ResourceInfo, name: str | None, namespace: str | None) -> str:
        base = f"/apis/{info.api_version}" if info.group else f"/api/{info.api_version}"
        if info.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{info.plural}"
        if name:
            base += f"/{name}"
        return base

    # --- requests ----------------------------------------------------------------

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None
    ) -> dict[str, Any] | None:
        """The live object, or None when it does not exist."""
        info = self.resource(api_version, kind)
        path = self._path(info, name, namespace if info.namespaced else None)
        what = f"get {describe(api_version, kind, name, namespace)}"
        try:
            data = self._request("get", path, what=what)
        except KubeApiError as exc:
            if exc.failure.status == 404:
                return None
            raise
        return dict(data)

    def apply(
        self,
        manifest: Mapping[str, Any],
        *,
        dry_run: bool,
        force: bool = True,
        field_manager: str = FIELD_MANAGER,
    ) -> dict[str, Any]:
        """Server-side apply (``application/apply-patch+yaml``); the server's result."""
        api_version = str(manifest.get("apiVersion", ""))
        kind = str(manifest.get("kind", ""))
        meta = manifest.get("metadata") or {}
        name = str(meta.get("name", ""))
        namespace = meta.get("namespace")
        info = self.resource(api_version, kind)
        path = self._path(info, name, namespace if info.namespaced else None)
        params: dict[str, Any] = {"fieldManager": field_manager}
        if force:
            params["force"] = "true"
        if dry_run:
            params["dryRun"] = "All"
        verb = "dry-run server-side apply" if dry_run else "server-side apply"
        what = f"{verb} of {describe(api_version, kind, name, namespace)}"
        return dict(
            self._request(
                "patch",
                path,
                what=what,
                body=apply_body(manifest),
                content_type="application/apply-patch+yaml",
                **params,
            )
        )

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        *,
        uid: str | None,
        propagation: str = "Foreground",
    ) -> None:
        """Delete one object; with ``uid`` only that incarnation. Already gone is fine."""
        info = self.resource(api_version, kind)
        path = self._path(info, name, namespace if info.namespaced else None)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        if uid:
            body["preconditions"] = {"uid": uid}
        what = f"delete {describe(api_version, kind, name, namespace)}"
        try:
            self._request("delete", path, what=what, body=body)
        except KubeApiError as exc:
            if exc.failure.status != 404:
                raise

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every object of a kind (in one namespace, or all), following ``continue``."""
        info = self.resource(api_version, kind)
        path = self._path(info, None, namespace if info.namespaced else None)
        items: list[dict[str, Any]] = []
        token: str | None = None
        where = f" in namespace {namespace}" if namespace else ""
        while True:
            data = self._request(
                "get",
                path,
                what=f"list {info.plural} ({api_version}){where}",
                labelSelector=label_selector,
                limit=500,
                **{"continue": token},  # type: ignore[arg-type]
            )
            for item in data.get("items") or []:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            token = (data.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- plumbing ----------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        body: Any = None,
        content_type: str = "application/json",
        **params: Any,
    ) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body, separators=(",", ":")).encode("utf-8")
        return self._call(
            lambda: self.http.request(
                method, path, query=query, body=body, content_type=content_type
            ),
            what=what,
        )

    def _call(self, fn: Callable[[], _T], *, what: str) -> _T:
        try:
            return fn()
        except _StatusError as exc:
            raise self._api_error(exc, what) from None
        except _NotJson as exc:
            raise KubeError(
                f"the server at {self.server} (context {self.context!r}) answered the "
                f"request to {what} with something that is not a Kubernetes API answer "
                f"(HTTP {exc.status}, {exc.content_type or 'no content type'}): {exc.start}",
                hint="check that the kubeconfig's server URL points at the Kubernetes API "
                "server itself, not at a proxy or a web page",
            ) from None
        except _Unreachable as exc:
            if exc.timed_out:
                raise KubeTimeoutError(
                    f"the Kubernetes API server at {self.server} (context {self.context!r}) "
                    f"did not answer within {self.timeouts.request:g}s when asked to {what}",
                    hint="check it with `kubectl --kubeconfig "
                    f"{self.kubeconfig} --context {self.context} --request-timeout "
                    f"{self.timeouts.request:g}s get --raw /readyz`; if it is only slow, raise "
                    "--request-timeout (or KONFIG_REQUEST_TIMEOUT)",
                ) from None
            raise KubeError(
                f"cannot reach the Kubernetes API server at {self.server} "
                f"(context {self.context!r}) to {what}: {exc.reason}",
                hint="check that the cluster is running and that the kubeconfig "
                f"{self.kubeconfig} and context {self.context!r} point at it "
                "(--kubeconfig / --context, the stack's kubernetes: settings, KUBECONFIG)",
            ) from None

    def _api_error(self, exc: _StatusError, what: str) -> KubeApiError:
        failure = failure_from(exc.status, exc.reason, exc.body)
        status = f"{failure.status} {failure.reason}".strip()
        identity = f"user {self.user!r} of context {self.context!r}"
        hint: str | None = None
        if failure.status == 401:
            message = (
                f"the API server at {self.server} rejected the credentials of {identity} "
                f"({status}) while trying to {what}"
            )
            hint = f"renew the credentials of user {self.user!r} in {self.kubeconfig}"
        elif failure.status == 403:
            message = f"{identity} may not {what} ({status}): {failure.message}"
            hint = (
                f"grant {self.user!r} the RBAC verbs konfig needs on this resource (preview: "
                "get, list and patch; dry-run apply is authorised as patch; apply also "
                "create and delete), or use a context that has them (--context)"
            )
        else:
            message = f"{what} failed: the API server said {status}: {failure.message}"
            for cause in failure.causes[:5]:
                field_name = f"{cause.field}: " if cause.field else ""
                message += f"\n  {field_name}{cause.message}"
        return KubeApiError(message, failure, hint=hint)


# What YAML does not take as it is: C1 controls and DEL (not printable), NEL and the
# Unicode line and paragraph separators (YAML 1.1 line breaks, which a double-quoted
# scalar folds), a BOM, non-characters and lone surrogates.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def apply_body(manifest: Mapping[str, Any]) -> bytes:
    """The body of a server-side apply (``application/apply-patch+yaml``), as UTF-8.

    JSON is YAML, but the API server's YAML parser rejects the surrogate-pair escapes
    (``\\ud83d\\ude00``) that ``json.dumps`` writes for characters beyond the Basic
    Multilingual Plane (emoji): the text goes as UTF-8, and only what YAML cannot hold
    literally is escaped (as ``\\uXXXX``, which YAML reads back as the same character).
    """
    text = json.dumps(dict(manifest), ensure_ascii=False, separators=(",", ":"))
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def _reason(exc: BaseException) -> str:
    """What went wrong on the way to the server, in a few words."""
    reason = getattr(exc, "reason", None)  # urllib3 wraps the cause
    text = str(reason if isinstance(reason, BaseException) else exc)
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without an answer"
    for marker in ("Connection refused", "timed out", "Name or service not known"):
        if marker in text:
            return marker.lower()
    return (text.splitlines() or [type(exc).__name__])[0][:200]


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


# --- the transport ---------------------------------------------------------------


class _StatusError(Exception):
    """The API server answered with an error status (turned into a KubeApiError)."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        super().__init__(status, reason)
        self.status = status
        self.reason = reason
        self.body = body


class _NotJson(Exception):
    """A 2xx answer whose body is not JSON (a proxy's or web server's page)."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        super().__init__(status)
        self.status = status
        self.content_type = content_type
        self.start = body[:120].decode("utf-8", "replace").strip() or "(empty)"


@dataclass
class _Endpoint:
    """Where and how to connect, whoever read the kubeconfig: the server URL, TLS
    (certificate authority, client certificate and key: a file or PEM data each), and
    the ``Authorization`` header (a callable: a credential may be refreshed)."""

    server: str
    verify: bool = True
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    tls_server_name: str | None = None
    proxy: str | None = None
    authorization: Callable[[], str | None] = lambda: None
    read_by: str = READ_BY_KONFIG
    # what to name in an error about this endpoint's files: "user 'x' in kubeconfig k"
    where: str = ""


def _ssl_context(endpoint: _Endpoint) -> ssl.SSLContext:
    """The TLS context for every connection of one endpoint (built once)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, and checks the name
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_TICKET
    context.hostname_checks_common_name = False
    context.post_handshake_auth = True
    if not endpoint.verify:  # insecure-skip-tls-verify
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    where = endpoint.where
    try:
        if endpoint.verify:
            if endpoint.ca_data is not None:
                context.load_verify_locations(cadata=endpoint.ca_data)
            elif endpoint.ca_file is not None:
                context.load_verify_locations(cafile=endpoint.ca_file)
            else:
                context.load_default_certs()
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise KubeError(f"cannot use the certificate authority of {where}: {exc}") from None
    if endpoint.cert_file is None and endpoint.cert_data is None:
        return context
    try:
        if endpoint.cert_data is None and endpoint.key_data is None:
            context.load_cert_chain(str(endpoint.cert_file), endpoint.key_file)
        else:
            # ssl loads a client certificate from files only: written to a private
            # directory, loaded, and removed at once
            import shutil
            import tempfile

            private = tempfile.mkdtemp(prefix="konfig-tls-")
            try:
                cert = _private_file(private, "cert.pem", endpoint.cert_data, endpoint.cert_file)
                key = _private_file(private, "key.pem", endpoint.key_data, endpoint.key_file)
                context.load_cert_chain(str(cert), key)
            finally:
                shutil.rmtree(private, ignore_errors=True)
    except (OSError, ValueError) as exc:
        raise KubeError(
            f"cannot use the client certificate and key of {where}: {exc}",
            hint="the kubeconfig user needs client-certificate(-data) and client-key(-data) "
            "that belong together (PEM)",
        ) from None
    return context


def _private_file(directory: str, name: str, data: bytes | None, path: str | None) -> str | None:
    if data is None:
        return path
    target = str(Path(directory) / name)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return target


class _Unreachable(Exception):
    """A request that got no HTTP answer: refused, timed out, TLS refused, dropped."""

    def __init__(self, reason: str, *, timed_out: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


class _Transport(Protocol):
    """JSON requests to one API server (thread-safe)."""

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any],
        body: bytes | None,
        content_type: str,
    ) -> Any: ...

    def close(self) -> None: ...


def _path_and_query(path: str, query: Mapping[str, Any]) -> str:
    """A request's path, quoted, with its query string (when there is one)."""
    quoted = quote(path, safe="/:@")
    return f"{quoted}?{urlencode(query)}" if query else quoted


def _headers(authorization: Callable[[], str | None], content_type: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    value = (authorization() or "").strip()  # a token file's newline
    if value:
        headers["Authorization"] = value
    if content_type is not None:
        headers["Content-Type"] = content_type
    return headers


def _answer(status: int, reason: str, content_type: str, data: bytes) -> Any:
    """The JSON of a 2xx answer; _StatusError for any other status."""
    if not 200 <= status < 300:
        raise _StatusError(status, reason, data)
    if not data:
        return {}
    try:
        return json.loads(data)
    except ValueError:
        raise _NotJson(status, content_type, data) from None


class _HttpsConnection(http.client.HTTPSConnection):
    """An HTTPS connection that checks the certificate against ``server_hostname``
    (the kubeconfig's ``tls-server-name``) when given, else against the host dialled."""

    def __init__(self, host: str, port: int, *, tls: ssl.SSLContext, name: str | None) -> None:
        super().__init__(host, port, context=tls)
        self.tls = tls
        self.server_hostname = name or host

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # TCP, under the connect timeout
        self.sock = self.tls.wrap_socket(self.sock, server_hostname=self.server_hostname)


# How often a request is sent again on a new connection when a kept-alive one turns out
# to be closed by the server (it closes idle connections after a while), and when a new
# connection is refused (the server restarting). A timeout is never retried: the server
# took the request and went silent, and asking again only doubles the wait.
_STALE_RETRIES = 2
_REFUSED_RETRIES = 1
_DROPPED = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


class _Http:
    """JSON requests to one API server over ``http.client`` (thread-safe): a pool of
    keep-alive connections, each used by one request at a time."""

    def __init__(self, endpoint: _Endpoint, timeouts: Timeouts) -> None:
        url = urlsplit(endpoint.server)
        if url.hostname is None:
            raise KubeError(
                f"cannot use {endpoint.where}: the server URL {endpoint.server!r} names no host"
            )
        self.host = url.hostname
        try:
            port = url.port
        except ValueError as exc:
            raise KubeError(
                f"cannot use {endpoint.where}: the server URL {endpoint.server!r}: {exc}"
            ) from None
        self.https = url.scheme == "https"
        self.port = port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")  # a server behind a path (a cluster manager's proxy)
        self.authorization = endpoint.authorization
        self.tls = _ssl_context(endpoint) if self.https else None
        self.server_hostname = endpoint.tls_server_name if endpoint.verify else None
        self.connect_timeout = timeouts.connect
        self.read_timeout = timeouts.request
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any],
        body: bytes | None,
        content_type: str,
    ) -> Any:
        target = self.prefix + _path_and_query(path, query)
        headers = _headers(self.authorization, content_type if body is not None else None)
        stale = refused = 0
        while True:
            conn, reused = self._take(fresh=stale > 0)
            try:
                if not reused:
                    conn.connect()
                    assert conn.sock is not None
                    conn.sock.settimeout(self.read_timeout)
                conn.request(method.upper(), target, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if reused and stale < _STALE_RETRIES and isinstance(exc, _DROPPED):
                    stale += 1  # the server closed a kept-alive connection: a new one
                    continue
                if (
                    not reused
                    and refused < _REFUSED_RETRIES
                    and isinstance(exc, ConnectionRefusedError)
                ):
                    refused += 1
                    continue
                raise _Unreachable(_reason(exc), timed_out=isinstance(exc, TimeoutError)) from None
            if response.will_close:
                conn.close()
            else:
                self._give(conn)
            return _answer(
                response.status, response.reason or "", response.getheader("Content-Type", ""), data
            )

    def _take(self, *, fresh: bool) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection the server has not closed (reused: True), else (or when
        ``fresh``: after one turned out closed) a new one."""
        while not fresh:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                break
            if conn.sock is not None and not _readable(conn.sock):
                return conn, True
            conn.close()  # closed by the server (or it sent something unasked)
        new: http.client.HTTPConnection
        if self.tls is not None:
            new = _HttpsConnection(self.host, self.port, tls=self.tls, name=self.server_hostname)
        else:
            new = http.client.HTTPConnection(self.host, self.port)
        new.timeout = self.connect_timeout
        return new, False

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_WORKERS:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _readable(sock: Any) -> bool:
    """An idle keep-alive connection has nothing to read: if it has, the server closed
    it (or broke the protocol) and it is not used again."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


class _ProxiedHttp:
    """The same requests through a proxy (``proxy-url``, read by the ``kubernetes``
    client's loader), over urllib3's ProxyManager: an HTTP(S) proxy with CONNECT,
    which ``http.client`` does only in part. urllib3 is imported only here."""

    def __init__(self, endpoint: _Endpoint, timeouts: Timeouts) -> None:
        import urllib3

        assert endpoint.proxy is not None
        self.base = endpoint.server.rstrip("/")
        self.authorization = endpoint.authorization
        self.timeout = urllib3.Timeout(connect=timeouts.connect, read=timeouts.request)
        pool: dict[str, Any] = {
            "maxsize": MAX_WORKERS,  # room for the dry-run thread pool
            # a refused connection once; never a read (one that timed out would only
            # double the wait; urllib3 checks a kept-alive connection before using it)
            "retries": urllib3.Retry(total=2, connect=1, read=0, redirect=0, status=0, other=0),
            "timeout": self.timeout,
        }
        if self.base.startswith("https:"):
            pool["ssl_context"] = _ssl_context(endpoint)
            if endpoint.verify:
                pool["cert_reqs"] = "CERT_REQUIRED"
                if endpoint.tls_server_name:
                    pool["server_hostname"] = endpoint.tls_server_name
            else:
                pool["cert_reqs"] = "CERT_NONE"
                pool["assert_hostname"] = False
                # the kubeconfig says insecure-skip-tls-verify: as kubectl, no warning
                # per request (urllib3 prints one for each, burying the output)
                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self.pool = urllib3.ProxyManager(endpoint.proxy, **pool)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any],
        body: bytes | None,
        content_type: str,
    ) -> Any:
        import urllib3

        url = self.base + _path_and_query(path, query)
        headers = _headers(self.authorization, content_type if body is not None else None)
        try:
            response = self.pool.request(
                method.upper(), url, body=body, headers=headers, timeout=self.timeout
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _Unreachable(_reason(exc), timed_out=_proxy_timed_out(exc)) from None
        return _answer(
            response.status,
            response.reason or "",
            response.headers.get("Content-Type", ""),
            response.data,
        )

    def close(self) -> None:
        self.pool.clear()


def _proxy_timed_out(exc: BaseException) -> bool:
    """A connect or read timeout, however urllib3 wraps it."""
    import urllib3

    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None or isinstance(seen, urllib3.exceptions.NewConnectionError):
            return False  # (urllib3 derives "connection refused" from ConnectTimeoutError)
        if isinstance(seen, (urllib3.exceptions.TimeoutError, TimeoutError)):
            return True
        reason = getattr(seen, "reason", None)  # an exception, or text (ssl.SSLError)
        seen = reason if isinstance(reason, BaseException) else seen.__context__
    return False


def _transport(endpoint: _Endpoint, timeouts: Timeouts) -> _Transport:
    if endpoint.proxy:
        return _ProxiedHttp(endpoint, timeouts)
    return _Http(endpoint, timeouts)


# --- reading the kubeconfig ----------------------------------------------------------


@dataclass(frozen=True)
class _Named:
    """A kubeconfig entry (context, cluster or user) and the file it came from."""

    value: Mapping[str, Any]
    source: str


@dataclass
class _Kubeconfig:
    """The kubeconfig file(s), merged as the ``kubernetes`` client merges ``a:b``: the
    first file that names an entry wins; the last file's ``current-context`` wins."""

    path: str
    current: str | None = None
    contexts: dict[str, _Named] = field(default_factory=dict)
    clusters: dict[str, _Named] = field(default_factory=dict)
    users: dict[str, _Named] = field(default_factory=dict)


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_kubeconfig(kubeconfig: str) -> _Kubeconfig:
    merged = _Kubeconfig(kubeconfig)
    for path in kubeconfig.split(":"):
        if not path or not Path(path).exists():
            continue
        try:
            with open(path, encoding="utf-8") as stream:
                doc = yaml.load(stream, Loader=_LOADER)  # a safe loader
        except (OSError, ValueError, yaml.YAMLError) as exc:  # unreadable, or not YAML
            raise KubeError(f"cannot read kubeconfig {path}: {exc}") from None
        if doc is None:
            raise KubeError(f"kubeconfig {path} is empty")
        if not isinstance(doc, Mapping):
            raise KubeError(f"kubeconfig {path} is not a kubeconfig (no mapping at the top)")
        for key, into in (
            ("contexts", merged.contexts),
            ("clusters", merged.clusters),
            ("users", merged.users),
        ):
            entries = doc.get(key) or []
            if not isinstance(entries, list):
                raise KubeError(f"kubeconfig {path}: `{key}` must be a list")
            for entry in entries:
                if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
                    into.setdefault(entry["name"], _Named(entry, path))
        if "current-context" in doc:
            current = doc["current-context"]
            merged.current = str(current) if current else None
    return merged


# The entries konfig reads itself; anything else in the context's cluster, user or
# context goes to the ``kubernetes`` client's loader.
_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "extensions",
        "disable-compression",
    }
)
_USER_KEYS = frozenset(
    {
        "token",
        "tokenFile",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "username",
        "password",
        "extensions",
    }
)
_CONTEXT_KEYS = frozenset({"cluster", "user", "namespace", "extensions"})


def _understood(section: Any, known: frozenset[str]) -> bool:
    return isinstance(section, Mapping) and all(
        key in known and (key == "extensions" or isinstance(value, (str, bool)))
        for key, value in section.items()
    )


def _beside(base: Path, name: str) -> str:
    """A path from a kubeconfig, relative to the file's directory (as the client reads it)."""
    return os.path.normpath(base / name)


def _konfig_endpoint(
    config: _Kubeconfig,
    ctx: Mapping[str, Any],
    user: Mapping[str, Any],
    user_source: str,
    token: _ExecToken | None,
    where: str,
) -> _Endpoint | None:
    """The endpoint of a context konfig fully understands, else None (the caller then
    asks the ``kubernetes`` client's loader, which reads the same kubeconfig)."""
    cluster_entry = config.clusters.get(str(ctx.get("cluster", "")))
    if cluster_entry is None:
        return None
    cluster = cluster_entry.value.get("cluster")
    if not (
        _understood(ctx, _CONTEXT_KEYS)
        and _understood(cluster, _CLUSTER_KEYS)
        and _understood(user, _USER_KEYS)
    ):
        return None
    assert isinstance(cluster, Mapping)
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        return None
    endpoint = _Endpoint(server=server.rstrip("/"), where=where)
    cluster_base = Path(cluster_entry.source).resolve().parent
    user_base = Path(user_source).resolve().parent
    try:
        if server.startswith("https://"):
            if cluster.get("certificate-authority-data"):
                pem = base64.b64decode(str(cluster["certificate-authority-data"]), validate=True)
                endpoint.ca_data = pem.decode("ascii")
            elif cluster.get("certificate-authority"):
                endpoint.ca_file = _beside(cluster_base, str(cluster["certificate-authority"]))
            # client certificates are read relative to the cluster's file, as the
            # kubernetes client does
            for key, attr in (("client-certificate", "cert"), ("client-key", "key")):
                if user.get(f"{key}-data"):
                    data = base64.b64decode(str(user[f"{key}-data"]), validate=True)
                    setattr(endpoint, f"{attr}_data", data)
                elif user.get(key):
                    setattr(endpoint, f"{attr}_file", _beside(cluster_base, str(user[key])))
    except (ValueError, UnicodeDecodeError) as exc:  # binascii.Error is a ValueError
        raise KubeError(f"cannot use {where}: a *-data entry is not base64 PEM: {exc}") from None
    if "insecure-skip-tls-verify" in cluster:
        endpoint.verify = not cluster["insecure-skip-tls-verify"]
    if cluster.get("tls-server-name"):
        endpoint.tls_server_name = str(cluster["tls-server-name"])
    # the kubernetes client's order: a token (or tokenFile), then user name and password
    if token is not None:
        endpoint.authorization = token.header
    elif user.get("token"):
        endpoint.authorization = _constant(f"Bearer {user['token']}")
    elif user.get("tokenFile"):
        try:
            text = Path(_beside(user_base, str(user["tokenFile"]))).read_text("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise KubeError(f"cannot read the tokenFile of {where}: {exc}") from None
        endpoint.authorization = _constant(f"Bearer {text}")
    elif "username" in user and "password" in user:
        pair = f"{user['username']}:{user['password']}".encode("latin-1", "replace")
        endpoint.authorization = _constant(f"Basic {base64.b64encode(pair).decode()}")
    return endpoint


def _constant(value: str) -> Callable[[], str | None]:
    return lambda: value


def _kubernetes_endpoint(
    kubeconfig: str,
    context: str,
    user_name: str,
    user: Mapping[str, Any] | None,
    token: _ExecToken | None,
    where: str,
) -> _Endpoint:
    """The endpoint as the ``kubernetes`` client's kubeconfig loader reads it (auth
    providers, proxies, and whatever konfig's own reader leaves to it)."""
    from kubernetes.client import Configuration
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader, KubeConfigMerger

    try:
        merged = KubeConfigMerger(kubeconfig).config  # type: ignore[no-untyped-call]
    except (OSError, ValueError, ConfigException) as exc:
        raise KubeError(f"cannot read kubeconfig {kubeconfig}: {exc}") from None
    if merged is None or not isinstance(merged.value, Mapping):
        raise KubeError(f"kubeconfig {kubeconfig} holds no configuration")
    if user is not None:  # an exec plugin's credential in place of `exec`
        for entry in merged.value.get("users") or []:
            plain = entry.value if isinstance(entry, ConfigNode) else entry
            if isinstance(plain, dict) and plain.get("name") == user_name:
                plain["user"] = dict(user)
                break
    conf = Configuration()
    try:
        loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=merged, active_context=context, config_base_path=None
        )
        loader.load_and_set(conf)  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        raise KubeError(
            f"cannot use kubeconfig {kubeconfig} (context {context!r}): {exc}"
        ) from None
    if token is not None:
        exec_token = token

        def refresh(conf: Configuration) -> None:
            conf.api_key["BearerToken"] = exec_token.header()

        conf.refresh_api_key_hook = refresh  # type: ignore[assignment]

    def authorization() -> str | None:
        setting = conf.auth_settings().get("BearerToken")
        return str(setting["value"]) if setting and setting.get("value") else None

    return _Endpoint(
        server=str(conf.host),
        verify=bool(conf.verify_ssl),
        ca_file=conf.ssl_ca_cert,
        cert_file=conf.cert_file,
        key_file=conf.key_file,
        tls_server_name=conf.tls_server_name,
        proxy=conf.proxy,
        authorization=authorization,
        read_by=READ_BY_KUBERNETES,
        where=where,
    )


@dataclass
class _ExecToken:
    """A token from a credential plugin, fetched again when it expires (thread-safe)."""

    plugin: credentials.Plugin
    credential: credentials.Credential
    timeout: float
    cwd: str | None
    cluster: Mapping[str, Any] | None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def header(self) -> str:
        with self.lock:
            if self.credential.expired(datetime.now(UTC)):
                fresh = credentials.run(
                    self.plugin, timeout=self.timeout, cwd=self.cwd, cluster=self.cluster
                )
                if fresh.token:
                    self.credential = fresh
            return f"Bearer {self.credential.token}"


def resolve_kubeconfig(kubeconfig: str | None) -> str:
    """The kubeconfig file(s) to read, ``~`` expanded (``a:b`` merges several, the first
    file's entries win); KubeError when none of them exists."""
    given = kubeconfig or DEFAULT_KUBECONFIG
    paths = [str(Path(p).expanduser()) for p in given.split(":") if p]
    if not any(Path(p).is_file() for p in paths):
        raise KubeError(
            f"kubeconfig not found: {given}",
            hint="pass --kubeconfig, set kubernetes.kubeconfig in stack.yaml, or set KUBECONFIG",
        )
    return ":".join(paths)


def list_contexts(kubeconfig: str | None) -> tuple[list[str], str | None]:
    """The context names of a kubeconfig and its current context (no connection made)."""
    config = _read_kubeconfig(resolve_kubeconfig(kubeconfig))
    return sorted(config.contexts), config.current


def connect(
    target: KubeTarget, timeouts: Timeouts | None = None, *, client: str = CLIENT_AUTO
) -> Kube:
    """Read the target's kubeconfig context and check that the API server answers.

    ``client``: ``CLIENT_AUTO`` (konfig reads the kubeconfig when it understands the
    context's entries, else the ``kubernetes`` client's loader does) or
    ``CLIENT_KUBERNETES`` (always the loader). An ``exec`` credential plugin runs here,
    bounded by ``timeouts.credential``.
    """
    if client not in CLIENTS:
        raise KubeError(
            f"unknown Kubernetes client {client!r}", hint=f"use one of: {', '.join(CLIENTS)}"
        )
    timeouts = timeouts or Timeouts()
    kubeconfig = resolve_kubeconfig(target.kubeconfig)
    config = _read_kubeconfig(kubeconfig)
    name = target.context or config.current
    found = config.contexts.get(name) if name else None
    if found is None:
        available = ", ".join(sorted(config.contexts))
        raise KubeError(
            f"kubeconfig {kubeconfig} has no context {name!r} (it has: {available or 'none'})",
            hint="set kubernetes.context in the stack's stack.yaml or pass --context",
        )
    ctx = found.value.get("context") or {}
    if not isinstance(ctx, Mapping):
        raise KubeError(f"kubeconfig {found.source}: context {name!r} must be a mapping")
    user_name = str(ctx.get("user", "") or "")
    user_entry = config.users.get(user_name) if user_name else None
    user: Mapping[str, Any] = {}
    user_source = found.source
    if user_entry is not None:
        user = user_entry.value.get("user") or {}
        user_source = user_entry.source
    where = f"user {user_name!r} of context {name!r} in kubeconfig {kubeconfig}"
    token: _ExecToken | None = None
    replaced: Mapping[str, Any] | None = None
    if isinstance(user, Mapping) and "exec" in user:
        plugin = credentials.plugin_of(user_name, user["exec"], user_source)
        cluster_entry = config.clusters.get(str(ctx.get("cluster", "")))
        cluster = cluster_entry.value.get("cluster") if cluster_entry else None
        cwd = str(Path(user_source).parent)
        credential = credentials.run(plugin, timeout=timeouts.credential, cwd=cwd, cluster=cluster)
        user = replaced = credentials.user_entry(credential, user)
        if credential.token and credential.expires is not None:
            token = _ExecToken(plugin, credential, timeouts.credential, cwd, cluster)
    endpoint = None
    if client == CLIENT_AUTO:
        endpoint = _konfig_endpoint(config, ctx, user, user_source, token, where)
    if endpoint is None:
        endpoint = _kubernetes_endpoint(kubeconfig, str(name), user_name, replaced, token, where)
    kube = Kube(
        http=_transport(endpoint, timeouts),
        server=endpoint.server,
        context=str(name),
        user=user_name,
        kubeconfig=kubeconfig,
        timeouts=timeouts,
        client=endpoint.read_by,
    )
    try:
        kube._request("get", "/api", what="discover its API resources")
    except BaseException:
        kube.close()
        raise
    return kube
