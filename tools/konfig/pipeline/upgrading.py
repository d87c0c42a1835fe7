"""``konfig upgrade``: a repository from the Konfig release it runs to this one.

1. read which release the repository runs and its files' digests then
   (:mod:`konfig.repo.release`: ``.konfig/release.json``, or the shipped manifest of a
   release older than the record);
2. compare each of the release's files three ways: as that release wrote it, as the
   repository has it now, as this release (the template konfig carries,
   :mod:`konfig.repo.template`) writes it. A file the team did not change is replaced,
   added or removed; one the team changed (or deleted) that this release does not
   change stays as the team has it; one both changed (or one the team made where the
   release now puts one) is a conflict, and the upgrade refused unless forced;
3. write the new files and the new record; the team's files (``base/``, ``appops/``,
   ``kcl.mod``, ``konfig.yaml``, ``.sops.yaml``) are never read for writing. Nothing is
   committed: the team reviews ``git diff`` and commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from konfig import __version__
from konfig.detect.gitrepo import uncommitted
from konfig.errors import KonfigError, UsageError
from konfig.repo.files import WriteScope, atomic_write_bytes, remove
from konfig.repo.release import (
    CHANGELOG,
    RECORD,
    Release,
    changelog_since,
    digest,
    is_team_file,
    read_record,
    release_content,
    shipped,
    version_key,
    write_record,
)
from konfig.repo.template import TemplateSource

ADD, CHANGE, REMOVE = "add", "change", "remove"


@dataclass(frozen=True)
class FileStep:
    """One release file: what the upgrade does to it, or why it cannot."""

    path: str
    action: str  # ADD, CHANGE or REMOVE
    conflict: str | None = None  # why the team's version stands in the way


@dataclass(frozen=True)
class UpgradePlan:
    root: Path
    old: Release
    new_version: str
    template: TemplateSource
    steps: list[FileStep]  # sorted by path; unchanged files are not listed
    changelog: list[tuple[str, str]]  # (version, text), newest first
    _content: dict[str, tuple[bytes, int]]  # path -> this release's bytes and mode

    @property
    def conflicts(self) -> list[FileStep]:
        return [s for s in self.steps if s.conflict]


@dataclass(frozen=True)
class Upgraded:
    plan: UpgradePlan
    written: list[str]
    removed: list[str]


def _old_release(root: Path) -> Release:
    recorded = read_record(root)
    if recorded is not None:
        return recorded
    oldest = shipped()
    if oldest is None:
        raise UsageError(
            f"{root} has no {RECORD} and this konfig ships no manifest of an older release",
            hint="is it a repository `konfig init` made?",
        )
    return oldest


def _step(rel: str, old: Release, now: bytes | None, new: bytes | None) -> FileStep | None:
    was = old.files.get(rel)
    here = digest(now) if now is not None else None
    if new is None:  # the release drops it
        if here is None:
            return None
        if here == was:
            return FileStep(rel, REMOVE)
        return FileStep(rel, REMOVE, f"changed here since {old.version}; {__version__} drops it")
    if here == digest(new) or digest(new) == was:
        return None  # already the new one, or a file this release did not change: as it is
    if here is None:
        if was is None:
            return FileStep(rel, ADD)
        return FileStep(rel, ADD, f"deleted here since {old.version}")
    if was is None:
        return FileStep(rel, CHANGE, f"made here; {__version__} brings its own")
    if here == was:
        return FileStep(rel, CHANGE)
    return FileStep(rel, CHANGE, f"changed here since {old.version}")


def plan_upgrade(root: Path, template: TemplateSource) -> UpgradePlan:
    old = _old_release(root)
    if version_key(old.version) > version_key(__version__):
        raise UsageError(
            f"the repository runs konfig {old.version} ({old.origin}), newer than this "
            f"konfig {__version__}",
            hint="install the newer konfig; an upgrade never goes back",
        )
    content = release_content(template)
    steps: list[FileStep] = []
    # a file an older release named that is the team's now stays the team's
    for rel in sorted({*content, *(f for f in old.files if not is_team_file(f))}):
        path = root / rel
        now = path.read_bytes() if path.is_file() else None
        new = content[rel][0] if rel in content else None
        step = _step(rel, old, now, new)
        if step is not None:
            steps.append(step)
    changelog_file = template.root / CHANGELOG
    notes = changelog_file.read_text(encoding="utf-8") if changelog_file.is_file() else ""
    return UpgradePlan(
        root=root,
        old=old,
        new_version=__version__,
        template=template,
        steps=steps,
        changelog=changelog_since(notes, old.version, __version__),
        _content=content,
    )


def upgrade(plan: UpgradePlan, *, force: bool) -> Upgraded:
    """Write ``plan`` (every step; conflicts only with ``force``) and the new record."""
    dirty = uncommitted(plan.root)
    if dirty:
        shown = ", ".join(dirty[:5]) + (", ..." if len(dirty) > 5 else "")
        raise KonfigError(
            f"uncommitted changes ({shown}): nothing was written",
            hint="commit or stash them first, so that git diff shows the upgrade alone",
        )
    if plan.conflicts and not force:
        raise KonfigError(
            f"{len(plan.conflicts)} of the release's files changed here: nothing was written",
            hint="look at them (konfig upgrade --dry-run, git log -- PATH); --force replaces "
            "them with the release's, and git diff shows what your change was",
        )
    scope = WriteScope.repository(plan.root)
    written: list[str] = []
    removed: list[str] = []
    for step in plan.steps:
        if step.action == REMOVE:
            remove([plan.root / step.path], scope=scope)
            removed.append(step.path)
        else:
            data, mode = plan._content[step.path]
            atomic_write_bytes(plan.root / step.path, data, scope=scope, mode=mode)
            written.append(step.path)
    write_record(plan.root, plan.new_version, plan._content)
    return Upgraded(plan, written, removed)
