"""Every file konfig writes goes through here: the write guard and atomic writes.

A command writes only where it was asked to: inside the repository, or inside a file or
folder the user named (``--out``, ``--junit``, ``$GITHUB_OUTPUT``, ...). A
:class:`WriteScope` holds those places as real paths, and every write checks the real
path of what it writes (symbolic links resolved, symlinked folders included) against it:
a golden folder that is a symbolic link to ``/tmp/elsewhere`` is not written through.
A write that fails (a read-only file system, a full disk, a missing permission) becomes
a :class:`WriteError` that names the file and the cause; no half-written file is left.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from konfig.errors import KonfigError


class WriteError(KonfigError):
    """A file cannot be written: outside where konfig may write, or the system refused."""


@dataclass(frozen=True)
class WriteScope:
    """Where a command may write: each place is a folder or a file, with how to name it."""

    places: tuple[tuple[Path, str], ...]  # (real path, how a message names it)
    base: Path | None = None  # paths inside it are shown relative to it in messages

    @classmethod
    def repository(cls, root: Path) -> WriteScope:
        """The repository (its real path)."""
        return cls(((root.resolve(), f"the repository {root.resolve()}"),), base=root)

    @classmethod
    def named(cls, path: Path, what: str, *, folder: bool = False) -> WriteScope:
        """Only ``path``, which the user named as ``what`` (e.g. ``--out``): a folder and
        what is below it, or a file. A symbolic link the user named is theirs to follow."""
        shown = f"{what} {path}"
        if folder:
            return cls(((path.resolve(), shown),))
        # the file itself (an atomic write replaces a link) or where a link leads (append)
        return cls(((path.parent.resolve() / path.name, shown), (path.resolve(), shown)))

    @classmethod
    def cache(cls, folder: Path) -> WriteScope:
        """konfig's cache folder (the CLI checked it lies in the repository)."""
        return cls.named(folder, "the cache folder", folder=True)

    def shown(self, path: Path) -> str:
        """``path`` as messages show it: relative to the repository when inside it."""
        if self.base is not None:
            try:
                return path.absolute().relative_to(self.base.absolute()).as_posix()
            except ValueError:
                pass
        return str(path)

    def admits(self, real: Path) -> bool:
        return any(real == place or place in real.parents for place, _ in self.places)

    def check(self, path: Path, *, follow: bool = False) -> Path:
        """The real path a write of ``path`` lands on; WriteError when outside the scope.

        An atomic write replaces ``path`` itself, so only its folder is resolved; an
        append (``follow``) writes through a symlinked file too, so all of it is.
        """
        real = path.resolve() if follow else path.parent.resolve() / path.name
        if self.admits(real):
            return real
        places = " or ".join(dict.fromkeys(what for _, what in self.places))
        link = _first_link(path, self.base)
        hint = (
            f"{link} is a symbolic link to {link.resolve()}: konfig does not write through "
            "it; make it a real folder (or point the link inside)"
            if link is not None
            else "write inside the repository, or name the place with the command's option"
        )
        raise WriteError(
            f"refusing to write {self.shown(path)}: its real path {real} lies outside {places}",
            hint=hint,
        )


def _first_link(path: Path, base: Path | None) -> Path | None:
    """The first symbolic link on the way to ``path`` (below ``base`` when given)."""
    absolute = path.absolute()
    start = base.absolute() if base is not None else Path(absolute.anchor)
    try:
        parts = absolute.relative_to(start).parts
    except ValueError:
        start, parts = Path(absolute.anchor), absolute.parts[1:]
    here = start
    for part in parts:
        here = here / part
        if here.is_symlink():
            return here
    return None


def _failure(scope: WriteScope, path: Path, exc: OSError) -> WriteError:
    reason = (exc.strerror or str(exc)).strip()
    reason = reason[:1].lower() + reason[1:]
    hints = {
        errno.EROFS: "the file system is mounted read-only: run konfig where it can write",
        errno.EACCES: f"check the permissions of {path.parent}",
        errno.EPERM: f"check the permissions of {path.parent}",
        errno.ENOSPC: "the disk is full",
        errno.ENOTDIR: f"a part of {path.parent} is a file, not a folder",
    }
    hint = hints.get(exc.errno) if exc.errno is not None else None
    return WriteError(f"cannot write {scope.shown(path)}: {reason}", hint=hint)


