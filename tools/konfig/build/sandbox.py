"""The file system a KCL worker may touch, enforced by the kernel (Linux Landlock).

The source rules (:mod:`konfig.build.sourcerules`) refuse the KCL functions known to
read or write files, and kcl-lib confines ``file``'s functions to the reading file's
folder. This is the layer under both, for what neither knows of (a function a kcl-lib
release adds, a bug in its confinement): before a worker runs any KCL it restricts
itself, irreversibly, to

* reading the repository, but not the files of its top-level hidden entries (``.git``,
  where a CI checkout keeps its token; ``.cache``; a ``.env``: their names can be
  listed, not their content), and the Python installation konfig and kcl-lib load
  from (code, no secret);
* reading and writing the pool's own temporary folder (the batch programs);
* writing nothing else: no file of the work tree, of the home folder, of ``/tmp``;
* no ``/proc`` (no ``/proc/<pid>/environ``, no ``/proc/self/mem``), no ``/dev`` but
  ``/dev/null`` and ``/dev/urandom``; no TCP connection where the kernel can refuse it.

Landlock needs Linux 5.13 or later with the LSM enabled (Ubuntu's kernels enable it);
where it is missing :func:`restrict` returns 0 and the worker runs with the other
layers only. A landlocked process cannot ptrace nor read ``/proc`` entries of
processes outside its domain, whatever their owner: this holds for root too.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM | REFER | TRUNCATE
_FILE_RIGHTS = EXECUTE | READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class Sandbox:
    """What a worker may read and write (absolute paths); plain data, set by the caller."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    list: tuple[str, ...] = ()  # folders whose entries (names) may be listed, beneath too


def _handled(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: bits 0-12
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def abi_version() -> int:
    """The Landlock ABI the kernel offers; 0 when it offers none."""
    libc = _libc()
    if libc is None:
        return 0
    version = int(libc.syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION))
    return max(version, 0)


def repository_entries(root: Path) -> list[str]:
    """The repository's top-level entries a worker may read: all but hidden ones."""
    return sorted(str(p) for p in root.iterdir() if not p.name.startswith("."))


def python_paths(root: Path) -> list[str]:
    """Where this Python, konfig and kcl-lib load code from (read only): the prefixes and
    every folder on ``sys.path`` (a ``.pth`` file may add one outside the prefix, as the
    setup action's venv does for its cached dependencies); never a folder holding the
    repository (a venv inside it is fine: a hidden entry of its own)."""
    import konfig

    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(konfig.__file__).parents[1])}
    found.update(p for p in sys.path if p and Path(p).is_absolute() and Path(p).is_dir())
    real_root = root.resolve()
    return sorted(
        p
        for p in found
        if os.path.exists(p)  # noqa: PTH110
        and not real_root.is_relative_to(Path(p).resolve())
    )


# files of the system a worker may read: the dynamic loader's cache, the time zone
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")
_SYSTEM_DIRS = ("/usr", "/lib", "/lib64")


def for_repository(root: Path, tmp: str, *, writable: Iterable[str] = ()) -> Sandbox:
    """The sandbox of a worker compiling in ``root`` with its temporary folder ``tmp``;
    ``writable``: folders KCL's test runner writes its temporary file into."""
    read = [
        *repository_entries(root),
        *python_paths(root),
        *(p for p in (*_SYSTEM_DIRS, *_SYSTEM_FILES) if os.path.exists(p)),  # noqa: PTH110
        "/dev/urandom",
    ]
    return Sandbox(tuple(read), (tmp, "/dev/null", *writable), (str(root),))


def restrict(sandbox: Sandbox) -> int:
    """Restrict this process (and what it starts) to ``sandbox``, for good. Returns the
    Landlock ABI used, 0 when the kernel has none (nothing restricted). Raises OSError
    when the kernel has Landlock and refuses the ruleset."""
    libc = _libc()
    abi = abi_version()
    if libc is None or abi <= 0:
        return 0
    handled = _handled(abi)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 4 else ctypes.sizeof(ctypes.c_uint64)
    ruleset = int(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), size, 0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        rights: dict[str, int] = {}
        for path in sandbox.list:
            rights[path] = rights.get(path, 0) | READ_DIR
        for path in sandbox.read:
            rights[path] = rights.get(path, 0) | READ
        for path in sandbox.write:
            rights[path] = rights.get(path, 0) | READ | WRITE
        for path, allowed in rights.items():
            _add(libc, ruleset, path, allowed & handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def _add(libc: ctypes.CDLL, ruleset: int, path: str, allowed: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone meanwhile: nothing to allow
    try:
        if not os.path.isdir(path):  # noqa: PTH112
            allowed &= _FILE_RIGHTS
        beneath = _PathBeneathAttr(allowed, fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(beneath), 0):
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)
