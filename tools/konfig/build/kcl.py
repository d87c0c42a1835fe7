"""The one module that talks to the KCL compiler (``kcl-lib``, in process).

Everything KCL returns is turned into plain data here: the compiled output as a
Python value, or :class:`Diagnostic` records (file, line, column, message) parsed
from KCL's error text.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import kcl_lib.api as kcl_api

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOCATION = re.compile(r"^\s*-->\s+(?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?\s*$")
_GUTTER = re.compile(r"^\s*\|\s*(?P<msg>\S.*)$")
_HEADER = re.compile(r"^(?:error|warning)\[(?P<code>\w+)\]:\s*(?P<kind>\w+)")
_BARE_KIND = re.compile(r"^(?P<kind>[A-Z]\w*Error)\s*$")


@dataclass(frozen=True)
class Diagnostic:
    """One KCL error location: ``file:line:column: message``."""

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    kind: str = "Error"

    def location(self) -> str:
        if self.file is None:
            return ""
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        where = self.location()
        return f"{where}: {self.kind}: {self.message}" if where else f"{self.kind}: {self.message}"


class KclError(Exception):
    """KCL rejected the program; carries the parsed diagnostics and the plain text."""

    def __init__(self, diagnostics: Sequence[Diagnostic], text: str) -> None:
        self.diagnostics = tuple(diagnostics)
        self.text = text
        super().__init__(self.summary())

    def summary(self) -> str:
        if not self.diagnostics:
            return self.text.strip() or "KCL compilation failed"
        first = self.diagnostics[0]
        related = [d for d in self.diagnostics[1:] if d.message != first.message]
        text = str(first)
        for extra in related[:3]:
            text += f"\n  {extra.location()}: {extra.message}" if extra.file else f"\n  {extra}"
        return text


@cache
def _lib() -> Any:
    # kcl-lib takes a tenth of a second to load: only a process that runs KCL pays it
    import kcl_lib.api as lib

    return lib


@cache
def _api() -> kcl_api.API:
    return _lib().API()


@cache
def version() -> str:
    """The KCL compiler version, e.g. ``0.13.2``."""
    return str(_api().get_version().version)


@cache
def library_version() -> str:
    """The installed kcl-lib's version, without loading it (nor importlib.metadata, which
    costs a compile served from the cache more than the rest of its imports): the name of
    its ``kcl_lib-<version>.dist-info`` directory, else its metadata, else kcl-lib itself."""
    from importlib.util import find_spec

    spec = find_spec("kcl_lib")
    if spec is not None and spec.origin:
        site = Path(spec.origin).parent.parent
        found = sorted(site.glob("kcl_lib-*.dist-info"))
        if len(found) == 1:
            return found[0].name.removeprefix("kcl_lib-").removesuffix(".dist-info")
    from importlib import metadata

    try:
        return metadata.version("kcl-lib")
    except metadata.PackageNotFoundError:
        return version()


def parse_diagnostics(raw: str, *, root: Path | None = None) -> list[Diagnostic]:
    """Parse KCL's pretty error text into diagnostics, deduplicated, in order."""
    text = _ANSI.sub("", raw)
    found: list[Diagnostic] = []
    kind = "Error"
    pending: tuple[str, int, int | None] | None = None
    for line in text.splitlines():
        header = _HEADER.match(line.strip()) or _BARE_KIND.match(line.strip())
        if header:
            kind = header.group("kind")
            continue
        loc = _LOCATION.match(line)
        if loc:
            if pending is not None:
                found.append(_diag(pending, "", kind, root))
            col = loc.group("col")
            pending = (loc.group("file"), int(loc.group("line")), int(col) if col else None)
            continue
        gutter = _GUTTER.match(line)
        if pending is not None and gutter:
            # the message follows the gutter, after a caret when KCL points at a column
            msg = gutter.group("msg").lstrip("^").strip()
            if msg:
                found.append(_diag(pending, msg, kind, root))
                pending = None
    if pending is not None:
        found.append(_diag(pending, "", kind, root))
    if not found:
        stripped = text.strip()
        not_utf8 = _NOT_UTF8.search(stripped)
        if not_utf8:
            return [_not_utf8(not_utf8.group("file"), root)]
        header = re.match(r"^error\[\w+\]:\s*(\w+)\s*-\s*(.*)$", stripped, re.S)
        if header:
            return [Diagnostic(message=header.group(2).strip(), kind=header.group(1))]
        return [Diagnostic(message=stripped or "KCL compilation failed")]
    unique: list[Diagnostic] = []
    for diag in found:
        if diag not in unique:
            unique.append(diag)
    return unique


# kcl-lib's words for a source file that is not UTF-8 (no file position given)
_NOT_UTF8 = re.compile(
    r"Failed to load KCL file '(?P<file>[^']+)'\. Because 'stream did not contain valid UTF-8'"
)


def _not_utf8(file: str, root: Path | None) -> Diagnostic:
    """Where a KCL file stops being UTF-8: its line and byte, in words."""
    line: int | None = None
    where = ""
    try:
        data = Path(file).read_bytes()
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        where = f" (byte {exc.start}: {exc.reason})"
    except OSError:
        pass
    diag = _diag((file, line or 1, None), "", "Error", root)
    return Diagnostic(
        message=f"is not UTF-8 text{where}: KCL reads only UTF-8; save the file as UTF-8",
        file=diag.file,
        line=line,
        kind="EncodingError",
    )


def _diag(where: tuple[str, int, int | None], msg: str, kind: str, root: Path | None) -> Diagnostic:
    file, line, col = where
    if root is not None:
        try:
            file = Path(file).resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return Diagnostic(message=msg or kind, file=file, line=line, column=col, kind=kind)


