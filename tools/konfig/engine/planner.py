"""Planning one stack: prior inventory × compiled spec × live cluster → changes.

The three-way table of ENGINE.md, per object id:

==========  ======  ======  ==========================================================
prior       plan    live    action
==========  ======  ======  ==========================================================
–           yes     –       create
–           yes     yes     update / unchanged (adopt; an object another inventory owns
                            is an error)
yes         yes     –       create (deleted out of band: drift)
yes         yes     yes     update / unchanged
yes         –       yes     delete (prune; only when this inventory provably owns it)
yes         –       –       unchanged (already gone: dropped from the inventory)
==========  ======  ======  ==========================================================

"update or unchanged" compares the server's ``dryRun=All`` server-side-apply result
with the live object (see :mod:`konfig.engine.diff`). A dry-run rejected for an immutable
field makes the change a **replace**. An object whose CustomResourceDefinition or
Namespace is created by the same plan cannot be dry-run yet: it is a create
"validated at apply". Nothing here writes to the cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from konfig.engine import inventory
from konfig.engine.diff import compare, scrub, secret_values
from konfig.engine.guards import foreign_owner
from konfig.engine.inventory import LABEL_PART_OF
from konfig.engine.kube import Kube, KubeApiError, UnknownKindError, describe
from konfig.engine.plan import Action, Change, PlanError, StackPlan
from konfig.repo.layout import Stack
from konfig.spec import Spec

CRD_API_VERSIONS = ("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")
DEFAULT_WORKERS = 8
RACE_RETRIES = 3
LIST_THRESHOLD = 3  # planned objects of one kind in one namespace: LIST instead of GETs


@dataclass(frozen=True)
class _Ref:
    id: str
    api_version: str
    kind: str
    namespace: str | None
    name: str

    def describe(self) -> str:
        return describe(self.api_version, self.kind, self.name, self.namespace)


@dataclass
class _Planned:
    ref: _Ref
    desired: dict[str, Any]
    deferred: str = ""  # why the dry-run must wait for apply
    live: dict[str, Any] | None = None
    dry: dict[str, Any] | None = None
    immutable: tuple[str, ...] = ()
    problem: str = ""


def _ref_from_manifest(resource_id: str, manifest: Mapping[str, Any]) -> _Ref:
    meta = manifest.get("metadata") or {}
    ns = meta.get("namespace")
    return _Ref(
        resource_id,
        str(manifest.get("apiVersion", "")),
        str(manifest.get("kind", "")),
        str(ns) if ns else None,
        str(meta.get("name", "")),
    )


def _ref_from_id(kube: Kube, resource_id: str) -> _Ref | None:
    """Parse ``apiVersion:Kind[:namespace]:name``; None when the kind no longer exists."""
    api_version, _, rest = resource_id.partition(":")
    kind, _, rest = rest.partition(":")
    try:
        namespaced = kube.is_namespaced(api_version, kind)
    except UnknownKindError:
        return None
    if namespaced:
        namespace, _, name = rest.partition(":")
        return _Ref(resource_id, api_version, kind, namespace, name)
    # Cluster-scoped names may contain ':' (e.g. ClusterRole system:foo).
    return _Ref(resource_id, api_version, kind, None, rest)


def _crds_in(spec: Spec | None) -> dict[tuple[str, str], str]:
    """(group, kind) → CRD name, for every CustomResourceDefinition the plan creates."""
    found: dict[tuple[str, str], str] = {}
    for res in spec.resources if spec else ():
        attrs = res.attributes
        if attrs.get("apiVersion") in CRD_API_VERSIONS and attrs.get("kind") == (
            "CustomResourceDefinition"
        ):
            crd_spec = attrs.get("spec") or {}
            kind = (crd_spec.get("names") or {}).get("kind")
            group = crd_spec.get("group")
            if kind and group:
                found[(str(group), str(kind))] = res.name
    return found


def _namespaces_in(spec: Spec | None) -> set[str]:
    return {
        r.name
        for r in (spec.resources if spec else ())
        if r.api_version == "v1" and r.kind == "Namespace"
    }


def _merged(live: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """``desired`` laid over ``live`` (maps merged, lists replaced): what a replace yields."""
    out = copy.deepcopy(dict(live))
    for key, value in desired.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _version(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


def plan_stack(
    kube: Kube,
    stack: Stack,
    spec: Spec | None,
    prior: inventory.Inventory | None,
    *,
    deleted: bool = False,
    workers: int = DEFAULT_WORKERS,
) -> StackPlan:
    """Plan one stack against the cluster. Raises PlanError / KubeError; never writes."""
    set_id = inventory.applyset_id(inventory.inventory_name(stack.path))
    prior_ids = prior.ids() if prior else frozenset()
    crds = _crds_in(spec)
    namespaces = _namespaces_in(spec)
    problems: list[str] = []

    # Discovery first, in this thread: the discovery cache is not thread-safe.
    planned: list[_Planned] = []
    for res in spec.resources if spec else ():
        desired = inventory.label_member(res.attributes, set_id)
        ref = _ref_from_manifest(res.id, desired)
        item = _Planned(ref, desired)
        try:
            info = kube.resource(ref.api_version, ref.kind)
        except UnknownKindError as exc:
            crd = crds.get((res.group, ref.kind))
            if crd is None:
                problems.append(f"{ref.describe()}: {exc.message}")
                continue
            item.deferred = f"its CustomResourceDefinition {crd} is created by this plan"
            planned.append(item)
            continue
        if info.namespaced and not ref.namespace:
            problems.append(
                f"{ref.describe()}: {ref.kind} is namespaced but the manifest has no "
                "metadata.namespace"
            )
            continue
        if not info.namespaced and ref.namespace:
            # The server ignores it on the path; drop it so the body matches the path.
            item.desired["metadata"] = {
                k: v for k, v in item.desired["metadata"].items() if k != "namespace"
            }
            item.ref = _Ref(ref.id, ref.api_version, ref.kind, None, ref.name)
        planned.append(item)
    planned_ids = {p.ref.id for p in planned} | {r.id for r in (spec.resources if spec else ())}
    pruned: list[_Ref | str] = []
    for member_id in sorted(prior_ids - planned_ids):
        pruned.append(_ref_from_id(kube, member_id) or member_id)

    # Objects this stack already owns carry its part-of label: one LIST per kind and
    # namespace reads them all, instead of a GET each (what the API server spends its
    # time on). Anything the list does not return is read with a GET.
    groups: dict[tuple[str, str, str | None], int] = {}
    for item in planned:
        if not item.deferred:
            key = (item.ref.api_version, item.ref.kind, item.ref.namespace)
            groups[key] = groups.get(key, 0) + 1
    batched = [key for key, count in groups.items() if count >= LIST_THRESHOLD]
    selector = f"{LABEL_PART_OF}={set_id}"

    def prefetch(key: tuple[str, str, str | None]) -> dict[str, dict[str, Any]]:
        try:
            listed = kube.list(key[0], key[1], key[2], label_selector=selector)
        except KubeApiError:
            return {}  # e.g. no "list" permission: fall back to GETs
        return {str(o["metadata"]["name"]): o for o in listed}

    prefetched: dict[tuple[str, str, str | None], dict[str, dict[str, Any]]] = {}

    def examine(item: _Planned) -> _Planned:
        if item.deferred:
            return item
        ref = item.ref
        known = prefetched.get((ref.api_version, ref.kind, ref.namespace), {})
        try:
            for attempt in range(RACE_RETRIES):
                if attempt == 0 and ref.name in known:
                    item.live = known[ref.name]
                else:
                    item.live = kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)
                item.dry = kube.apply(item.desired, dry_run=True, force=True)
                # The dry-run result is based on the object as stored at that moment; when
                # a controller wrote in between (e.g. the Deployment revision annotation),
                # the two disagree in fields nobody planned: read both again.
                if _version(item.live) in ("", _version(item.dry)):
                    break
        except KubeApiError as exc:
            failure = exc.failure
            if failure.immutable_fields and item.live is not None:
                item.immutable = failure.immutable_fields
            elif failure.namespace_missing and failure.namespace_missing in namespaces:
                item.deferred = f"its Namespace {failure.namespace_missing} is created by this plan"
            else:
                item.problem = exc.message
        return item

    def fetch(ref: _Ref) -> tuple[_Ref, dict[str, Any] | None]:
        return ref, kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        prefetched.update(zip(batched, pool.map(prefetch, batched), strict=True))
        examined = list(pool.map(examine, planned))
        fetched = list(pool.map(fetch, [p for p in pruned if isinstance(p, _Ref)]))

    changes: list[Change] = []
    for item in examined:
        if item.problem:
            problems.append(item.problem)
            continue
        change = _planned_change(item, set_id, item.ref.id in prior_ids)
        if isinstance(change, str):
            problems.append(change)
        else:
            changes.append(change)

    live_by_id = {ref.id: (ref, live) for ref, live in fetched}
    for entry in pruned:
        if isinstance(entry, str):
            changes.append(_gone(entry, "its kind no longer exists on the server"))
            continue
        ref, live = live_by_id[entry.id]
        changes.append(_pruned_change(ref, live, prior, deleted=deleted))

    if problems:
        secrets: set[str] = set()
        for item in planned:
            secrets |= secret_values(item.desired) | secret_values(item.live)
        raise PlanError(stack.path, [scrub(p, secrets) for p in problems])

    return StackPlan(
        path=stack.path,
        context=kube.context,
        deleted=deleted,
        spec_digest=spec.digest() if spec is not None else None,
        prior_commit=(prior.commit or None) if prior else None,
        prior_digest=(prior.spec_digest or None) if prior else None,
        changes=tuple(sorted(changes, key=lambda c: c.id)),
    )


def _change(
    ref: _Ref,
    action: Action,
    reason: str,
    *,
    validated: bool,
    desired: dict[str, Any] | None,
    live: dict[str, Any] | None,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> Change:
    comparison = compare(before, after, name=ref.id)
    return Change(
        id=ref.id,
        api_version=ref.api_version,
        kind=ref.kind,
        namespace=ref.namespace,
        name=ref.name,
        action=action,
        reason=reason,
        validated=validated,
        desired=desired,
        live=live,
        fields=comparison.fields,
        diff=comparison.diff,
    )


def _planned_change(item: _Planned, set_id: str, in_prior: bool) -> Change | str:
    ref = item.ref
    if item.deferred:
        return _change(
            ref,
            "create",
            f"validated at apply: {item.deferred}",
            validated=False,
            desired=item.desired,
            live=None,
            before=None,
            after=item.desired,
        )
    live = item.live
    if live is None:
        reason = (
            "in the inventory but not in the cluster: deleted out of band (drift)"
            if in_prior
            else "not in the cluster"
        )
        return _change(
            ref,
            "create",
            reason,
            validated=True,
            desired=item.desired,
            live=None,
            before=None,
            after=item.dry,
        )
    owner = foreign_owner(live, set_id)
    if owner is not None:
        return (
            f"{ref.describe()} belongs to another inventory ({LABEL_PART_OF}={owner}); "
            "konfig will not take it over: remove it from this stack, or from the other one"
        )
    if item.immutable:
        fields = ", ".join(item.immutable)
        return _change(
            ref,
            "replace",
            f"immutable field changed ({fields}): apply must delete and re-create it",
            validated=False,
            desired=item.desired,
            live=live,
            before=live,
            after=_merged(live, item.desired),
        )
    comparison = compare(live, item.dry, name=ref.id)
    adopt = "" if in_prior else "; not in the inventory yet: apply adopts it"
    if comparison.changed:
        count = len(comparison.fields)
        reason = f"differs from the cluster in {count} field{'s' if count != 1 else ''}{adopt}"
        action: Action = "update"
    else:
        reason = f"matches the cluster{adopt}"
        action = "unchanged"
    return Change(
        id=ref.id,
        api_version=ref.api_version,
        kind=ref.kind,
        namespace=ref.namespace,
        name=ref.name,
        action=action,
        reason=reason,
        validated=True,
        desired=item.desired,
        live=live,
        fields=comparison.fields,
        diff=comparison.diff,
    )


def _gone(resource_id: str, why: str) -> Change:
    api_version, _, rest = resource_id.partition(":")
    kind, _, rest = rest.partition(":")
    namespace, _, name = rest.rpartition(":")
    return Change(
        id=resource_id,
        api_version=api_version,
        kind=kind,
        namespace=namespace or None,
        name=name,
        action="unchanged",
        reason=f"not in the plan and already gone ({why}): dropped from the inventory",
        validated=False,
        desired=None,
        live=None,
        fields=(),
        diff="",
    )


def _pruned_change(
    ref: _Ref, live: dict[str, Any] | None, prior: inventory.Inventory | None, *, deleted: bool
) -> Change:
    if live is None:
        return _gone(ref.id, "not in the cluster")
    if prior is None or not prior.owns(ref.id, live):
        return _change(
            ref,
            "unchanged",
            "not in the plan, but no longer provably owned by this stack (its "
            f"{LABEL_PART_OF} label or UID differs): left alone, dropped from the inventory",
            validated=False,
            desired=None,
            live=live,
            before=None,
            after=None,
        )
    reason = "the stack was deleted" if deleted else "removed from the stack"
    return _change(
        ref,
        "delete",
        f"{reason}: apply prunes it",
        validated=False,
        desired=None,
        live=live,
        before=live,
        after=None,
    )
