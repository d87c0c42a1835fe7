"""The preview flow: each stack's plan against its cluster, or the error that stopped it.

``konfig preview`` (and the plan ``konfig destroy`` shows) compose this: compiled stacks
are planned against the live cluster, deleted stacks from their inventories; a stack
that fails (compile, connection, plan) becomes a :class:`StackPreview` with its error
while the others go on. Nothing here writes to the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from konfig.build.compiler import CompileResult
from konfig.detect import gitrepo
from konfig.engine.danger import assess
from konfig.engine.digest import ChangeDigest, change_digest
from konfig.engine.guards import DangerGuard, DangerPolicy, mark_unconfirmed
from konfig.engine.ignore import ProposedRule
from konfig.engine.inventory_store import read_inventory
from konfig.engine.kube import Kube
from konfig.engine.livefingerprint import Lists
from konfig.engine.plan import ACTIONS, DANGER_CLASSES, Change, Danger, NotPreviewed, StackPlan
from konfig.engine.planner import DEFAULT_WORKERS, plan_stack
from konfig.errors import KonfigError
from konfig.pipeline.connections import Connections
from konfig.pipeline.publishing import PullPreview, preview_pull
from konfig.pipeline.refusals import first_refusal
from konfig.pipeline.reusing import Previous, Reused, reuse_key
from konfig.pipeline.runtime import (
    NOTHING_SET_UP,
    Contexts,
    kept_of_gone,
    runtime_of,
)
from konfig.repo.layout import Stack
from konfig.secrets.refs import Resolver, referenced_files, sealed_files, secret_data
from konfig.spec import Spec

# Told what a reader should know that is not an error (e.g. a stack with no inventory).
Note = Callable[[str], None]


@dataclass(frozen=True)
class StackError:
    message: str
    file: str | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class StackPreview:
    """One stack's outcome: a plan, or the error that prevented it."""

    path: str
    context: str | None = None
    deleted: bool = False
    plan: StackPlan | None = None
    error: StackError | None = None
    spec_digest: str | None = None
    # (file, sha256) of the encrypted files the stack's Secrets read (its change digest)
    sealed: tuple[tuple[str, str], ...] = ()
    # a stack in pull delivery: what the merge publishes; its plan is the controller's
    pull: PullPreview | None = None
    controller: str = ""  # who the plan is of: "flux <namespace>/<name>", or why none
    # what the plan was computed from (pipeline.reusing; None: not recorded)
    reuse_key: str | None = None
    # the result of a previous preview, re-used: Spec and live objects unchanged since
    reused: Reused | None = None

    @property
    def project(self) -> str:
        parts = PurePosixPath(self.path).parts
        return parts[1] if len(parts) > 1 else ""

    @property
    def stack(self) -> str:
        parts = PurePosixPath(self.path).parts
        return "/".join(parts[2:])

    def counts(self) -> dict[str, int]:
        if self.plan:
            return self.plan.counts()
        if self.reused is not None:
            return {**dict.fromkeys(ACTIONS, 0), **self.reused.counts()}
        return dict.fromkeys(ACTIONS, 0)

    def danger_counts(self) -> dict[str, int]:
        if self.plan:
            return self.plan.danger_counts()
        if self.reused is not None:
            return {**dict.fromkeys(DANGER_CLASSES, 0), **self.reused.dangers()}
        return dict.fromkeys(DANGER_CLASSES, 0)

    @property
    def has_changes(self) -> bool:
        if self.plan is not None:
            return self.plan.has_changes
        counts = self.counts()
        return self.reused is not None and any(counts[a] for a in ACTIONS if a != "unchanged")

    @property
    def drifted_objects(self) -> int:
        if self.plan is not None:
            return len(self.plan.drifted)
        return self.reused.drifted_objects if self.reused is not None else 0

    @property
    def changes(self) -> tuple[Change, ...]:
        return self.plan.changes if self.plan else ()

    @property
    def not_previewed(self) -> tuple[NotPreviewed, ...]:
        return self.plan.not_previewed if self.plan else ()

    @cached_property
    def digest(self) -> ChangeDigest | None:
        """The change digest of the plan (:mod:`konfig.engine.digest`); None: no plan."""
        return change_digest(self.plan, self.sealed) if self.plan is not None else None


@dataclass(frozen=True)
class Commits:
    """The commits a preview compares: the base (the merge base of ``--changed-from``;
    None without one) and the head checked out (None outside a git repository)."""

    base: str | None = None
    head: str | None = None


