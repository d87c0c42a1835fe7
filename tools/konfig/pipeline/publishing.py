"""``konfig publish``: the pull-delivery stacks rendered onto their rendered branches.

Every stack whose ``stack.yaml`` says ``delivery: {mode: pull, target: ...}`` is
compiled, refused where it holds what cannot be published
(:func:`konfig.build.rendered.refusals`), and rendered
(:func:`konfig.build.rendered.render`) into ``<cluster>/<project>/<stack>/`` of its
target branch; each cluster folder gets a ``kustomization.yaml`` naming its stack
folders. The branch is a function of the commit: a stack folder whose stack is no
longer in pull mode for that cluster (moved back to push, to another cluster, or
deleted) is removed. One commit per branch, naming the source commit and the stacks
whose folder changed; none when nothing changed. A stack that fails to compile or is
refused keeps the folder it had (nothing of it is written), and the run fails.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from konfig.build.compiler import CompileSettings
from konfig.build.rendered import KUSTOMIZATION, Refusal, cluster_kustomization, refusals, render
from konfig.detect import gitrepo, gitwrite
from konfig.errors import ConfigError
from konfig.pipeline.compiling import compile_stacks
from konfig.repo.layout import DEFAULT_RENDERED_BRANCH, Repository, Stack
from konfig.repo.yamlio import load_yaml_text
from konfig.spec import Spec

FORMAT = "konfig-rendered/v1"  # the rendered tree's layout (docs/pull.md)


@dataclass(frozen=True)
class RenderedStack:
    """One pull stack: its folder on the branch and its files, or why it has none."""

    path: str  # appops/<project>/<stack>
    branch: str
    folder: str  # <cluster>/<project>/<stack>
    files: dict[str, bytes] = field(default_factory=dict)  # name in the folder -> bytes
    refused: tuple[Refusal, ...] = ()
    error: str | None = None  # the compile error
    where: tuple[str, int | None] = ("", None)  # file and line of the first problem
    blocked: str | None = None  # not the folder reviewed (publish --reviewed): why

    @property
    def ok(self) -> bool:
        return self.error is None and not self.refused and self.blocked is None


@dataclass(frozen=True)
class BranchCommit:
    """What publishing did to one branch."""

    branch: str
    commit: str | None  # None: nothing changed, nothing committed
    changed: tuple[str, ...]  # stack folders written or removed
    removed: tuple[str, ...]  # stack folders removed (their stack left pull for it)


def pull_stacks(repo: Repository) -> list[Stack]:
    """The repository's stacks in pull delivery, in path order; ConfigError (every
    problem, with file and line) when a ``delivery:`` breaks the stack.yaml contract."""
    from konfig import contracts
    from konfig.repo.layout import STACK_FILE

    problems: list[str] = []
    for stack in repo.stacks:
        if "delivery" not in stack.raw:
            continue
        rel = f"{stack.path}/{STACK_FILE}"
        text = (repo.root / rel).read_text(encoding="utf-8")
        for v in contracts.violations("stack", stack.raw, file=rel, text=text):
            if v.path[:1] == ("delivery",):
                problems.append(str(v))
    if problems:
        raise ConfigError(
            "invalid `delivery:` in stack.yaml:\n  " + "\n  ".join(problems),
            hint="`delivery: {mode: pull, target: {cluster: NAME, branch: rendered}}` or "
            "`delivery: {mode: push}` (docs/pull.md)",
        )
    return [s for s in repo.stacks if s.delivery.pull]


def render_stacks(
    repo: Repository,
    stacks: Sequence[Stack],
    *,
    jobs: int | None = None,
    state: Path | None = None,
    settings: CompileSettings | None = None,
) -> list[RenderedStack]:
    """Compile ``stacks`` and render each, refusals and compile errors included."""
    from konfig.check.locate import locate

    out: list[RenderedStack] = []
    results = compile_stacks(repo, stacks, jobs=jobs, state=state, settings=settings)
    for stack, result in zip(stacks, results, strict=True):
        delivery = stack.delivery
        folder = f"{delivery.cluster}/{stack.short}"
        base = RenderedStack(stack.path, delivery.branch, folder)
        if result.spec is None:
            error = result.error
            out.append(
                RenderedStack(
                    stack.path,
                    delivery.branch,
                    folder,
                    error=str(error) if error else "compile failed",
                    where=(error.file or stack.path, error.line) if error else (stack.path, None),
                )
            )
            continue
        refused = refusals(result.spec)
        if refused:
            first = result.spec.by_id().get(refused[0].resource)
            out.append(
                RenderedStack(
                    base.path,
                    base.branch,
                    folder,
                    refused=tuple(refused),
                    where=locate(repo.root, stack, first),
                )
            )
            continue
        out.append(RenderedStack(base.path, base.branch, folder, files=render(result.spec)))
    return out


def tree(rendered: Sequence[RenderedStack], existing: Collection[str] = ()) -> dict[str, bytes]:
    """The files of one branch's rendered tree (path -> bytes) for ``rendered`` (the
    stacks that rendered; ``existing``: stack folders kept as they are, e.g. of a stack
    that failed), each cluster's ``kustomization.yaml`` included."""
    files: dict[str, bytes] = {}
    clusters: dict[str, set[str]] = {}
    for stack in rendered:
        for name, data in stack.files.items():
            files[f"{stack.folder}/{name}"] = data
        cluster, _, rest = stack.folder.partition("/")
        clusters.setdefault(cluster, set()).add(rest)
    for folder in existing:
        cluster, _, rest = folder.partition("/")
        clusters.setdefault(cluster, set()).add(rest)
    for cluster, folders in clusters.items():
        files[f"{cluster}/{KUSTOMIZATION}"] = cluster_kustomization(dict.fromkeys(folders))
    return dict(sorted(files.items()))


