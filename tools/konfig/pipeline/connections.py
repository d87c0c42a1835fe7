"""The one place that picks a stack's cluster and keeps one connection per cluster."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

from konfig.engine.inventory_store import read_inventory
from konfig.engine.kube import (
    CLIENT_AUTO,
    Kube,
    KubeError,
    KubeTarget,
    Timeouts,
    connect,
    list_contexts,
    resolve_kubeconfig,
)
from konfig.errors import KonfigError
from konfig.repo.layout import Repository, Stack
from konfig.repo.settings import identity_of, impersonated_user


class Connections:
    """One connection per (kubeconfig, context), opened on first use, closed together.

    A stack's cluster: ``kubeconfig`` (the command line) else the stack's
    ``kubernetes.kubeconfig`` (relative to the repository root) else
    ``env_kubeconfig`` (``$KUBECONFIG``, which the caller reads); ``context`` (the
    command line) else the stack's ``kubernetes.context``. A stack whose directory is
    gone has neither, so only the command line and ``$KUBECONFIG`` choose for it.
    A connection that failed fails again for every stack of that cluster, without
    trying again. ``timeouts`` bound every request and the credential plugin; ``client``
    says who reads the kubeconfigs (``kube.connect``).
    """

    def __init__(
        self,
        repo: Repository,
        kubeconfig: str | None,
        context: str | None,
        *,
        env_kubeconfig: str | None = None,
        timeouts: Timeouts | None = None,
        client: str = CLIENT_AUTO,
    ) -> None:
        self.repo = repo
        self.kubeconfig = kubeconfig
        self.context = context
        self.env_kubeconfig = env_kubeconfig or None
        self.timeouts = timeouts or Timeouts()
        self.client = client
        self._open: dict[KubeTarget, Kube | KonfigError] = {}
        self._lock = threading.Lock()
        self._located: dict[str, KubeTarget] = {}  # deleted stack path -> its cluster

    def target(self, stack: Stack) -> KubeTarget:
        if stack.path in self._located:
            return self._located[stack.path]
        from_stack = stack.kubeconfig
        if from_stack and not Path(from_stack).expanduser().is_absolute():
            from_stack = str(self.repo.root / from_stack)
        identity = identity_of(self.repo.config.identities, stack.path)
        return KubeTarget(
            kubeconfig=self.kubeconfig or from_stack or self.env_kubeconfig,
            context=self.context or stack.kube_context,
            impersonate=impersonated_user(identity) if identity else None,
        )

    def groups(self, stacks: Sequence[Stack]) -> dict[KubeTarget, list[Stack]]:
        """The stacks per cluster (kubeconfig and context), in first-seen order."""
        out: dict[KubeTarget, list[Stack]] = {}
        for stack in stacks:
            out.setdefault(self.target(stack), []).append(stack)
        return out

    def identities(self, stacks: Sequence[Stack]) -> dict[str, str | None]:
        """The user each stack's requests impersonate (konfig.yaml ``identities``), None
        where the kubeconfig's own user makes them."""
        return {s.path: self.target(s).impersonate for s in stacks}

    def contexts(self, stacks: Sequence[Stack]) -> dict[str, str]:
        """Each stack's context name as reports show it (the current context's name when
        the stack names none and the kubeconfig can be read)."""
        out: dict[str, str] = {}
        current: dict[str | None, str] = {}
        for target, group in self.groups(stacks).items():
            name = target.context
            if name is None:
                if target.kubeconfig not in current:
                    try:
                        current[target.kubeconfig] = list_contexts(target.kubeconfig)[1] or ""
                    except KonfigError:
                        current[target.kubeconfig] = ""
                name = current[target.kubeconfig]
            for stack in group:
                out[stack.path] = name
        return out

    def check(self, stacks: Sequence[Stack]) -> None:
        """Before anything is read or written: every stack's context exists in its
        kubeconfig. One error names every stack whose context is missing and the
        contexts the kubeconfig has (no connection is made)."""
        problems: list[str] = []
        listed: dict[str | None, tuple[list[str], str | None] | KonfigError] = {}
        for target, group in self.groups(stacks).items():
            if target.kubeconfig not in listed:
                try:
                    listed[target.kubeconfig] = list_contexts(target.kubeconfig)
                except KonfigError as exc:
                    listed[target.kubeconfig] = exc
            found = listed[target.kubeconfig]
            paths = _some(s.path for s in group)
            if isinstance(found, KonfigError):
                problems.append(f"{paths}: {found.message}")
                continue
            names, current = found
            wanted = target.context or current
            if wanted is None:
                problems.append(
                    f"{paths}: no kubernetes.context in stack.yaml and the kubeconfig "
                    f"{resolve_kubeconfig(target.kubeconfig)} has no current context "
                    f"(it has: {', '.join(names) or 'none'})"
                )
            elif wanted not in names:
                problems.append(
                    f"{paths}: kubeconfig {resolve_kubeconfig(target.kubeconfig)} has no "
                    f"context {wanted!r} (it has: {', '.join(names) or 'none'})"
                )
        if problems:
            raise KubeError(
                "\n".join(problems)
                if len(problems) == 1
                else "these stacks' clusters are not in the kubeconfig:\n  "
                + "\n  ".join(problems),
                hint="add the contexts to the kubeconfig (KUBECONFIG may join several files: "
                "a:b), or fix kubernetes.context in the stacks' stack.yaml (--context "
                "overrides it for every stack); nothing was read or written",
            )

    def locate(self, stack: Stack) -> KubeTarget:
        """The cluster of a stack whose directory is gone (no ``stack.yaml`` names it).

        With ``--context`` that one. Otherwise each cluster the repository's stacks use,
        and the kubeconfig's current context, is asked for the stack's inventory: the
        one that holds it is the stack's cluster from then on. Found in several: an
        error asking for ``--context``; found nowhere: the current context.
        """
        default = self.target(stack)
        if self.context or stack.path in self._located or stack.kube_context:
            return default  # --context, found before, or its stack.yaml from git history
        candidates = list(dict.fromkeys([*self.groups(self.repo.stacks), default]))
        holders: dict[str, tuple[KubeTarget, str]] = {}  # by API server: one per cluster
        for target in candidates:
            try:
                kube = self._connect(target)
                if read_inventory(kube, stack) is not None:
                    holders.setdefault(kube.server, (target, kube.context))
            except KonfigError:
                if target == default:
                    raise
        if len(holders) > 1:
            where = ", ".join(f"{c} ({server})" for server, (_, c) in holders.items())
            raise KubeError(
                f"{stack.path}: its inventory is in several clusters: {where}",
                hint="pass --context to say which one to use",
            )
        found = [t for t, _ in holders.values()]
        chosen = default if default in found or not found else found[0]
        self._located[stack.path] = chosen
        return chosen

    def _connect(self, target: KubeTarget) -> Kube:
        with self._lock:
            if target not in self._open:
                try:
                    self._open[target] = connect(target, self.timeouts, client=self.client)
                except KonfigError as exc:
                    self._open[target] = exc
            found = self._open[target]
        if isinstance(found, KonfigError):
            raise found
        return found

    def kube(self, stack: Stack) -> Kube:
        return self._connect(self.target(stack))

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


# Stacks an error names: a base-model change may reach 10,000 of them (one line each
# would be a 170 KB message); the count says how many more.
NAMED = 5


def _some(paths: Iterable[str]) -> str:
    """The first :data:`NAMED` paths, then "and N more"."""
    listed = list(paths)
    shown = ", ".join(listed[:NAMED])
    more = len(listed) - NAMED
    return shown + (f" and {more:,} more" if more > 0 else "")
