"""What the KCL of a pull request may not do: rules read from the source, before KCL runs.

A stack's KCL (and every module it imports, its KCL unit tests, the policies) comes
from the pull request, and compile, test, check, preview and apply all run it. These
rules refuse, with the file and line, what must never run there; each is a named rule
that compile applies, so ``konfig check`` reports it under its name and preview and
apply refuse the stack with the same words:

- ``kcl/side-effect``: ``file.write``, ``file.append``, ``file.delete``, ``file.mkdir``,
  ``file.cp``, ``file.mv``, ``json.dump_to_file``, ``yaml.dump_to_file`` and
  ``yaml.dump_all_to_file`` (through any alias, called or taken as a value). Compiling
  must not change the work tree, nor any file of the machine: ``*.dump_to_file`` writes
  wherever it is told (``.git/hooks``, ``~/.bashrc``), the next step would run it.
- ``kcl/file-hash``: ``crypto.filesha256``, ``crypto.filesha512``: they read any file of
  the machine (kcl-lib confines only ``file``'s functions), and a hash tells whether a
  guess of a secret file's content is right.
- ``kcl/root-read``: a function of ``file`` in a KCL file at the repository root.
  kcl-lib lets ``file`` functions reach only the reading file's own directory and
  below; from the root that is the whole repository, ``.git/config`` (where a CI
  checkout keeps its token) included.
- ``kcl/plugin``: an ``import kcl_plugin...``. Plugins are native code outside the
  repository, and where none is installed kcl-lib quietly makes every call ``None``.

Modules are no values in KCL (``f = file`` does not compile), so a function of ``file``
is always written ``<alias>.<function>`` somewhere in the source: the rule finds every
such name in the syntax tree. What these rules do not cover (reads, the environment) is
the worker's part: see :mod:`konfig.build.workers` and docs/security.md.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from konfig.build import kcl
from konfig.detect.importgraph import KCL_SUFFIX, TEST_SUFFIX, resolve, scan_imports

SIDE_EFFECT_RULE = "kcl/side-effect"
FILE_HASH_RULE = "kcl/file-hash"
PLUGIN_RULE = "kcl/plugin"
ROOT_READ_RULE = "kcl/root-read"
# the `file` functions that change the file system
WRITING = frozenset({"write", "append", "delete", "mkdir", "cp", "mv"})
# the functions of other system modules refused: module -> {function: rule}
REFUSED: dict[str, dict[str, str]] = {
    "json": {"dump_to_file": SIDE_EFFECT_RULE},
    "yaml": {"dump_to_file": SIDE_EFFECT_RULE, "dump_all_to_file": SIDE_EFFECT_RULE},
    "crypto": {"filesha256": FILE_HASH_RULE, "filesha512": FILE_HASH_RULE},
}
WATCHED = frozenset({"file", *REFUSED})
PLUGIN_ROOT = "kcl_plugin"


@dataclass(frozen=True)
class SourceFinding:
    """One refused construct: the rule, what and how to fix, where (relative path)."""

    rule: str
    message: str
    file: str
    line: int
    column: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" + (f":{self.column}" if self.column else "")
        return f"{where}: {self.message} [{self.rule}]"


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _walk(obj: Any) -> Iterator[dict[str, Any]]:
    todo = [obj]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            yield item
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)


Aliases = frozenset[tuple[str, str]]  # (name bound, system module it names)


def _aliases(tree: dict[str, Any]) -> Aliases:
    """The names a file binds to the system modules the rules watch."""
    return frozenset(
        (str(wrapper["node"]["name"]), str(wrapper["node"]["path"]["node"]))
        for wrapper in tree.get("body", [])
        if (wrapper.get("node") or {}).get("type") == "Import"
        and wrapper["node"]["path"]["node"] in WATCHED
    )


def _parse(text: str) -> dict[str, Any] | None:
    try:
        return kcl.parse_source(text)
    except kcl.KclError:
        return None  # KCL reports the syntax error itself


def _plugin_findings(imports: Sequence[tuple[str, int]], file: str) -> list[SourceFinding]:
    return [
        SourceFinding(
            PLUGIN_RULE,
            f"`import {name}`: KCL plugins are refused (native code from outside the "
            "repository; without the plugin every call is silently None); compute the "
            "value in KCL or pass it as a kcl_option in ci-test/settings.yaml",
            file,
            line,
        )
        for name, line in imports
        if name == PLUGIN_ROOT or name.startswith(PLUGIN_ROOT + ".")
    ]


def _rule_of(module: str, function: str, *, at_root: bool) -> str | None:
    if module == "file":
        if function in WRITING:
            return SIDE_EFFECT_RULE
        return ROOT_READ_RULE if at_root else None
    return REFUSED.get(module, {}).get(function)


_WHY = {
    SIDE_EFFECT_RULE: "changes files: compiling and checking must change no file (the work "
    "tree, or any other); make the content a resource instead, or write files outside KCL",
    FILE_HASH_RULE: "reads any file of the machine: hash a string instead (crypto.sha256), "
    "read with file.read from the stack's own folder",
    ROOT_READ_RULE: "in a file at the repository root reaches every file of the repository, "
    ".git included: move this file into a package directory (its own files are all KCL "
    "lets it read)",
}


def _call_findings(
    tree: dict[str, Any], aliases: Aliases, file: str, *, at_root: bool = False
) -> list[SourceFinding]:
    bound = dict(aliases)
    found: list[SourceFinding] = []
    for wrapper in _walk(tree):
        node = wrapper.get("node")
        if not isinstance(node, dict) or node.get("type") != "Identifier":
            continue
        names = [str(n.get("node")) for n in node.get("names", []) if isinstance(n, dict)]
        if len(names) < 2 or names[0] not in bound:
            continue
        rule = _rule_of(bound[names[0]], names[1], at_root=at_root)
        if rule is None:
            continue
        column = wrapper.get("column")
        found.append(
            SourceFinding(
                rule,
                f"`{names[0]}.{names[1]}` {_WHY[rule]}",
                file,
                int(wrapper.get("line") or 1),
                int(column) + 1 if column is not None else None,
            )
        )
    return found


def source_findings(
    text: str, file: str, *, shared_aliases: Aliases = frozenset(), at_root: bool = False
) -> list[SourceFinding]:
    """The refused constructs of one KCL file's text (``file``: its name in messages).

    ``shared_aliases``: the names the other files of a main package bind to watched
    modules (the files of a main package share their imports); ``at_root``: the file
    lies in the repository's root directory."""
    imports = scan_imports(text)
    found = _plugin_findings(imports, file)
    if shared_aliases or any(name in WATCHED for name, _ in imports):
        tree = _parse(text)
        if tree is not None:
            aliases = _aliases(tree) | shared_aliases
            found.extend(_call_findings(tree, aliases, file, at_root=at_root))
    return sorted(found, key=lambda f: (f.line, f.column or 0, f.rule))


