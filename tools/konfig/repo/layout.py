"""The repository on disk: its root, projects and stacks.

A project is a directory under ``appops/`` holding ``project.yaml``; a stack is a
directory inside a project holding ``stack.yaml``. ``name`` in each must equal the
directory name. Discovery never raises for a bad project or stack: it returns
:class:`Problem` records so that one broken stack never hides the others. Every such
problem makes a stack (or a whole project) unusable, so every command reports it as an
error, before anything else, and carries on with the other stacks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from konfig.errors import ConfigError, KonfigError, UsageError
from konfig.repo.settings import (
    CACHE_DIR,
    CONFIG_FILE,
    RepoConfig,
    is_production,
    load_repo_config,
)
from konfig.repo.statmemo import MISSING, StatMemo

APPOPS = "appops"
PROJECT_FILE = "project.yaml"
STACK_FILE = "stack.yaml"
MAIN = "main.k"  # a stack's entry file
KCL_YAML = "kcl.yaml"  # a stack's optional kcl_cli_configs (entry files, options)
KCL_MOD_VAR = "${KCL_MOD}"  # in kcl.yaml paths: the directory holding kcl.mod
ROOT_MARKER = "kcl.mod"

_T = TypeVar("_T")


@dataclass(frozen=True)
class Problem:
    """Something wrong with the repository layout, with where it is."""

    rule: str
    message: str
    file: str
    line: int | None = None
    hint: str | None = None  # how to fix it

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        text = f"{where}: {self.message} [{self.rule}]"
        return f"{text}\n  hint: {self.hint}" if self.hint else text

    @property
    def directory(self) -> str:
        """The project or stack directory the problem is about."""
        return PurePosixPath(self.file).parent.as_posix()


@dataclass(frozen=True)
class Project:
    name: str
    path: str  # relative to the repository root, POSIX
    description: str = ""
    owners: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


PUSH = "push"
PULL = "pull"
DEFAULT_RENDERED_BRANCH = "rendered"


@dataclass(frozen=True)
class Delivery:
    """How a merge delivers a stack: ``push`` (konfig apply) or ``pull`` (konfig publish
    writes ``<cluster>/<project>/<stack>/`` on ``branch``; a controller applies it)."""

    mode: str
    branch: str = ""
    cluster: str = ""

    @property
    def pull(self) -> bool:
        return self.mode == PULL


@dataclass(frozen=True)
class Stack:
    project: str
    name: str
    path: str  # relative to the repository root, POSIX: appops/<project>/<stack>
    project_path: str
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # the ignore rules it inherits, as written, per file: konfig.yaml's, its project's
    inherited_ignore: tuple[tuple[str, tuple[dict[str, Any], ...]], ...] = field(
        default=(), compare=False, hash=False
    )

    @property
    def short(self) -> str:
        """The ``<project>/<stack>`` address."""
        return f"{self.project}/{PurePosixPath(self.path).relative_to(self.project_path)}"

    @property
    def kube_context(self) -> str | None:
        kube = self.raw.get("kubernetes")
        if isinstance(kube, dict) and isinstance(kube.get("context"), str):
            return str(kube["context"])
        return None

    def apply_setting(self, key: str) -> bool:
        """A switch of ``stack.yaml`` ``apply:`` (``replaceOnImmutable``, ``adoptUnmanaged``)."""
        settings = self.raw.get("apply")
        return isinstance(settings, dict) and settings.get(key) is True

    def on_reviewed_changed(self, production_stacks: tuple[str, ...]) -> str:
        """``stack.yaml`` ``apply: {onReviewedChanged}``: ``block`` or ``apply``; by
        default ``block`` for a production stack (:func:`is_production`), else ``apply``."""
        settings = self.raw.get("apply")
        chosen = settings.get("onReviewedChanged") if isinstance(settings, dict) else None
        if chosen in ("block", "apply"):
            return str(chosen)
        production = is_production(self.path, self.raw.get("production"), production_stacks)
        return "block" if production else "apply"

    @property
    def delivery(self) -> Delivery:
        """``stack.yaml`` ``delivery:``: push (the default) or pull with its target.
        Its shape is checked by the stack.yaml contract (``konfig check``, ``publish``)."""
        raw = self.raw.get("delivery")
        if not isinstance(raw, dict) or raw.get("mode") != PULL:
            return Delivery(PUSH)
        target = raw.get("target")
        target = target if isinstance(target, dict) else {}
        branch = target.get("branch")
        cluster = target.get("cluster")
        return Delivery(
            PULL,
            branch if isinstance(branch, str) and branch else DEFAULT_RENDERED_BRANCH,
            cluster if isinstance(cluster, str) else "",
        )

    @property
    def kubeconfig(self) -> str | None:
        kube = self.raw.get("kubernetes")
        if isinstance(kube, dict) and isinstance(kube.get("kubeconfig"), str):
            return str(kube["kubeconfig"])
        return None


@dataclass(frozen=True)
class Repository:
    root: Path
    config: RepoConfig
    projects: tuple[Project, ...]
    stacks: tuple[Stack, ...]
    problems: tuple[Problem, ...]

    def stack(self, address: str) -> Stack:
        """Resolve ``appops/<project>/<stack>`` or ``<project>/<stack>`` (or a path)."""
        found = resolve_stacks(self, [address])
        if not found:
            raise unusable_error(self, [address])
        return found[0]

    def unusable(self, path: str) -> tuple[Problem, ...]:
        """The problems that make the stack directory ``path`` unusable: its own, or its
        project's (a stack of a broken project is dropped with it)."""
        return tuple(
            p for p in self.problems if p.directory == path or is_within(path, p.directory)
        )


