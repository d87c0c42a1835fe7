"""The one module that talks to git (through gitpython).

Everything is returned as plain data with POSIX paths relative to the Konfig root (the
directory holding ``kcl.mod``), which may be a subdirectory of the git work tree. Every
listing uses NUL-separated output (``-z``) so paths with spaces, quotes or newlines
survive; renames and copies are reported as a deletion plus an addition (``--no-renames``)
so both the old and the new path take part in change detection.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import git

from konfig.errors import KonfigError, UsageError

ADDED = "A"
MODIFIED = "M"
DELETED = "D"


class GitError(KonfigError):
    """git failed or the repository is not what konfig needs."""


def _said(exc: git.GitCommandError) -> str:
    """What git wrote on stderr, without gitpython's wrapping."""
    text = str(exc.stderr or "").strip()
    text = text.removeprefix("stderr:").strip().strip("'").strip()
    return text


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip().removeprefix("fatal:").removeprefix("error:").strip()
        if line:
            return line[:300]
    return "no message"


def failure(top: Path, what: str, exc: git.GitCommandError) -> GitError:
    """A failed git command as a GitError that names the real cause when git's message
    shows it (a repository git refuses, a lock, a permission), else git's first line."""
    said = _said(exc)
    if "dubious ownership" in said:
        return GitError(
            f"git refuses to work in {top}: the repository belongs to another user "
            "(git calls it dubious ownership)",
            hint=f"if you trust it: `git config --global --add safe.directory {top}` (in a CI "
            "container the checkout often belongs to another user than the job)",
        )
    if "index.lock" in said:
        return GitError(
            f"git {what} failed: another git process holds {top}/.git/index.lock",
            hint="wait for it to finish; if no git is running, a killed one left the lock: "
            "remove .git/index.lock",
        )
    if "Permission denied" in said:
        return GitError(
            f"git {what} failed: permission denied in {top} ({_first_line(said)})",
            hint="check that the user running konfig may read the repository",
        )
    if "not a git repository" in said:
        return GitError(
            f"git {what} failed: {top} is not a git repository ({_first_line(said)})",
            hint="run konfig inside the git work tree (or `git init` and commit first)",
        )
    return GitError(f"git {what} failed: {_first_line(said)}")


@dataclass(frozen=True)
class FileChange:
    """One changed path: ``A`` added, ``M`` modified (also type changes), ``D`` deleted."""

    status: str
    path: str


@dataclass(frozen=True)
class GitRepo:
    """A git repository seen from a Konfig root inside it."""

    repo: git.Repo
    root: Path  # the Konfig root (absolute)
    prefix: str  # the Konfig root relative to the git top level, "" or "a/b/"

    @property
    def cmd(self) -> git.Git:
        return self.repo.git


@cache
def _open(root: Path) -> GitRepo:
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise UsageError(
            f"{root} is not inside a git repository",
            hint="change detection compares git commits; run `git init` and commit first",
        ) from exc
    top = Path(repo.working_tree_dir or root).resolve()
    rel = root.resolve().relative_to(top).as_posix()
    return GitRepo(repo, root.resolve(), "" if rel == "." else rel + "/")


def open_repo(root: Path) -> GitRepo:
    """The git repository holding ``root``; UsageError when there is none."""
    return _open(root.resolve())


def is_repo(root: Path) -> bool:
    try:
        open_repo(root)
    except UsageError:
        return False
    return True


def rev_parse(root: Path, ref: str) -> str:
    """The commit id ``ref`` names. When it names none, the error says why: git refuses
    the repository (GitError), the repository has no commit yet, or the ref is unknown
    here (UsageError, with how to fetch it)."""
    g = open_repo(root)
    try:
        return str(g.repo.commit(ref).hexsha)
    # BrokenPipeError: gitpython's `git cat-file --batch` exited before it was asked (git
    # refusing the repository), which races with the error it would otherwise read
    except (git.BadName, git.BadObject, ValueError, git.GitCommandError, BrokenPipeError) as exc:
        raise _unknown_revision(g, ref) from exc


def _top(g: GitRepo) -> Path:
    return Path(g.repo.working_tree_dir or g.root)


def check_usable(root: Path) -> None:
    """GitError when git refuses to work in the repository (e.g. dubious ownership)."""
    g = open_repo(root)
    try:
        g.cmd.rev_parse("--git-dir")
    except git.GitCommandError as exc:
        raise failure(_top(g), "rev-parse", exc) from None


def is_shallow(root: Path) -> bool:
    g = open_repo(root)
    try:
        return str(g.cmd.rev_parse("--is-shallow-repository")).strip() == "true"
    except git.GitCommandError:
        return False