def commits_of(root: Path, changed_from: str | None) -> Commits:
    """The commits of a preview of the work tree at ``root``."""
    if not gitrepo.is_repo(root):
        return Commits()
    try:
        head = gitrepo.rev_parse(root, "HEAD")
    except KonfigError:
        return Commits()  # no commit yet
    base = gitrepo.merge_base(root, changed_from, head) if changed_from else None
    return Commits(base, head)


@dataclass(frozen=True)
class Mode:
    """How a preview was made: ``live`` (each stack's plan against its cluster) or
    ``offline`` (the render diff of the Specs at ``base`` and at ``merge``, the tree of
    ``head`` merged into ``base``: no cluster, no credential; :mod:`.offline`)."""

    name: Literal["live", "offline"]
    base: str | None = None  # commit ids (offline)
    head: str | None = None
    merge: str | None = None  # the merge's tree id

    def to_dict(self) -> dict[str, Any]:
        if self.name == "live":
            return {"name": "live"}
        return {"name": self.name, "base": self.base, "head": self.head, "merge": self.merge}


LIVE = Mode("live")


@dataclass(frozen=True)
class Preview:
    stacks: tuple[StackPreview, ...]
    secrets: frozenset[str] = field(default=frozenset(), compare=False)
    commits: Commits = Commits()
    mode: Mode = LIVE
    # (stack path, rule) the change declares that the base does not, or drops: listed,
    # not applied (`konfig preview --rules-from`, engine.ignore.proposed_rules)
    proposed_rules: tuple[tuple[str, ProposedRule], ...] = field(default=(), compare=False)

    @classmethod
    def of(
        cls, stacks: list[StackPreview], commits: Commits | None = None, *, mode: Mode = LIVE
    ) -> Preview:
        found: set[str] = set()
        for s in stacks:
            if s.plan:
                found |= s.plan.secrets()
        return cls(
            tuple(sorted(stacks, key=lambda s: s.path)),
            frozenset(found),
            commits or Commits(),
            mode,
        )

    def counts(self) -> dict[str, int]:
        total: dict[str, int] = dict.fromkeys(ACTIONS, 0)
        for s in self.stacks:
            for action, n in s.counts().items():
                total[action] += n
        return total

    @property
    def has_changes(self) -> bool:
        return any(s.has_changes for s in self.stacks)

    def reused(self) -> dict[str, list[str]]:
        """Commit -> the stacks whose result was re-used from its preview."""
        out: dict[str, list[str]] = {}
        for s in self.stacks:
            if s.reused is not None:
                out.setdefault(s.reused.head, []).append(s.path)
        return out

    @property
    def has_errors(self) -> bool:
        return any(s.error is not None for s in self.stacks)

    @property
    def has_conflicts(self) -> bool:
        """An object belongs to someone else: apply would refuse (an error, like one)."""
        return any(s.plan is not None and s.plan.conflicts for s in self.stacks)

    def conflicts(self) -> list[tuple[str, Change]]:
        """``(stack path, change)`` of every conflict, in stack order."""
        return [(s.path, c) for s in self.stacks for c in (s.plan.conflicts if s.plan else ())]

    @property
    def has_drift(self) -> bool:
        return any(s.drifted_objects for s in self.stacks)

    def drifted_objects(self) -> int:
        return sum(s.drifted_objects for s in self.stacks)

    def danger_counts(self) -> dict[str, int]:
        """Changes per danger class, over every stack."""
        total: dict[str, int] = dict.fromkeys(DANGER_CLASSES, 0)
        for s in self.stacks:
            for name, n in s.danger_counts().items():
                total[name] += n
        return total

    def dangers(self) -> list[tuple[str, Change, Danger]]:
        """``(stack path, change, danger)`` of every danger, in stack then class order."""
        found = [
            (s.path, c, d)
            for s in self.stacks
            for c in (s.plan.changes if s.plan else ())
            for d in c.dangers
        ]
        order = {name: i for i, name in enumerate(DANGER_CLASSES)}
        return sorted(found, key=lambda t: (t[0], order[t[2].name], t[1].id))

    def not_previewed(self) -> int:
        """Resources no runtime previewed (their credentials are missing)."""
        return sum(len(s.not_previewed) for s in self.stacks)