def stack_folders(paths: Collection[str]) -> set[str]:
    """The stack folders (``<cluster>/<project>/<stack...>``) among a branch's files:
    every folder below a cluster folder holding a ``kustomization.yaml``."""
    found = set()
    for path in paths:
        p = PurePosixPath(path)
        if p.name == KUSTOMIZATION and len(p.parts) >= 4:
            found.add(p.parent.as_posix())
    return found


def publish(
    repo: Repository,
    rendered: Sequence[RenderedStack],
    *,
    source: str,
    extra_branches: Sequence[str] = (),
) -> list[BranchCommit]:
    """Write ``rendered`` onto their branches (and prune the stack folders of stacks no
    longer published there on those, ``extra_branches`` and the default branch
    ``rendered`` when it exists): one commit per branch that changes, naming ``source``
    and the stacks."""
    branches = sorted({r.branch for r in rendered} | set(extra_branches))
    if DEFAULT_RENDERED_BRANCH not in branches and gitwrite.branch_files(
        repo.root, DEFAULT_RENDERED_BRANCH
    ):
        branches.append(DEFAULT_RENDERED_BRANCH)  # its last pull stack may have left
    done: list[BranchCommit] = []
    for branch in branches:
        mine = [r for r in rendered if r.branch == branch]
        old = gitwrite.branch_files(repo.root, branch) or {}
        kept = {r.folder for r in mine if not r.ok and _has_folder(old, r.folder)}
        wanted = tree([r for r in mine if r.ok], kept)
        changes: dict[str, bytes | None] = {}
        for path, data in wanted.items():
            if old.get(path) != gitrepo.blob_id(data):
                changes[path] = data
        for path in old:
            if path in wanted or any(path.startswith(k + "/") for k in kept):
                continue
            changes[path] = None
        folders = stack_folders(set(wanted)) | stack_folders(set(old))
        changed_folders = sorted(f for f in folders if any(p.startswith(f + "/") for p in changes))
        removed = sorted(stack_folders(set(old)) - stack_folders(set(wanted)) - kept)
        if not changes:
            done.append(BranchCommit(branch, None, (), ()))
            continue
        message = _message(source, changed_folders, removed)
        commit = gitwrite.commit_files(repo.root, branch, changes, message)
        done.append(BranchCommit(branch, commit, tuple(changed_folders), tuple(removed)))
    return done


def _has_folder(files: dict[str, str], folder: str) -> bool:
    return f"{folder}/{KUSTOMIZATION}" in files


