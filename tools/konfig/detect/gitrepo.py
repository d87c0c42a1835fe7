"""The one module that talks to git: plain ``git`` processes, one per question.

Everything is returned as plain data with POSIX paths relative to the Konfig root (the
directory holding ``kcl.mod``), which may be a subdirectory of the git work tree. Every
listing uses NUL-separated output (``-z``) so paths with spaces, quotes or newlines
survive; renames and copies are reported as a deletion plus an addition (``--no-renames``)
so both the old and the new path take part in change detection.

konfig only asks git questions (it never writes to a repository; the exceptions are
``konfig init``, which makes a new one: :func:`init_repository`, and ``konfig publish``,
which commits to the rendered branch without touching the work tree:
:func:`commit_files`), so it runs the
``git`` command line itself: a library that wraps git costs every command that asks
one question a tenth of a second of imports. :func:`runs` counts the processes started,
so a test can hold the number a command needs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from konfig.errors import KonfigError, UsageError

ADDED = "A"
MODIFIED = "M"
DELETED = "D"

# git's messages in English (the causes below are recognised by them), as GitPython did
_ENV = {"LC_ALL": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0"}
_started = 0


class GitError(KonfigError):
    """git failed or the repository is not what konfig needs."""


class _Failed(Exception):
    """A git process exited non-zero: its exit code and what it wrote on stderr."""

    def __init__(self, status: int, stderr: str) -> None:
        super().__init__(stderr)
        self.status = status
        self.stderr = stderr


def runs() -> int:
    """How many git processes this process started so far."""
    return _started


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip().removeprefix("fatal:").removeprefix("error:").strip()
        if line:
            return line[:300]
    return "no message"


def failure(top: Path, what: str, said: str) -> GitError:
    """A failed git command as a GitError that names the real cause when git's message
    (``said``, its stderr) shows it (a repository git refuses, a lock, a permission),
    else git's first line."""
    said = said.strip()
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

    top: Path  # the git work tree's top level (git runs there)
    root: Path  # the Konfig root (absolute)
    prefix: str  # the Konfig root relative to the git top level, "" or "a/b/"


def _git(
    g: GitRepo, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> bytes:
    """What ``git <args>`` (run at the top of the work tree) wrote on stdout; _Failed
    when it exits non-zero."""
    global _started
    _started += 1
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=g.top,
            input=stdin,
            capture_output=True,
            env={**os.environ, **_ENV, **(env or {})},
            check=False,
        )
    except OSError as exc:  # no git on PATH, or the top folder vanished
        raise GitError(
            f"cannot run git in {g.top}: {exc.strerror or exc}",
            hint="install git (konfig runs the git command line)",
        ) from None
    if done.returncode != 0:
        raise _Failed(done.returncode, done.stderr.decode("utf-8", errors="replace"))
    return done.stdout


def _text(g: GitRepo, *args: str, env: dict[str, str] | None = None) -> str:
    return _git(g, *args, env=env).decode("utf-8", errors="surrogateescape")


