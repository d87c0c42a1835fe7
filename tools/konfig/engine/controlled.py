"""The live preview of a stack in pull delivery: what its controller will change.

A stack in pull delivery is applied by a controller in the cluster, not by konfig
(docs/pull.md). Flux's kustomize-controller applies the objects of the stack's folder
on the rendered branch with server-side apply, forced, as the field manager
``kustomize-controller``, adding its owner labels (``kustomize.toolkit.fluxcd.io/name``
and ``/namespace``, from the Kustomization that reconciles the folder), and prunes the
objects it applied before that are no longer in the folder. :func:`plan_controlled`
dry-runs exactly that against the cluster: each object to publish as the controller
would send it (``dryRun=All``, forced, its field manager and labels), compared with
the live object; each object of the folder as published now that the new folder no
longer has, a delete. No konfig inventory, no ApplySet label, no ownership guard (the
controller forces). Nothing here writes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from konfig.engine.kube import Kube, KubeApiError, UnknownKindError
from konfig.engine.plan import Action, Change, PlanError, StackPlan, make_change
from konfig.ids import ObjectRef, resource_id
from konfig.masking import scrub, secret_values
from konfig.words import plural

FLUX_MANAGER = "kustomize-controller"
FLUX_NAME_LABEL = "kustomize.toolkit.fluxcd.io/name"
FLUX_NAMESPACE_LABEL = "kustomize.toolkit.fluxcd.io/namespace"


def flux_labels(kustomization: str) -> dict[str, str]:
    """The owner labels kustomize-controller sets on what the Kustomization
    ``<namespace>/<name>`` applies."""
    namespace, _, name = kustomization.partition("/")
    return {FLUX_NAME_LABEL: name, FLUX_NAMESPACE_LABEL: namespace}


def _ref(manifest: Mapping[str, Any]) -> ObjectRef:
    meta = manifest.get("metadata") or {}
    ns = meta.get("namespace")
    return ObjectRef(
        str(manifest.get("apiVersion", "")),
        str(manifest.get("kind", "")),
        str(ns) if ns else None,
        str(meta.get("name", "")),
    )


def _labelled(manifest: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(dict(manifest))
    if labels:
        meta = out.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
    return out


def _change(
    ref: ObjectRef,
    action: Action,
    reason: str,
    *,
    validated: bool,
    desired: dict[str, Any] | None,
    live: dict[str, Any] | None,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> Change:
    rid = resource_id(desired or live or {})
    return make_change(
        rid, ref, action, reason, validated=validated, desired=desired, live=live,
        before=before, after=after,
    )  # fmt: skip


def plan_controlled(
    kube: Kube,
    path: str,
    objects: Sequence[Mapping[str, Any]],
    published: Sequence[Mapping[str, Any]] = (),
    *,
    manager: str = FLUX_MANAGER,
    labels: Mapping[str, str] | None = None,
    spec_digest: str | None = None,
) -> StackPlan:
    """What the controller changes live when the stack ``path``'s folder goes from
    ``published`` (the objects the rendered branch has now) to ``objects``: each object
    dry-run as ``manager`` with ``labels`` added (create, update, unchanged), each
    published object no longer there a delete (the controller prunes it). Raises
    :class:`PlanError` with every problem the server reports."""
    labels = dict(labels or {})
    namespaces = {
        str((o.get("metadata") or {}).get("name"))
        for o in objects
        if o.get("kind") == "Namespace" and o.get("apiVersion") == "v1"
    }
    crds = {
        (
            str((o.get("spec") or {}).get("group")),
            str((o.get("spec") or {}).get("names", {}).get("kind")),
        )
        for o in objects
        if o.get("kind") == "CustomResourceDefinition"
    }
    problems: list[str] = []
    changes: list[Change] = []
    wanted: set[str] = set()
    for manifest in objects:
        desired = _labelled(manifest, labels)
        ref = _ref(desired)
        wanted.add(resource_id(desired))
        try:
            info = kube.resource(ref.api_version, ref.kind)
        except UnknownKindError as exc:
            group = ref.api_version.rpartition("/")[0]
            if (group, ref.kind) not in crds:
                problems.append(f"{ref.describe()}: {exc.message}")
                continue
            changes.append(
                _change(
                    ref,
                    "create",
                    "validated when the controller applies it: its CustomResourceDefinition "
                    "is in the same folder",
                    validated=False,
                    desired=desired,
                    live=None,
                    before=None,
                    after=desired,
                )
            )
            continue
        if not info.namespaced and ref.namespace:
            desired["metadata"].pop("namespace", None)
            ref = ObjectRef(ref.api_version, ref.kind, None, ref.name)
        try:
            live = kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)
            dry = kube.apply(desired, dry_run=True, force=True, field_manager=manager)
        except KubeApiError as exc:
            missing = exc.failure.namespace_missing
            if missing and missing in namespaces:
                changes.append(
                    _change(
                        ref,
                        "create",
                        f"validated when the controller applies it: its Namespace {missing} "
                        "is in the same folder",
                        validated=False,
                        desired=desired,
                        live=None,
                        before=None,
                        after=desired,
                    )
                )
            else:
                problems.append(exc.message)
            continue
        if live is None:
            changes.append(
                _change(
                    ref,
                    "create",
                    f"not in the cluster: {manager} creates it",
                    validated=True,
                    desired=desired,
                    live=None,
                    before=None,
                    after=dry,
                )
            )
            continue
        change = _change(
            ref,
            "unchanged",
            "",
            validated=True,
            desired=desired,
            live=live,
            before=live,
            after=dry,
        )
        if change.fields:
            reason = f"{manager} changes {plural(len(change.fields), 'field')}"
            changes.append(_with(change, "update", reason))
        else:
            changes.append(_with(change, "unchanged", "matches the cluster"))
    for manifest in published:
        rid = resource_id(manifest)
        if rid in wanted:
            continue
        ref = _ref(manifest)
        try:
            live = kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)
        except (KubeApiError, UnknownKindError):
            live = None
        if live is None:
            continue  # already gone: nothing to prune
        changes.append(
            _change(
                ref,
                "delete",
                f"no longer in the folder: {manager} prunes it",
                validated=True,
                desired=None,
                live=live,
                before=live,
                after=None,
            )
        )
    if problems:
        found: set[str] = set()
        for o in objects:
            found |= secret_values(o)
        raise PlanError(path, [scrub(p, found) for p in problems])
    return StackPlan(
        path=path,
        context=kube.context,
        deleted=False,
        spec_digest=spec_digest,
        prior_commit=None,
        prior_digest=None,
        changes=tuple(sorted(changes, key=lambda c: c.id)),
    )


def _with(change: Change, action: Action, reason: str) -> Change:
    from dataclasses import replace

    return replace(change, action=action, reason=reason)