@dataclass(frozen=True)
class _Scanned:
    stamp: tuple[int, int, int]
    text: str
    imports: tuple[str, ...]
    aliases: Aliases  # the names this file binds to watched modules


class SourceRules:
    """The rules over every file a KCL program loads from the repository; remembers
    what it read of each file by its stat (a worker serves many stacks)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: dict[str, _Scanned] = {}
        self._found: dict[tuple[str, Aliases], list[SourceFinding]] = {}
        self._modules: dict[str, tuple[int, list[str]]] = {}
        self._real_root = os.path.realpath(root)

    def _scan(self, path: str) -> _Scanned | None:
        try:
            st = os.stat(path)  # noqa: PTH116
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            known = self._files.get(path)
            if known is not None and known.stamp == stamp:
                return known
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError):
            return None  # KCL reports an unreadable file itself
        names = scan_imports(text)
        aliases: Aliases = frozenset()
        if any(name in WATCHED for name, _ in names):
            tree = _parse(text)
            aliases = _aliases(tree) if tree is not None else frozenset()
        scanned = _Scanned(stamp, text, tuple(name for name, _ in names), aliases)
        self._files[path] = scanned
        return scanned

    def _file_findings(self, path: str, scanned: _Scanned, shared: Aliases) -> list[SourceFinding]:
        key = (f"{path}:{scanned.stamp}", shared)
        found = self._found.get(key)
        if found is None:
            rel = _rel(Path(path), self.root)
            found = source_findings(
                scanned.text, rel, shared_aliases=shared, at_root="/" not in rel
            )
            self._found[key] = found
        return found

    def _module_files(self, module: str) -> list[str]:
        """The files KCL loads for ``module`` (remembered by the folder's mtime)."""
        base = f"{self._real_root}/{module}"
        try:
            st = os.stat(base)  # noqa: PTH116
        except OSError:
            single = base + KCL_SUFFIX
            return [single] if os.path.isfile(single) else []  # noqa: PTH113
        if not stat.S_ISDIR(st.st_mode):
            single = base + KCL_SUFFIX
            return [single] if os.path.isfile(single) else []  # noqa: PTH113
        known = self._modules.get(base)
        if known is not None and known[0] == st.st_mtime_ns:
            return known[1]
        files = sorted(
            f"{base}/{entry.name}"
            for entry in os.scandir(base)
            if entry.name.endswith(KCL_SUFFIX)
            and not entry.name.endswith(TEST_SUFFIX)
            and entry.is_file()
        )
        self._modules[base] = (st.st_mtime_ns, files)
        return files

    def findings(self, entries: Iterable[str | Path]) -> list[SourceFinding]:
        """Every finding in the ``entries`` (one main package: they share imports) and in
        every module they import from the repository, transitively."""
        return self.findings_of([entries])[0]

    def findings_of(self, programs: Iterable[Iterable[str | Path]]) -> list[list[SourceFinding]]:
        """:meth:`findings` of each program (its entry files). The modules they import
        (the base models, the generated schemas: most of what a stack loads) are walked
        once for all of them: each file is read, or found unchanged by its stat, once in
        the call, and a module's findings with those of everything it imports are kept
        for the call's other programs."""
        scans: dict[str, _Scanned | None] = {}
        listed: dict[str, list[str]] = {}
        closures: dict[str, frozenset[SourceFinding]] = {}
        prefix = f"{self._real_root}/"

        def scan(path: str) -> _Scanned | None:
            if path not in scans:
                scans[path] = self._scan(path)
            return scans[path]

        def files_of(module: str) -> list[str]:
            found = listed.get(module)
            if found is None:
                found = listed[module] = self._module_files(module)
            return found

        def imported(path: str, scanned: _Scanned) -> list[str]:
            if not path.startswith(prefix):
                return []  # outside the repository: its imports are not the repository's
            rel = path[len(prefix) :]
            modules = (resolve(name, rel) for name in scanned.imports)
            return [m for m in modules if m is not None]

        def closure(module: str) -> frozenset[SourceFinding]:
            """The findings of a module's files and of all they import, transitively."""
            done = closures.get(module)
            if done is not None:
                return done
            found: set[SourceFinding] = set()
            seen: set[str] = set()
            todo = list(files_of(module))
            while todo:
                path = todo.pop()
                if path in seen:
                    continue
                seen.add(path)
                scanned = scan(path)
                if scanned is None:
                    continue
                found.update(self._file_findings(path, scanned, frozenset()))
                for target in imported(path, scanned):
                    known = closures.get(target)
                    if known is not None:
                        found.update(known)
                    else:
                        todo.extend(files_of(target))
            closures[module] = done = frozenset(found)
            return done

        out: list[list[SourceFinding]] = []
        for entries in programs:
            main = list(dict.fromkeys(os.path.realpath(f) for f in entries))
            scanned_main = [(p, scan(p)) for p in main]
            shared = frozenset(a for _, s in scanned_main if s is not None for a in s.aliases)
            program: set[SourceFinding] = set()
            for path, scanned in scanned_main:
                if scanned is None:
                    continue
                program.update(self._file_findings(path, scanned, shared))
                for module in imported(path, scanned):
                    program.update(closure(module))
            out.append(sorted(program, key=lambda f: (f.file, f.line, f.column or 0, f.rule)))
        return out


def package_files(directory: Path) -> list[Path]:
    """A KCL package's files, its ``*_test.k`` included (what ``kcl test`` loads)."""
    return sorted(p for p in directory.glob(f"*{KCL_SUFFIX}") if p.is_file())


def summary(findings: Sequence[SourceFinding]) -> str:
    """The first finding's message, and how many more there are."""
    first = findings[0]
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return f"{first.message}{more}"
