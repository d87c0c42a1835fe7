"""What a pull controller says about a stack in pull delivery (``konfig status``).

Flux's kustomize-controller reports on its ``Kustomization`` objects
(``kustomize.toolkit.fluxcd.io/v1``): the ``Ready`` condition and
``status.lastAppliedRevision`` (``<branch>@sha1:<commit of the rendered branch>``). The
Kustomization of a stack is the one whose ``spec.path`` is the stack's folder on the
rendered branch or a folder above it (the cluster's folder, as ``pull/flux/`` sets it).
Reading them needs only ``list`` on that kind; a cluster without Flux's API says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from konfig.engine.inventory import KubeLister
from konfig.engine.kube.errors import KubeError

FLUX_API = "kustomize.toolkit.fluxcd.io/v1"
FLUX_KIND = "Kustomization"


@dataclass(frozen=True)
class ControllerStatus:
    """One controller object that reconciles a stack's folder."""

    controller: str  # "flux"
    name: str  # <namespace>/<name>
    path: str  # its spec.path, normalised (no ./, no trailing /)
    ready: str  # the Ready condition's status: True, False, Unknown ("" without one)
    reason: str = ""
    message: str = ""
    revision: str = ""  # the last applied revision, e.g. rendered@sha1:<commit>

    @property
    def rendered_commit(self) -> str:
        """The rendered branch's commit in ``revision`` ("" when there is none)."""
        _, sep, sha = self.revision.rpartition("sha1:")
        return sha if sep else ""


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