def cache_dir(root: Path) -> Path:
    """Where konfig keeps its caches: ``.cache/konfig`` in the repository root (gitignored)."""
    return root / CACHE_DIR


def find_root(start: Path | None = None) -> Path:
    """Walk up from ``start`` (default: the working directory) to the directory with kcl.mod."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / ROOT_MARKER).is_file():
            return candidate
    raise UsageError(
        f"not inside a Konfig repository: no {ROOT_MARKER} in {here} or any parent",
        hint="run konfig from inside the repository, or pass --root",
    )


def _read_named(
    root: Path, rel: str, kind: str, memo: StatMemo | None = None
) -> tuple[dict[str, Any] | None, Problem | None]:
    st = None
    if memo is not None:
        try:
            st = os.stat(f"{root}/{rel}")  # noqa: PTH116 (a string: runs per stack)
        except OSError:
            st = None  # read below, which reports it
        else:
            known = memo.get(rel, st)
            if known is not MISSING:
                return known, None  # read and found right before, unchanged since
    data, problem = _parse_named(root / rel, rel, root, kind)
    if memo is not None and st is not None and problem is None:
        memo.put(rel, st, data)
    return data, problem


def _parse_named(
    path: Path, rel: str, root: Path, kind: str
) -> tuple[dict[str, Any] | None, Problem | None]:
    from konfig.repo.yamlio import load_yaml_file  # PyYAML: only when a file is read

    try:
        data = load_yaml_file(path, root=root)
    except ConfigError as exc:
        return None, Problem(
            f"{kind}-yaml",
            exc.problem,
            rel,
            exc.line,
            f"fix the YAML; {kind}.yaml holds a mapping with at least `name: {path.parent.name}`",
        )
    return check_named(data, rel, path.parent.name, kind, lambda: _line_of_key(path, "name"))


def check_named(
    data: Any,
    rel: str,
    expected: str,
    kind: str,
    name_line: Callable[[], int | None] = lambda: None,
) -> tuple[dict[str, Any] | None, Problem | None]:
    """A parsed ``project.yaml`` / ``stack.yaml`` (``kind``: project or stack) at ``rel``
    checked: a mapping whose ``name`` is ``expected``, the directory's name."""
    fix = f"`name: {expected}`"
    if not isinstance(data, dict):
        return None, Problem(
            f"{kind}-yaml", "expected a mapping with at least `name`", rel, 1, f"write {fix}"
        )
    name = data.get("name")
    if name is None:
        return None, Problem(
            f"{kind}-name", f"`name` is required and must be {expected!r}", rel, 1, f"add {fix}"
        )
    if name != expected:
        return None, Problem(
            f"{kind}-name",
            f"name {name!r} does not match the directory name {expected!r}",
            rel,
            name_line(),
            f"set {fix}, or rename the directory to {name!r}"
            + (" (and its inventory with it: see docs/apply.md)" if kind == "stack" else ""),
        )
    return data, None


