"""What is deployed where: every stack of the repository and every inventory in its
clusters, per cluster, with the applied commit against HEAD, health and drift.

Per cluster (each cluster the selected stacks use, connected once):
:func:`konfig.engine.survey.survey` (one LIST of inventories, one LIST per kind).
Then, once for all clusters, :func:`konfig.detect.behind.pending_stacks` says
which applied commits are behind HEAD in a way that affects the stack (what
``konfig pending`` and apply-on-merge use, so the three agree), and which
inventories belong to stacks deleted from the repository (orphans).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from konfig.detect import gitrepo
from konfig.detect.behind import Pending, pending_stacks
from konfig.engine.controllers import ControllerStatus
from konfig.engine.drift import value_at
from konfig.engine.ignore import stack_rules, without_ignored
from konfig.engine.inventory import Inventory
from konfig.engine.kube import KubeTarget
from konfig.engine.survey import ClusterSurvey, InventoryStatus, ObjectStatus, survey
from konfig.errors import KonfigError
from konfig.ids import parse_id
from konfig.pipeline.concurrency import run_concurrently
from konfig.pipeline.connections import Connections
from konfig.pipeline.runtime import NOTHING_SET_UP, Contexts, runtime_of, uses_opentofu
from konfig.repo.layout import Stack
from konfig.spec import Spec

SCHEMA_VERSION = 1
KIND = "KonfigStatus"

StackState = Literal["applied", "incomplete", "never-applied", "orphaned", "error"]
HealthSummary = Literal["healthy", "progressing", "failed", "missing", "empty", "unknown"]
DriftSummary = Literal["none", "drifted", "unknown"]
# How status and drift read a stack's Terraform resources: ``refresh`` (its state, and
# OpenTofu's ``plan -refresh-only`` for their drift: needs the provider credentials),
# ``state`` (the state Secret only: no OpenTofu, no credentials, drift not checked) or
# ``skip`` (not at all: not even the state is read).
TerraformMode = Literal["refresh", "state", "skip"]
TERRAFORM_MODES: tuple[TerraformMode, ...] = ("refresh", "state", "skip")
TERRAFORM_UNREAD = "its Terraform resources were not read"  # a stack's error: then why
DEFAULT_REFRESHES = 2  # stacks OpenTofu refreshes at once (docs/operate.md: measured)


@dataclass(frozen=True)
class Cluster:
    """One cluster context the report covers."""

    context: str
    server: str = ""
    error: str = ""
    optional: bool = False  # only stacks deleted from the repository used it


@dataclass(frozen=True)
class StackStatus:
    path: str
    context: str
    state: StackState
    status: InventoryStatus | None = None
    commits_behind: int | None = None  # None: unknown (no commit, not in history, no git)
    pending: tuple[str, ...] = ()  # why apply-on-merge would apply it (empty: up to date)
    orphan: Literal["deleted", "foreign"] | None = None
    error: str = ""
    terraform: TerraformMode | None = None  # how its Terraform part was read (None: none)
    pull: PullStatus | None = None  # a stack in pull delivery: what its controller says

    @property
    def inventory(self) -> Inventory | None:
        return self.status.inventory if self.status else None

    @property
    def short(self) -> str:
        parts = PurePosixPath(self.path).parts
        return "/".join(parts[1:]) if parts and parts[0] == "appops" else self.path

    @property
    def health(self) -> HealthSummary:
        if self.status is None:
            return "unknown"
        counts = self.status.health_counts()
        if not self.status.objects:
            return "empty"
        if counts["failed"]:
            return "failed"
        if counts["not_found"]:
            return "missing"
        if counts["in_progress"]:
            return "progressing"
        return "healthy"

    @property
    def drift(self) -> DriftSummary:
        if self.status is None:
            return "unknown"
        if self.status.drifted:
            return "drifted"
        if self.status.drift_unknown or self.terraform_unread:
            return "unknown"  # never "none" for what was not checked
        return "none"

    @property
    def terraform_unread(self) -> bool:
        """Its Terraform resources were not read: ``--terraform skip``, or the state could
        not be read (``error`` says why)."""
        return self.terraform == "skip" or self.error.startswith(TERRAFORM_UNREAD)

    def to_dict(self) -> dict[str, Any]:
        inv = self.inventory
        counts = self.status.health_counts() if self.status else None
        drifted = self.status.drifted if self.status else ()
        return {
            "path": self.path,
            "context": self.context,
            "state": self.state,
            "inventory": inv.name if inv else None,
            "commit": (inv.commit or None) if inv else None,
            "appliedAt": (inv.applied_at or None) if inv else None,
            "specDigest": (inv.spec_digest or None) if inv else None,
            "review": dict(inv.review) if inv and inv.review else None,
            "appliedBy": (inv.applied_by or None) if inv else None,
            "approvedBy": list(inv.approved_by) if inv else [],
            "approvedChange": (inv.approved_change or None) if inv else None,
            "approvedOverrides": [o.to_json() for o in inv.approved_overrides] if inv else [],
            "commitsBehind": self.commits_behind,
            "upToDate": None if self.state != "applied" else not self.pending,
            "pendingReasons": list(self.pending),
            "orphan": self.orphan,
            "objects": len(inv.members) if inv else 0,
            "health": {
                "state": self.health,
                "current": counts["current"] if counts else 0,
                "inProgress": counts["in_progress"] if counts else 0,
                "failed": counts["failed"] if counts else 0,
                "notFound": counts["not_found"] if counts else 0,
            },
            "drift": {
                "state": self.drift,
                "objects": len(drifted),
                "fields": sum(len(o.drift.fields) for o in drifted),
                "unknown": self.status.drift_unknown if self.status else 0,
            },
            "terraform": {
                "mode": self.terraform,
                "resources": len(self.status.terraform) if self.status else 0,
                "drifted": sum(1 for o in self.status.terraform if o.drift.drifted)
                if self.status
                else 0,
                "unknown": sum(1 for o in self.status.terraform if o.drift.state == "unknown")
                if self.status
                else 0,
            },
            "details": [o.to_dict() for o in self.status.objects] if self.status else [],
            "error": self.error or None,
            "pull": self.pull.to_dict() if self.pull else None,
        }


@dataclass(frozen=True)
class PullStatus:
    """A pull-delivery stack's folder and what the controller reconciling it reports."""

    branch: str
    folder: str
    controller: ControllerStatus | None = None
    source_commit: str = ""  # of the rendered commit applied, from its message
    error: str = ""  # why the controller's status could not be read

    def to_dict(self) -> dict[str, Any]:
        c = self.controller
        return {
            "branch": self.branch,
            "folder": self.folder,
            "controller": c.controller if c else None,
            "object": c.name if c else None,
            "ready": c.ready or None if c else None,
            "reason": c.reason or None if c else None,
            "message": c.message or None if c else None,
            "revision": c.revision or None if c else None,
            "sync": c.sync or None if c else None,
            "health": c.health or None if c else None,
            "renderedCommit": c.rendered_commit or None if c else None,
            "sourceCommit": self.source_commit or None,
            "error": self.error or None,
        }