def _top_of(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git`` (a folder, or the file
    a linked work tree or a submodule has), as git finds it."""
    for candidate in (start, *start.parents):
        marker = candidate / ".git"
        if marker.is_file() or (marker / "HEAD").is_file():
            return candidate
    return None


@cache
def _open(root: Path) -> GitRepo:
    top = _top_of(root)
    if top is None:
        raise UsageError(
            f"{root} is not inside a git repository",
            hint="change detection compares git commits; run `git init` and commit first",
        )
    rel = root.relative_to(top).as_posix()
    return GitRepo(top, root, "" if rel == "." else rel + "/")


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
    return rev_parse_all(root, [ref])[0]


def rev_parse_all(root: Path, refs: Sequence[str]) -> list[str]:
    """The commit id each of ``refs`` names, asked of one git process; errors as
    :func:`rev_parse`'s, for the first ref that names no commit."""
    g = open_repo(root)
    if any("\n" in ref for ref in refs):
        bad = next(ref for ref in refs if "\n" in ref)
        raise _unknown_revision(g, bad)
    request = "".join(f"{ref}^{{commit}}\n" for ref in refs).encode()
    try:
        out = _git(g, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=request)
    except _Failed:
        raise _unknown_revision(g, refs[0]) from None
    lines = out.decode("utf-8", errors="replace").splitlines()
    found: list[str] = []
    for ref, line in zip(refs, lines, strict=False):
        sha, _, kind = line.partition(" ")
        # "<ref> missing" or "<ref> ambiguous" for what names no single commit
        if kind != "commit" or len(sha) not in (40, 64):
            raise _unknown_revision(g, ref)
        found.append(sha)
    if len(found) != len(refs):
        raise _unknown_revision(g, refs[len(found)])
    return found


def check_usable(root: Path) -> None:
    """GitError when git refuses to work in the repository (e.g. dubious ownership)."""
    g = open_repo(root)
    try:
        _git(g, "rev-parse", "--git-dir")
    except _Failed as exc:
        raise failure(g.top, "rev-parse", exc.stderr) from None


def is_shallow(root: Path) -> bool:
    g = open_repo(root)
    try:
        return _text(g, "rev-parse", "--is-shallow-repository").strip() == "true"
    except _Failed:
        return False


def _unknown_revision(g: GitRepo, ref: str) -> KonfigError:
    try:
        _git(g, "rev-parse", "--git-dir")
        any_commit = _text(g, "rev-list", "-n1", "--all").strip()
    except _Failed as exc:
        return failure(g.top, "rev-parse", exc.stderr)
    if not any_commit:
        return UsageError(
            f"the git repository {g.top} has no commits yet, so {ref!r} names nothing",
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
        return int(_text(g, "rev-list", "--count", f"{base}..{head}", "--"))
    except _Failed as exc:
        raise GitError(
            f"git rev-list --count {base[:12]}..{head[:12]} failed: {exc.stderr.strip()}"
        ) from None


def deleted_files(root: Path, name: str, under: str = "appops") -> list[tuple[str, str]]:
    """(commit, path) of every file called ``name`` below ``under`` that a commit of
    HEAD's history deleted, newest first; paths relative to the Konfig root."""
    g = open_repo(root)
    try:
        out = _text(
            g,
            "log",
            "--diff-filter=D",
            "--name-only",
            "--no-renames",
            "--format=%x00%H",
            "HEAD",
            "--",
            f":(glob){g.prefix}{under}/**/{name}",
        )
    except _Failed as exc:
        raise GitError(f"git log of deleted {name} files failed: {exc.stderr.strip()}") from None
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
        return _git(g, "show", f"{commit}^:{g.prefix}{path}")
    except _Failed:
        return None


def file_at(root: Path, ref: str, path: str) -> bytes | None:
    """The content ``path`` has in commit ``ref`` (None when it has no such file);
    GitError when git does not know ``ref``."""
    g = open_repo(root)
    commit = rev_parse(root, ref)
    try:
        return _git(g, "show", f"{commit}:{g.prefix}{path}")
    except _Failed:
        return None


def merge_base(root: Path, base: str, head: str) -> str:
    """The best common ancestor of two commits, as ``git diff base...head`` uses."""
    g = open_repo(root)
    try:
        found = _text(g, "merge-base", base, head).split()
    except _Failed as exc:
        # exit 1 without a word: the commits share no history
        if exc.status != 1 or exc.stderr.strip():
            raise failure(g.top, f"merge-base {base[:12]} {head[:12]}", exc.stderr) from None
        found = []
    if not found:
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
    return found[0]


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
        out = _text(g, "diff", *args, "--", g.prefix or ".")
        changes = _diff_records(g, out)
        if head is None:
            untracked = _text(g, "ls-files", "-z", "--others", "--exclude-standard", "--full-name")
            for path in _split_z(untracked):
                rel = _strip(g, path)
                if rel is not None:
                    changes.append(FileChange(ADDED, rel))
    except _Failed as exc:
        raise failure(g.top, "diff", exc.stderr) from None
    return sorted(set(changes), key=lambda c: (c.path, c.status))


@dataclass(frozen=True)
class TreeChange:
    """One file that differs between two trees, with its blob id on each side (None
    where it is absent, or not a file KCL can read: a submodule, a symbolic link)."""

    path: str
    old: str | None
    new: str | None


def diff_trees(root: Path, old: str, new: str) -> list[TreeChange]:
    """The files under the Konfig root that differ between two commits (or trees), with
    their blob ids: what turns :func:`list_tree` of ``old`` into that of ``new``."""
    g = open_repo(root)
    try:
        out = _text(
            g,
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            old,
            new,
            "--",
            g.prefix or ".",
        )
    except _Failed as exc:
        raise failure(g.top, f"diff-tree {old[:12]} {new[:12]}", exc.stderr) from None
    parts = out.split("\0")
    found: list[TreeChange] = []
    i = 0
    while i + 1 < len(parts):
        meta, path = parts[i], parts[i + 1]
        i += 2
        if not meta.startswith(":"):
            break
        old_mode, new_mode, old_sha, new_sha, _status = meta[1:].split(" ")
        rel = _strip(g, path)
        if rel is None:
            continue
        found.append(TreeChange(rel, _blob(old_mode, old_sha), _blob(new_mode, new_sha)))
    return found


def _blob(mode: str, sha: str) -> str | None:
    """The blob id of a regular file's entry (what :func:`list_tree` lists)."""
    if mode in ("100644", "100755"):
        return sha
    return None


def list_tree(root: Path, commit: str, paths: Sequence[str] = ()) -> dict[str, str]:
    """Every file of ``commit`` under the Konfig root: path -> blob id.

    ``paths`` (relative to the root) limits the listing to those directories or files.
    Submodules and symlinks are left out: KCL can read neither from a tree.
    """
    g = open_repo(root)
    spec = [g.prefix + p for p in paths] if paths else [g.prefix or "."]
    try:
        out = _text(g, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *spec)
    except _Failed as exc:
        raise failure(g.top, f"ls-tree {commit[:12]}", exc.stderr) from None
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
        out = _text(
            g,
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--full-name",
            "--",
            g.prefix or ".",
        )
    except _Failed as exc:
        raise failure(g.top, "ls-files", exc.stderr) from None
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
    try:
        raw = _git(g, "cat-file", "--batch", stdin="".join(f"{sha}\n" for sha in wanted).encode())
    except _Failed as exc:
        raise failure(g.top, "cat-file", exc.stderr) from None
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
    g = open_repo(root)
    remote, upstream = "origin", None
    try:
        # every local branch: `*` marks the current one (none on a detached HEAD, as in
        # a CI checkout, which tracks nothing)
        listing = _text(
            g,
            "for-each-ref",
            "--format=%(HEAD)%00%(upstream:remotename)%00%(upstream:short)",
            "refs/heads",
        )
    except _Failed:
        listing = ""
    for line in listing.splitlines():
        mark, _, tracked = line.partition("\0")
        name, _, short = tracked.partition("\0")
        if mark == "*" and name and short:
            remote, upstream = name, short
            break
    try:
        target = _text(g, "symbolic-ref", "--quiet", "--short", f"refs/remotes/{remote}/HEAD")
        return DefaultBase(target.strip(), f"the default branch of {remote}")
    except _Failed:
        pass
    for name in ("main", "master"):
        try:
            _git(g, "rev-parse", "--verify", "--quiet", f"refs/remotes/{remote}/{name}")
            return DefaultBase(f"{remote}/{name}", f"{remote}'s {name} branch")
        except _Failed:
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
        out = _text(
            g,
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=normal",
            "--no-renames",
            "--",
            g.prefix or ".",
        )
    except _Failed as exc:
        raise GitError(f"git status failed: {exc.stderr.strip()}") from None
    paths: set[str] = set()
    for record in _split_z(out):
        rel = _strip(g, record[3:])
        if rel is not None:
            paths.add(rel)
    return sorted(paths)


def tracked_under(root: Path, rel: str) -> list[str]:
    """The files git tracks below ``rel`` (a folder relative to ``root``), sorted: a
    folder Konfig keeps for itself (a cache) must hold none, whatever .gitignore says
    (``git add -f`` commits an ignored file, and a checkout writes it)."""
    g = open_repo(root)
    try:
        out = _text(g, "ls-files", "-z", "--cached", "--full-name", "--", g.prefix + rel)
    except _Failed as exc:
        raise failure(g.top, "ls-files", exc.stderr) from None
    return sorted(r for r in (_strip(g, p) for p in _split_z(out)) if r is not None)


def init_repository(root: Path, branch: str, message: str) -> str:
    """``git init`` a new repository in ``root`` on ``branch``, add every file and commit
    them with ``message`` (git's own identity settings: user.name, user.email); returns
    the commit id."""
    g = GitRepo(root, root, "")
    steps = (
        ("init", ("init", "--quiet", f"--initial-branch={branch}")),
        ("add", ("add", "--all")),
        ("commit", ("commit", "--quiet", "--no-verify", "--message", message)),
    )
    for what, args in steps:
        try:
            _git(g, *args)
        except _Failed as exc:
            if what == "commit" and ("user.email" in exc.stderr or "ident" in exc.stderr):
                raise GitError(
                    f"git commit failed in {root}: git does not know who you are "
                    f"({_first_line(exc.stderr)})",
                    hint="set `git config --global user.name NAME` and `git config --global "
                    "user.email EMAIL`, then in the new repository: `git add -A && git commit`",
                ) from None
            raise failure(root, what, exc.stderr) from None
    return _text(g, "rev-parse", "HEAD").strip()


def branch_files(root: Path, branch: str, *, ref: str | None = None) -> dict[str, str] | None:
    """The files on local ``branch`` (or on ``ref``, e.g. ``refs/remotes/origin/x``):
    paths from the top of the repository -> blob ids; None when there is no such ref."""
    g = open_repo(root)
    try:
        out = _text(g, "ls-tree", "-r", "-z", "--full-tree", ref or f"refs/heads/{branch}")
    except _Failed as exc:
        if "Not a valid object name" in exc.stderr or "not a tree object" in exc.stderr:
            return None
        raise failure(g.top, "ls-tree", exc.stderr) from None
    found: dict[str, str] = {}
    for record in _split_z(out):
        info, _, path = record.partition("\t")
        mode, _kind, sha = info.split(" ")
        if _blob(mode, sha) is not None:
            found[path] = sha
    return found


def commit_files(
    root: Path, branch: str, changes: Mapping[str, bytes | None], message: str
) -> str | None:
    """Commit ``changes`` (path from the top of the repository -> new bytes, or None to
    delete it) onto local ``branch`` (made when missing, as a root commit), on top of
    its files, without touching the work tree, the index or HEAD. Returns the new
    commit, or None when the tree would not change (nothing is committed then)."""
    g = open_repo(root)
    ref = f"refs/heads/{branch}"
    try:
        _git(g, "check-ref-format", ref)
    except _Failed:
        raise UsageError(f"{branch!r} is not a valid git branch name") from None
    try:
        parent: str | None = _text(g, "rev-parse", "--verify", "--quiet", ref + "^{commit}")
        parent = (parent or "").strip() or None
    except _Failed:
        parent = None
    with tempfile.TemporaryDirectory(prefix="konfig-publish-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        try:
            if parent:
                _git(g, "read-tree", parent, env=env)
            else:
                _git(g, "read-tree", "--empty", env=env)
            lines: list[str] = []
            written = {p: data for p, data in sorted(changes.items()) if data is not None}
            if written:
                blobs = Path(tmp) / "blobs"
                blobs.mkdir()
                names = []
                for number, data in enumerate(written.values()):
                    name = blobs / str(number)
                    name.write_bytes(data)
                    names.append(str(name))
                shas = (
                    _git(
                        g,
                        "hash-object",
                        "-w",
                        "--no-filters",
                        "--stdin-paths",
                        stdin="\n".join(names).encode() + b"\n",
                    )
                    .decode()
                    .split()
                )
                lines += [f"100644 {sha}\t{p}" for p, sha in zip(written, shas, strict=True)]
            zero = "0" * 40
            lines += [f"0 {zero}\t{p}" for p, data in sorted(changes.items()) if data is None]
            if lines:
                _git(
                    g,
                    "update-index",
                    "-z",
                    "--index-info",
                    stdin="".join(line + "\0" for line in lines).encode(),
                    env=env,
                )
            tree = _text(g, "write-tree", env=env).strip()
            if parent and _text(g, "rev-parse", parent + "^{tree}").strip() == tree:
                return None
            args = ["commit-tree", tree, "-m", message]
            if parent:
                args += ["-p", parent]
            commit = _text(g, *args).strip()
            _git(g, "update-ref", "-m", "konfig publish", ref, commit, parent or zero)
        except _Failed as exc:
            if "ident" in exc.stderr or "user.email" in exc.stderr:
                raise GitError(
                    f"git commit-tree failed in {g.top}: git does not know who commits "
                    f"({_first_line(exc.stderr)})",
                    hint="set `git config user.name NAME` and `git config user.email EMAIL` "
                    "(the publish job's identity)",
                ) from None
            raise failure(g.top, "commit to " + ref, exc.stderr) from None
    return commit


def commit_message(root: Path, commit: str) -> str | None:
    """The full message of ``commit``, or None when the repository does not have it
    (e.g. a rendered branch never fetched)."""
    g = open_repo(root)
    try:
        return _text(g, "log", "-1", "--format=%B", commit + "^{commit}", "--")
    except _Failed:
        return None


def merge_tree(root: Path, base: str, head: str) -> str:
    """The tree of ``head`` merged into ``base`` (what merging the pull request would
    make), computed from git objects alone: the work tree, the index and the refs are
    left as they are (``git merge-tree --write-tree``, git 2.38 or later). GitError
    naming the conflicting files when the two do not merge cleanly."""
    g = open_repo(root)
    try:
        out = _text(g, "merge-tree", "--write-tree", "--name-only", "--no-messages", base, head)
    except _Failed as exc:
        if exc.status == 1:  # conflicts
            raise GitError(
                f"{head[:12]} does not merge cleanly into {base[:12]}",
                hint="rebase the branch onto its base (or merge the base into it) and push",
            ) from None
        if "--write-tree" in exc.stderr or "unknown option" in exc.stderr:
            raise GitError(
                "git merge-tree --write-tree is not available: git 2.38 or later is needed",
                hint="install a newer git",
            ) from None
        raise failure(g.top, f"merge-tree {base[:12]} {head[:12]}", exc.stderr) from None
    return out.split("\n", 1)[0].strip()
