"""Sending a :class:`~konfig.engine.kube.request.Request` to one API server.

:class:`Transport` is the one request path: it adds the headers (the credential is read
per request: a token may be refreshed), hands method, target, body and headers to a
wire, and reads the answer (JSON for a 2xx, :class:`StatusError` for any other status,
:class:`NotJson` for a 2xx that is not JSON, :class:`Unreachable` when no answer came).
Two wires carry the bytes: the standard library's ``http.client`` (a pool of keep-alive
connections, one per concurrent request) and, through a proxy (``proxy-url``, which only
the ``kubernetes`` client's kubeconfig loader reads), urllib3's ProxyManager, imported
only then (it costs about 0.06 s CPU to import). No raw ``http.client``, ssl or urllib3
exception leaves this module; :mod:`.client` turns these into KubeErrors.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from konfig.engine.kube.errors import KubeError
from konfig.engine.kube.request import Request

# Concurrent requests one transport serves without opening throw-away connections.
MAX_WORKERS = 32


@dataclass
class Endpoint:
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
    # what to name in an error about this endpoint's files: "user 'x' in kubeconfig k"
    where: str = ""


class StatusError(Exception):
    """The API server answered with an error status (turned into a KubeApiError)."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        super().__init__(status, reason)
        self.status = status
        self.reason = reason
        self.body = body


class NotJson(Exception):
    """A 2xx answer whose body is not JSON (a proxy's or web server's page)."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        super().__init__(status)
        self.status = status
        self.content_type = content_type
        self.start = body[:120].decode("utf-8", "replace").strip() or "(empty)"


class Unreachable(Exception):
    """A request that got no HTTP answer: refused, timed out, TLS refused, dropped."""

    def __init__(self, reason: str, *, timed_out: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


# status, reason, Content-Type, body
Answer = tuple[int, str, str, bytes]


class _Wire(Protocol):
    """Carries one request's bytes to the server and its answer back (thread-safe)."""

    def exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> Answer: ...

    def close(self) -> None: ...


class Transport:
    """JSON requests to one API server (thread-safe)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        connect_timeout: float,
        read_timeout: float,
        impersonate: str | None = None,
    ):
        self.authorization = endpoint.authorization
        # every request acts as this user (the API server checks that the kubeconfig's
        # user may impersonate it, then authorizes the request as it alone)
        self.impersonate = impersonate
        self.wire: _Wire
        if endpoint.proxy:
            self.wire = _Proxied(endpoint, connect_timeout, read_timeout)
        else:
            self.wire = _Pooled(endpoint, connect_timeout, read_timeout)

    def send(self, request: Request) -> Any:
        """The JSON of the server's 2xx answer to ``request`` (``{}`` for none)."""
        headers = request.headers(self.authorization())
        if self.impersonate:
            headers["Impersonate-User"] = self.impersonate
        status, reason, content_type, data = self.wire.exchange(
            request.method, request.target, request.body, headers
        )
        if not 200 <= status < 300:
            raise StatusError(status, reason, data)
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError:
            raise NotJson(status, content_type, data) from None

    def close(self) -> None:
        self.wire.close()


def _ssl_context(endpoint: Endpoint) -> ssl.SSLContext:
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


class _Pooled:
    """The wire over ``http.client``: a pool of keep-alive connections, each used by one
    request at a time."""

    def __init__(self, endpoint: Endpoint, connect_timeout: float, read_timeout: float) -> None:
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
        self.tls = _ssl_context(endpoint) if self.https else None
        self.server_hostname = endpoint.tls_server_name if endpoint.verify else None
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> Answer:
        stale = refused = 0
        while True:
            conn, reused = self._take(fresh=stale > 0)
            try:
                if not reused:
                    conn.connect()
                    assert conn.sock is not None
                    conn.sock.settimeout(self.read_timeout)
                conn.request(method, self.prefix + target, body=body, headers=headers)
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
                raise Unreachable(_reason(exc), timed_out=isinstance(exc, TimeoutError)) from None
            if response.will_close:
                conn.close()
            else:
                self._give(conn)
            return (
                response.status,
                response.reason or "",
                response.getheader("Content-Type", ""),
                data,
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


class _Proxied:
    """The wire through a proxy (``proxy-url``, read by the ``kubernetes`` client's
    loader), over urllib3's ProxyManager: an HTTP(S) proxy with CONNECT, which
    ``http.client`` does only in part. urllib3 is imported only here."""

    def __init__(self, endpoint: Endpoint, connect_timeout: float, read_timeout: float) -> None:
        import urllib3

        assert endpoint.proxy is not None
        self.base = endpoint.server.rstrip("/")
        self.timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
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

    def exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> Answer:
        import urllib3

        try:
            response = self.pool.request(
                method, self.base + target, body=body, headers=headers, timeout=self.timeout
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(_reason(exc), timed_out=_proxy_timed_out(exc)) from None
        return (
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
