"""Whose approval a change needs, and whether it has it (``konfig owners``, the status
``konfig/owners``).

1. The change's affected stacks come from :func:`konfig.detect.changeset.affected_stacks`:
   through the KCL import graph, so a change to ``base/`` reaches every stack whose
   entry files import what changed (and a repo-wide trigger every stack).
2. Each affected *production* stack needs an approval from an owner of its project.
   A stack is production when it is at the head of the change *or* at its merge base:
   a pull request cannot drop the requirement by writing ``production: false``.
3. The owners are read from the merge base (:func:`owners_at`): the change's own
   ``project.yaml`` or ``konfig.yaml`` cannot name its author an owner. A project new in
   the change has no owners there: the platform team owns it.
4. An approval counts when it approved the change as it is now: the pull request's
   head commit (:attr:`Approval.change`), or an earlier commit at which the stack's
   change digest (docs/review.md) was the one the head's preview has, with no preview
   between showing another (``holding``, from the reviewed record in Konfig's comment).
5. A policy override needs an approval from the owners named for that policy
   (konfig.yaml ``owners.policies`` at the merge base, else the platform team), on any
   affected stack, production or not (:class:`Override`): a rule a stack's stack.yaml
   ``policies.disable`` switches off that the merge base did not (the same rule, reason
   and resources already there were approved when they came), with its reason; and each
   danger class of a change that konfig.yaml ``dangers.confirm`` (at the merge base)
   lists, as ``danger/<class>``, with the danger's reason (:func:`danger_overrides`, from
   the preview's plans).

Plain data in, plain data out; the forge's reviews are read by the command.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from konfig.check.structure import exemptions
from konfig.detect import gitrepo
from konfig.engine.guards import DangerPolicy
from konfig.engine.inventory import ApprovedOverride
from konfig.errors import ConfigError
from konfig.repo.layout import APPOPS, PROJECT_FILE, STACK_FILE
from konfig.repo.owners import Owners, ProjectFile, resolve_owners
from konfig.repo.settings import CONFIG_FILE, is_production, repo_config_from_data
from konfig.repo.yamlio import load_yaml_text

if TYPE_CHECKING:  # git: apply loads this module, and only `konfig owners` needs a change set
    from konfig.detect.changeset import ChangeSet
    from konfig.engine.plan import StackPlan

STATUS_CONTEXT = "konfig/owners"
DANGER_PREFIX = "danger/"  # the rule of a danger class's override: danger/<class>


@dataclass(frozen=True)
class Requirement:
    """A production stack the change affects, and the logins that may approve it."""

    stack: str
    project: str  # appops/<project>
    owners: tuple[str, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Approval:
    """``login`` approved ``change`` (a commit, or a change digest)."""

    login: str
    change: str


@dataclass(frozen=True)
class Override:
    """A policy override the change brings to ``stack``: ``rule`` is a policy rule it
    disables, or ``danger/<class>``; ``reason`` says why (the stack.yaml's reason, or the
    danger's); ``owners`` may approve it."""

    stack: str
    rule: str
    reason: str
    owners: tuple[str, ...]


@dataclass(frozen=True)
class OverrideVerdict:
    override: Override
    approved_by: tuple[str, ...]  # owners of the policy who approved the current change

    @property
    def satisfied(self) -> bool:
        return bool(self.approved_by)


@dataclass(frozen=True)
class StackVerdict:
    requirement: Requirement
    approved_by: tuple[str, ...]  # owners who approved the current change

    @property
    def satisfied(self) -> bool:
        return bool(self.approved_by)


@dataclass(frozen=True)
class OwnersVerdict:
    """Every requirement with the owners' approvals of ``change``."""

    change: str
    stacks: tuple[StackVerdict, ...]
    overrides: tuple[OverrideVerdict, ...] = ()

    @property
    def ok(self) -> bool:
        return all(s.satisfied for s in self.stacks) and all(o.satisfied for o in self.overrides)

    @property
    def missing(self) -> tuple[StackVerdict, ...]:
        return tuple(s for s in self.stacks if not s.satisfied)

    @property
    def missing_overrides(self) -> tuple[OverrideVerdict, ...]:
        return tuple(o for o in self.overrides if not o.satisfied)

    def summary(self) -> str:
        """One line for the commit status (the forge keeps 140 characters)."""
        if self.missing_overrides:
            rules = sorted({o.override.rule for o in self.missing_overrides})
            text = (
                f"{len(self.missing_overrides)} policy override(s) await the policy's owners: "
                + ", ".join(rules)
            )
            if self.missing:
                text = f"{len(self.missing)} of {len(self.stacks)} production stacks and " + text
            return text[:140]
        extra = f" and {len(self.overrides)} policy override(s)" if self.overrides else ""
        if not self.stacks:
            if self.overrides:
                return f"owners approved all {len(self.overrides)} policy override(s)"
            return "no production stack affected: no owner approval needed"
        if self.ok:
            return f"owners approved all {len(self.stacks)} affected production stacks{extra}"
        waiting = sorted({s.requirement.project.split("/")[-1] for s in self.missing})
        text = f"{len(self.missing)} of {len(self.stacks)} production stacks await an owner: "
        return (text + ", ".join(waiting))[:140]

    def to_json(self) -> dict[str, Any]:
        return {
            "context": STATUS_CONTEXT,
            "change": self.change,
            "ok": self.ok,
            "stacks": [
                {
                    "path": s.requirement.stack,
                    "project": s.requirement.project,
                    "owners": list(s.requirement.owners),
                    "approved_by": list(s.approved_by),
                    "reasons": list(s.requirement.reasons),
                }
                for s in self.stacks
            ],
            "overrides": [
                {
                    "stack": o.override.stack,
                    "rule": o.override.rule,
                    "reason": o.override.reason,
                    "owners": list(o.override.owners),
                    "approved_by": list(o.approved_by),
                }
                for o in self.overrides
            ],
        }


def owners_at(root: Path, ref: str) -> Owners:
    """The owners commit ``ref`` declares (konfig.yaml ``owners`` and every
    ``appops/*/project.yaml``); problems there were ``konfig check``'s to report, and an
    owner that names no team is left out."""
    raw = gitrepo.file_at(root, ref, CONFIG_FILE)
    text = raw.decode("utf-8", "replace") if raw else ""
    data = load_yaml_text(text, file=f"{CONFIG_FILE} at {ref[:12]}") if text else None
    config = repo_config_from_data(data, text=text)
    if config.owners is None:
        return Owners()
    projects = []
    listing = gitrepo.list_tree(root, ref, [APPOPS])
    wanted = [p for p in listing if p.count("/") == 2 and p.endswith(f"/{PROJECT_FILE}")]
    blobs = gitrepo.read_blobs(root, [listing[p] for p in wanted])
    for path in sorted(wanted):
        ptext = blobs[listing[path]].decode("utf-8", "replace")
        try:
            pdata = load_yaml_text(ptext, file=path)
        except ConfigError:  # a broken project.yaml at base: the platform owns it
            pdata = None
        projects.append(ProjectFile(path.rsplit("/", 1)[0], pdata, ptext))
    owners, _ = resolve_owners(config.owners, projects)
    return owners


def requirements(root: Path, changes: ChangeSet, owners: Owners) -> tuple[Requirement, ...]:
    """The production stacks of ``changes`` (production at its head or its merge base),
    each with its project's owners."""
    base_raw = gitrepo.file_at(root, changes.merge_base, CONFIG_FILE)
    base_text = base_raw.decode("utf-8", "replace") if base_raw else ""
    patterns = repo_config_from_data(
        load_yaml_text(base_text, file=CONFIG_FILE) if base_text else None, text=base_text
    ).production_stacks
    out = []
    for stack in changes.stacks:
        if not (stack.production or _production_at(root, changes.merge_base, stack.path, patterns)):
            continue
        project = "/".join(stack.path.split("/")[:2])
        out.append(Requirement(stack.path, project, owners.of_project(project), stack.reasons))
    return tuple(out)


def _production_at(root: Path, ref: str, stack: str, patterns: tuple[str, ...]) -> bool:
    raw = gitrepo.file_at(root, ref, f"{stack}/{STACK_FILE}")
    if raw is None:
        return is_production(stack, None, patterns)
    try:
        data = load_yaml_text(raw.decode("utf-8", "replace"), file=f"{stack}/{STACK_FILE}")
    except ConfigError:  # broken at base: the patterns decide
        data = None
    declared = data.get("production") if isinstance(data, dict) else None
    return is_production(stack, declared, patterns)


def policy_overrides(
    stack: str,
    base: Mapping[str, Any] | None,
    head: Mapping[str, Any] | None,
    owners: Owners,
) -> tuple[Override, ...]:
    """The rules ``stack``'s stack.yaml at the change's head (``head``, its data)
    switches off that it did not at the merge base (``base``): a new rule, or a changed
    reason or scope (what was approved before was that exemption, not this one). Each
    needs the policy's owners."""
    before = {(rule, e.reason, e.resources) for rule, es in exemptions(base).items() for e in es}
    out = []
    for rule, entries in exemptions(head).items():
        for e in entries:
            if (rule, e.reason, e.resources) not in before:
                out.append(Override(stack, rule, e.reason, owners.of_policy(rule)))
    return tuple(out)


def danger_overrides(
    plans: Iterable[StackPlan], confirm: Iterable[str], owners: Owners
) -> tuple[Override, ...]:
    """Each danger class of the plans' changes that ``confirm`` (konfig.yaml
    ``dangers.confirm`` at the merge base) lists, once per stack and class, as the rule
    ``danger/<class>`` with the reasons of its changes (the first three)."""
    wanted = set(confirm)
    out = []
    for plan in plans:
        reasons: dict[str, list[str]] = {}
        for change in plan.changes:
            for d in change.dangers:
                if d.name in wanted:
                    reasons.setdefault(d.name, []).append(d.reason)
        for name in sorted(reasons):
            rule = f"{DANGER_PREFIX}{name}"
            said = reasons[name]
            reason = "; ".join(said[:3]) + (f" (and {len(said) - 3} more)" if len(said) > 3 else "")
            out.append(Override(plan.path, rule, reason, owners.of_policy(rule)))
    return tuple(out)


def overrides(root: Path, changes: ChangeSet, head: str, owners: Owners) -> tuple[Override, ...]:
    """The policies the affected stacks of ``changes`` disable at ``head`` (a commit)
    that they did not at the merge base (:func:`policy_overrides`)."""
    out: list[Override] = []
    for stack in changes.stacks:
        path = f"{stack.path}/{STACK_FILE}"
        out += policy_overrides(
            stack.path,
            _stack_data(gitrepo.file_at(root, changes.merge_base, path), path),
            _stack_data(gitrepo.file_at(root, head, path), path),
            owners,
        )
    return tuple(out)


def confirm_classes(root: Path, ref: str) -> tuple[str, ...]:
    """konfig.yaml ``dangers.confirm`` at ``ref``: the danger classes whose changes need
    the policy's owners (and a confirmation at apply)."""
    raw = gitrepo.file_at(root, ref, CONFIG_FILE)
    text = raw.decode("utf-8", "replace") if raw else ""
    data = load_yaml_text(text, file=f"{CONFIG_FILE} at {ref[:12]}") if text else None
    dangers = data.get("dangers") if isinstance(data, dict) else None
    confirm = dangers.get("confirm") if isinstance(dangers, dict) else None
    return tuple(str(c) for c in confirm) if isinstance(confirm, list) else ()


def policy_at(root: Path, ref: str) -> DangerPolicy:
    """konfig.yaml ``dangers`` at ``ref`` (a commit of the repository at ``root``), held
    to konfig.yaml's contract: the policy before a merge, which the merge's apply holds
    too (``konfig apply --policy-from``). No konfig.yaml there: no policy."""
    raw = gitrepo.file_at(root, ref, CONFIG_FILE)
    text = raw.decode("utf-8", "replace") if raw else ""
    where = f"{CONFIG_FILE} at {ref[:12]}"
    data = load_yaml_text(text, file=where) if text else None
    return DangerPolicy.of(repo_config_from_data(data, text=text).dangers)


def _stack_data(raw: bytes | None, path: str) -> Mapping[str, Any] | None:
    if raw is None:
        return None
    try:
        data = load_yaml_text(raw.decode("utf-8", "replace"), file=path)
    except ConfigError:  # a broken stack.yaml: check reports it; it disables nothing
        return None
    return data if isinstance(data, dict) else None


def verdict(
    needed: Sequence[Requirement],
    approvals: Iterable[Approval],
    change: str,
    holding: Mapping[str, Iterable[str]] | None = None,
    *,
    overridden: Sequence[Override] = (),
) -> OwnersVerdict:
    """Which requirements an owner's approval satisfies: an approval of ``change``, or
    (``holding``: stack -> logins, :func:`konfig.pipeline.reviewed.approvals_holding`)
    an approval of an earlier commit at which the stack's change digest was already
    the one it is now; and which ``overridden`` policies an approval of ``change`` by
    one of the policy's owners does (of ``change`` only: an exemption in stack.yaml
    changes no object, so the digest cannot tell an approval given before it came)."""
    approvers = {a.login.lower() for a in approvals if a.change == change}
    held = {stack: {login.lower() for login in logins} for stack, logins in (holding or {}).items()}
    return OwnersVerdict(
        change,
        tuple(
            StackVerdict(
                r,
                tuple(
                    o
                    for o in r.owners
                    if o.lower() in approvers or o.lower() in held.get(r.stack, set())
                ),
            )
            for r in needed
        ),
        tuple(
            OverrideVerdict(o, tuple(x for x in o.owners if x.lower() in approvers))
            for o in overridden
        ),
    )


@dataclass(frozen=True)
class Approved:
    """What ``konfig apply --approvals`` records of one stack: who approved ``change``,
    and each policy override of it with its reason and the policy's owners who approved."""

    approved_by: tuple[str, ...]
    change: str
    overrides: tuple[ApprovedOverride, ...] = ()


def load_approvals(path: Path) -> dict[str, Approved]:
    """A ``konfig owners --json`` file: each stack's approvers, the change they approved
    and its overrides (``konfig apply --approvals``, for the inventory's audit)."""
    from konfig import contracts
    from konfig.errors import UsageError

    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--approvals {path}: cannot read `konfig owners --json`: {exc}") from None
    try:
        contracts.validate("owners", data, file=str(path), text=text)
    except contracts.ContractError as exc:
        raise UsageError(f"--approvals {path}: not `konfig owners --json`: {exc}") from None
    change = str(data["change"])
    out = {
        str(s["path"]): Approved(tuple(str(a) for a in s["approved_by"]), change)
        for s in data["stacks"]
    }
    for o in data.get("overrides") or ():
        path_ = str(o["stack"])
        entry = ApprovedOverride(
            str(o["rule"]), str(o["reason"]), tuple(str(a) for a in o["approved_by"])
        )
        prior = out.get(path_, Approved((), change))
        out[path_] = replace(prior, overrides=(*prior.overrides, entry))
    return out
