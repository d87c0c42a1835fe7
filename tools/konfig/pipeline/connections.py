"""The one place that picks a stack's cluster and keeps one connection per cluster."""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType

from konfig.engine.kube import Kube, KubeTarget, Timeouts, connect
from konfig.errors import KonfigError
from konfig.repo.layout import Repository, Stack


class Connections:
    """One connection per (kubeconfig, context), opened on first use, closed together.

    A stack's cluster: ``kubeconfig`` (the command line) else the stack's
    ``kubernetes.kubeconfig`` (relative to the repository root) else
    ``env_kubeconfig`` (``$KUBECONFIG``, which the caller reads); ``context`` (the
    command line) else the stack's ``kubernetes.context``. A stack whose directory is
    gone has neither, so only the command line and ``$KUBECONFIG`` choose for it.
    A connection that failed fails again for every stack of that cluster, without
    trying again. ``timeouts`` bound every request and the credential plugin.
    """

    def __init__(
        self,
        repo: Repository,
        kubeconfig: str | None,
        context: str | None,
        *,
        env_kubeconfig: str | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        self.repo = repo
        self.kubeconfig = kubeconfig
        self.context = context
        self.env_kubeconfig = env_kubeconfig or None
        self.timeouts = timeouts or Timeouts()
        self._open: dict[KubeTarget, Kube | KonfigError] = {}
        self._lock = threading.Lock()

    def target(self, stack: Stack) -> KubeTarget:
        from_stack = stack.kubeconfig
        if from_stack and not Path(from_stack).expanduser().is_absolute():
            from_stack = str(self.repo.root / from_stack)
        return KubeTarget(
            kubeconfig=self.kubeconfig or from_stack or self.env_kubeconfig,
            context=self.context or stack.kube_context,
        )

    def kube(self, stack: Stack) -> Kube:
        target = self.target(stack)
        with self._lock:
            if target not in self._open:
                try:
                    self._open[target] = connect(target, self.timeouts)
                except KonfigError as exc:
                    self._open[target] = exc
            found = self._open[target]
        if isinstance(found, KonfigError):
            raise found
        return found

    def close(self) -> None:
        for kube in self._open.values():
            if isinstance(kube, Kube):
                kube.close()

    def __enter__(self) -> Connections:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