def _line_of_key(path: Path, key: str) -> int | None:
    try:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith(f"{key}:"):
                return number
    except OSError:
        return None
    return None


def discover(root: Path, memo: StatMemo | None = None) -> Repository:
    """Find every project and stack under ``root/appops``.

    ``memo`` (:func:`konfig.fingerprint.settings_memo`) remembers each ``stack.yaml``
    and ``project.yaml`` found right, by its stat: a warm run reads only changed files.
    """
    config = load_repo_config(root, memo)
    appops = root / APPOPS
    projects: dict[str, Project] = {}
    stacks: dict[str, Stack] = {}
    problems: list[Problem] = []
    if not appops.is_dir():
        return Repository(root, config, (), (), ())

    top = str(appops)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        files = set(filenames)
        if PROJECT_FILE not in files and STACK_FILE not in files:
            continue  # nothing to find here (paths are built only where there is)
        rel = APPOPS + dirpath[len(top) :]
        name = rel.rpartition("/")[2]
        enclosing = _enclosing(rel, projects)
        if PROJECT_FILE in files:
            if enclosing is not None:
                problems.append(
                    Problem(
                        "project-nested",
                        f"project inside project {enclosing.path!r}: projects must sit directly "
                        f"under {APPOPS}/",
                        f"{rel}/{PROJECT_FILE}",
                        hint=f"move {rel} to {APPOPS}/{name}, or delete this {PROJECT_FILE}",
                    )
                )
            elif rel.count("/") != 1:  # not directly in appops/
                problems.append(
                    Problem(
                        "project-location",
                        f"projects must be directories directly under {APPOPS}/",
                        f"{rel}/{PROJECT_FILE}",
                        hint=f"move {rel} to {APPOPS}/{name}",
                    )
                )
            else:
                data, problem = _read_named(root, f"{rel}/{PROJECT_FILE}", "project", memo)
                if problem:
                    problems.append(problem)
                    # still treat the directory as a project so its stacks are not
                    # reported as "outside a project" as well
                    projects[rel] = Project(name=name, path=rel, raw={"_invalid": True})
                else:
                    assert data is not None
                    owners = data.get("owners") or ()
                    projects[rel] = Project(
                        name=name,
                        path=rel,
                        description=str(data.get("description") or ""),
                        owners=tuple(str(o) for o in owners) if isinstance(owners, list) else (),
                        raw=data,
                    )
        if STACK_FILE in files:
            if PROJECT_FILE in files:
                problems.append(
                    Problem(
                        "stack-is-project",
                        "a directory cannot be both a project and a stack",
                        f"{rel}/{STACK_FILE}",
                        hint=f"move the stack into a directory of its own under {rel}/",
                    )
                )
                continue
            project = _enclosing(rel, projects)
            if project is None:
                problems.append(
                    Problem(
                        "stack-outside-project",
                        f"stack is not inside a project (no {PROJECT_FILE} in a parent directory "
                        f"under {APPOPS}/)",
                        f"{rel}/{STACK_FILE}",
                        hint=outside_project_hint(rel),
                    )
                )
                continue
            outer = _enclosing(rel, stacks)
            if outer is not None:
                problems.append(
                    Problem(
                        "stack-nested",
                        f"stack inside stack {outer.path!r}",
                        f"{rel}/{STACK_FILE}",
                        hint=f"move it out of {outer.path}/ (stacks cannot nest)",
                    )
                )
                continue
            data, problem = _read_named(root, f"{rel}/{STACK_FILE}", "stack", memo)
            if problem:
                problems.append(problem)
                continue
            if project.raw.get("_invalid"):
                continue
            assert data is not None
            stacks[rel] = Stack(
                project=project.name,
                name=name,
                path=rel,
                project_path=project.path,
                raw=data,
                inherited_ignore=(
                    (CONFIG_FILE, config.ignore),
                    (f"{project.path}/{PROJECT_FILE}", tuple(project.raw.get("ignore") or ())),
                ),
            )
    if memo is not None:
        memo.save()
    valid_projects = tuple(p for p in projects.values() if not p.raw.get("_invalid"))
    return Repository(
        root=root,
        config=config,
        projects=tuple(sorted(valid_projects, key=lambda p: p.path)),
        stacks=tuple(sorted(stacks.values(), key=lambda s: s.path)),
        problems=tuple(problems),
    )


