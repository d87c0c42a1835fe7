"""What a pull controller says about a stack in pull delivery (``konfig status``).

Flux's kustomize-controller reports on its ``Kustomization`` objects
(``kustomize.toolkit.fluxcd.io/v1``): the ``Ready`` condition and
``status.lastAppliedRevision`` (``<branch>@sha1:<commit of the rendered branch>``).
Argo CD's application controller reports on its ``Application`` objects
(``argoproj.io/v1alpha1``): ``status.sync`` (``status``: Synced, OutOfSync, Unknown;
``revision``: the commit of the rendered branch compared) and ``status.health.status``
(Healthy, Progressing, Degraded, Suspended, Missing, Unknown); the source folder is
``spec.source.path`` (or each of ``spec.sources``, with ``status.sync.revisions``).
The object of a stack is the one whose path is the stack's folder on the rendered
branch or the deepest folder above it (the cluster's folder, as ``pull/flux/`` sets
it; the stack's own, as ``pull/argocd/``'s ApplicationSet does). Reading them needs
only ``list`` on those kinds; a cluster with neither API says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from konfig.engine.inventory_store import KubeLister
from konfig.engine.kube.errors import KubeError

FLUX_API = "kustomize.toolkit.fluxcd.io/v1"
FLUX_KIND = "Kustomization"
ARGOCD_API = "argoproj.io/v1alpha1"
ARGOCD_KIND = "Application"


@dataclass(frozen=True)
class ControllerStatus:
    """One controller object that reconciles a stack's folder."""

    controller: str  # "flux" or "argocd"
    name: str  # <namespace>/<name>
    path: str  # its spec.path, normalised (no ./, no trailing /)
    ready: str  # True, False, Unknown ("" without one): Flux's Ready; Argo CD: Synced+Healthy
    reason: str = ""
    message: str = ""
    # the revision applied: rendered@sha1:<commit> (Flux); <commit> (Argo CD: the last
    # deployment in status.history)
    revision: str = ""
    sync: str = ""  # Argo CD: status.sync.status
    health: str = ""  # Argo CD: status.health.status

    @property
    def rendered_commit(self) -> str:
        """The rendered branch's commit in ``revision`` ("" when there is none)."""
        _, sep, sha = self.revision.rpartition("sha1:")
        if sep:
            return sha
        if len(self.revision) in (40, 64) and all(c in "0123456789abcdef" for c in self.revision):
            return self.revision
        return ""


def _normal(path: str) -> str:
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    return path.strip("/")


def read_flux(kube: KubeLister) -> Sequence[ControllerStatus] | str:
    """Every Flux Kustomization in the cluster, or why none could be read."""
    try:
        items = kube.list(FLUX_API, FLUX_KIND)
    except KubeError as exc:
        return f"Flux's Kustomization API could not be read: {exc.message}"
    return [_status(item) for item in items]


def read_argocd(kube: KubeLister) -> Sequence[ControllerStatus] | str:
    """Every Argo CD Application in the cluster (one entry per source path), or why
    none could be read."""
    try:
        items = kube.list(ARGOCD_API, ARGOCD_KIND)
    except KubeError as exc:
        return f"Argo CD's Application API could not be read: {exc.message}"
    return [s for item in items for s in _application(item)]


def read_controllers(kube: KubeLister) -> Sequence[ControllerStatus] | str:
    """Flux's Kustomizations and Argo CD's Applications; why neither could be read."""
    flux, argocd = read_flux(kube), read_argocd(kube)
    if isinstance(flux, str) and isinstance(argocd, str):
        return f"{flux}; {argocd}"
    return [
        *(flux if not isinstance(flux, str) else ()),
        *(argocd if not isinstance(argocd, str) else ()),
    ]


def _application(item: dict[str, Any]) -> list[ControllerStatus]:
    meta = item.get("metadata") or {}
    spec = item.get("spec") or {}
    status = item.get("status") or {}
    sync = status.get("sync") or {}
    health = status.get("health") or {}
    sync_status = str(sync.get("status") or "")
    health_status = str(health.get("status") or "")
    if sync_status == "Synced" and health_status == "Healthy":
        ready = "True"
    elif sync_status in ("", "Unknown") or health_status in ("", "Unknown"):
        ready = "Unknown"
    else:
        ready = "False"
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    operation = status.get("operationState") or {}
    message = "; ".join(str(c.get("message") or "") for c in conditions if c.get("message"))
    if ready != "True" and not message:
        message = str(health.get("message") or operation.get("message") or "")
    reason = f"{sync_status or 'sync unknown'}, {health_status or 'health unknown'}"
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    # what is live: the last deployment of status.history (appended after each sync that
    # succeeded); sync.revision is what the live state was compared with, live only
    # when Synced
    history = [h for h in status.get("history") or [] if isinstance(h, dict)]
    last = history[-1] if history else {}
    if isinstance(spec.get("sources"), list) and spec["sources"]:
        sources = [s for s in spec["sources"] if isinstance(s, dict)]
        revisions = [str(r) for r in last.get("revisions") or []]
        if not revisions and sync_status == "Synced":
            revisions = [str(r) for r in sync.get("revisions") or []]
    else:
        sources = [spec.get("source") or {}]
        revision = str(last.get("revision") or "")
        if not revision and sync_status == "Synced":
            revision = str(sync.get("revision") or "")
        revisions = [revision]
    target = sync.get("revision") or ""
    if sync_status == "OutOfSync" and target:
        message = (message + "; " if message else "") + f"the branch is at {target}"
    return [
        ControllerStatus(
            "argocd",
            name,
            _normal(str(source.get("path") or "")),
            ready,
            reason,
            message,
            revisions[i] if i < len(revisions) else "",
            sync_status,
            health_status,
        )
        for i, source in enumerate(sources)
    ]


def _status(item: dict[str, Any]) -> ControllerStatus:
    meta = item.get("metadata") or {}
    status = item.get("status") or {}
    ready: dict[str, Any] = next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, dict) and c.get("type") == "Ready"
        ),
        {},
    )
    return ControllerStatus(
        "flux",
        f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        _normal(str((item.get("spec") or {}).get("path") or "")),
        str(ready.get("status") or ""),
        str(ready.get("reason") or ""),
        str(ready.get("message") or ""),
        str(status.get("lastAppliedRevision") or ""),
    )


def reconciling(found: Sequence[ControllerStatus], folder: str) -> ControllerStatus | None:
    """The controller object whose path is ``folder`` or the deepest folder above it."""
    folder = _normal(folder)
    best: ControllerStatus | None = None
    for c in found:
        above = c.path == folder or not c.path or folder.startswith(c.path + "/")
        if above and (best is None or len(c.path) > len(best.path)):
            best = c
    return best
