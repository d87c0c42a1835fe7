"""The Kubernetes API facade: :func:`connect` and :class:`Kube`.

``connect(KubeTarget)`` reads a kubeconfig context (:mod:`.kubeconfig`), checks that the
API server answers and returns a :class:`Kube`: lazy discovery (a kind's group version
is read again on a miss, so kinds whose CustomResourceDefinition appeared mid-plan are
found), server-side apply (also as ``dryRun=All``), get, list and delete. Each call
builds its request as data (:mod:`.request`) and sends it through one
:class:`~.transport.Transport`; every failure becomes a :class:`~.errors.KubeError` with
a readable message (what was attempted, on which object, as whom, and how to fix it),
made here, where the server, context and user are known.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from konfig.engine import credentials
from konfig.engine.kube import request
from konfig.engine.kube.errors import (
    KubeApiError,
    KubeError,
    KubeTimeoutError,
    UnknownKindError,
    failure_from,
)
from konfig.engine.kube.kubeconfig import CLIENT_AUTO, READ_BY_KONFIG, read_context
from konfig.engine.kube.request import FIELD_MANAGER, Request, ResourceInfo
from konfig.engine.kube.transport import NotJson, StatusError, Transport, Unreachable

# kube-apiserver ends a request after 60 s itself (its --request-timeout): a server that
# answers at all answers within that.
DEFAULT_REQUEST_TIMEOUT = 60.0
# A connection that is not even accepted within this is not coming.
CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class KubeTarget:
    """Which cluster to talk to: a kubeconfig (None: the default) and a context in it."""

    kubeconfig: str | None = None
    context: str | None = None
    # the user every request impersonates (Impersonate-User), e.g. a ServiceAccount's
    # system:serviceaccount:<namespace>:<name>; None: the kubeconfig user itself
    impersonate: str | None = None


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


@dataclass
class Kube:
    """A connection to one cluster context. Thread-safe for get/apply/delete/list."""

    transport: Transport
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
        path = request.group_version_path(api_version)
        if path is None:
            return None
        try:
            data = self.send(request.read(path, f"discover {kind} ({api_version})"))
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
            ("v1", self.send(request.read("/api/v1", "discover the core API")))
        ]
        groups = self.send(request.read("/apis", "discover the API groups"))
        for group in groups.get("groups") or []:
            gv = (group.get("preferredVersion") or {}).get("groupVersion")
            if not gv:
                continue
            try:
                lists.append((gv, self.send(request.read(f"/apis/{gv}", f"discover {gv}"))))
            except KubeApiError:
                continue
        found: list[tuple[str, str]] = []
        for gv, data in lists:
            for res in data.get("resources") or []:
                name = str(res.get("name", ""))
                if res.get("namespaced") and "/" not in name and "list" in (res.get("verbs") or []):
                    found.append((gv, str(res.get("kind"))))
        return found

    # --- requests ----------------------------------------------------------------

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None
    ) -> dict[str, Any] | None:
        """The live object, or None when it does not exist."""
        info = self.resource(api_version, kind)
        try:
            data = self.send(request.get(info, name, namespace))
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
        info = self.resource(str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
        call = request.apply(
            info, manifest, dry_run=dry_run, force=force, field_manager=field_manager
        )
        return dict(self.send(call))

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
        try:
            self.send(request.delete(info, name, namespace, uid=uid, propagation=propagation))
        except KubeApiError as exc:
            if exc.failure.status != 404:
                raise

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        metadata_only: bool = False,
    ) -> list[dict[str, Any]]:
        """Every object of a kind (in one namespace, or all), following ``continue``;
        ``metadata_only``: only each object's metadata (a cheap read of uids and
        resourceVersions)."""
        info = self.resource(api_version, kind)
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            call = request.list_page(
                info, namespace, label_selector, token, metadata_only=metadata_only
            )
            data = self.send(call)
            for item in data.get("items") or []:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            token = (data.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- sending -------------------------------------------------------------------

    def send(self, call: Request) -> Any:
        """The server's JSON answer to ``call``; a KubeError naming what failed."""
        try:
            return self.transport.send(call)
        except StatusError as exc:
            raise self._api_error(exc, call.what) from None
        except NotJson as exc:
            raise KubeError(
                f"the server at {self.server} (context {self.context!r}) answered the "
                f"request to {call.what} with something that is not a Kubernetes API answer "
                f"(HTTP {exc.status}, {exc.content_type or 'no content type'}): {exc.start}",
                hint="check that the kubeconfig's server URL points at the Kubernetes API "
                "server itself, not at a proxy or a web page",
            ) from None
        except Unreachable as exc:
            if exc.timed_out:
                raise KubeTimeoutError(
                    f"the Kubernetes API server at {self.server} (context {self.context!r}) "
                    f"did not answer within {self.timeouts.request:g}s when asked to "
                    f"{call.what}",
                    hint="check it with `kubectl --kubeconfig "
                    f"{self.kubeconfig} --context {self.context} --request-timeout "
                    f"{self.timeouts.request:g}s get --raw /readyz`; if it is only slow, raise "
                    "--request-timeout (or KONFIG_REQUEST_TIMEOUT)",
                ) from None
            raise KubeError(
                f"cannot reach the Kubernetes API server at {self.server} "
                f"(context {self.context!r}) to {call.what}: {exc.reason}",
                hint="check that the cluster is running and that the kubeconfig "
                f"{self.kubeconfig} and context {self.context!r} point at it "
                "(--kubeconfig / --context, the stack's kubernetes: settings, KUBECONFIG)",
            ) from None

    def _api_error(self, exc: StatusError, what: str) -> KubeApiError:
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


def connect(
    target: KubeTarget, timeouts: Timeouts | None = None, *, client: str = CLIENT_AUTO
) -> Kube:
    """Read the target's kubeconfig context and check that the API server answers.

    ``client``: how the kubeconfig is read (:func:`.kubeconfig.read_context`); an
    ``exec`` credential plugin runs here, bounded by ``timeouts.credential``.
    """
    timeouts = timeouts or Timeouts()
    context = read_context(
        target.kubeconfig, target.context, client=client, credential_timeout=timeouts.credential
    )
    transport = Transport(
        context.endpoint,
        connect_timeout=timeouts.connect,
        read_timeout=timeouts.request,
        impersonate=target.impersonate,
    )
    kube = Kube(
        transport=transport,
        server=context.endpoint.server,
        context=context.name,
        user=target.impersonate or context.user,
        kubeconfig=context.kubeconfig,
        timeouts=timeouts,
        client=context.read_by,
    )
    try:
        kube.send(request.read("/api", "discover its API resources"))
    except BaseException:
        kube.close()
        raise
    return kube
