"""Is an object healthy yet? kstatus rules on plain objects (pure, no API calls).

The rules of kubernetes-sigs/cli-utils ``pkg/kstatus/status``, in this order:

1. ``metadata.deletionTimestamp`` set → in progress (terminating);
2. ``status.observedGeneration`` behind ``metadata.generation`` → in progress;
3. per kind: Deployment (updated, ready and available replicas, ``Available=True``;
   ``ProgressDeadlineExceeded`` → failed), StatefulSet (ready/current/updated
   replicas, revisions equal), DaemonSet (observed by its controller, then
   scheduled/updated/available counts),
   Job (``Complete`` → current, ``Failed`` → failed), PersistentVolumeClaim
   (``Bound``), CustomResourceDefinition (``Established``; names not accepted →
   failed), Service of type LoadBalancer (has ingress), Pod (Ready or Succeeded);
4. otherwise a ``Ready`` condition when present (``Stalled=True`` → failed);
5. otherwise current.

A Job with ``ttlSecondsAfterFinished`` deletes itself once it finished: apply takes
its disappearance for completion (:func:`removes_itself`, :data:`COLLECTED`).

Every "not yet" carries ``waiting_for``: the condition it waits for, so a timeout
can name it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

State = Literal["current", "in_progress", "failed", "not_found"]


@dataclass(frozen=True)
class Health:
    state: State
    message: str = ""
    waiting_for: str = ""

    @property
    def done(self) -> bool:
        return self.state in ("current", "failed")


CURRENT = Health("current", "ready")
# A Job with ttlSecondsAfterFinished that is gone: it completed and was removed.
COLLECTED = Health("current", "Job complete, removed after its ttlSecondsAfterFinished")


def removes_itself(manifest: Mapping[str, Any] | None) -> bool:
    """Whether the object is a Job the TTL controller deletes once it finished
    (``spec.ttlSecondsAfterFinished``): its absence after an apply is its success."""
    if not manifest or manifest.get("kind") != "Job":
        return False
    if str(manifest.get("apiVersion", "")).rpartition("/")[0] != "batch":
        return False
    ttl = (manifest.get("spec") or {}).get("ttlSecondsAfterFinished")
    return isinstance(ttl, int) and not isinstance(ttl, bool)


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type"):
            out[str(cond["type"])] = cond
    return out


def _is(cond: Mapping[str, Any] | None, value: str) -> bool:
    return cond is not None and str(cond.get("status")) == value


def _int(value: Any, default: int = 0) -> int:
    return int(value) if isinstance(value, int) else default


def _waiting(message: str, waiting_for: str) -> Health:
    return Health("in_progress", message, waiting_for)


def status(obj: Mapping[str, Any] | None) -> Health:
    """The kstatus of one live object (``None``: it does not exist)."""
    if obj is None:
        return Health("not_found", "object not found", "the object to exist")
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return _waiting("terminating", "deletion to finish")
    st = obj.get("status") or {}
    generation = meta.get("generation")
    observed = st.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return _waiting(
            f"observedGeneration {observed} < generation {generation}",
            "the controller to observe the latest generation",
        )
    kind = str(obj.get("kind", ""))
    rule = _RULES.get(kind)
    if rule is not None:
        return rule(obj)
    return _generic(obj)


def _generic(obj: Mapping[str, Any]) -> Health:
    conds = _conditions(obj)
    if _is(conds.get("Stalled"), "True"):
        return Health("failed", f"Stalled: {conds['Stalled'].get('message', '')}".strip())
    ready = conds.get("Ready")
    if ready is not None and not _is(ready, "True"):
        reason = ready.get("reason") or ready.get("message") or ""
        return _waiting(f"Ready={ready.get('status')} {reason}".strip(), "condition Ready=True")
    return CURRENT


def _deployment(obj: Mapping[str, Any]) -> Health:
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    want = _int(spec.get("replicas"), 1)
    conds = _conditions(obj)
    progressing = conds.get("Progressing")
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return Health("failed", f"progress deadline exceeded: {progressing.get('message', '')}")
    updated, ready = _int(st.get("updatedReplicas")), _int(st.get("readyReplicas"))
    available, total = _int(st.get("availableReplicas")), _int(st.get("replicas"))
    waiting_for = f"condition Available=True with {want} updated, available replicas"
    if updated < want:
        return _waiting(f"{updated}/{want} replicas updated", waiting_for)
    if total > want:
        return _waiting(f"{total - want} old replicas pending termination", waiting_for)
    if available < want:
        return _waiting(f"{available}/{want} replicas available", waiting_for)
    if ready < want:
        return _waiting(f"{ready}/{want} replicas ready", waiting_for)
    if want > 0 and not _is(conds.get("Available"), "True"):
        return _waiting("condition Available is not True", waiting_for)
    return Health("current", f"{available}/{want} replicas available")


def _statefulset(obj: Mapping[str, Any]) -> Health:
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    if (spec.get("updateStrategy") or {}).get("type") == "OnDelete":
        return CURRENT
    want = _int(spec.get("replicas"), 1)
    waiting_for = f"{want} ready replicas at the update revision"
    ready, current = _int(st.get("readyReplicas")), _int(st.get("currentReplicas"))
    updated = _int(st.get("updatedReplicas"))
    if _int(st.get("replicas")) > want:
        return _waiting("pending termination of extra replicas", waiting_for)
    if ready < want:
        return _waiting(f"{ready}/{want} replicas ready", waiting_for)
    partition = _int(
        ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition")
    )
    if partition and updated < want - partition:
        return _waiting(f"{updated}/{want - partition} replicas updated (partition)", waiting_for)
    if not partition and current < want:
        return _waiting(f"{current}/{want} replicas at the current revision", waiting_for)
    if not partition and st.get("currentRevision") != st.get("updateRevision"):
        return _waiting("currentRevision != updateRevision", waiting_for)
    return Health("current", f"{ready}/{want} replicas ready")


def _daemonset(obj: Mapping[str, Any]) -> Health:
    st = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    # The create response already has a status of zeros (desired 0 of 0): until the
    # controller wrote observedGeneration, the counts say nothing (kstatus does the same).
    if "desiredNumberScheduled" not in st or (
        isinstance(generation, int) and not isinstance(st.get("observedGeneration"), int)
    ):
        return _waiting(
            "the DaemonSet controller has not observed it yet",
            "the controller to observe the DaemonSet and count its pods",
        )
    want = _int(st.get("desiredNumberScheduled"))
    waiting_for = f"{want} scheduled, updated and available pods"
    for field, label in (
        ("currentNumberScheduled", "scheduled"),
        ("updatedNumberScheduled", "updated"),
        ("numberAvailable", "available"),
        ("numberReady", "ready"),
    ):
        have = _int(st.get(field))
        if have < want:
            return _waiting(f"{have}/{want} pods {label}", waiting_for)
    return Health("current", f"{want}/{want} pods available")


def _job(obj: Mapping[str, Any]) -> Health:
    conds = _conditions(obj)
    if _is(conds.get("Failed"), "True"):
        c = conds["Failed"]
        return Health("failed", f"Job failed: {c.get('reason', '')} {c.get('message', '')}".strip())
    if _is(conds.get("Complete"), "True"):
        return Health("current", "Job complete")
    st = obj.get("status") or {}
    return _waiting(
        f"{_int(st.get('succeeded'))} succeeded, {_int(st.get('active'))} active",
        "condition Complete=True",
    )


def _pvc(obj: Mapping[str, Any]) -> Health:
    phase = (obj.get("status") or {}).get("phase")
    if phase == "Bound":
        return Health("current", "Bound")
    return _waiting(f"phase {phase or 'unknown'}", "phase Bound")


def _crd(obj: Mapping[str, Any]) -> Health:
    conds = _conditions(obj)
    if _is(conds.get("NamesAccepted"), "False"):
        return Health("failed", f"names not accepted: {conds['NamesAccepted'].get('message', '')}")
    if _is(conds.get("Established"), "True"):
        return Health("current", "Established")
    return _waiting("not established yet", "condition Established=True")


def _service(obj: Mapping[str, Any]) -> Health:
    if (obj.get("spec") or {}).get("type") != "LoadBalancer":
        return CURRENT
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if ingress:
        return Health("current", "load balancer has an ingress")
    return _waiting(NO_LOAD_BALANCER, "status.loadBalancer.ingress")


NO_LOAD_BALANCER = (
    "no load balancer address yet: the cluster's load balancer controller (a cloud "
    "provider's, MetalLB, ...) gives a LoadBalancer Service its address; a cluster without "
    "one never does (use type ClusterIP or NodePort there, or apply with --no-wait)"
)


def _pod(obj: Mapping[str, Any]) -> Health:
    phase = (obj.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return Health("current", "Succeeded")
    if phase == "Failed":
        return Health("failed", "pod failed")
    if _is(_conditions(obj).get("Ready"), "True"):
        return Health("current", "Ready")
    return _waiting(f"phase {phase or 'Pending'}", "condition Ready=True")


_RULES = {
    "Deployment": _deployment,
    "StatefulSet": _statefulset,
    "DaemonSet": _daemonset,
    "Job": _job,
    "PersistentVolumeClaim": _pvc,
    "CustomResourceDefinition": _crd,
    "Service": _service,
    "Pod": _pod,
}
