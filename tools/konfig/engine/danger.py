"""Danger classes: what a reviewer must not miss about a planned change, as plain data.

A stack's plan (:class:`~konfig.engine.plan.StackPlan`) says what apply does; this module
says which of those changes are dangerous and why, one :class:`~konfig.engine.plan.Danger`
per class that applies (docs/danger.md):

- ``destroy``: a delete (removed from the stack, the stack deleted, or renamed);
- ``replace``: delete + create because an immutable field changed (the dry-run's answer,
  or a field of :data:`IMMUTABLE` when the server could not answer yet);
- ``rollout``: a workload's pod template changed, or a ConfigMap/Secret a workload of
  the stack mounts or references changed;
- ``capacity``: replicas to 0, a PodDisruptionBudget that lets every pod go, an HPA's
  maximum lowered;
- ``access``: RBAC rules or bindings widened or removed, a binding to cluster-admin;
- ``cascade``: a Namespace or CRD deleted, with the live count of what goes with it;
- ``data``: a PersistentVolumeClaim/PersistentVolume deleted or replaced, a StatefulSet
  with volume claim templates deleted or replaced, a Terraform resource destroyed or
  replaced;
- ``deprecated``: an API version removed or deprecated in the declared Kubernetes version
  or the next minor (``data/kubernetes/deprecated-apis.yaml``, bundled, never downloaded).

:func:`assess` takes a plan and returns it with each change's ``dangers`` set; the live
counts a ``cascade`` needs are read once through a
:class:`~konfig.engine.guards.ClusterReader` (:func:`held_objects`). Everything else is
computed from the plan alone, so it works on plain data.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

import yaml

from konfig.engine.diff import compare
from konfig.engine.guards import (
    CLUSTER_MADE_KINDS,
    ClusterReader,
    DangerGuard,
    confirmation_digest,
    others_in_namespace,
    others_of_kind,
    served_kind,
)
from konfig.engine.kube import KubeApiError, KubeError
from konfig.engine.plan import Change, Danger, StackPlan
from konfig.errors import KonfigError

PREVIOUS_NAME_ANNOTATION = "konfig.io/previous-name"
# said of a danger that comes only from fields someone changed in the cluster
DRIFT = " (drift: the cluster already differs; apply sets it back)"
RENAME_SIMILARITY = 0.9  # a delete and a create this alike (their fields) are a rename
# the kinds whose deletion deletes other objects with them (a ``cascade``)
CASCADING = frozenset({"Namespace", "CustomResourceDefinition"})

# Known immutable fields, per (group, kind): a change to one (or below it) is a replace
# even when the server's dry-run could not tell yet (e.g. validated at apply).
IMMUTABLE: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("apps", "Deployment"): ("spec.selector",),
    ("apps", "ReplicaSet"): ("spec.selector",),
    ("apps", "DaemonSet"): ("spec.selector",),
    ("apps", "StatefulSet"): (
        "spec.selector",
        "spec.serviceName",
        "spec.volumeClaimTemplates",
        "spec.podManagementPolicy",
    ),
    ("batch", "Job"): ("spec.selector", "spec.template", "spec.completionMode", "spec.completions"),
    ("", "Service"): ("spec.clusterIP", "spec.clusterIPs"),
    ("", "PersistentVolumeClaim"): (
        "spec.storageClassName",
        "spec.accessModes",
        "spec.volumeName",
        "spec.volumeMode",
        "spec.selector",
        "spec.dataSource",
    ),
    ("", "Secret"): ("type",),
    ("storage.k8s.io", "StorageClass"): (
        "provisioner",
        "parameters",
        "reclaimPolicy",
        "volumeBindingMode",
    ),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("roleRef",),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ("roleRef",),
}

WORKLOADS = frozenset(
    {
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "DaemonSet"),
        ("apps", "ReplicaSet"),
    }
)
_RBAC = "rbac.authorization.k8s.io"
_ADMIN_ROLES = frozenset({"cluster-admin", "admin"})


def group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def _name(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("name", ""))


def _annotation(obj: Mapping[str, Any] | None, key: str) -> str | None:
    value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(key)
    return None if value is None else str(value)


def _dig(obj: Mapping[str, Any] | None, *keys: str) -> Any:
    node: Any = obj
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


# --- deprecated API versions ---------------------------------------------------------


@dataclass(frozen=True)
class DeprecatedApi:
    api_version: str
    kind: str
    deprecated: str
    removed: str | None
    use: str | None


@dataclass(frozen=True)
class DeprecationData:
    checked_through: str
    apis: tuple[DeprecatedApi, ...]

    def find(self, api_version: str, kind: str) -> DeprecatedApi | None:
        for api in self.apis:
            if api.api_version == api_version and api.kind == kind:
                return api
        return None


def version_tuple(version: str) -> tuple[int, int]:
    """``"1.32"`` (or ``"v1.32.4"``) as ``(1, 32)``; a ConfigError-like KonfigError else."""
    found = re.findall(r"\d+", version)
    if len(found) < 2:
        raise KonfigError(f"{version!r} is not a Kubernetes version like 1.32")
    return int(found[0]), int(found[1])


def parse_deprecations(data: Any) -> DeprecationData:
    """The deprecation data file's content, checked (a malformed file is an error)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("apis"), list):
        raise KonfigError("deprecated-apis.yaml: expected a mapping with an `apis` list")
    apis: list[DeprecatedApi] = []
    for index, entry in enumerate(data["apis"]):
        if not isinstance(entry, Mapping) or not entry.get("apiVersion") or not entry.get("kind"):
            raise KonfigError(f"deprecated-apis.yaml: apis[{index}] needs apiVersion and kind")
        removed = entry.get("removed")
        deprecated = str(entry.get("deprecated") or "")
        version_tuple(deprecated)
        if removed is not None and version_tuple(str(removed)) < version_tuple(deprecated):
            raise KonfigError(f"deprecated-apis.yaml: apis[{index}] removed before deprecated")
        apis.append(
            DeprecatedApi(
                str(entry["apiVersion"]),
                str(entry["kind"]),
                deprecated,
                None if removed is None else str(removed),
                None if entry.get("use") is None else str(entry["use"]),
            )
        )
    return DeprecationData(str(data.get("checkedThrough", "")), tuple(apis))