def _argument_value(value: Any) -> str:
    # KCL parses option values as literals and JSON is a subset it understands; a
    # string is quoted too, so the value "3" stays the string "3" instead of an int.
    return json.dumps(value)


# kcl-lib expands every entry file as a glob pattern (Rust's glob crate), so a stack
# directory named ``st*r?`` would also compile its sibling ``stArX``. Brackets make each
# metacharacter literal (what glob::Pattern::escape does).
_GLOB_META = re.compile(r"([*?\[\]])")


def literal_path(path: str) -> str:
    """``path`` as a glob pattern that matches exactly that path."""
    return _GLOB_META.sub(r"[\1]", path)


def run(
    files: Sequence[str],
    *,
    work_dir: Path,
    options: Iterable[tuple[str, Any]] = (),
    root: Path | None = None,
    select: Sequence[str] = (),
    packages: Mapping[str, str] | None = None,
) -> Any:
    """Compile ``files`` as one main package and return the output as Python data.

    ``packages`` maps a first import name to a directory (KCL's external packages):
    ``{"base": "/repo/base"}`` makes ``import base.pkg.x`` load ``/repo/base/pkg/x``.
    Raises :class:`KclError` with parsed diagnostics when KCL rejects the program.
    """
    args = _lib().ExecProgramArgs(
        k_filename_list=[literal_path(f) for f in files],
        work_dir=str(work_dir),
        args=[_lib().Argument(name=k, value=_argument_value(v)) for k, v in options],
        path_selector=list(select),
        disable_yaml_result=True,
        external_pkgs=[
            _lib().ExternalPkg(pkg_name=name, pkg_path=path)
            for name, path in sorted((packages or {}).items())
        ],
    )
    try:
        result = _api().exec_program(args)
    except Exception as exc:  # kcl-lib raises bare Exception for compile errors
        text = str(exc)
        raise KclError(parse_diagnostics(text, root=root), _ANSI.sub("", text)) from None
    if result.err_message:
        raise KclError(
            parse_diagnostics(result.err_message, root=root), _ANSI.sub("", result.err_message)
        )
    return json.loads(result.json_result) if result.json_result else None


# parse_source() gives kcl-lib this path, which does not exist: KCL then parses the text
# alone instead of also loading every module it imports (a hundred times slower)
_NOWHERE = "/nonexistent/konfig-parse-source.k"


def parse_source(text: str) -> dict[str, Any]:
    """The syntax tree of KCL source text (kcl-lib's JSON form, positions included:
    lines 1-based, columns 0-based). Imports are not followed. Raises :class:`KclError`
    for a syntax error."""
    result = _api().parse_file(_lib().ParseFileArgs(path=_NOWHERE, source=text))
    errors = [
        Diagnostic(message=_ANSI.sub("", m.msg), line=m.pos.line or None, kind="SyntaxError")
        for e in result.errors
        if e.level == "error" and "CannotFindModule" not in e.code
        for m in e.messages[:1]
    ]
    if errors:
        raise KclError(errors, "\n".join(d.message for d in errors))
    tree = json.loads(result.ast_json)
    if not isinstance(tree, dict):
        raise KclError([], "kcl-lib returned no syntax tree")
    return tree


def import_deps(file: Path) -> tuple[list[str], list[str]]:
    """The files a KCL file imports (resolved by KCL) and its parse errors."""
    result = _api().parse_file(_lib().ParseFileArgs(path=str(file)))
    errors = [_ANSI.sub("", m.msg) for e in result.errors for m in e.messages]
    return list(result.deps), errors


@dataclass(frozen=True)
class TestCase:
    """One KCL unit test (a ``test_*`` lambda in a ``*_test.k`` file) and its outcome."""

    __test__ = False  # not a pytest class

    name: str
    seconds: float
    error: Diagnostic | None = None  # None: passed
    log: str = ""


_TEST_TEMP = re.compile(r"^_kcl_test_(?P<pid>\d+)\.k$")


def remove_stale_test_files(package_dir: Path) -> list[Path]:
    """Delete ``_kcl_test_<pid>.k`` files left in ``package_dir`` by a killed test run.

    kcl-lib's test runner writes that temporary file into the package under test and
    removes it when done; if the process dies first, the file stays and every program
    importing the package fails to compile. Files of live processes are kept.
    """
    removed: list[Path] = []
    for path in package_dir.glob("_kcl_test_*.k"):
        match = _TEST_TEMP.match(path.name)
        if match is None or _pid_alive(int(match.group("pid"))):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def test(package_dir: Path, *, root: Path | None = None) -> list[TestCase]:
    """Run the ``*_test.k`` files of one KCL package (a directory) through kcl-lib.

    Raises :class:`KclError` when the package or its tests do not compile.
    """
    remove_stale_test_files(package_dir)
    args = _lib().TestArgs(pkg_list=[str(package_dir.resolve())])
    try:
        result = _api().test(args)
    except Exception as exc:  # kcl-lib raises bare Exception for compile errors
        text = str(exc)
        raise KclError(parse_diagnostics(text, root=root), _ANSI.sub("", text)) from None
    cases: list[TestCase] = []
    for info in result.info:
        error = None
        if info.error:
            diags = parse_diagnostics(info.error, root=root)
            error = diags[0] if diags else Diagnostic(message=_ANSI.sub("", info.error).strip())
        # kcl-lib reports the duration in microseconds
        log = _ANSI.sub("", info.log_message)
        cases.append(TestCase(info.name, info.duration / 1e6, error, log))
    return cases


def format_source(source: str) -> str:
    """KCL's canonical formatting of ``source`` (what ``kcl fmt`` writes)."""
    result = _api().format_code(_lib().FormatCodeArgs(source=source))
    return bytes(result.formatted).decode("utf-8")