def _pull_statuses(
    root: Path, stacks: Sequence[Stack], conns: Connections, result: list[StackStatus]
) -> list[StackStatus]:
    """``result`` with each pull-delivery stack's controller status (docs/pull.md)."""
    from konfig.engine.controllers import read_controllers, reconciling

    pulled = {s.path: s for s in stacks if s.delivery.pull}
    if not pulled:
        return result
    read: dict[int, Any] = {}
    out = []
    for st in result:
        stack = pulled.get(st.path)
        if stack is None:
            out.append(st)
            continue
        folder = f"{stack.delivery.cluster}/{stack.short}"
        info = PullStatus(stack.delivery.branch, folder)
        try:
            kube = conns.kube(stack)
            found = read.setdefault(id(kube), read_controllers(kube))
        except KonfigError as exc:
            found = str(exc)
        if isinstance(found, str):
            info = replace(info, error=found)
        else:
            c = reconciling(found, folder)
            if c is None:
                info = replace(
                    info,
                    error=f"no Flux Kustomization or Argo CD Application reconciles {folder}/",
                )
            else:
                source = ""
                if c.rendered_commit and gitrepo.is_repo(root):
                    message = gitrepo.commit_message(root, c.rendered_commit) or ""
                    for line in message.splitlines():
                        if line.startswith("Source-Commit: "):
                            source = line.split(": ", 1)[1].strip()
                info = replace(info, controller=c, source_commit=source)
        out.append(replace(st, pull=info))
    return out