def _unknown_revision(g: GitRepo, ref: str) -> KonfigError:
    top = _top(g)
    try:
        g.cmd.rev_parse("--git-dir")
        any_commit = str(g.cmd.rev_list("-n1", "--all")).strip()
    except git.GitCommandError as exc:
        return failure(top, "rev-parse", exc)
    if not any_commit:
        return UsageError(
            f"the git repository {top} has no commits yet, so {ref!r} names nothing",
            hint="commit first (`git add -A && git commit -m 'first commit'`); change "
            "detection compares commits",
        )
    shallow = (
        " (this is a shallow clone: the commit may not be fetched)" if is_shallow(g.root) else ""
    )
    return UsageError(
        f"unknown git revision {ref!r}{shallow}",
        hint="fetch it first (in CI: actions/checkout with fetch-depth: 0, or "
        "`git fetch origin <branch>`)",
    )


def count_commits(root: Path, base: str, head: str) -> int:
    """The number of commits in ``head`` that ``base`` lacks (``git rev-list --count``)."""
    g = open_repo(root)
    try:
        return int(g.cmd.rev_list("--count", f"{base}..{head}"))
    except git.GitCommandError as exc:
        raise GitError(
            f"git rev-list --count {base[:12]}..{head[:12]} failed: {exc.stderr.strip()}"
        ) from exc


def deleted_files(root: Path, name: str, under: str = "appops") -> list[tuple[str, str]]:
    """(commit, path) of every file called ``name`` below ``under`` that a commit of
    HEAD's history deleted, newest first; paths relative to the Konfig root."""
    g = open_repo(root)
    try:
        out = g.cmd.log(
            "--diff-filter=D",
            "--name-only",
            "--no-renames",
            "--format=%x00%H",
            "HEAD",
            "--",
            f":(glob){g.prefix}{under}/**/{name}",
        )
    except git.GitCommandError as exc:
        raise GitError(f"git log of deleted {name} files failed: {exc.stderr.strip()}") from exc
    found: list[tuple[str, str]] = []
    for record in out.split("\0"):
        lines = [line for line in record.splitlines() if line.strip()]
        if not lines:
            continue
        commit, paths = lines[0], lines[1:]
        for path in paths:
            rel = _strip(g, path)
            if rel is not None:
                found.append((commit, rel))
    return found


def file_before(root: Path, commit: str, path: str) -> bytes | None:
    """The content ``path`` had just before ``commit`` (in its first parent), if any."""
    g = open_repo(root)
    try:
        data: bytes = g.repo.git.show(f"{commit}^:{g.prefix}{path}", stdout_as_string=False)
    except git.GitCommandError:
        return None
    return data


def merge_base(root: Path, base: str, head: str) -> str:
    """The best common ancestor of two commits, as ``git diff base...head`` uses."""
    g = open_repo(root)
    try:
        bases = g.repo.merge_base(base, head)
    except git.GitCommandError as exc:
        raise failure(_top(g), f"merge-base {base[:12]} {head[:12]}", exc) from exc
    if not bases:
        if is_shallow(root):
            raise GitError(
                f"{base[:12]} and {head[:12]} have no common ancestor in this shallow clone: "
                "the history that joins them was not fetched",
                hint="fetch the whole history: actions/checkout with fetch-depth: 0, or "
                "`git fetch --unshallow`",
            )
        raise GitError(
            f"{base[:12]} and {head[:12]} have no common ancestor: their histories are unrelated",
            hint="compare against a branch that shares history with the head (--base)",
        )
    return str(bases[0].hexsha)


def _split_z(out: str) -> list[str]:
    return [part for part in out.split("\0") if part != ""]


def _strip(g: GitRepo, path: str) -> str | None:
    if not g.prefix:
        return path
    return path[len(g.prefix) :] if path.startswith(g.prefix) else None


def _diff_records(g: GitRepo, out: str) -> list[FileChange]:
    parts = out.split("\0")
    changes: list[FileChange] = []
    i = 0
    while i + 1 < len(parts):
        status, path = parts[i], parts[i + 1]
        i += 2
        if not status:
            break
        rel = _strip(g, path)
        if rel is None:
            continue
        kind = status[0]
        changes.append(FileChange(kind if kind in (ADDED, DELETED) else MODIFIED, rel))
    return changes


def diff(root: Path, base: str, head: str | None) -> list[FileChange]:
    """Files that differ between commit ``base`` and ``head`` (None: the work tree).

    For the work tree, uncommitted changes to tracked files and untracked files that
    are not ignored count too.
    """
    g = open_repo(root)
    args = ["--name-status", "-z", "--no-renames", "--no-ext-diff", base]
    if head is not None:
        args.append(head)
    try:
        out = g.cmd.diff(*args, "--", g.prefix or ".")
        changes = _diff_records(g, out)
        if head is None:
            untracked = g.cmd.ls_files("-z", "--others", "--exclude-standard", "--full-name")
            for path in _split_z(untracked):
                rel = _strip(g, path)
                if rel is not None:
                    changes.append(FileChange(ADDED, rel))
    except git.GitCommandError as exc:
        raise failure(_top(g), "diff", exc) from exc
    return sorted(set(changes), key=lambda c: (c.path, c.status))


