"""What one cluster holds for Konfig: every inventory, its members' live objects,
their health and drift, read with one LIST per kind (not one GET per object).

1. one LIST of the inventory ConfigMaps in ``konfig-system``;
2. per (apiVersion, kind) among all members: one cluster-wide LIST with the label
   selector ``applyset.kubernetes.io/part-of`` (every member carries it). Where
   the identity may not list cluster-wide (403), per namespace; where it may not
   list at all, a GET per object;
3. a GET for each member the lists did not return (its part-of label may have been
   removed by hand: it is then drifted, not gone).

Health is :func:`konfig.engine.health.status` (the kstatus rules apply waits for) and
drift :func:`konfig.engine.drift.object_drift`. Nothing here writes, prints or reads the
environment.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from konfig.engine import health
from konfig.engine.drift import ObjectDrift, object_drift
from konfig.engine.inventory import LABEL_PART_OF, Inventory, Member
from konfig.engine.inventory_store import scan_inventories
from konfig.engine.kube import Kube, KubeApiError, UnknownKindError
from konfig.ids import ObjectRef, is_terraform_id, parse_id

WORKERS = 8


@dataclass(frozen=True)
class ObjectStatus:
    """One inventory member as it is in the cluster now."""

    id: str
    health: health.Health
    drift: ObjectDrift
    # the live object's labels (ignore rules that select by labels: engine.ignore)
    labels: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def runtime(self) -> str:
        """``Terraform`` for a resource OpenTofu manages, else ``Kubernetes``."""
        return "Terraform" if is_terraform_id(self.id) else "Kubernetes"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "runtime": self.runtime,
            "health": {"state": self.health.state, "message": self.health.message},
            "drift": self.drift.to_dict(),
        }


@dataclass(frozen=True)
class InventoryStatus:
    """An inventory and the state of every member it records."""

    inventory: Inventory
    objects: tuple[ObjectStatus, ...]

    def health_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("current", "in_progress", "failed", "not_found"), 0)
        for o in self.objects:
            counts[o.health.state] += 1
        return counts

    @property
    def drifted(self) -> tuple[ObjectStatus, ...]:
        return tuple(o for o in self.objects if o.drift.drifted)

    @property
    def drift_unknown(self) -> int:
        return sum(1 for o in self.objects if o.drift.state == "unknown")

    @property
    def terraform(self) -> tuple[ObjectStatus, ...]:
        """The stack's Terraform resources (after its Kubernetes objects)."""
        return tuple(o for o in self.objects if o.runtime == "Terraform")

    def unknown_reasons(self) -> dict[str, int]:
        """Why drift is unknown -> how many objects: Terraform resources not checked
        (their reason), Kubernetes objects applied before drift was recorded."""
        out: dict[str, int] = {}
        for o in self.objects:
            if o.drift.state == "unknown":
                why = o.drift.message if o.runtime == "Terraform" else "not recorded"
                out[why] = out.get(why, 0) + 1
        return out


@dataclass(frozen=True)
class ClusterSurvey:
    """Every Konfig inventory in one cluster context, keyed by stack path."""

    context: str
    server: str
    stacks: dict[str, InventoryStatus] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # inventories that could not be read


def survey(kube: Kube, *, only: Iterable[str] | None = None) -> ClusterSurvey:
    """Read every inventory of the cluster (or those of the stack paths ``only``) and
    the live state of their members."""
    inventories, problems = scan_inventories(kube)
    wanted = None if only is None else set(only)
    chosen = [i for i in inventories if wanted is None or i.stack_path in wanted]
    live = _live_objects(kube, [m for i in chosen for m in i.members])
    stacks: dict[str, InventoryStatus] = {}
    for inv in chosen:
        objects = []
        for m in inv.members:
            obj = live.get(m.id)
            objects.append(
                ObjectStatus(
                    m.id,
                    health.COLLECTED if obj is None and m.finished else health.status(obj),
                    object_drift(
                        m.id,
                        inv.applied_fields.get(m.id) if inv.applied_fields is not None else None,
                        m.uid,
                        obj,
                        finished=bool(m.finished),
                    ),
                    _labels(obj),
                )
            )
        stacks[inv.stack_path] = InventoryStatus(inv, tuple(objects))
    return ClusterSurvey(kube.context, kube.server, stacks, tuple(problems))


def _labels(obj: dict[str, Any] | None) -> tuple[tuple[str, str], ...]:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return tuple(sorted((str(k), str(v)) for k, v in labels.items()))


def _live_objects(kube: Kube, members: Sequence[Member]) -> dict[str, dict[str, Any] | None]:
    """Member id → live object (None: not in the cluster, or its kind is gone)."""
    by_kind: dict[tuple[str, str], list[str]] = {}
    for m in members:
        api_version, _, rest = m.id.partition(":")
        by_kind.setdefault((api_version, rest.partition(":")[0]), []).append(m.id)
    # Discovery in this thread (the discovery cache is not thread-safe), lists in parallel.
    refs: dict[tuple[str, str], list[tuple[str, ObjectRef]]] = {}
    out: dict[str, dict[str, Any] | None] = {}
    for key in sorted(by_kind):
        try:
            namespaced = kube.is_namespaced(*key)
        except UnknownKindError:
            out.update(dict.fromkeys(by_kind[key]))  # the kind (its CRD) is gone
            continue
        refs[key] = [(i, parse_id(i, namespaced=namespaced)) for i in by_kind[key]]

    def listed(key: tuple[str, str]) -> list[dict[str, Any]]:
        return _list_kind(kube, key, [r for _, r in refs[key]])

    found: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        kinds = list(refs)
        for key, items in zip(kinds, pool.map(listed, kinds), strict=True):
            for obj in items:
                meta = obj.get("metadata") or {}
                found[(*key, meta.get("namespace") or None, str(meta.get("name", "")))] = obj
        unseen: list[tuple[str, ObjectRef]] = []
        for key, pairs in refs.items():
            for member_id, ref in pairs:
                hit = found.get((*key, ref.namespace, ref.name))
                if hit is None:
                    unseen.append((member_id, ref))
                out[member_id] = hit

        def fetch(item: tuple[str, ObjectRef]) -> tuple[str, dict[str, Any] | None]:
            member_id, ref = item
            return member_id, kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)

        for member_id, got in pool.map(fetch, unseen):
            out[member_id] = got
    return out


def _list_kind(kube: Kube, key: tuple[str, str], refs: Sequence[ObjectRef]) -> list[dict[str, Any]]:
    """Konfig-labelled objects of one kind: cluster-wide, else per namespace, else none."""
    selector = LABEL_PART_OF  # "exists": every member of every inventory
    try:
        return kube.list(key[0], key[1], None, label_selector=selector)
    except KubeApiError as exc:
        if exc.failure.status != 403:
            raise
    items: list[dict[str, Any]] = []
    for namespace in sorted({r.namespace for r in refs if r.namespace}):
        try:
            items += kube.list(key[0], key[1], namespace, label_selector=selector)
        except KubeApiError as exc:
            if exc.failure.status != 403:
                raise
    return items  # what is still missing is read with a GET each