def _new_file(folder: Path, prefix: str) -> tuple[int, Path]:
    """A new file of one's own in ``folder`` (mode 0600, opened for writing), as
    ``tempfile.mkstemp`` makes it: the tempfile module (and shutil, bz2, lzma with it)
    is not imported by every preview and apply for this alone."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = folder / f"{prefix}{os.urandom(6).hex()}"
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(folder))


def atomic_write_bytes(
    path: Path, data: bytes, *, scope: WriteScope, mode: int | None = None
) -> None:
    """Write ``data`` to ``path`` via a temporary file and an atomic rename, inside
    ``scope``; ``mode``: the file's permission bits (default: a new temporary file's,
    0600). WriteError names the file when it is outside ``scope`` or cannot be written."""
    scope.check(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        scope.check(path)  # the folders just made are real; a race would show here
        fd, tmp = _new_file(path.parent, f".{path.name}.")
    except OSError as exc:
        raise _failure(scope, path, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            tmp.chmod(mode)
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _failure(scope, path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, *, scope: WriteScope, mode: int | None = None) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"), scope=scope, mode=mode)


def update_text(path: Path, text: str, *, scope: WriteScope) -> bool:
    """:func:`atomic_write_text`, except that a regular file already holding exactly
    ``text`` is left as it is (a warm ``konfig compile --out`` rewrote hundreds of
    unchanged Specs). Whether it wrote; the scope is checked either way."""
    scope.check(path)
    data = text.encode("utf-8")
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size == len(data):
            with open(path, "rb") as handle:
                if handle.read() == data:
                    return False
    except OSError:
        pass  # not there or unreadable: written below, which names any failure
    atomic_write_text(path, text, scope=scope)
    return True


def append_text(path: Path, text: str, *, scope: WriteScope) -> None:
    """Append ``text`` to ``path`` (e.g. ``$GITHUB_OUTPUT``) inside ``scope``."""
    scope.check(path, follow=True)
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise _failure(scope, path, exc) from None


def remove(paths: Iterable[Path], *, scope: WriteScope) -> None:
    """Delete files (already gone is fine) inside ``scope``."""
    for path in paths:
        scope.check(path)
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise _failure(scope, path, exc) from None


def usable_cache(root: Path, cache: Path) -> tuple[Path | None, str | None]:
    """``cache`` (a folder for konfig's caches) when konfig can use it, else why not.

    It must lie inside the repository (real paths) and be writable; otherwise konfig
    runs without it: (None, the reason, to be shown as a warning).
    """
    scope = WriteScope.repository(root)
    shown = scope.shown(cache)
    try:
        scope.check(cache / "x")
    except WriteError:
        return None, (
            f"the cache {shown} leads outside the repository (to {cache.resolve()}): "
            "running without it"
        )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        # a real write: a read-only mount or a full disk shows only then
        fd, probe = _new_file(cache, ".probe.")
        os.close(fd)
        probe.unlink()
        _ignore_in_git(cache)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).strip()
        return None, f"cannot write the cache {shown} ({reason.lower()}): running without it"
    return cache, None


# What the cache folder holds for git: nothing to track. A repository that does not
# ignore .cache/ (the template's .gitignore does) would otherwise see the cache as
# uncommitted files, and apply would work out which stacks they affect on every run.
CACHE_GITIGNORE = "# written by konfig: its cache is never committed\n*\n"


def _ignore_in_git(cache: Path) -> None:
    """The cache ignores itself (a ``.gitignore`` of ``*`` in it, as pytest's and mypy's
    caches do), whatever the repository's own ignore rules say."""
    ignore = cache / ".gitignore"
    if not ignore.exists():
        ignore.write_text(CACHE_GITIGNORE, encoding="utf-8")
