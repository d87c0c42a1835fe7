"""The Kubernetes API: the only module that imports ``kubernetes``.

``connect(KubeTarget)`` loads a kubeconfig context and returns a :class:`Kube`: a
dynamic client with lazy discovery (refreshed on a miss, so kinds whose
CustomResourceDefinition appeared mid-plan are found), server-side apply (also as
``dryRun=All``), get, list and delete. Every API failure becomes a
:class:`KubeError` with a readable message (what was attempted, on which object,
as whom, and how to fix it); a failed request carries an :class:`ApiFailure`.
No raw ``kubernetes`` exception leaves this module.

The kubeconfig path is given by the caller (``--kubeconfig``, the stack's
``kubernetes.kubeconfig``, ``KUBECONFIG``, in that order, resolved by the CLI):
this module never reads the environment.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import urllib3
from kubernetes.client import ApiClient, Configuration
from kubernetes.client import rest as kube_rest
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader, KubeConfigMerger
from kubernetes.dynamic import DynamicClient, LazyDiscoverer
from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError

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
    def urllib3(self) -> tuple[float, float]:
        return (min(CONNECT_TIMEOUT, self.request), self.request)


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


class _InMemoryDiscoverer(LazyDiscoverer):
    """Lazy discovery kept in memory: the stock one writes a cache file to the shared
    temp directory, keyed only by server URL (stale across clusters on one port)."""

    def _write_cache(self) -> None:
        pass


def _raw(_client: Any, data: Any) -> Any:
    return data


@dataclass
class Kube:
    """A connection to one cluster context. Thread-safe for get/apply/delete/list."""

    api: ApiClient
    dynamic: DynamicClient
    server: str
    context: str
    user: str
    kubeconfig: str
    timeouts: Timeouts = field(default_factory=Timeouts)
    _mappings: dict[tuple[str, str], ResourceInfo] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- discovery ---------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """The REST mapping of a kind; rediscovers once on a miss (new CRDs)."""
        key = (api_version, kind)
        with self._lock:
            found = self._mappings.get(key)
            if found is not None:
                return found
            res = self._call(
                lambda: self._discover(api_version, kind), what=f"discover {kind} ({api_version})"
            )
            if res is None:
                raise UnknownKindError(api_version, kind, self.server)
            self._mappings[key] = res
            return res

    def _discover(self, api_version: str, kind: str) -> ResourceInfo | None:
        group, _, version = api_version.rpartition("/")
        prefix = "apis" if group else "api"
        try:
            # LazyDiscoverer re-reads the server's API groups itself on a miss.
            results = self.dynamic.resources.search(
                prefix=prefix, group=group, api_version=version, kind=kind
            )
        except (ResourceNotFoundError, ResourceNotUniqueError):
            return None
        for res in results:
            name = getattr(res, "name", "") or ""
            if getattr(res, "kind", None) == kind and "/" not in name and name:
                return ResourceInfo(api_version, kind, name, bool(res.namespaced))
        return None

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
        params: dict[str, Any] = {"field_manager": field_manager}
        if force:
            params["force_conflicts"] = "true"
        if dry_run:
            params["dry_run"] = "All"
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
                label_selector=label_selector,
                limit=500,
                _continue=token,
            )
            for item in data.get("items") or []:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            token = (data.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- plumbing ----------------------------------------------------------------

    def _request(self, method: str, path: str, *, what: str, **params: Any) -> Any:
        params = {k: v for k, v in params.items() if v is not None}
        return self._call(
            lambda: self.dynamic.request(
                method, path, serializer=_raw, _request_timeout=self.timeouts.urllib3, **params
            ),
            what=what,
        )

    def _call(self, fn: Callable[[], _T], *, what: str) -> _T:
        try:
            return fn()
        except ApiException as exc:
            raise self._api_error(exc, what) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if _timed_out(exc):
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
                f"(context {self.context!r}) to {what}: {_reason(exc)}",
                hint="check that the cluster is running and that the kubeconfig "
                f"{self.kubeconfig} and context {self.context!r} point at it "
                "(--kubeconfig / --context, the stack's kubernetes: settings, KUBECONFIG)",
            ) from None

    def _api_error(self, exc: ApiException, what: str) -> KubeApiError:
        failure = failure_from(exc.status or 0, exc.reason or "", exc.body)
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


def _timed_out(exc: BaseException) -> bool:
    """A connect or read timeout, however urllib3 wraps it."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None or isinstance(seen, urllib3.exceptions.NewConnectionError):
            return False  # (urllib3 derives "connection refused" from ConnectTimeoutError)
        if isinstance(seen, (urllib3.exceptions.TimeoutError, TimeoutError)):
            return True
        seen = getattr(seen, "reason", None) or seen.__context__
    return False


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    text = str(reason or exc)
    for marker in ("Connection refused", "timed out", "Name or service not known"):
        if marker in text:
            return marker.lower()
    return text.splitlines()[0][:200]


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


