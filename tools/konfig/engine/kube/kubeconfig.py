"""Reading a kubeconfig: which server, which TLS and which credential a context names.

konfig reads the kubeconfigs it fully understands itself (a server, a certificate
authority as file or data or ``insecure-skip-tls-verify``, ``tls-server-name``, a client
certificate and key as files or data, a bearer token or ``tokenFile``, a user name and
password, an ``exec`` credential plugin). Any other entry in the context's cluster, user
or context (``auth-provider``, ``proxy-url``, impersonation, a key konfig does not know)
is read by the ``kubernetes`` client's kubeconfig loader instead, imported only then (it
costs about 0.8 s CPU to import), as is every kubeconfig when the caller asks for
``client="kubernetes"``. Either way the result is one :class:`Context` whose
:class:`~konfig.engine.kube.transport.Endpoint` the same transport uses. ``exec`` plugins
are run by konfig (:mod:`konfig.engine.credentials`) on both paths.

The kubeconfig path is given by the caller (``--kubeconfig``, the stack's
``kubernetes.kubeconfig``, ``KUBECONFIG``, in that order, resolved by the CLI): this
module never reads the environment.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from konfig.engine import credentials
from konfig.engine.kube.errors import KubeError
from konfig.engine.kube.transport import Endpoint

DEFAULT_KUBECONFIG = "~/.kube/config"

# How a kubeconfig is read: ``auto`` (konfig's own reader when it understands the
# context's entries, else the ``kubernetes`` client's loader) or ``kubernetes`` (always
# the loader; ``KONFIG_KUBE_CLIENT=kubernetes``, read by the CLI).
CLIENT_AUTO = "auto"
CLIENT_KUBERNETES = "kubernetes"
CLIENTS = (CLIENT_AUTO, CLIENT_KUBERNETES)
# Which reader a connection used (``Kube.client``).
READ_BY_KONFIG = "konfig"
READ_BY_KUBERNETES = "kubernetes"


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
) -> Endpoint | None:
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
    endpoint = Endpoint(server=server.rstrip("/"), where=where)
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
) -> Endpoint:
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

    return Endpoint(
        server=str(conf.host),
        verify=bool(conf.verify_ssl),
        ca_file=conf.ssl_ca_cert,
        cert_file=conf.cert_file,
        key_file=conf.key_file,
        tls_server_name=conf.tls_server_name,
        proxy=conf.proxy,
        authorization=authorization,
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


@dataclass(frozen=True)
class Context:
    """A kubeconfig context read for connecting: its endpoint, and who read it."""

    name: str
    user: str
    kubeconfig: str  # the file(s), resolved
    endpoint: Endpoint
    read_by: str  # READ_BY_KONFIG or READ_BY_KUBERNETES


def read_context(
    kubeconfig: str | None, context: str | None, *, client: str, credential_timeout: float
) -> Context:
    """The ``context`` (None: the current one) of ``kubeconfig`` (None: the default).

    ``client``: ``CLIENT_AUTO`` (konfig reads the kubeconfig when it understands the
    context's entries, else the ``kubernetes`` client's loader does) or
    ``CLIENT_KUBERNETES`` (always the loader). An ``exec`` credential plugin runs here,
    bounded by ``credential_timeout``.
    """
    if client not in CLIENTS:
        raise KubeError(
            f"unknown Kubernetes client {client!r}", hint=f"use one of: {', '.join(CLIENTS)}"
        )
    path = resolve_kubeconfig(kubeconfig)
    config = _read_kubeconfig(path)
    name = context or config.current
    found = config.contexts.get(name) if name else None
    if found is None:
        available = ", ".join(sorted(config.contexts))
        raise KubeError(
            f"kubeconfig {path} has no context {name!r} (it has: {available or 'none'})",
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
    where = f"user {user_name!r} of context {name!r} in kubeconfig {path}"
    token: _ExecToken | None = None
    replaced: Mapping[str, Any] | None = None
    if isinstance(user, Mapping) and "exec" in user:
        plugin = credentials.plugin_of(user_name, user["exec"], user_source)
        cluster_entry = config.clusters.get(str(ctx.get("cluster", "")))
        cluster = cluster_entry.value.get("cluster") if cluster_entry else None
        cwd = str(Path(user_source).parent)
        credential = credentials.run(plugin, timeout=credential_timeout, cwd=cwd, cluster=cluster)
        user = replaced = credentials.user_entry(credential, user)
        if credential.token and credential.expires is not None:
            token = _ExecToken(plugin, credential, credential_timeout, cwd, cluster)
    endpoint = None
    if client == CLIENT_AUTO:
        endpoint = _konfig_endpoint(config, ctx, user, user_source, token, where)
    if endpoint is not None:
        return Context(str(name), user_name, path, endpoint, READ_BY_KONFIG)
    endpoint = _kubernetes_endpoint(path, str(name), user_name, replaced, token, where)
    return Context(str(name), user_name, path, endpoint, READ_BY_KUBERNETES)