@functools.cache
def bundled_deprecations() -> DeprecationData:
    """The data file shipped with Konfig (``konfig/data/kubernetes/deprecated-apis.yaml``)."""
    path = resources.files("konfig").joinpath("data", "kubernetes", "deprecated-apis.yaml")
    return parse_deprecations(yaml.safe_load(path.read_text(encoding="utf-8")))


def deprecation(
    api_version: str, kind: str, version: str, data: DeprecationData | None = None
) -> str | None:
    """Why ``kind`` at ``api_version`` is ``deprecated`` for a cluster at ``version``
    (removed in it or the next minor, or deprecated by then), or None."""
    found = (data or bundled_deprecations()).find(api_version, kind)
    if found is None:
        return None
    wanted = version_tuple(version)
    following = (wanted[0], wanted[1] + 1)
    use = f"; use {found.use}" if found.use else ""
    if found.removed is not None:
        removed = version_tuple(found.removed)
        if removed <= wanted:
            return f"{api_version} {kind} is not served since Kubernetes {found.removed}{use}"
        if removed <= following:
            return f"{api_version} {kind} is removed in Kubernetes {found.removed}{use}"
    if version_tuple(found.deprecated) <= following:
        return f"{api_version} {kind} is deprecated since Kubernetes {found.deprecated}{use}"
    return None


# --- renames -------------------------------------------------------------------------