class _Retry(urllib3.Retry):
    """urllib3's retries (a refused connection, a dropped keep-alive connection), except
    for a read that timed out: the server took the request and went silent, and asking
    again only doubles the wait."""

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: TracebackType | None = None,
    ) -> _Retry:
        if isinstance(error, urllib3.exceptions.ReadTimeoutError):
            raise error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def _retries() -> _Retry:
    return _Retry(total=3, connect=1, read=2, redirect=0, status=0, other=0)


class _BoundedRest(kube_rest.RESTClientObject):
    """The client's REST layer with a timeout on every request: the kubernetes client
    sends the requests it makes itself (API discovery) without one."""

    def __init__(self, configuration: Configuration, timeout: tuple[float, float]) -> None:
        super().__init__(configuration)
        self._default_timeout = timeout

    def request(  # type: ignore[no-untyped-def]
        self, method, url, headers=None, body=None, post_params=None, _request_timeout=None
    ):
        return super().request(  # type: ignore[no-untyped-call]
            method,
            url,
            headers=headers,
            body=body,
            post_params=post_params,
            _request_timeout=_request_timeout or self._default_timeout,
        )


def _plain(node: Any) -> Any:
    """The value of a kubeconfig entry (the client wraps merged entries in ConfigNode)."""
    return node.value if isinstance(node, ConfigNode) else node


def _named(entries: Any, name: str) -> Any:
    for entry in entries or []:
        if isinstance(_plain(entry), Mapping) and _plain(entry).get("name") == name:
            return entry
    return None


@dataclass
class _Refresher:
    """Runs the credential plugin again when the token it gave expires (thread-safe)."""

    plugin: credentials.Plugin
    credential: credentials.Credential
    timeout: float
    cwd: str | None
    cluster: Mapping[str, Any] | None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, conf: Configuration) -> None:
        with self.lock:
            if not self.credential.expired(datetime.now(UTC)):
                return
            fresh = credentials.run(
                self.plugin, timeout=self.timeout, cwd=self.cwd, cluster=self.cluster
            )
            if fresh.token:
                self.credential = fresh
                conf.api_key["BearerToken"] = f"Bearer {fresh.token}"