def _message(source: str, changed: Sequence[str], removed: Sequence[str]) -> str:
    subject = f"konfig publish {source[:12]}: " + (
        ", ".join(changed) if len(changed) <= 3 else f"{len(changed)} stacks"
    )
    lines = [subject, "", f"Source-Commit: {source}", f"Format: {FORMAT}"]
    lines += [f"Stack: {folder}" for folder in changed if folder not in removed]
    lines += [f"Removed: {folder}" for folder in removed]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class FolderDiff:
    """What publishing would change in one stack folder, against a base of the branch."""

    path: str  # the stack
    branch: str
    folder: str
    base: str  # the ref compared with ("" when the branch exists nowhere yet)
    digest: str  # of the folder's rendered bytes (folder_digest)
    diff: str  # unified diff, "" when unchanged
    old: dict[str, bytes] = field(default_factory=dict, compare=False)  # the folder now


def folder_digest(files: dict[str, bytes]) -> str:
    """A stack folder's digest: sha256 over each file's name and bytes, in name order.
    What the pull request reviews (``publish --diff``) and what ``publish --expect``
    requires before it writes."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + str(len(files[name])).encode() + b"\0" + files[name])
    return "sha256:" + h.hexdigest()


def diff_against(
    repo: Repository, rendered: Sequence[RenderedStack], *, remote: str = "origin"
) -> list[FolderDiff]:
    """Each rendered stack folder against its branch as published: ``<remote>/<branch>``
    when it exists (a pull request's CI), else the local branch; every line of every
    file that publishing would add, change or remove."""
    out: list[FolderDiff] = []
    bases: dict[str, tuple[str, dict[str, str]]] = {}
    for r in rendered:
        if not r.ok:
            continue
        if r.branch not in bases:
            bases[r.branch] = _base(repo, r.branch, remote)
        base, files = bases[r.branch]
        prefix = r.folder + "/"
        old_ids = {p[len(prefix) :]: sha for p, sha in files.items() if p.startswith(prefix)}
        blobs = gitrepo.read_blobs(repo.root, old_ids.values())
        old = {name: blobs[sha] for name, sha in old_ids.items()}
        text: list[str] = []
        for name in sorted(set(old) | set(r.files)):
            before, after = old.get(name), r.files.get(name)
            if before == after:
                continue
            text += difflib.unified_diff(
                (before or b"").decode("utf-8").splitlines(keepends=True),
                (after or b"").decode("utf-8").splitlines(keepends=True),
                fromfile=f"a/{prefix}{name}" if before is not None else "/dev/null",
                tofile=f"b/{prefix}{name}" if after is not None else "/dev/null",
            )
        out.append(
            FolderDiff(r.path, r.branch, r.folder, base, folder_digest(r.files), "".join(text), old)
        )
    return out


@dataclass(frozen=True)
class PullPreview:
    """A pull stack in a pull request's preview: what the merge will publish (the folder
    diff and digest, byte for byte what ``konfig publish`` writes) and the objects, new
    and as published now, for the live preview of what the controller will change."""

    branch: str
    folder: str
    diff: FolderDiff | None  # None: refused, nothing would be published
    refused: tuple[Refusal, ...] = ()
    objects: tuple[dict[str, Any], ...] = ()  # what the folder will hold
    published: tuple[dict[str, Any], ...] = ()  # what it holds on the branch now


def preview_pull(
    repo: Repository, stack: Stack, spec: Spec, *, remote: str = "origin"
) -> PullPreview:
    """``stack`` (in pull delivery) compiled as ``spec``: its folder diff against the
    rendered branch as published (:func:`diff_against`) and the objects on both sides."""
    delivery = stack.delivery
    folder = f"{delivery.cluster}/{stack.short}"
    refused = refusals(spec)
    if refused:
        return PullPreview(delivery.branch, folder, None, tuple(refused))
    rendered = RenderedStack(stack.path, delivery.branch, folder, files=render(spec))
    (diff,) = diff_against(repo, [rendered], remote=remote)
    published = []
    for name, data in sorted(diff.old.items()):
        if name == KUSTOMIZATION or not name.endswith(".yaml"):
            continue
        loaded = load_yaml_text(data.decode("utf-8"), file=f"{diff.base}:{folder}/{name}")
        if isinstance(loaded, dict):
            published.append(loaded)
    return PullPreview(
        delivery.branch,
        folder,
        diff,
        objects=tuple(r.attributes for r in spec.kubernetes()),
        published=tuple(published),
    )


def _base(repo: Repository, branch: str, remote: str) -> tuple[str, dict[str, str]]:
    for ref in (f"refs/remotes/{remote}/{branch}", f"refs/heads/{branch}"):
        files = gitwrite.branch_files(repo.root, branch, ref=ref)
        if files is not None:
            return ref, files
    return "", {}


def unexpected(
    rendered: Sequence[RenderedStack], expected: dict[str, str]
) -> list[tuple[str, str, str]]:
    """The stacks of ``expected`` (stack path -> digest reviewed) whose rendered folder
    has another digest now, or that did not render: (path, expected, found)."""
    by_path = {r.path: r for r in rendered}
    wrong = []
    for path, digest in sorted(expected.items()):
        r = by_path.get(path)
        found = folder_digest(r.files) if r is not None and r.ok else "(not rendered)"
        if found != digest:
            wrong.append((path, digest, found))
    return wrong


# -- at merge: the folder rendered again, compared with the one reviewed -----------------

ReviewStatus = Literal["reviewed", "changed", "unreviewed"]


@dataclass(frozen=True)
class PublishVerdict:
    """One pull stack at merge: is the folder publish would write the one reviewed?

    ``reviewed``: the record has its digest (or the folder does not change on the
    branch); ``changed``: the record has another digest; ``unreviewed``: the record
    has none and the folder changes (a direct push, a stack no preview showed).
    ``policy`` (stack.yaml ``apply.onReviewedChanged``, as for ``konfig apply
    --reviewed``) decides the other two: ``block`` keeps the folder as it is."""

    path: str
    status: ReviewStatus
    policy: str
    digest: str
    reviewed_digest: str | None

    @property
    def blocked(self) -> bool:
        return self.status != "reviewed" and self.policy == "block"

    def explain(self) -> str:
        if self.status == "reviewed":
            return f"{self.path}: the reviewed rendered folder ({self.digest})"
        if self.status == "unreviewed":
            return (
                f"{self.path}: its rendered folder changes ({self.digest}) and no preview of "
                "the merged pull request showed it"
            )
        return (
            f"{self.path}: its rendered folder is {self.digest}, not the "
            f"{self.reviewed_digest} reviewed (a later merge or a changed base changed it)"
        )


def verify_published(
    repo: Repository,
    rendered: Sequence[RenderedStack],
    reviewed: Mapping[str, str],
    policy_of: Callable[[str], str],
) -> list[PublishVerdict]:
    """Each rendered pull stack against ``reviewed`` (stack path -> folder digest, the
    record's ``published``); the folder compared with the local branch it goes to."""
    out: list[PublishVerdict] = []
    branches: dict[str, dict[str, str]] = {}
    for r in rendered:
        if not r.ok:
            continue
        now = folder_digest(r.files)
        before = reviewed.get(r.path)
        status: ReviewStatus
        if before is not None:
            status = "reviewed" if before == now else "changed"
        else:
            if r.branch not in branches:
                branches[r.branch] = gitwrite.branch_files(repo.root, r.branch) or {}
            old = branches[r.branch]
            prefix = r.folder + "/"
            had = {p[len(prefix) :]: sha for p, sha in old.items() if p.startswith(prefix)}
            same = had == {name: gitrepo.blob_id(data) for name, data in r.files.items()}
            status = "reviewed" if same else "unreviewed"
        out.append(PublishVerdict(r.path, status, policy_of(r.path), now, before))
    return out


def blocked_by(
    rendered: Sequence[RenderedStack], verdicts: Sequence[PublishVerdict]
) -> list[RenderedStack]:
    """``rendered`` with each blocked stack marked (its folder is kept as it is)."""
    why = {v.path: v.explain() for v in verdicts if v.blocked}
    return [replace(r, blocked=why[r.path]) if r.path in why else r for r in rendered]