def list_tree(root: Path, commit: str, paths: Sequence[str] = ()) -> dict[str, str]:
    """Every file of ``commit`` under the Konfig root: path -> blob id.

    ``paths`` (relative to the root) limits the listing to those directories or files.
    Submodules and symlinks are left out: KCL can read neither from a tree.
    """
    g = open_repo(root)
    spec = [g.prefix + p for p in paths] if paths else [g.prefix or "."]
    try:
        out = g.cmd.ls_tree("-r", "-z", "--full-tree", commit, "--", *spec)
    except git.GitCommandError as exc:
        raise failure(_top(g), f"ls-tree {commit[:12]}", exc) from exc
    files: dict[str, str] = {}
    for record in _split_z(out):
        meta, _, path = record.partition("\t")
        mode, kind, sha = meta.split(" ")
        if kind != "blob" or mode == "120000":
            continue
        rel = _strip(g, path)
        if rel is not None:
            files[rel] = sha
    return files


def list_worktree(root: Path) -> list[str]:
    """Paths in the work tree git would see: tracked and untracked, not ignored, existing."""
    g = open_repo(root)
    try:
        out = g.cmd.ls_files(
            "-z", "--cached", "--others", "--exclude-standard", "--full-name", "--", g.prefix or "."
        )
    except git.GitCommandError as exc:
        raise failure(_top(g), "ls-files", exc) from exc
    seen: set[str] = set()
    for path in _split_z(out):
        rel = _strip(g, path)
        if rel is not None:
            seen.add(rel)
    return sorted(seen)


def read_blobs(root: Path, blob_ids: Iterable[str]) -> dict[str, bytes]:
    """The content of each blob, all read by one ``git cat-file --batch`` process."""
    wanted = sorted(set(blob_ids))
    if not wanted:
        return {}
    g = open_repo(root)
    with tempfile.TemporaryFile() as request:
        request.write("".join(f"{sha}\n" for sha in wanted).encode())
        request.seek(0)
        try:
            raw = g.cmd.cat_file("--batch", istream=request, stdout_as_string=False)
        except git.GitCommandError as exc:
            raise failure(_top(g), "cat-file", exc) from exc
    assert isinstance(raw, bytes)
    out: dict[str, bytes] = {}
    pos = 0
    for sha in wanted:
        end = raw.index(b"\n", pos)
        header = raw[pos:end].split(b" ")
        pos = end + 1
        if len(header) != 3:  # "<sha> missing"
            raise GitError(f"git object {sha} is missing from the repository")
        size = int(header[2])
        out[sha] = raw[pos : pos + size]
        pos += size + 1
    return out


def blob_id(data: bytes) -> str:
    """The id git gives a blob with this content (so work-tree files share cache keys)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class DefaultBase:
    """The branch a change is compared with when the user names none, and why."""

    ref: str  # e.g. origin/main
    why: str


def default_base(root: Path) -> DefaultBase:
    """What a pull request from here would merge into: the default branch of the remote
    the current branch tracks (``origin`` when it tracks none), as ``git clone`` records
    it (``<remote>/HEAD``), else ``<remote>/main`` or ``<remote>/master``, else the
    current branch's upstream. UsageError saying what to pass when there is none."""
    repo = open_repo(root).repo
    remote, upstream = "origin", None
    try:
        tracking = repo.active_branch.tracking_branch()
    except TypeError:  # a detached HEAD (a CI checkout) tracks nothing
        tracking = None
    if tracking is not None:
        remote, upstream = tracking.remote_name, tracking.name
    try:
        target = str(repo.git.symbolic_ref("--quiet", "--short", f"refs/remotes/{remote}/HEAD"))
        return DefaultBase(target, f"the default branch of {remote}")
    except git.GitCommandError:
        pass
    for name in ("main", "master"):
        try:
            repo.git.rev_parse("--verify", "--quiet", f"refs/remotes/{remote}/{name}")
            return DefaultBase(f"{remote}/{name}", f"{remote}'s {name} branch")
        except git.GitCommandError:
            continue
    if upstream is not None:
        return DefaultBase(upstream, "the upstream of the current branch")
    raise UsageError(
        "no branch to compare with: the repository has no remote default branch",
        hint="pass --base REF, the branch your change will merge into (e.g. --base main)",
    )


def uncommitted(root: Path) -> list[str]:
    """Paths under the Konfig root whose changes are not committed: modified or staged
    tracked files and untracked files that are not ignored (a rename: both paths); a
    folder holding only untracked files is one path ending in ``/`` (git does not walk
    into it: on 5,000 stacks that walk cost more than the rest of ``konfig changed``)."""
    g = open_repo(root)
    try:
        out = g.cmd.status(
            "--porcelain=v1",
            "-z",
            "--untracked-files=normal",
            "--no-renames",
            "--",
            g.prefix or ".",
        )
    except git.GitCommandError as exc:
        raise GitError(f"git status failed: {exc.stderr.strip()}") from exc
    paths: set[str] = set()
    for record in _split_z(out):
        rel = _strip(g, record[3:])
        if rel is not None:
            paths.add(rel)
    return sorted(paths)
