"""Planning one stack: prior inventory × compiled spec × live cluster → changes.

The three-way table of ENGINE.md, per object id:

==========  ======  ======  ==========================================================
prior       plan    live    action
==========  ======  ======  ==========================================================
–           yes     –       create
–           yes     yes     update / unchanged (adopt) when it carries this stack's
                            label, or the stack opts in to adopting unmanaged objects;
                            conflict when another inventory owns it or nobody does
yes         yes     –       create (deleted out of band: drift)
yes         yes     yes     update / unchanged
yes         –       yes     delete (prune; only when this inventory provably owns it)
yes         –       –       unchanged (already gone: dropped from the inventory)
==========  ======  ======  ==========================================================

"update or unchanged" compares the server's ``dryRun=All`` server-side-apply result
with the live object (see :mod:`konfig.engine.diff`). A dry-run rejected for an immutable
field makes the change a **replace**. An object whose CustomResourceDefinition or
Namespace is created by the same plan cannot be dry-run yet: it is a create
"validated at apply". An object that belongs to someone else (another stack's
inventory, or no Konfig stack: see :mod:`konfig.engine.guards`) is a **conflict** naming
its owner; apply refuses a plan with conflicts. Nothing here writes to the cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from konfig.engine import inventory, inventory_store
from konfig.engine.diff import Comparison, compare
from konfig.engine.drift import FINISHED, is_drift_path, object_drift
from konfig.engine.guards import ADOPT_ANNOTATION, adopt_allowed, foreign_owner, unmanaged_by
from konfig.engine.ignore import IgnoredField, ignore_fields, stack_rules
from konfig.engine.inventory import LABEL_PART_OF
from konfig.engine.kube import Kube, KubeApiError, UnknownKindError
from konfig.engine.plan import Action, Change, PlanError, StackPlan, make_change
from konfig.ids import ObjectRef, parse_id
from konfig.masking import scrub, secret_values
from konfig.repo.layout import Stack
from konfig.secrets.generated import generated_keys
from konfig.secrets.refs import key_refs, key_statuses
from konfig.spec import Spec
from konfig.words import plural

CRD_API_VERSIONS = ("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")
DEFAULT_WORKERS = 8
RACE_RETRIES = 3
LIST_THRESHOLD = 3  # planned objects of one kind in one namespace: LIST instead of GETs


@dataclass
class _Planned:
    id: str  # the Spec's id (what the inventory records), even if it does not match ref
    ref: ObjectRef
    desired: dict[str, Any]
    deferred: str = ""  # why the dry-run must wait for apply
    live: dict[str, Any] | None = None
    dry: dict[str, Any] | None = None
    immutable: tuple[str, ...] = ()
    problem: str = ""
    secret_keys: tuple[str, ...] = ()  # data keys from encrypted files
    compared: bool = True  # their values are known (decrypted)
    foreign: bool = False  # it exists and the stack does not own it: its content is not shown
    ignored: tuple[IgnoredField, ...] = ()  # fields ignore rules kept out


def _ref_from_manifest(manifest: Mapping[str, Any]) -> ObjectRef:
    meta = manifest.get("metadata") or {}
    ns = meta.get("namespace")
    return ObjectRef(
        str(manifest.get("apiVersion", "")),
        str(manifest.get("kind", "")),
        str(ns) if ns else None,
        str(meta.get("name", "")),
    )


def _ref_from_id(kube: Kube, resource_id: str) -> ObjectRef | None:
    """Where a member lives, its kind's scope asked of the server; None when the kind
    no longer exists."""
    loose = parse_id(resource_id, namespaced=False)
    try:
        namespaced = kube.is_namespaced(loose.api_version, loose.kind)
    except UnknownKindError:
        return None
    return parse_id(resource_id, namespaced=True) if namespaced else loose


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


def _live_values(item: _Planned) -> None:
    """Without the decryption key: the Secret's encrypted keys take their live values
    (empty when it has none), so the dry-run shows neither a removal nor a value."""
    live = ((item.live or {}).get("data") or {}) if item.live else {}
    data = dict(item.desired.get("data") or {})
    for key in item.secret_keys:
        data[key] = live.get(key, "")
    item.desired["data"] = data


def _version(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


def plan_stack(
    kube: Kube,
    stack: Stack,
    spec: Spec | None,
    prior: inventory.Inventory | None,
    *,
    deleted: bool = False,
    details: bool = True,
    workers: int = DEFAULT_WORKERS,
    secret_data: Mapping[str, Mapping[str, str]] | None = None,
) -> StackPlan:
    """Plan one stack against the cluster. Raises PlanError / KubeError; never writes.

    ``secret_data`` (resource id -> data key -> base64 value, decrypted in memory by
    :func:`konfig.secrets.refs.secret_data`) fills the Secrets whose values come from
    encrypted files. A Secret missing from it is planned with its live values (nothing
    shows as removed) and its keys are reported "not compared". Keys Konfig generates
    (``extensions.generated``: a database password) come the same way, from the caller
    (:mod:`konfig.tofu.values`: the live value, else a new one).
    """
    set_id = inventory.applyset_id(inventory.inventory_name(stack.path))
    # the ids whose label is this stack's: its own, and a former name's (being moved)
    ours = frozenset({set_id}) | (prior.accepted_ids if prior else frozenset())
    prior_ids = prior.ids() if prior else frozenset()
    crds = _crds_in(spec)
    namespaces = _namespaces_in(spec)
    problems: list[str] = []
    rules = stack_rules(stack, (r.attributes for r in spec.resources) if spec else ())

    # Discovery first, in this thread: the discovery cache is not thread-safe.
    planned: list[_Planned] = []
    for res in spec.resources if spec else ():
        desired = inventory.label_member(res.attributes, set_id)
        ref = _ref_from_manifest(desired)
        item = _Planned(res.id, ref, desired)
        item.secret_keys = tuple(k.key for k in key_refs(res.id, res.extensions)) + tuple(
            g.key for g in generated_keys(res)
        )
        if item.secret_keys:
            values = (secret_data or {}).get(res.id)
            item.compared = values is not None
            data = dict(desired.get("data") or {})
            # known values now; unknown ones from the live object once it is read
            data.update(values or dict.fromkeys(item.secret_keys, ""))
            item.desired["data"] = data
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
            item.ref = ObjectRef(ref.api_version, ref.kind, None, ref.name)
        planned.append(item)
    planned_ids = {p.id for p in planned} | {r.id for r in (spec.resources if spec else ())}
    pruned: list[tuple[str, ObjectRef | None]] = [
        (member_id, _ref_from_id(kube, member_id)) for member_id in sorted(prior_ids - planned_ids)
    ]

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
        declared = item.desired
        try:
            for attempt in range(RACE_RETRIES):
                if attempt == 0 and ref.name in known:
                    item.live = known[ref.name]
                else:
                    item.live = kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)
                if not item.compared:
                    _live_values(item)
                if rules:
                    item.desired, item.ignored = ignore_fields(declared, item.live, rules)
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

    def fetch(ref: ObjectRef) -> dict[str, Any] | None:
        return kube.get(ref.api_version, ref.kind, ref.name, ref.namespace)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        prefetched.update(zip(batched, pool.map(prefetch, batched), strict=True))
        examined = list(pool.map(examine, planned))
        known_refs = [(rid, ref) for rid, ref in pruned if ref is not None]
        fetched = dict(
            zip(
                [rid for rid, _ in known_refs],
                pool.map(fetch, [r for _, r in known_refs]),
                strict=True,
            )
        )

    adopt = stack.apply_setting("adoptUnmanaged")
    finished = {m.id: m.finished for m in prior.members if m.finished} if prior else {}
    changes: list[Change] = []
    for item in examined:
        if item.problem:
            problems.append(item.problem)
            continue
        change = _planned_change(
            item, ours, item.id in prior_ids, adopt=adopt, finished=finished.get(item.id, "")
        )
        if item.ignored and not item.foreign:
            change = replace(change, ignored=item.ignored)
        if change.action != "conflict":
            if prior is not None and item.id in prior_ids and not item.deferred:
                change = _with_drift(change, prior)
            if item.secret_keys and not item.foreign:
                statuses = key_statuses(
                    item.secret_keys, item.desired, item.live, compared=item.compared
                )
                reason = change.reason
                if not item.compared:
                    reason += (
                        f"; values not compared (no decryption key): {', '.join(item.secret_keys)}"
                    )
                change = replace(change, secrets=statuses, reason=reason)
        changes.append(change)
    if any(c.owner and c.owner.startswith(_APPLYSET) for c in changes):
        changes = _name_owners(kube, changes)

    for rid, found in pruned:
        if found is None:
            changes.append(_gone(rid, parse_id(rid), "its kind no longer exists on the server"))
            continue
        changes.append(
            _pruned_change(rid, found, fetched[rid], prior, deleted=deleted, details=details)
        )

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
        prior_dirty=prior.dirty if prior else False,
    )


_APPLYSET = "applyset-"  # an owner not yet named by its stack


def _name_owners(kube: Kube, changes: list[Change]) -> list[Change]:
    """Conflicts name the stack whose inventory owns the object (one LIST of the
    inventories); an ApplySet no Konfig inventory here has stays named by its id."""
    try:
        stacks = {i.applyset_id: i.stack_path for i in inventory_store.list_inventories(kube)}
    except KubeApiError:
        stacks = {}  # may not list them: the ApplySet id still names the owner
    named: list[Change] = []
    for c in changes:
        if c.owner and c.owner.startswith(_APPLYSET):
            owner = stacks.get(c.owner)
            who = owner or f"ApplySet {c.owner} (no Konfig inventory here has it)"
            reason = f"owned by {who}: konfig will not take it over; remove it from this stack" + (
                f" or from {owner}" if owner else ""
            )
            c = replace(c, owner=who, reason=reason)
        named.append(c)
    return named


# What a change shows of an object the stack does not own: nothing of its content.
_UNSHOWN = Comparison((), "")


def _conflict(item: _Planned, owner: str, reason: str) -> Change:
    """An object someone else owns: who (``owner``), never its live content (nor the
    dry-run's, which holds the other owners' fields): a pull request's preview must not
    read another team's objects through the preview's identity."""
    return make_change(
        item.id,
        item.ref,
        "conflict",
        reason,
        validated=item.dry is not None,
        desired=item.desired,
        live=item.live,
        comparison=_UNSHOWN,
        owner=owner,
    )


def _adopted(item: _Planned, managers: str) -> Change:
    """An unmanaged object the stack opts in to adopting: apply takes it over (and sets
    this stack's label, so it always changes), but until then it is not the stack's:
    who manages it is shown, not its live content (nor whether it matches)."""
    action: Action = "replace" if item.immutable else "update"
    what = (
        f"immutable field changed ({', '.join(item.immutable)}): apply must delete and re-create it"
        if item.immutable
        else "apply adopts it"
    )
    return make_change(
        item.id,
        item.ref,
        action,
        f"exists in the cluster, managed by no Konfig stack (field managers: {managers}): "
        f"{what} (the stack opts in); its live content is not shown until the stack owns it",
        validated=not item.immutable,
        desired=item.desired,
        live=item.live,
        comparison=_UNSHOWN,
    )


def _planned_change(
    item: _Planned, ours: frozenset[str], in_prior: bool, *, adopt: bool, finished: str = ""
) -> Change:
    """``finished``: the digest of the Job manifest the inventory records as run to
    completion and removed (:attr:`inventory.Member.finished`)."""
    rid, ref = item.id, item.ref
    if item.deferred:
        return make_change(
            rid,
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
    if live is None and finished and finished == inventory.manifest_digest(item.desired):
        return make_change(
            rid,
            ref,
            "unchanged",
            f"{FINISHED}; its manifest is unchanged, so it is not run again",
            validated=True,
            desired=item.desired,
            live=None,
            comparison=Comparison((), ""),
        )
    if live is None:
        reason = (
            "in the inventory but not in the cluster: deleted out of band (drift)"
            if in_prior
            else "not in the cluster"
        )
        return make_change(
            rid,
            ref,
            "create",
            reason,
            validated=True,
            desired=item.desired,
            live=None,
            before=None,
            after=item.dry,
        )
    owner = foreign_owner(live, ours)
    if owner is not None:
        return _conflict(item, owner, f"owned by another inventory ({LABEL_PART_OF}={owner})")
    managers = None if in_prior else unmanaged_by(live)
    item.foreign = managers is not None
    if managers is not None and not adopt_allowed(item.desired, stack_opts_in=adopt):
        return _conflict(
            item,
            f"unmanaged ({managers})",
            f"exists in the cluster, managed by no Konfig stack (field managers: {managers}); "
            "konfig will not take it over unless the stack opts in with `apply: "
            f'{{adoptUnmanaged: true}}` in stack.yaml or the object with {ADOPT_ANNOTATION}: "true"'
            "; or delete it from the cluster, or remove it from this stack",
        )
    if managers is not None:
        return _adopted(item, managers)
    if item.immutable:
        fields = ", ".join(item.immutable)
        return make_change(
            rid,
            ref,
            "replace",
            f"immutable field changed ({fields}): apply must delete and re-create it",
            validated=False,
            desired=item.desired,
            live=live,
            before=live,
            after=_merged(live, item.desired),
        )
    comparison = compare(live, item.dry, name=rid)
    adopts = "" if in_prior else "; not in the inventory yet: apply adopts it"
    if comparison.changed:
        count = len(comparison.fields)
        reason = f"differs from the cluster in {plural(count, 'field')}{adopts}"
        action: Action = "update"
    else:
        reason = f"matches the cluster{adopts}"
        action = "unchanged"
    return make_change(
        rid,
        ref,
        action,
        reason,
        validated=True,
        desired=item.desired,
        live=live,
        comparison=comparison,
    )


def _with_drift(change: Change, prior: inventory.Inventory) -> Change:
    """``change`` told apart: fields someone changed in the cluster since Konfig's last
    apply (drift) from fields the repository changes."""
    member = prior.member(change.id)
    recorded = (prior.applied_fields or {}).get(change.id) if prior.applied_fields else None
    drift = object_drift(
        change.id,
        recorded,
        member.uid if member else "",
        change.live,
        finished=bool(member and member.finished and change.action == "unchanged"),
    )
    if not drift.drifted:
        return replace(change, drift=drift)
    if drift.state == "deleted":  # the reason says so already
        return replace(change, drift=drift)
    if drift.state == "recreated":
        return replace(change, drift=drift, reason=f"{change.reason}; drift: {drift.message}")
    paths = {f.path for f in drift.fields}
    fields = tuple(replace(f, drift=is_drift_path(f.path, paths)) for f in change.fields)
    n_drift = sum(1 for f in fields if f.drift)
    n_repo = len(fields) - n_drift
    if change.action == "update" and n_drift and not n_repo:
        reason = (
            f"{plural(n_drift, 'field')} changed outside Konfig since the last apply "
            f"(drift): apply sets {'it' if n_drift == 1 else 'them'} back"
        )
    elif change.action == "update" and n_drift:
        reason = (
            f"differs from the cluster in {plural(len(fields), 'field')}: {n_drift} changed "
            f"outside Konfig since the last apply (drift), {n_repo} changed in the repository"
        )
    else:
        undone = len(drift.fields) - n_drift
        reason = (
            f"{change.reason}; drift: {plural(len(drift.fields), 'field')} changed outside "
            f"Konfig since the last apply"
            + (
                f" ({undone} no longer set by the repository, so apply leaves them)"
                if undone
                else ""
            )
        )
    return replace(change, fields=fields, drift=drift, reason=reason)


def _gone(rid: str, ref: ObjectRef, why: str) -> Change:
    return make_change(
        rid,
        ref,
        "unchanged",
        f"not in the plan and already gone ({why}): dropped from the inventory",
        validated=False,
        desired=None,
        live=None,
        comparison=Comparison((), ""),
    )


def _pruned_change(
    rid: str,
    ref: ObjectRef,
    live: dict[str, Any] | None,
    prior: inventory.Inventory | None,
    *,
    deleted: bool,
    details: bool = True,
) -> Change:
    """``details``: the deleted object's fields and diff (a destroy shows neither: dumping
    every object as YAML to diff it was most of destroy's CPU)."""
    if live is None:
        # named as the id reads (an inventory's ids always parse), like a member whose
        # kind is gone
        return _gone(rid, parse_id(rid), "not in the cluster")
    if prior is None or not prior.owns(rid, live):
        return make_change(
            rid,
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
    return make_change(
        rid,
        ref,
        "delete",
        f"{reason}: apply prunes it",
        validated=False,
        desired=None,
        live=live,
        before=live,
        after=None,
        comparison=None if details else Comparison((), ""),
    )