def _flat(obj: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _flat(value, f"{prefix}.{key}")
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from _flat(value, f"{prefix}[{index}]")
    else:
        yield prefix, repr(obj)


_IDENTITY = ("metadata", "status")


def similarity(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> float:
    """How alike two objects are, leaf by leaf, leaving out metadata and status
    (labels and annotations kept): 1.0 identical, 0.0 nothing in common."""

    def leaves(obj: Mapping[str, Any] | None) -> set[tuple[str, str]]:
        body = {k: v for k, v in (obj or {}).items() if k not in _IDENTITY}
        meta = (obj or {}).get("metadata") or {}
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if "konfig" not in k}
        body["labels"] = labels
        return set(_flat(body))

    left, right = leaves(a), leaves(b)
    if not left and not right:
        return 1.0
    return 2 * len(left & right) / (len(left) + len(right))


def shaped(live: Any, desired: Any) -> Any:
    """``live`` cut to what ``desired`` declares (the server's defaults left out), so
    that comparing them shows what the repository changed; named list items are
    matched by name."""
    if isinstance(live, Mapping) and isinstance(desired, Mapping):
        return {k: shaped(live[k], desired[k]) for k in desired if k in live}
    if isinstance(live, list) and isinstance(desired, list):
        named = all(isinstance(i, Mapping) and "name" in i for i in live + desired)
        if named:
            by_name = {i["name"]: i for i in live}
            return [shaped(by_name[i["name"]], i) for i in desired if i["name"] in by_name]
        if len(live) == len(desired):
            return [shaped(a, b) for a, b in zip(live, desired, strict=True)]
    return live


def renames(changes: Sequence[Change]) -> dict[str, str]:
    """``{deleted id: created id}``: a delete and a create of the same kind (and
    namespace) in one plan that the created object's ``konfig.io/previous-name`` names,
    or that are at least :data:`RENAME_SIMILARITY` alike."""
    deletes = [c for c in changes if c.action == "delete" and c.runtime == "Kubernetes"]
    creates = [c for c in changes if c.action == "create" and c.runtime == "Kubernetes"]
    found: dict[str, str] = {}
    taken: set[str] = set()
    for old in deletes:
        same = [
            c
            for c in creates
            if c.id not in taken
            and c.kind == old.kind
            and group_of(c.api_version) == group_of(old.api_version)
            and c.namespace == old.namespace
        ]
        named = [c for c in same if _annotation(c.desired, PREVIOUS_NAME_ANNOTATION) == old.name]
        if named:
            found[old.id] = named[0].id
            taken.add(named[0].id)
            continue
        scored = sorted(((similarity(old.live, c.desired), c.id) for c in same), reverse=True)
        if scored and scored[0][0] >= RENAME_SIMILARITY:
            found[old.id] = scored[0][1]
            taken.add(scored[0][1])
    return found


# --- what the workloads of a plan reference ------------------------------------------


def pod_spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    spec = _dig(obj, "spec", "template", "spec")
    return spec if isinstance(spec, Mapping) else None


def referenced(obj: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """``(kind, name)`` of the ConfigMaps and Secrets a workload's pods mount or read."""
    spec = pod_spec(obj)
    if spec is None:
        return set()
    found: set[tuple[str, str]] = set()
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, Mapping):
            continue
        if _dig(volume, "configMap", "name"):
            found.add(("ConfigMap", str(volume["configMap"]["name"])))
        if _dig(volume, "secret", "secretName"):
            found.add(("Secret", str(volume["secret"]["secretName"])))
        for source in _dig(volume, "projected", "sources") or []:
            if _dig(source, "configMap", "name"):
                found.add(("ConfigMap", str(source["configMap"]["name"])))
            if _dig(source, "secret", "name"):
                found.add(("Secret", str(source["secret"]["name"])))
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    for container in containers:
        if not isinstance(container, Mapping):
            continue
        for source in container.get("envFrom") or []:
            if _dig(source, "configMapRef", "name"):
                found.add(("ConfigMap", str(source["configMapRef"]["name"])))
            if _dig(source, "secretRef", "name"):
                found.add(("Secret", str(source["secretRef"]["name"])))
        for env in container.get("env") or []:
            if _dig(env, "valueFrom", "configMapKeyRef", "name"):
                found.add(("ConfigMap", str(env["valueFrom"]["configMapKeyRef"]["name"])))
            if _dig(env, "valueFrom", "secretKeyRef", "name"):
                found.add(("Secret", str(env["valueFrom"]["secretKeyRef"]["name"])))
    return found


# --- the classes, one change at a time -----------------------------------------------


@dataclass(frozen=True)
class Context:
    """What classifying one change needs to know of the rest of the plan."""

    deleted: bool = False  # the stack was deleted
    renamed: Mapping[str, str] | None = None  # deleted id -> created id
    users: Mapping[tuple[str | None, str, str], tuple[str, ...]] | None = None
    held: Mapping[str, int] | None = None  # cascade: change id -> live objects it holds
    version: str | None = None  # the stack's declared Kubernetes version


def _destroy(change: Change, ctx: Context) -> Danger | None:
    if change.action != "delete":
        return None
    what = f"{change.kind} {change.name}"
    if change.runtime == "Terraform":
        return Danger("destroy", f"{change.kind} {change.name}: Terraform destroys it")
    renamed = (ctx.renamed or {}).get(change.id)
    if renamed is not None:
        new = renamed.rsplit(":", 1)[-1]
        return Danger(
            "destroy",
            f"{what}: renamed to {new} (the old object is pruned after the new one is healthy)",
        )
    if ctx.deleted:
        return Danger("destroy", f"{what}: the stack was deleted")
    return Danger("destroy", f"{what}: removed from the stack")


def _replace(change: Change) -> Danger | None:
    if change.runtime == "Terraform":
        if change.action == "replace":
            return Danger("replace", f"{change.kind} {change.name}: Terraform replaces it")
        return None
    if change.action == "replace":
        return Danger("replace", f"{change.kind} {change.name}: {change.reason}")
    if change.action != "update":
        return None
    known = IMMUTABLE.get((group_of(change.api_version), change.kind), ())
    hit = sorted({p for f in change.fields for p in known if _under(f.path, p)})
    if not hit:
        return None
    return Danger(
        "replace",
        f"{change.kind} {change.name}: immutable field changed: {', '.join(hit)} "
        "(delete and create)",
    )


def _rollout(change: Change, ctx: Context) -> Danger | None:
    if change.action not in ("update", "replace"):
        return None
    key = (group_of(change.api_version), change.kind)
    template = [f for f in change.fields if _under(f.path, "spec.template")]
    if key in WORKLOADS and template:
        return Danger(
            "rollout",
            f"{change.kind} {change.name}: pod template changed, pods restart"
            + (DRIFT if all(f.drift for f in template) else ""),
        )
    if key in (("", "ConfigMap"), ("", "Secret")):
        users = (ctx.users or {}).get((change.namespace, change.kind, change.name), ())
        if users:
            shown = ", ".join(users[:3]) + (" ..." if len(users) > 3 else "")
            return Danger(
                "rollout",
                f"{change.kind} {change.name} changed: mounted or referenced by {shown}",
            )
    return None


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _capacity(change: Change) -> Danger | None:
    if change.action not in ("create", "update", "replace"):
        return None
    key = (group_of(change.api_version), change.kind)
    what = f"{change.kind} {change.name}"
    for f in change.fields:
        if f.path == "spec.replicas" and _number(f.after) == 0 and change.action != "create":
            return Danger(
                "capacity", f"{what}: replicas {f.before} → 0" + (DRIFT if f.drift else "")
            )
        if key == ("autoscaling", "HorizontalPodAutoscaler") and f.path == "spec.maxReplicas":
            before, after = _number(f.before), _number(f.after)
            if before is not None and after is not None and after < before:
                return Danger("capacity", f"{what}: maxReplicas lowered {before} → {after}")
    if key == ("policy", "PodDisruptionBudget"):
        spec = _dig(change.desired, "spec") or {}
        unavailable, available = spec.get("maxUnavailable"), spec.get("minAvailable")
        if str(unavailable) == "100%" or str(available) in ("0", "0%"):
            return Danger("capacity", f"{what}: allows every pod down at once")
    return None


def _rules(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return [r for r in (obj or {}).get("rules") or [] if isinstance(r, Mapping)]


def _wild(rules: list[Mapping[str, Any]]) -> bool:
    return any("*" in (r.get(k) or []) for r in rules for k in ("verbs", "resources", "apiGroups"))


def _access(change: Change) -> Danger | None:
    if group_of(change.api_version) != _RBAC:
        return None
    what = f"{change.kind} {change.name}"
    if change.action == "delete":
        return Danger("access", f"{what}: removed (whoever it grants loses access)")
    if change.action not in ("create", "update", "replace"):
        return None
    if change.kind.endswith("Binding"):
        role = str(_dig(change.desired, "roleRef", "name") or "")
        if role in _ADMIN_ROLES:
            return Danger("access", f"{what}: binds {role}")
        if change.action != "create" and any(_under(f.path, "subjects") for f in change.fields):
            had = len((change.live or {}).get("subjects") or [])
            has = len((change.desired or {}).get("subjects") or [])
            word = "widened" if has >= had else "narrowed"
            return Danger("access", f"{what}: subjects {word} ({had} → {has})")
        return None
    if change.kind in ("Role", "ClusterRole"):
        rules = _rules(change.desired)
        if _wild(rules) and (change.action == "create" or not _wild(_rules(change.live))):
            return Danger("access", f"{what}: grants * (every verb, resource or group)")
        if change.action != "create" and any(_under(f.path, "rules") for f in change.fields):
            return Danger("access", f"{what}: rules widened or removed")
    return None


def _cascade(change: Change, ctx: Context) -> Danger | None:
    if change.action != "delete" or change.runtime != "Kubernetes":
        return None
    if change.kind not in CASCADING:
        return None
    held = (ctx.held or {}).get(change.id)
    if change.kind == "Namespace":
        count = "" if held is None else f" and the {held} objects it holds"
        return Danger("cascade", f"Namespace {change.name}: deleting it deletes it{count}", held)
    count = "" if held is None else f" and its {held} custom resources"
    return Danger("cascade", f"CRD {change.name}: deleting it deletes it{count}", held)


def _data(change: Change) -> Danger | None:
    if change.action not in ("delete", "replace"):
        return None
    verb = "destroyed" if change.action == "delete" else "replaced"
    what = f"{change.kind} {change.name}"
    if change.runtime == "Terraform":
        return Danger("data", f"{what}: Terraform resource {verb}, with what it stores")
    key = (group_of(change.api_version), change.kind)
    if key in (("", "PersistentVolumeClaim"), ("", "PersistentVolume")):
        return Danger("data", f"{what} {verb}: its volume may be deleted")
    if key == ("apps", "StatefulSet"):
        claims = (_dig(change.live, "spec", "volumeClaimTemplates") or []) + (
            _dig(change.desired, "spec", "volumeClaimTemplates") or []
        )
        if claims:
            return Danger("data", f"{what} {verb}: its pods' volume claims")
    return None


def _deprecated(change: Change, ctx: Context) -> Danger | None:
    if ctx.version is None or change.desired is None or change.runtime != "Kubernetes":
        return None
    if change.action in ("delete", "conflict"):
        return None
    why = deprecation(change.api_version, change.kind, ctx.version)
    return None if why is None else Danger("deprecated", f"{change.kind} {change.name}: {why}")


def classify(change: Change, ctx: Context) -> tuple[Danger, ...]:
    """Every danger of one change, in :data:`~konfig.engine.plan.DANGER_CLASSES` order."""
    found = (
        _destroy(change, ctx),
        _replace(change),
        _rollout(change, ctx),
        _capacity(change),
        _access(change),
        _cascade(change, ctx),
        _data(change),
        _deprecated(change, ctx),
    )
    return tuple(d for d in found if d is not None)


def workload_users(changes: Sequence[Change]) -> dict[tuple[str | None, str, str], tuple[str, ...]]:
    """``(namespace, kind, name)`` of a ConfigMap/Secret -> the workloads of the plan
    (``Kind/name``) whose pods mount or reference it."""
    users: dict[tuple[str | None, str, str], list[str]] = {}
    for change in changes:
        obj = change.desired if change.desired is not None else change.live
        if (group_of(change.api_version), change.kind) not in WORKLOADS:
            continue
        for kind, name in sorted(referenced(obj)):
            users.setdefault((change.namespace, kind, name), []).append(
                f"{change.kind}/{change.name}"
            )
    return {k: tuple(v) for k, v in users.items()}


def held_objects(reader: ClusterReader, changes: Sequence[Change]) -> dict[str, int]:
    """change id -> how many live objects a deleted Namespace or CRD takes with it (not
    counting what the cluster makes itself; a kind we may not list is not counted)."""
    held: dict[str, int] = {}
    doomed = [
        c
        for c in changes
        if c.action == "delete" and c.runtime == "Kubernetes" and c.kind in CASCADING
    ]
    if not doomed:
        return held
    kinds = (
        sorted(set(reader.namespaced_kinds())) if any(c.kind == "Namespace" for c in doomed) else []
    )
    for change in doomed:
        if change.kind == "Namespace":
            listed: list[tuple[str, str, Mapping[str, Any]]] = []
            for api_version, kind in kinds:
                if kind in CLUSTER_MADE_KINDS:
                    continue
                try:
                    items = reader.list(api_version, kind, change.name)
                except KubeApiError:
                    continue
                listed.extend((api_version, kind, obj) for obj in items)
            held[change.id] = len(others_in_namespace(change.name, listed, (), ""))
        else:
            served = served_kind(change.live or {})
            if served is None:
                continue
            try:
                items = reader.list(served[0], served[1])
            except KubeError:
                held[change.id] = 0
                continue
            held[change.id] = len(others_of_kind(served[0], served[1], items, (), ""))
    return held


def assess(
    plan: StackPlan,
    *,
    version: str | None = None,
    reader: ClusterReader | None = None,
) -> StackPlan:
    """``plan`` with each change's dangers (``reader``: the cluster, for the counts of
    a cascade; without it they are not counted). ``version``: the stack's declared
    Kubernetes version (``konfig.yaml`` ``kubernetesVersion``), for ``deprecated``."""
    renamed = renames(plan.changes)
    ctx = Context(
        deleted=plan.deleted,
        renamed=renamed,
        users=workload_users(plan.changes),
        held=held_objects(reader, plan.changes) if reader is not None else None,
        version=version,
    )
    by_id = {c.id: c for c in plan.changes}
    sources = {new: old for old, new in renamed.items()}

    def marked(c: Change) -> Change:
        c = replace(c, dangers=classify(c, ctx))
        if c.id in renamed:
            return replace(c, renamed_to=renamed[c.id])
        if c.id in sources:
            old = by_id[sources[c.id]]
            fields = compare(shaped(old.live, c.desired), c.desired, name=c.id).fields
            return replace(c, renamed_from=old.id, rename_fields=fields)
        return c

    return replace(plan, changes=tuple(marked(c) for c in plan.changes))


def confirmed_cascades(
    plan: StackPlan,
    guard: DangerGuard | None,
    *,
    reader: ClusterReader,
    version: str | None = None,
) -> dict[str, int]:
    """The Namespace and CRD deletions of ``plan`` that are confirmed cascades: their id
    -> the live objects the confirmation counted. A confirmation counts when ``guard``
    holds the plan's confirmation digest, which binds each cascade's live count
    (:func:`~konfig.engine.guards.confirmation_digest`); the prune guards
    ``namespace-in-use`` and ``crd-in-use`` then let the Namespace or CRD go with no
    more than that many objects of other owners in it, or custom resources of its kind
    (else they keep it, as without a confirmation)."""
    given = guard.confirmed.get(plan.path) if guard is not None else None
    if not given or not any(
        c.action == "delete" and c.kind in CASCADING and c.runtime == "Kubernetes"
        for c in plan.changes
    ):
        return {}
    assessed = assess(plan, version=version, reader=reader)
    if confirmation_digest(assessed) not in given:
        return {}
    return {
        c.id: d.objects
        for c in assessed.changes
        if c.kind in CASCADING
        for d in c.dangers
        if d.name == "cascade" and d.objects is not None
    }