def _configuration(
    kubeconfig: str, context: str | None, timeouts: Timeouts
) -> tuple[Configuration, str, str]:
    """Load a kubeconfig context into a client Configuration: (configuration, context,
    user). An ``exec`` credential plugin runs here, bounded by ``timeouts.credential``."""
    try:
        merged = KubeConfigMerger(kubeconfig).config  # type: ignore[no-untyped-call]
    except (OSError, ValueError) as exc:  # unreadable, or not YAML
        raise KubeError(f"cannot read kubeconfig {kubeconfig}: {exc}") from None
    if merged is None or not isinstance(merged.value, Mapping):
        raise KubeError(f"kubeconfig {kubeconfig} holds no configuration")
    top = merged.value
    name = context or top.get("current-context")
    found = _named(top.get("contexts"), str(name)) if name else None
    if found is None:
        available = ", ".join(sorted(str(_plain(c).get("name")) for c in top.get("contexts") or []))
        raise KubeError(
            f"kubeconfig {kubeconfig} has no context {name!r} (it has: {available or 'none'})",
            hint="set kubernetes.context in the stack's stack.yaml or pass --context",
        )
    ctx = _plain(found).get("context") or {}
    user_name = str(ctx.get("user", ""))
    user_entry = _named(top.get("users"), user_name) if user_name else None
    refresher: _Refresher | None = None
    if user_entry is not None:
        user = _plain(user_entry).get("user") or {}
        if isinstance(user, Mapping) and "exec" in user:
            source = getattr(user_entry, "path", None) or kubeconfig.split(":")[0]
            plugin = credentials.plugin_of(user_name, user["exec"], source)
            cluster_entry = _named(top.get("clusters"), str(ctx.get("cluster", "")))
            cluster = (_plain(cluster_entry) or {}).get("cluster") if cluster_entry else None
            cwd = str(Path(source).parent)
            credential = credentials.run(
                plugin, timeout=timeouts.credential, cwd=cwd, cluster=cluster
            )
            _plain(user_entry)["user"] = credentials.user_entry(credential, user)
            if credential.token and credential.expires is not None:
                refresher = _Refresher(plugin, credential, timeouts.credential, cwd, cluster)
    conf = Configuration()
    # Room for the dry-run thread pool: one pooled connection per worker.
    conf.connection_pool_maxsize = MAX_WORKERS
    conf.retries = _retries()
    try:
        loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=merged, active_context=str(name), config_base_path=None
        )
        loader.load_and_set(conf)  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        raise KubeError(f"cannot use kubeconfig {kubeconfig} (context {name!r}): {exc}") from None
    if refresher is not None:
        conf.refresh_api_key_hook = refresher  # type: ignore[assignment]
    return conf, str(name), user_name


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
    path = resolve_kubeconfig(kubeconfig)
    try:
        merged = KubeConfigMerger(path).config  # type: ignore[no-untyped-call]
    except (OSError, ValueError) as exc:  # unreadable, or not YAML
        raise KubeError(f"cannot read kubeconfig {path}: {exc}") from None
    doc = _plain(merged) if merged is not None else None
    if not isinstance(doc, Mapping):
        raise KubeError(f"kubeconfig {path} is not a kubeconfig (no mapping at the top)")
    names = sorted(
        str(_plain(c).get("name"))
        for c in _plain(doc.get("contexts")) or []
        if isinstance(_plain(c), Mapping)
    )
    current = _plain(doc.get("current-context"))
    return names, (str(current) if current else None)


def connect(target: KubeTarget, timeouts: Timeouts | None = None) -> Kube:
    """Load the target's kubeconfig context and check that the API server answers."""
    timeouts = timeouts or Timeouts()
    kubeconfig = resolve_kubeconfig(target.kubeconfig)
    conf, context, user = _configuration(kubeconfig, target.context, timeouts)
    api = ApiClient(configuration=conf)
    api.rest_client.pool_manager.clear()
    api.rest_client = _BoundedRest(conf, timeouts.urllib3)
    server = str(conf.host)
    # Never read: nothing is written (see _InMemoryDiscoverer), so it never exists.
    no_cache = str(Path(tempfile.gettempdir()) / f"konfig-discovery-{uuid.uuid4().hex}.json")
    placeholder = Kube(
        api=api,
        dynamic=None,  # type: ignore[arg-type]
        server=server,
        context=context,
        user=user,
        kubeconfig=kubeconfig,
        timeouts=timeouts,
    )
    try:
        dynamic = placeholder._call(
            lambda: DynamicClient(  # type: ignore[no-untyped-call]
                api, cache_file=no_cache, discoverer=_InMemoryDiscoverer
            ),
            what="discover its API resources",
        )
    except BaseException:
        placeholder.close()
        raise
    placeholder.dynamic = dynamic
    return placeholder
