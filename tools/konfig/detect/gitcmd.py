"""Running git: the one place konfig starts a ``git`` process, its errors, and the
repository a Konfig root is in. :mod:`konfig.detect.gitrepo` (the questions konfig asks)
and :mod:`konfig.detect.gitwrite` (what it writes) both run git through :func:`git`.

konfig runs the ``git`` command line itself: a library that wraps git costs every
command that asks one question a tenth of a second of imports. :func:`runs` counts the
processes started, so a test can hold the number a command needs.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from konfig.errors import KonfigError, UsageError

# git's messages in English (the causes below are recognised by them), as GitPython did
_ENV = {"LC_ALL": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0"}
_started = 0


class GitError(KonfigError):
    """git failed or the repository is not what konfig needs."""


class Failed(Exception):
    """A git process exited non-zero: its exit code and what it wrote on stderr."""

    def __init__(self, status: int, stderr: str) -> None:
        super().__init__(stderr)
        self.status = status
        self.stderr = stderr


def runs() -> int:
    """How many git processes this process started so far."""
    return _started


def first_line(text: str) -> str:
    """git's first line of ``text`` (its stderr) without ``fatal:``/``error:``, at most
    300 characters."""
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
            f"git {what} failed: permission denied in {top} ({first_line(said)})",
            hint="check that the user running konfig may read the repository",
        )
    if "not a git repository" in said:
        return GitError(
            f"git {what} failed: {top} is not a git repository ({first_line(said)})",
            hint="run konfig inside the git work tree (or `git init` and commit first)",
        )
    return GitError(f"git {what} failed: {first_line(said)}")


@dataclass(frozen=True)
class GitRepo:
    """A git repository seen from a Konfig root inside it."""

    top: Path  # the git work tree's top level (git runs there)
    root: Path  # the Konfig root (absolute)
    prefix: str  # the Konfig root relative to the git top level, "" or "a/b/"


def git(
    g: GitRepo, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> bytes:
    """What ``git <args>`` (run at the top of the work tree) wrote on stdout; Failed
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
        raise Failed(done.returncode, done.stderr.decode("utf-8", errors="replace"))
    return done.stdout


def git_text(g: GitRepo, *args: str, env: dict[str, str] | None = None) -> str:
    """:func:`git`'s output as text (bytes that are not UTF-8 kept as surrogates)."""
    return git(g, *args, env=env).decode("utf-8", errors="surrogateescape")


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


def split_z(out: str) -> list[str]:
    """The records of NUL-separated (``-z``) output."""
    return [part for part in out.split("\0") if part != ""]


def relative(g: GitRepo, path: str) -> str | None:
    """A path from the top of the work tree relative to the Konfig root; None when it is
    outside the root."""
    if not g.prefix:
        return path
    return path[len(g.prefix) :] if path.startswith(g.prefix) else None


def file_blob(mode: str, sha: str) -> str | None:
    """The blob id of a tree entry that is a regular file (None for a submodule or a
    symbolic link: KCL can read neither from a tree)."""
    if mode in ("100644", "100755"):
        return sha
    return None