@dataclass(frozen=True)
class StatusReport:
    head: str | None
    clusters: tuple[Cluster, ...]
    stacks: tuple[StackStatus, ...] = field(default=())
    terraform: TerraformMode = "refresh"

    def by_cluster(self) -> list[tuple[Cluster, list[StackStatus]]]:
        return [(c, [s for s in self.stacks if s.context == c.context]) for c in self.clusters]

    def counts(self) -> dict[str, int]:
        states = [s.state for s in self.stacks]
        return {
            "stacks": len(self.stacks),
            "applied": states.count("applied") + states.count("incomplete"),
            "behind": sum(1 for s in self.stacks if s.state == "applied" and s.pending),
            "neverApplied": states.count("never-applied"),
            "orphaned": states.count("orphaned"),
            "errors": states.count("error"),
            "unhealthy": sum(1 for s in self.stacks if s.health in ("failed", "missing")),
            "progressing": sum(1 for s in self.stacks if s.health == "progressing"),
            "drifted": sum(1 for s in self.stacks if s.drift == "drifted"),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schemaVersion": SCHEMA_VERSION,
            "kind": KIND,
            "head": self.head,
            "terraform": {"mode": self.terraform},
            "summary": self.counts(),
            "clusters": [
                {
                    "context": c.context,
                    "server": c.server or None,
                    "error": c.error or None,
                    "onlyDeletedStacks": c.optional,
                    "stacks": sum(1 for s in self.stacks if s.context == c.context),
                }
                for c in self.clusters
            ],
            "stacks": [s.to_dict() for s in self.stacks],
        }


def _context_name(target: KubeTarget) -> str:
    return target.context or "(current context)"


def collect_status(
    root: Path,
    stacks: Sequence[Stack],
    all_stacks: Sequence[Stack],
    conns: Connections,
    *,
    orphans: bool,
    gone: Sequence[Stack] = (),
    head: str = "HEAD",
    contexts: Contexts = NOTHING_SET_UP,
    terraform: TerraformMode = "refresh",
    refreshes: int = DEFAULT_REFRESHES,
) -> StatusReport:
    """The status of ``stacks``; with ``orphans``, also every inventory in their
    clusters (and in the clusters of ``gone``, stacks the history deleted) whose stack
    is not among ``all_stacks`` (the repository's). A cluster only ``gone`` stacks used
    that cannot be read is reported as such but is not an error of the report. An
    applied stack with a ``terraform`` section gets its Terraform resources as objects
    of its status next to its Kubernetes objects, as ``terraform`` says: ``refresh``
    (needs OpenTofu set up in ``contexts``: :func:`konfig.tofu.observe.terraform_objects`),
    ``state`` (:func:`konfig.tofu.observe.state_objects`) or ``skip`` (not read; the
    stack is marked so that its drift is unknown, never "none"); its runtime reads them
    (:func:`konfig.pipeline.runtime.runtime_of`)."""
    groups = conns.groups(stacks)
    extra = {t: g for t, g in conns.groups(gone).items() if t not in groups} if orphans else {}
    targets = [*groups, *extra]

    def read(target: KubeTarget) -> ClusterSurvey | KonfigError:
        try:
            kube = conns.kube((groups.get(target) or extra[target])[0])
            wanted = None if orphans else [s.path for s in groups[target]]
            return survey(kube, only=wanted)
        except KonfigError as exc:
            return exc

    surveys = dict(zip(targets, run_concurrently(targets, read, 8), strict=True))

    head_sha: str | None = None
    if gitrepo.is_repo(root):
        try:
            head_sha = gitrepo.rev_parse(root, head)
        except KonfigError:
            head_sha = None

    clusters: list[Cluster] = []
    inventories: dict[str, Inventory | None] = {}
    found: list[Inventory] = []
    repo_paths = {s.path for s in all_stacks}
    seen_orphans: set[tuple[str, str]] = set()
    orphan_of: list[tuple[str, InventoryStatus]] = []
    for target in targets:
        got = surveys[target]
        if isinstance(got, KonfigError):
            clusters.append(
                Cluster(_context_name(target), error=got.message, optional=target in extra)
            )
            continue
        if any(c.server == got.server and c.context == got.context for c in clusters):
            continue  # the same cluster through another kubeconfig entry
        clusters.append(Cluster(got.context, got.server, optional=target in extra))
        for stack in groups.get(target, ()):
            st = got.stacks.get(stack.path)
            inventories[stack.path] = st.inventory if st else None
        for path, st in got.stacks.items():
            found.append(st.inventory)
            if orphans and path not in repo_paths and (got.server, path) not in seen_orphans:
                seen_orphans.add((got.server, path))
                orphan_of.append((got.context, st))

    pending: Pending | None = None
    if head_sha is not None:
        pending = pending_stacks(root, head_sha, list(inventories), inventories, found)
    reasons = {p.path: p.reasons for p in pending.stacks} if pending else {}
    deleted = set(pending.deleted_stacks) if pending else set()
    behind = _commits_behind(root, head_sha, found)

    result: list[StackStatus] = []
    for target in groups:
        got = surveys[target]
        for stack in groups[target]:
            if isinstance(got, KonfigError):
                result.append(
                    StackStatus(stack.path, _context_name(target), "error", error=str(got))
                )
                continue
            st = got.stacks.get(stack.path)
            inv = st.inventory if st else None
            if st is not None:
                st = _ignoring(st, stack)
            if st is None or inv is None:
                result.append(StackStatus(stack.path, got.context, "never-applied"))
                continue
            result.append(
                StackStatus(
                    stack.path,
                    got.context,
                    "applied" if inv.commit else "incomplete",
                    st,
                    commits_behind=behind.get(inv.commit) if inv.commit else None,
                    pending=tuple(reasons.get(stack.path, ())),
                )
            )
    result = _with_terraform(result, stacks, conns, contexts, terraform, refreshes)
    result = _pull_statuses(root, stacks, conns, result)
    for context, st in sorted(orphan_of, key=lambda o: o[1].inventory.stack_path):
        inv = st.inventory
        result.append(
            StackStatus(
                inv.stack_path,
                context,
                "orphaned",
                st,
                commits_behind=behind.get(inv.commit) if inv.commit else None,
                orphan="deleted" if inv.stack_path in deleted else "foreign",
            )
        )
    order = {c.context: i for i, c in enumerate(clusters)}
    result.sort(key=lambda s: (order.get(s.context, len(order)), s.state == "orphaned", s.path))
    return StatusReport(head_sha, tuple(clusters), tuple(result), terraform)