def outside_project_hint(rel: str) -> str:
    """How to fix a stack at ``rel`` (its directory) that is not inside a project."""
    parts = PurePosixPath(rel).parts
    if len(parts) >= 3 and parts[0] == APPOPS:
        project = PurePosixPath(*parts[:2]).as_posix()
        return f"add {project}/{PROJECT_FILE} with `name: {parts[1]}`"
    return f"move the stack to {APPOPS}/<project>/<stack>/"


def is_within(path: str, parent: str) -> bool:
    """Component-wise containment: ``appops/a/x`` is within ``appops/a``, not ``appops/ab``."""
    p, q = PurePosixPath(path).parts, PurePosixPath(parent).parts
    return len(p) >= len(q) and p[: len(q)] == q


def _enclosing(rel: str, by_path: dict[str, _T]) -> _T | None:
    """The entry of ``by_path`` at a proper ancestor directory of ``rel``, if any."""
    cut = rel.rfind("/")
    while cut > 0:  # each parent, without building path objects (runs per directory)
        hit = by_path.get(rel[:cut])
        if hit is not None:
            return hit
        cut = rel.rfind("/", 0, cut)
    return None


def resolve_stacks(repo: Repository, addresses: Iterable[str]) -> list[Stack]:
    """Map user-given stack addresses to stacks, in the given order, without duplicates.

    An address of a stack that a layout problem makes unusable is left out (every
    command reports the problems first, as errors); an unknown address is a UsageError.
    """
    by_path = {s.path: s for s in repo.stacks}
    found: list[Stack] = []
    for address in addresses:
        stack = _resolve_one(repo, by_path, address)
        if stack is not None and stack not in found:
            found.append(stack)
    return found


def unusable_error(repo: Repository, addresses: Iterable[str]) -> KonfigError:
    """The error for addresses that name only unusable stacks: nothing left to do."""
    named = ", ".join(addresses)
    problems = [p for a in addresses for p in repo.unusable(_candidate_path(repo, a))]
    where = "; ".join(f"{p.file}:{p.line}" if p.line else p.file for p in dict.fromkeys(problems))
    return KonfigError(
        f"{named}: unusable because of the layout errors above ({where}); nothing was done",
        hint=problems[0].hint if problems and problems[0].hint else None,
    )


def _candidate_path(repo: Repository, address: str) -> str:
    read = parse_stack_address(repo.root, address)
    for candidate in read.candidates:
        if repo.unusable(candidate) and (repo.root / candidate / STACK_FILE).is_file():
            return candidate
    return read.candidates[-1]


