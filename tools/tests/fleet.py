"""Preview JSON of many stacks, built the way ``konfig preview`` builds it.

Each change is computed by the real comparison (``konfig.diff.compare``: noise
removal, Secret masking, field list and unified diff) from a live and a planned
object, so the field paths, values and diffs are those a real preview carries.
Used by the report tests and ``hack/bench_report.py``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from konfig.engine.danger import Context, classify
from konfig.engine.diff import FieldChange, compare
from konfig.engine.digest import change_digest
from konfig.engine.plan import Change, StackPlan

ENVS = ("dev", "staging", "prod")
ZERO = {"create": 0, "update": 0, "replace": 0, "delete": 0, "unchanged": 0}
Obj = dict[str, Any]


def deployment(project: str, env: str, *, image: str = "nginx:1.27.3", replicas: int = 1) -> Obj:
    ns = f"{project}-{env}"
    labels = {"app.kubernetes.io/name": project, "app.kubernetes.io/instance": f"{project}-{env}"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": project, "namespace": ns, "labels": dict(labels)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": image,
                            "env": [{"name": "ENV", "value": env}],
                            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                        }
                    ]
                },
            },
        },
    }


def service(project: str, env: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": project, "namespace": f"{project}-{env}"},
        "spec": {
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
            "selector": {"app.kubernetes.io/name": project},
        },
    }


def configmap(project: str, env: str, name: str, data: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": f"{project}-{env}"},
        "data": dict(data),
    }


def secret(project: str, env: str, name: str, data: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": f"{project}-{env}"},
        "type": "Opaque",
        "data": dict(data),
    }


def object_id(obj: Obj) -> str:
    meta = obj["metadata"]
    ns = f"{meta['namespace']}:" if meta.get("namespace") else ""
    return f"{obj['apiVersion']}:{obj['kind']}:{ns}{meta['name']}"


def change(
    live: Obj | None,
    planned: Obj | None,
    *,
    unmasked: bool = False,
    dangers: bool = False,
    held: int | None = None,
) -> dict[str, Any]:
    """One change of the preview JSON; ``unmasked`` fakes a faulty producer that
    forgot to mask Secret values (the report must mask them anyway); ``dangers``: with
    its danger classes as the preview finds them (``held``: a deleted Namespace's count)."""
    obj = planned if planned is not None else live
    assert obj is not None
    ident = object_id(obj)
    if unmasked:
        from konfig.engine.diff import field_changes, unified_diff  # no masking on purpose

        fields = field_changes(live, planned)
        diff = unified_diff(live, planned, name=ident)
    else:
        comparison = compare(live, planned, name=ident)
        fields, diff = comparison.fields, comparison.diff
    if live is None:
        action, reason = "create", "not in the cluster"
    elif planned is None:
        action, reason = "delete", "not in the plan any more: prune"
    elif fields:
        action = "update"
        reason = f"differs from the cluster in {len(fields)} field{'s' if len(fields) > 1 else ''}"
    else:
        action, reason = "unchanged", "matches the cluster"
    meta = obj["metadata"]
    out = {
        "id": ident,
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "action": action,
        "reason": reason,
        "validated": action != "delete",
        "fields": [f.to_dict() for f in fields],
        "diff": "" if action == "unchanged" else diff,
    }
    if dangers:
        planned_change = Change(
            ident, obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"],
            action, reason, action != "delete", planned, live, tuple(fields), diff,
        )  # fmt: skip
        found = classify(planned_change, Context(held={ident: held} if held is not None else None))
        out["dangers"] = [d.to_dict() for d in found]
    return out


def stack_doc(
    path: str, changes: Sequence[dict[str, Any]], *, error: dict[str, Any] | None = None
) -> dict[str, Any]:
    counts = dict(ZERO)
    for c in changes:
        counts[c["action"]] += 1
    parts = path.split("/")
    return {
        "path": path,
        "project": parts[1],
        "stack": "/".join(parts[2:]),
        "context": "admin",
        "deleted": False,
        "status": "error" if error else "ok",
        "error": error,
        "specDigest": None if error else "d" * 64,
        "priorCommit": "c" * 40,
        "priorDigest": "e" * 64,
        "counts": dict(ZERO) if error else counts,
        "changes": [] if error else sorted(changes, key=lambda c: c["id"]),
    }


def with_review(stack: dict[str, Any]) -> dict[str, Any]:
    """``stack`` (a stack of the preview JSON) with its change digest, as a live preview
    records it (``review``): each changed object's field digests and the live version
    (uid, resourceVersion) it was computed against, distinct per object as a cluster's."""
    changes = []
    for c in stack["changes"]:
        seed = f"{stack['path']}\0{c['id']}"
        number = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16) % 10_000_000
        live = None
        if c["action"] != "create":
            meta = {
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, seed)),
                "resourceVersion": str(number),
            }
            live = {"metadata": meta}
        fields = tuple(FieldChange(f["path"], f["before"], f["after"]) for f in c["fields"])
        ident, kind = c["id"], (c["apiVersion"], c["kind"], c["namespace"], c["name"])
        what = (c["action"], c["reason"], c["validated"])
        changes.append(Change(ident, *kind, *what, {}, live, fields, c["diff"]))
    plan = StackPlan(stack["path"], "admin", False, stack["specDigest"], None, None, tuple(changes))
    return {**stack, "review": change_digest(plan).to_dict()}