def _ignoring(st: InventoryStatus, stack: Stack) -> InventoryStatus:
    """The stack's drift without the fields its ignore rules ignore (engine.ignore:
    the rules preview and apply follow)."""
    rules = stack_rules(stack)
    if not rules:
        return st
    objects = tuple(
        replace(o, drift=without_ignored(o.drift, parse_id(o.id), rules, dict(o.labels)))
        if o.runtime == "Kubernetes"
        else o
        for o in st.objects
    )
    return replace(st, objects=objects)


def _with_terraform(
    result: list[StackStatus],
    stacks: Sequence[Stack],
    conns: Connections,
    contexts: Contexts,
    mode: TerraformMode,
    refreshes: int,
) -> list[StackStatus]:
    """The applied stacks with a ``terraform`` section get their Terraform resources as
    objects, read as ``mode`` says (OpenTofu refreshes ``refreshes`` stacks at a time:
    each is a tofu process and a provider, in a working directory of its own, read-only
    and without the state lock)."""
    by_path = {s.path: s for s in stacks}
    chosen = [
        i
        for i, st in enumerate(result)
        if st.status is not None and uses_opentofu(by_path[st.path])
    ]
    out = list(result)
    if mode == "skip" or not chosen:
        for index in chosen:
            out[index] = replace(out[index], terraform=mode)
        return out
    if mode == "refresh" and contexts.tofu is None:
        raise ValueError("a refresh of the Terraform resources needs the OpenTofu context")

    def read(index: int) -> tuple[ObjectStatus, ...] | KonfigError:
        stack = by_path[result[index].path]
        try:
            runtime = runtime_of(stack, None, contexts)
            return runtime.survey(conns.kube(stack), stack, conns.target(stack), mode)
        except KonfigError as exc:  # the state cannot be read: said, the rest goes on
            return exc

    workers = 8 if mode == "state" else refreshes
    for index, objects in zip(chosen, run_concurrently(chosen, read, workers), strict=True):
        current = out[index].status
        out[index] = replace(out[index], terraform=mode)
        if isinstance(objects, KonfigError):
            error = f"{TERRAFORM_UNREAD}: {objects.message}"
            out[index] = replace(out[index], error=error)
        elif objects and current is not None:
            status = replace(current, objects=current.objects + objects)
            out[index] = replace(out[index], status=status)
    return out


def planned_values(
    report: StatusReport, specs: Mapping[str, Spec]
) -> dict[tuple[str, str, str], Any]:
    """For each drifted field of the report, the value the stack's Spec sets there."""
    out: dict[tuple[str, str, str], Any] = {}
    for s in report.stacks:
        spec = specs.get(s.path)
        if spec is None or s.status is None:
            continue
        resources = spec.by_id()
        for o in s.status.drifted:
            res = resources.get(o.id)
            for f in o.drift.fields:
                value = value_at(res.attributes if res else None, f.keys)
                if value is not None:
                    out[(s.path, o.id, f.path)] = value
    return out


def _commits_behind(
    root: Path, head: str | None, inventories: Sequence[Inventory]
) -> dict[str, int]:
    """Applied commit → number of commits from it to HEAD (commits not in history: absent)."""
    out: dict[str, int] = {}
    if head is None:
        return out
    for commit in sorted({i.commit for i in inventories if i.commit}):
        try:
            out[commit] = gitrepo.count_commits(root, commit, head)
        except KonfigError:
            continue
    return out