def preview_stack(
    conns: Connections,
    stack: Stack,
    compiled: CompileResult,
    *,
    workers: int = DEFAULT_WORKERS,
    resolver: Resolver | None = None,
    contexts: Contexts = NOTHING_SET_UP,
    keyed: bool = False,
    previous: Previous | None = None,
    lists: dict[tuple[str, str], Lists] | None = None,
    policy: DangerPolicy | None = None,
) -> StackPreview:
    """One existing stack: its plan, or the compile, decryption or cluster error that
    stopped it. ``keyed`` (or a ``previous`` preview): its reuse key is read first
    (:mod:`.reusing`), and with a ``previous`` preview whose result recorded the same
    key, that result is re-used instead of planning. With a ``resolver`` that can
    decrypt, Secrets from encrypted files are compared key by key (in memory); without
    one they are reported "not compared".
    The stack's runtime plans it (:func:`konfig.pipeline.runtime.runtime_of`: a stack
    with Terraform resources is planned with OpenTofu too, set up in ``contexts``).
    ``policy``: the danger policy to mark refusals by (default: konfig.yaml ``dangers``
    of ``conns.repo``; a pull request's preview passes its base branch's)."""
    if compiled.spec is None:
        assert compiled.error is not None
        e = compiled.error
        message = e.message + "".join(f"\n  {d}" for d in e.details)
        return StackPreview(
            stack.path,
            context=stack.kube_context,
            error=StackError(f"compile failed: {message}", e.file, e.line),
        )
    pull: PullPreview | None = None
    if stack.delivery.pull:
        try:
            pull = preview_pull(conns.repo, stack, compiled.spec)
        except KonfigError as exc:
            return StackPreview(
                stack.path,
                context=stack.kube_context,
                error=StackError(f"the rendered branch could not be read: {exc}"),
                spec_digest=compiled.spec.digest(),
            )
        if pull.refused:
            first = pull.refused[0]
            return StackPreview(
                stack.path,
                context=stack.kube_context,
                error=StackError(
                    f"not published: {first.message} [{first.rule}]; hint: {first.hint}"
                ),
                spec_digest=compiled.spec.digest(),
                pull=pull,
            )
    refused = first_refusal(conns.repo, stack, compiled.spec)
    if refused is not None:
        # what apply would refuse (by the rule `konfig check` reports): never a plan of it
        return StackPreview(
            stack.path,
            context=conns.target(stack).context,
            error=StackError(refused.preview, refused.file, refused.line),
            spec_digest=compiled.spec.digest(),
            pull=pull,
        )
    if pull is not None:
        return _preview_controlled(conns, stack, compiled.spec, pull, policy)
    try:
        data = None
        decrypts = resolver is not None and _can_decrypt_all(compiled.spec, resolver)
        if resolver is not None and decrypts:
            data = secret_data(compiled.spec, resolver)
        kube = conns.kube(stack)
        prior = read_inventory(kube, stack)
        sealed = sealed_files(conns.repo.root, compiled.spec)
        runtime = runtime_of(stack, compiled.spec, contexts)
        key = None
        if keyed or previous is not None:
            # read before the plan: an edit between the two makes the next key differ
            key = reuse_key(
                kube,
                conns.repo.root,
                stack,
                compiled.spec,
                prior,
                sealed=sealed,
                can_decrypt=decrypts,
                runtime_inputs=runtime.reuse_inputs(
                    kube, stack, compiled.spec, conns.target(stack)
                ),
                lists=lists,
                policy=policy,
            )
        reused = previous.candidate(stack.path, key) if previous is not None else None
        if reused is not None:
            return StackPreview(
                stack.path,
                context=conns.target(stack).context,
                spec_digest=compiled.spec.digest(),
                sealed=sealed,
                reuse_key=key,
                reused=reused,
            )
        plan = runtime.preview(
            kube,
            stack,
            compiled.spec,
            prior,
            conns.target(stack),
            workers=workers,
            secret_data=data,
        )
        plan = _assessed(conns, plan, kube, policy)
        return StackPreview(
            stack.path, context=plan.context, plan=plan, sealed=sealed, reuse_key=key
        )
    except KonfigError as exc:
        return StackPreview(
            stack.path,
            context=conns.target(stack).context,
            error=StackError(str(exc)),
            spec_digest=compiled.spec.digest(),
        )


