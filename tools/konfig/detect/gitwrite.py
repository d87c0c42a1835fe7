"""What konfig writes to a git repository, never touching a work tree it did not make:
a new repository (``konfig init``: :func:`init_repository`), commits to a rendered
branch beside the branch's files (``konfig publish``: :func:`branch_files`,
:func:`commit_files`, with a temporary index) and the tree of a pull request merged
into its base (git objects only: :func:`merge_tree`). git runs through
:mod:`konfig.detect.gitcmd`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from konfig.detect.gitcmd import (
    Failed,
    GitError,
    GitRepo,
    failure,
    file_blob,
    first_line,
    git,
    git_text,
    open_repo,
    split_z,
)
from konfig.errors import UsageError


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
            git(g, *args)
        except Failed as exc:
            if what == "commit" and ("user.email" in exc.stderr or "ident" in exc.stderr):
                raise GitError(
                    f"git commit failed in {root}: git does not know who you are "
                    f"({first_line(exc.stderr)})",
                    hint="set `git config --global user.name NAME` and `git config --global "
                    "user.email EMAIL`, then in the new repository: `git add -A && git commit`",
                ) from None
            raise failure(root, what, exc.stderr) from None
    return git_text(g, "rev-parse", "HEAD").strip()


def branch_files(root: Path, branch: str, *, ref: str | None = None) -> dict[str, str] | None:
    """The files on local ``branch`` (or on ``ref``, e.g. ``refs/remotes/origin/x``):
    paths from the top of the repository -> blob ids; None when there is no such ref."""
    g = open_repo(root)
    try:
        out = git_text(g, "ls-tree", "-r", "-z", "--full-tree", ref or f"refs/heads/{branch}")
    except Failed as exc:
        if "Not a valid object name" in exc.stderr or "not a tree object" in exc.stderr:
            return None
        raise failure(g.top, "ls-tree", exc.stderr) from None
    found: dict[str, str] = {}
    for record in split_z(out):
        info, _, path = record.partition("\t")
        mode, _kind, sha = info.split(" ")
        if file_blob(mode, sha) is not None:
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
        git(g, "check-ref-format", ref)
    except Failed:
        raise UsageError(f"{branch!r} is not a valid git branch name") from None
    try:
        parent: str | None = git_text(g, "rev-parse", "--verify", "--quiet", ref + "^{commit}")
        parent = (parent or "").strip() or None
    except Failed:
        parent = None
    with tempfile.TemporaryDirectory(prefix="konfig-publish-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        try:
            if parent:
                git(g, "read-tree", parent, env=env)
            else:
                git(g, "read-tree", "--empty", env=env)
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
                    git(
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
                git(
                    g,
                    "update-index",
                    "-z",
                    "--index-info",
                    stdin="".join(line + "\0" for line in lines).encode(),
                    env=env,
                )
            tree = git_text(g, "write-tree", env=env).strip()
            if parent and git_text(g, "rev-parse", parent + "^{tree}").strip() == tree:
                return None
            args = ["commit-tree", tree, "-m", message]
            if parent:
                args += ["-p", parent]
            commit = git_text(g, *args).strip()
            git(g, "update-ref", "-m", "konfig publish", ref, commit, parent or zero)
        except Failed as exc:
            if "ident" in exc.stderr or "user.email" in exc.stderr:
                raise GitError(
                    f"git commit-tree failed in {g.top}: git does not know who commits "
                    f"({first_line(exc.stderr)})",
                    hint="set `git config user.name NAME` and `git config user.email EMAIL` "
                    "(the publish job's identity)",
                ) from None
            raise failure(g.top, "commit to " + ref, exc.stderr) from None
    return commit


def merge_tree(root: Path, base: str, head: str) -> str:
    """The tree of ``head`` merged into ``base`` (what merging the pull request would
    make), computed from git objects alone: the work tree, the index and the refs are
    left as they are (``git merge-tree --write-tree``, git 2.38 or later). GitError
    naming the conflicting files when the two do not merge cleanly."""
    g = open_repo(root)
    try:
        out = git_text(g, "merge-tree", "--write-tree", "--name-only", "--no-messages", base, head)
    except Failed as exc:
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