@dataclass(frozen=True)
class StackAddress:
    """A stack address as the user gave it, read: the repository-relative POSIX paths it
    may name, most likely first (a path from the working directory, the address from
    the repository root, the address under ``appops/``)."""

    text: str
    candidates: tuple[str, ...]


def parse_stack_address(root: Path, address: str) -> StackAddress:
    """Read a stack address (``appops/<project>/<stack>``, ``<project>/<stack>``, or a
    path to the stack's directory): the one parser of every command that takes stacks.

    A usage error when the address is empty or leads outside the repository: an
    absolute path elsewhere, ``..`` climbing out (an address with ``..`` is a path, read
    from the working directory when that is inside the repository, else from its
    root), or a symbolic link in the repository that points out of it.
    """
    cleaned = address.strip().rstrip("/")
    if not cleaned:
        raise UsageError(
            f"empty stack address {address!r}",
            hint="give appops/<project>/<stack> or <project>/<stack> (see `konfig list`)",
        )
    top = root.resolve()
    cwd = Path.cwd().resolve()

    def within(path: Path) -> bool:
        return path == top or top in path.parents

    def inside(path: Path) -> str:
        """``path`` relative to the repository, symbolic links followed; a usage error
        when it leads out of it."""
        resolved = path.resolve()
        if within(resolved):
            return resolved.relative_to(top).as_posix()
        if within(Path(os.path.normpath(path))):
            why = f"a symbolic link on the way leads to {resolved}"
        elif ".." in PurePosixPath(cleaned).parts:
            why = f"`..` climbs out of it, to {resolved}"
        else:
            why = f"{resolved} is not in {top}"
        raise UsageError(
            f"stack {address!r} is outside the repository: {why}",
            hint=f"stacks live under {top}/{APPOPS}/: give appops/<project>/<stack> or "
            "<project>/<stack> (see `konfig list`)",
        )

    given = Path(cleaned)
    candidates: list[str] = []
    if given.is_absolute():
        candidates.append(inside(given))
    elif ".." in PurePosixPath(cleaned).parts:
        candidates.append(inside((cwd if within(cwd) else top) / given))
    else:
        here = cwd / given
        if here.exists():
            try:
                candidates.append(inside(here))
            except UsageError:
                if within(cwd):
                    raise  # else a path of the working directory, not of the repository
        for candidate in (cleaned, f"{APPOPS}/{cleaned}"):
            inside(top / candidate)  # a link on the way may lead out
            candidates.append(candidate)
    return StackAddress(address, tuple(dict.fromkeys(candidates)))


def _resolve_one(repo: Repository, by_path: dict[str, Stack], address: str) -> Stack | None:
    candidates = parse_stack_address(repo.root, address).candidates
    for candidate in candidates:
        if candidate in by_path:
            return by_path[candidate]
    for candidate in candidates:
        if repo.unusable(candidate) and (repo.root / candidate / STACK_FILE).is_file():
            return None  # reported as a layout error already
    known = ", ".join(s.short for s in repo.stacks[:8])
    more = " ..." if len(repo.stacks) > 8 else ""
    raise UsageError(
        f"unknown stack {address!r}",
        hint=f"use appops/<project>/<stack> or <project>/<stack>; known: {known}{more} "
        "(see `konfig list`)",
    )


def deleted_stack(path: str) -> Stack:
    """A :class:`Stack` for a stack whose directory is gone (planned from its inventory)."""
    parts = PurePosixPath(path.strip("/")).parts
    if parts and parts[0] != APPOPS:
        parts = (APPOPS, *parts)
    if len(parts) < 3:
        raise KonfigError(
            f"not a stack path: {path!r}", hint="give the stack as appops/<project>/<stack>"
        )
    project_path = PurePosixPath(*parts[:2]).as_posix()
    return Stack(
        project=parts[1],
        name=parts[-1],
        path=PurePosixPath(*parts).as_posix(),
        project_path=project_path,
    )
