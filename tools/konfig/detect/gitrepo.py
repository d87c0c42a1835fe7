"""The questions konfig asks git: commits, differences, trees, blobs and the work tree.

Everything is returned as plain data with POSIX paths relative to the Konfig root (the
directory holding ``kcl.mod``), which may be a subdirectory of the git work tree. Every
listing uses NUL-separated output (``-z``) so paths with spaces, quotes or newlines
survive; renames and copies are reported as a deletion plus an addition (``--no-renames``)
so both the old and the new path take part in change detection.

konfig only asks git questions here; what it writes to a repository (``konfig init``,
``konfig publish``, the merge tree of an offline preview) is in
:mod:`konfig.detect.gitwrite`. Both run git through :mod:`konfig.detect.gitcmd`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from konfig.detect.gitcmd import (
    Failed,
    GitError,
    GitRepo,
    failure,
    file_blob,
    git,
    git_text,
    open_repo,
    relative,
    split_z,
)
from konfig.errors import KonfigError, UsageError

ADDED = "A"
MODIFIED = "M"
DELETED = "D"


@dataclass(frozen=True)
class FileChange:
    """One changed path: ``A`` added, ``M`` modified (also type changes), ``D`` deleted."""

    status: str
    path: str


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
        out = git(g, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=request)
    except Failed:
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
        git(g, "rev-parse", "--git-dir")
    except Failed as exc:
        raise failure(g.top, "rev-parse", exc.stderr) from None


def is_shallow(root: Path) -> bool:
    g = open_repo(root)
    try:
        return git_text(g, "rev-parse", "--is-shallow-repository").strip() == "true"
    except Failed:
        return False


def _unknown_revision(g: GitRepo, ref: str) -> KonfigError:
    try:
        git(g, "rev-parse", "--git-dir")
        any_commit = git_text(g, "rev-list", "-n1", "--all").strip()
    except Failed as exc:
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
        return int(git_text(g, "rev-list", "--count", f"{base}..{head}", "--"))
    except Failed as exc:
        raise GitError(
            f"git rev-list --count {base[:12]}..{head[:12]} failed: {exc.stderr.strip()}"
        ) from None


def deleted_files(root: Path, name: str, under: str = "appops") -> list[tuple[str, str]]:
    """(commit, path) of every file called ``name`` below ``under`` that a commit of
    HEAD's history deleted, newest first; paths relative to the Konfig root."""
    g = open_repo(root)
    try:
        out = git_text(
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
    except Failed as exc:
        raise GitError(f"git log of deleted {name} files failed: {exc.stderr.strip()}") from None
    found: list[tuple[str, str]] = []
    for record in out.split("\0"):
        lines = [line for line in record.splitlines() if line.strip()]
        if not lines:
            continue
        commit, paths = lines[0], lines[1:]
        for path in paths:
            rel = relative(g, path)
            if rel is not None:
                found.append((commit, rel))
    return found


def file_before(root: Path, commit: str, path: str) -> bytes | None:
    """The content ``path`` had just before ``commit`` (in its first parent), if any."""
    g = open_repo(root)
    try:
        return git(g, "show", f"{commit}^:{g.prefix}{path}")
    except Failed:
        return None


def file_at(root: Path, ref: str, path: str) -> bytes | None:
    """The content ``path`` has in commit ``ref`` (None when it has no such file);
    GitError when git does not know ``ref``."""
    g = open_repo(root)
    commit = rev_parse(root, ref)
    try:
        return git(g, "show", f"{commit}:{g.prefix}{path}")
    except Failed:
        return None


def merge_base(root: Path, base: str, head: str) -> str:
    """The best common ancestor of two commits, as ``git diff base...head`` uses."""
    g = open_repo(root)
    try:
        found = git_text(g, "merge-base", base, head).split()
    except Failed as exc:
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


def _diff_records(g: GitRepo, out: str) -> list[FileChange]:
    parts = out.split("\0")
    changes: list[FileChange] = []
    i = 0
    while i + 1 < len(parts):
        status, path = parts[i], parts[i + 1]
        i += 2
        if not status:
            break
        rel = relative(g, path)
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
        out = git_text(g, "diff", *args, "--", g.prefix or ".")
        changes = _diff_records(g, out)
        if head is None:
            untracked = git_text(
                g, "ls-files", "-z", "--others", "--exclude-standard", "--full-name"
            )
            for path in split_z(untracked):
                rel = relative(g, path)
                if rel is not None:
                    changes.append(FileChange(ADDED, rel))
    except Failed as exc:
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
        out = git_text(
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
    except Failed as exc:
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
        rel = relative(g, path)
        if rel is None:
            continue
        found.append(TreeChange(rel, file_blob(old_mode, old_sha), file_blob(new_mode, new_sha)))
    return found


def list_tree(root: Path, commit: str, paths: Sequence[str] = ()) -> dict[str, str]:
    """Every file of ``commit`` under the Konfig root: path -> blob id.

    ``paths`` (relative to the root) limits the listing to those directories or files.
    Submodules and symlinks are left out: KCL can read neither from a tree.
    """
    g = open_repo(root)
    spec = [g.prefix + p for p in paths] if paths else [g.prefix or "."]
    try:
        out = git_text(g, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *spec)
    except Failed as exc:
        raise failure(g.top, f"ls-tree {commit[:12]}", exc.stderr) from None
    files: dict[str, str] = {}
    for record in split_z(out):
        meta, _, path = record.partition("\t")
        mode, kind, sha = meta.split(" ")
        if kind != "blob" or mode == "120000":
            continue
        rel = relative(g, path)
        if rel is not None:
            files[rel] = sha
    return files


def list_worktree(root: Path) -> list[str]:
    """Paths in the work tree git would see: tracked and untracked, not ignored, existing."""
    g = open_repo(root)
    try:
        out = git_text(
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
    except Failed as exc:
        raise failure(g.top, "ls-files", exc.stderr) from None
    seen: set[str] = set()
    for path in split_z(out):
        rel = relative(g, path)
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
        raw = git(g, "cat-file", "--batch", stdin="".join(f"{sha}\n" for sha in wanted).encode())
    except Failed as exc:
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
        listing = git_text(
            g,
            "for-each-ref",
            "--format=%(HEAD)%00%(upstream:remotename)%00%(upstream:short)",
            "refs/heads",
        )
    except Failed:
        listing = ""
    for line in listing.splitlines():
        mark, _, tracked = line.partition("\0")
        name, _, short = tracked.partition("\0")
        if mark == "*" and name and short:
            remote, upstream = name, short
            break
    try:
        target = git_text(g, "symbolic-ref", "--quiet", "--short", f"refs/remotes/{remote}/HEAD")
        return DefaultBase(target.strip(), f"the default branch of {remote}")
    except Failed:
        pass
    for name in ("main", "master"):
        try:
            git(g, "rev-parse", "--verify", "--quiet", f"refs/remotes/{remote}/{name}")
            return DefaultBase(f"{remote}/{name}", f"{remote}'s {name} branch")
        except Failed:
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
        out = git_text(
            g,
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=normal",
            "--no-renames",
            "--",
            g.prefix or ".",
        )
    except Failed as exc:
        raise GitError(f"git status failed: {exc.stderr.strip()}") from None
    paths: set[str] = set()
    for record in split_z(out):
        rel = relative(g, record[3:])
        if rel is not None:
            paths.add(rel)
    return sorted(paths)


def tracked_under(root: Path, rel: str) -> list[str]:
    """The files git tracks below ``rel`` (a folder relative to ``root``), sorted: a
    folder Konfig keeps for itself (a cache) must hold none, whatever .gitignore says
    (``git add -f`` commits an ignored file, and a checkout writes it)."""
    g = open_repo(root)
    try:
        out = git_text(g, "ls-files", "-z", "--cached", "--full-name", "--", g.prefix + rel)
    except Failed as exc:
        raise failure(g.top, "ls-files", exc.stderr) from None
    return sorted(r for r in (relative(g, p) for p in split_z(out)) if r is not None)


def commit_message(root: Path, commit: str) -> str | None:
    """The full message of ``commit``, or None when the repository does not have it
    (e.g. a rendered branch never fetched)."""
    g = open_repo(root)
    try:
        return git_text(g, "log", "-1", "--format=%B", commit + "^{commit}", "--")
    except Failed:
        return None