def preview_doc(stacks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    totals = {a: sum(s["counts"][a] for s in stacks) for a in ZERO}
    return {
        "schemaVersion": 1,
        "kind": "KonfigPreview",
        "hasChanges": any(totals[a] for a in ("create", "update", "replace", "delete")),
        "counts": totals,
        "stacks": sorted(stacks, key=lambda s: s["path"]),
    }


Edit = Callable[[Obj], None]
_STAND_IN = "zzstandin"


@dataclass
class Fleet:
    """``projects`` × ``envs`` stacks, each a Deployment and a Service.

    ``edits`` change every stack's Deployment (the base-model change); ``special``
    maps a stack path to a function that returns that stack's own list of changes
    instead (an exception), or to an error dict (a failed stack).
    """

    projects: int
    envs: Sequence[str] = ENVS
    edits: Sequence[Edit] = ()
    special: dict[str, Callable[[str, str], list[dict[str, Any]]] | dict[str, Any]] = field(
        default_factory=dict
    )
    name: Callable[[int], str] = lambda i: f"app{i:03d}"
    dangers: bool = False  # the changes carry their danger classes
    reviews: bool = False  # each stack carries its change digest (a live preview's)
    _made: dict[str, str] = field(default_factory=dict, repr=False)

    def paths(self) -> list[str]:
        return [f"appops/{self.name(i)}/{env}" for i in range(self.projects) for env in self.envs]

    def standard(self, project: str, env: str) -> list[dict[str, Any]]:
        """The common change. Computed once per stack name for a stand-in project, then
        renamed: a project's name changes no line or order of a diff, only its text."""
        if env not in self._made:
            self._made[env] = json.dumps(self._standard(_STAND_IN, env))
        return list(json.loads(self._made[env].replace(_STAND_IN, project)))

    def _standard(self, project: str, env: str) -> list[dict[str, Any]]:
        live = deployment(project, env)
        planned = copy.deepcopy(live)
        for edit in self.edits:
            edit(planned)
        svc = service(project, env)
        return [
            change(live, planned, dangers=self.dangers),
            change(svc, svc, dangers=self.dangers),
        ]

    def stacks(self) -> list[dict[str, Any]]:
        out = []
        for path in self.paths():
            _, project, env = path.split("/")
            special = self.special.get(path)
            if isinstance(special, dict):
                out.append(stack_doc(path, [], error=special))
            elif special is not None:
                out.append(stack_doc(path, special(project, env)))
            else:
                out.append(stack_doc(path, self.standard(project, env)))
        if self.reviews:
            out = [with_review(s) if s["status"] == "ok" else s for s in out]
        return out

    def preview(self) -> dict[str, Any]:
        return preview_doc(self.stacks())

    def changed(self, reason: str = "imports base/pkg/models/frontend") -> dict[str, Any]:
        paths = self.paths()
        return {
            "base": "origin/main",
            "head": "0" * 40,
            "merge_base": "f" * 40,
            "stacks": [
                {"path": p, "reasons": [reason], "production": p.endswith("/prod")} for p in paths
            ],
            "deleted_stacks": [],
            "projects": sorted({p.split("/")[1] for p in paths}),
        }


def set_image(image: str) -> Edit:
    def edit(obj: Obj) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = image

    return edit


def add_label(key: str, value: str) -> Edit:
    def edit(obj: Obj) -> None:
        obj["metadata"]["labels"][key] = value
        obj["spec"]["template"]["metadata"]["labels"][key] = value

    return edit