def _preview_controlled(
    conns: Connections,
    stack: Stack,
    spec: Spec,
    pull: PullPreview,
    policy: DangerPolicy | None = None,
) -> StackPreview:
    """A pull stack's live preview: what its controller changes when the folder goes
    from what the branch has to what the merge publishes (engine.controlled)."""
    from konfig.engine.controlled import flux_labels, plan_controlled
    from konfig.engine.controllers import read_flux, reconciling

    try:
        kube = conns.kube(stack)
        found = read_flux(kube)
        labels: dict[str, str] = {}
        if isinstance(found, str):
            controller = f"no Flux API: {found}"
        else:
            c = reconciling(found, pull.folder)
            if c is None:
                controller = f"no Flux Kustomization reconciles {pull.folder}/"
            else:
                controller = f"flux {c.name}"
                labels = flux_labels(c.name)
        plan = plan_controlled(
            kube,
            stack.path,
            pull.objects,
            pull.published,
            labels=labels,
            spec_digest=spec.digest(),
        )
        plan = _assessed(conns, plan, kube, policy)
        return StackPreview(
            stack.path, context=plan.context, plan=plan, pull=pull, controller=controller
        )
    except KonfigError as exc:
        return StackPreview(
            stack.path,
            context=conns.target(stack).context,
            error=StackError(f"live preview: {exc}"),
            spec_digest=spec.digest(),
            pull=pull,
        )


def preview_deleted(
    conns: Connections,
    stack: Stack,
    *,
    workers: int = DEFAULT_WORKERS,
    note: Note | None = None,
    contexts: Contexts = NOTHING_SET_UP,
    policy: DangerPolicy | None = None,
) -> StackPreview:
    """A stack whose directory is gone: the deletion of what its inventory owns (what
    another runtime keeps of it is said to ``note``)."""
    try:
        conns.locate(stack)
        kube = conns.kube(stack)
        prior = read_inventory(kube, stack)
        if prior is None and note is not None:
            note(f"{stack.path}: no inventory in the cluster, nothing to delete")
        for kept in kept_of_gone(kube, stack, contexts):
            if note is not None:
                note(kept)
        plan = plan_stack(kube, stack, None, prior, deleted=True, workers=workers)
        plan = _assessed(conns, plan, kube, policy)
        return StackPreview(stack.path, context=plan.context, deleted=True, plan=plan)
    except KonfigError as exc:
        return StackPreview(
            stack.path,
            context=conns.target(stack).context,
            deleted=True,
            error=StackError(str(exc)),
        )


def _assessed(
    conns: Connections, plan: StackPlan, kube: Kube, policy: DangerPolicy | None = None
) -> StackPlan:
    """``plan`` with its dangers (engine.danger) and what ``danger/confirm`` stops marked
    refused under ``policy`` (default: konfig.yaml ``dangers``; a preview holds no
    confirmation: apply takes them)."""
    config = conns.repo.config
    plan = assess(plan, version=config.kubernetes_version, reader=kube)
    if policy is None:
        policy = DangerPolicy.of(config.dangers)
    return mark_unconfirmed(plan, DangerGuard(policy))


def preview_stacks(
    conns: Connections,
    stacks: Sequence[Stack],
    compiled: Mapping[str, CompileResult],
    gone: Sequence[Stack] = (),
    *,
    workers: int = DEFAULT_WORKERS,
    note: Note | None = None,
    resolver: Resolver | None = None,
    contexts: Contexts = NOTHING_SET_UP,
    keyed: bool = False,
    previous: Previous | None = None,
    policy: DangerPolicy | None = None,
) -> list[StackPreview]:
    """The previews of ``stacks`` (compiled) and of the deleted stacks ``gone``, in order
    (``keyed``, ``previous``: see :func:`preview_stack`; the live fingerprints' lists
    are read once a run; ``policy``: see :func:`preview_stack`)."""
    lists: dict[tuple[str, str], Lists] = {}
    results = [
        preview_stack(
            conns,
            s,
            compiled[s.path],
            workers=workers,
            resolver=resolver,
            contexts=contexts,
            keyed=keyed,
            previous=previous,
            lists=lists,
            policy=policy,
        )
        for s in stacks
    ]
    results += [
        preview_deleted(conns, s, workers=workers, note=note, contexts=contexts, policy=policy)
        for s in gone
    ]
    return results


def _can_decrypt_all(spec: Spec, resolver: Resolver) -> bool:
    """The key(s) given open every file the stack's Secrets read. A key for other
    recipients only (a preview's non-production key and a production stack) is no
    error: those Secrets are compared as without a key ("not compared"), and their
    values are never decrypted here."""
    if not resolver.can_decrypt:
        return False
    files = referenced_files(r.extensions for r in spec.resources)
    return all(resolver.holds_key_for(f) for f in files)
