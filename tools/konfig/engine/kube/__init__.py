"""The Kubernetes API: the one package that talks to the API server.

- :mod:`.client`: the facade, :func:`connect` and :class:`Kube` (discovery, get, list,
  server-side apply, delete), and the readable errors it raises;
- :mod:`.request`: each API request built as plain data (method, path, query, body);
- :mod:`.transport`: sending a request (``http.client``, or urllib3 through a proxy);
- :mod:`.kubeconfig`: reading a kubeconfig context (konfig's own reader, or the
  ``kubernetes`` client's loader for what it does not understand);
- :mod:`.errors`: :class:`KubeError` and its kinds, the server's ``Status`` as data.

No raw ``http.client``, ssl, urllib3 or ``kubernetes`` exception leaves this package.
Callers import what they use from here.
"""

from konfig.engine.kube.client import (
    DEFAULT_REQUEST_TIMEOUT,
    Kube,
    KubeTarget,
    Timeouts,
    connect,
)
from konfig.engine.kube.errors import (
    ApiFailure,
    KubeApiError,
    KubeError,
    KubeTimeoutError,
    UnknownKindError,
    failure_from,
)
from konfig.engine.kube.kubeconfig import (
    CLIENT_AUTO,
    CLIENT_KUBERNETES,
    CLIENTS,
    READ_BY_KONFIG,
    READ_BY_KUBERNETES,
    list_contexts,
    resolve_kubeconfig,
)
from konfig.engine.kube.request import ResourceInfo
from konfig.engine.kube.transport import MAX_WORKERS

__all__ = [
    "CLIENTS",
    "CLIENT_AUTO",
    "CLIENT_KUBERNETES",
    "DEFAULT_REQUEST_TIMEOUT",
    "MAX_WORKERS",
    "READ_BY_KONFIG",
    "READ_BY_KUBERNETES",
    "ApiFailure",
    "Kube",
    "KubeApiError",
    "KubeError",
    "KubeTarget",
    "KubeTimeoutError",
    "ResourceInfo",
    "Timeouts",
    "UnknownKindError",
    "connect",
    "failure_from",
    "list_contexts",
    "resolve_kubeconfig",
]
