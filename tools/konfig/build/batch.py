"""Compile many stacks in one KCL run: each stack becomes a package of one program.

Compiling a stack alone makes kcl-lib parse and resolve the whole shared base (the
models and some 200 generated Kubernetes schema files) again for every stack: about
four fifths of its CPU time. Here N stacks with the same options and the same last
entry file (the render entry) form one program: a generated ``main.k`` imports one
package per stack and outputs each package's ``resources``; the base is parsed and
resolved once for all of them.

A stack's entry files are KCL's *main package*, and the main package has rules no
other package has. Each stack's package is one generated source file that does by
hand what KCL does to a main package:

* **imports are shared by all files** of the main package: every entry file's imports
  are hoisted to the top (an alias naming two different modules cannot be);
* **same-named top-level schema declarations are merged** (``app: S {..}`` in the
  project's ``base/base.k`` and again in ``main.k``): the entries of every
  declaration go, in order, into the last one. KCL unifies these entries first
  (grouping them by key); the batch takes a merge only where evaluating the entries
  in order gives the same result: no unpacked (``**``) or ``if`` entries and no key
  set twice with a schema value, at any depth;
* **``X.instances()`` sees the main package's instances only**: in the last entry
  file each call becomes ``X.instances(True)[start:end]``, where ``start`` and
  ``end`` count all instances of ``X`` before and after the stack's own statements.
  Instances made by code of *another* package are not the main package's; so every
  package the stack imports (transitively) must be unable to make an ``X`` (it does
  not name ``X`` at all), and the stack itself must not pass ``X`` around as a value;
* **``file.read`` resolves against the reading file's directory**: a stack whose files
  in its own directory read files gets that directory's files hard-linked (or copied)
  into its package directory; files outside the stack directory must not read files.

Whatever the batch cannot express (``typeof``, ``instances`` or ``file`` functions other
than ``read`` in the stack's files, ``runtime``/``manifests``/plugins, relative
imports, a nested ``kcl.mod``, dependencies in ``kcl.mod``, ...) compiles alone: see
:class:`Unbatchable` for the reasons. A KCL error in a batch never reaches the user:
the stacks it names are compiled alone (so their errors are exactly those of a run of
their own), the others run again; an error that names no stack splits the batch in
halves until it does. ``tools/tests/build/test_batch.py`` proves batch and alone give
byte-identical Specs on every example stack, a generated repository and a corpus of
hard cases.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from konfig.build import kcl
from konfig.build.kclsource import (
    ALLOWED_SYSTEM,
    FACTS_KEPT,
    IDENT,
    IMPORT_LINE,
    PACKAGE_DEPENDENT,
    PREFIX,
    STACK_FILE,
    Decl,
    FileFacts,
    LastFile,
    Unbatchable,
    analyze,
    ident_names,
    is_identifier,
    lines_of,
    merged_source,
    plan_last,
    walk,
)
from konfig.detect.importgraph import SYSTEM_MODULES

# ------------------------------------------------------------------- a repository


def module_files(root: Path, dotted: str) -> list[Path]:
    """The files KCL loads for the absolute import ``dotted`` from the repository root."""
    base = root.joinpath(*dotted.split("."))
    if base.is_dir():
        return sorted(
            p
            for p in base.iterdir()
            if p.suffix == ".k" and not p.name.endswith("_test.k") and p.is_file()
        )
    single = base.with_suffix(".k")
    return [single] if single.is_file() else []


class Planner:
    """Turns stacks of one repository into package sources; remembers what it read."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._facts: dict[tuple[str, str], FileFacts] = {}
        self._last: dict[tuple[str, str], LastFile] = {}
        self._imports_ok: dict[tuple[str, frozenset[tuple[str, str]]], str | None] = {}
        self._nested_mod: dict[str, bool] = {}
        self.whole_repo_problem = self._check_kcl_mod()

    def _check_kcl_mod(self) -> str | None:
        mod = self.root / "kcl.mod"
        try:
            text = mod.read_text(encoding="utf-8")
        except OSError:
            return "the repository has no readable kcl.mod"
        sections = {m.group(1).strip() for m in re.finditer(r"^\s*\[([^\]]+)\]", text, re.M)}
        if sections - {"package"}:
            return "kcl.mod has more than a [package] section (dependencies)"
        return None

    def _read(self, path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise Unbatchable(f"cannot read {path}: {exc}") from None

    def facts(self, path: Path, *, last: bool = False) -> FileFacts:
        text = self._read(path)
        key = (str(path), hashlib.sha256(text.encode()).hexdigest())
        if last:
            return self.last(path).facts
        found = self._facts.get(key)
        if found is None:
            found = analyze(text)
            if len(self._facts) >= FACTS_KEPT:
                self._facts.pop(next(iter(self._facts)))  # the oldest
            self._facts[key] = found
        return found

    def last(self, path: Path) -> LastFile:
        text = self._read(path)
        key = (str(path), hashlib.sha256(text.encode()).hexdigest())
        found = self._last.get(key)
        if found is None:
            found = plan_last(text)
            self._last[key] = found
        return found

    def _under_nested_mod(self, directory: Path) -> bool:
        key = str(directory)
        known = self._nested_mod.get(key)
        if known is None:
            known = False
            current = directory
            while current != self.root and self.root in current.parents:
                if (current / "kcl.mod").exists():
                    known = True
                    break
                current = current.parent
            self._nested_mod[key] = known
        return known

    def imports_problem(self, dotted: str, rendered: frozenset[tuple[str, str]]) -> str | None:
        """Why code of ``dotted`` (or what it imports) may act differently in a batch."""
        key = (dotted, rendered)
        if key in self._imports_ok:
            return self._imports_ok[key]
        self._imports_ok[key] = None  # an import cycle is judged by its other members
        problem = self._module_problem(dotted, rendered)
        self._imports_ok[key] = problem
        return problem

    def _module_problem(self, dotted: str, rendered: frozenset[tuple[str, str]]) -> str | None:
        files = module_files(self.root, dotted)
        if not files:
            return f"`import {dotted}` does not resolve from the repository root"
        rendered_modules = {module for module, _ in rendered}
        for path in files:
            if self._under_nested_mod(path.parent):
                return f"{path} is under a nested kcl.mod"
            text = self._read(path)
            if any(word in text for word in PACKAGE_DEPENDENT):
                return f"{path} may call file.workdir() or file.modpath()"
            bound = {
                m.group(2) or m.group(1).split(".")[-1]: m.group(1)
                for m in IMPORT_LINE.finditer(text)
            }
            naming = {name for name, module in bound.items() if module in rendered_modules}
            own = dotted in rendered_modules
            if naming or own:
                for node in walk(kcl.parse_source(text)):
                    if not is_identifier(node):
                        continue
                    parts = ident_names(node)
                    if (
                        len(parts) >= 2
                        and parts[0] in naming
                        and (bound[parts[0]], parts[1]) in rendered
                    ):
                        return f"{path} uses {parts[0]}.{parts[1]}, which a stack renders"
                    if own and (dotted, parts[0]) in rendered:
                        return f"{path} uses {parts[0]}, which a stack renders"
            for module in bound.values():
                if module in SYSTEM_MODULES:
                    if module not in ALLOWED_SYSTEM:
                        return f"{path} imports the `{module}` module"
                    continue
                problem = self.imports_problem(module, rendered)
                if problem:
                    return problem
        return None

    def program(self, stack_path: str, files: Sequence[str]) -> StackProgram:
        """The package source of one stack; raises :class:`Unbatchable`."""
        if self.whole_repo_problem:
            raise Unbatchable(self.whole_repo_problem)
        if len(files) < 2:
            raise Unbatchable("fewer than two entry files")
        stack_dir = self.root / stack_path
        paths = [Path(f) for f in files]
        for path in paths:
            if not path.is_file():
                raise Unbatchable(f"entry file not found: {path}")
            if self._under_nested_mod(path.parent):
                raise Unbatchable(f"{path} is under a nested kcl.mod")
        last = self.last(paths[-1])
        own = [self.facts(p) for p in paths[:-1]]
        for path, facts in zip(paths[:-1], own, strict=True):
            if facts.reads_files and path.parent != stack_dir:
                raise Unbatchable(f"{path} reads files but is not in the stack directory")
        return _synthesize(self, stack_path, stack_dir, own, last)


@dataclass(frozen=True)
class StackProgram:
    """One stack as a package: its source and the directory whose files it reads."""

    stack_path: str
    source: str
    reads_from: Path | None


def _synthesize(
    planner: Planner,
    stack_path: str,
    stack_dir: Path,
    files: Sequence[FileFacts],
    last: LastFile,
) -> StackProgram:
    bound: dict[str, str] = {}
    order: list[tuple[str, str]] = []
    for facts in [*files, last.facts]:
        for module, name in facts.imports:
            known = bound.get(name)
            if known is None:
                bound[name] = module
                order.append((module, name))
            elif known != module:
                raise Unbatchable(f"`{name}` names two different imports")
    for module in {m for facts in files for m, _ in facts.imports}:
        if module not in SYSTEM_MODULES:
            problem = planner.imports_problem(module, last.rendered)
            if problem:
                raise Unbatchable(problem)
    # merges: every name declared more than once must be a plain top-level merge
    by_name: dict[str, list[tuple[Decl, FileFacts]]] = {}
    targets: list[str] = []
    nested: set[str] = set()
    for facts in files:
        for decl in facts.decls:
            by_name.setdefault(decl.name, []).append((decl, facts))
        targets.extend(facts.targets)
        nested |= facts.nested_targets
    merges = {name: decls for name, decls in by_name.items() if len(decls) > 1}
    for name, decls in merges.items():
        if targets.count(name) != len(decls) or name in nested:
            raise Unbatchable(f"`{name}` is declared in more ways than KCL's merge takes")
        if any(decl.stmt["node"]["type"] != "Unification" for decl, _ in decls):
            # KCL refuses some mixes of `name: S {}` and `name = S {}`: not guessed here
            raise Unbatchable(f"`{name}` is declared both with `:` and with `=`")
    last_targets = set(last.facts.targets) | last.facts.nested_targets
    if last_targets & (set(targets) | nested):
        raise Unbatchable("the stack assigns a name the render entry assigns")
    rendered_names = {
        (name, schema) for module, schema in last.rendered for m, name in order if m == module
    }
    for facts in files:
        for first, second in facts.value_refs & rendered_names:
            raise Unbatchable(f"uses {first}.{second} as a value")
    out: list[str] = []
    for module, name in order:
        out.append(
            f"import {module}" if module.split(".")[-1] == name else f"import {module} as {name}"
        )
    counted = last.counted
    for k, (alias, schema) in enumerate(counted):
        out.append(f"{PREFIX}start{k} = len({alias}.{schema}.instances(True))")
    for facts in files:
        text: list[str | None] = list(facts.lines)
        for start, stop in [*facts.import_lines, *([facts.doc_lines] if facts.doc_lines else [])]:
            text[start:stop] = [None] * (stop - start)
        inserts: dict[int, str] = {}
        for decls in merges.values():
            for decl, owner in decls:
                if owner is facts:
                    start, stop = lines_of(decl.stmt)
                    text[start:stop] = [None] * (stop - start)
            if decls[-1][1] is facts:
                inserts[lines_of(decls[-1][0].stmt)[0]] = merged_source(decls)
        for i, line in enumerate(text):
            if i in inserts:
                out.append(inserts[i])
            if line is not None:
                out.append(line)
    for k, (alias, schema) in enumerate(counted):
        out.append(f"{PREFIX}end{k} = len({alias}.{schema}.instances(True))")
    rtext: list[str | None] = list(last.facts.lines)
    edits: dict[int, list[tuple[int, int, str]]] = {}
    for node, alias, schema in last.calls:
        k = counted.index((alias, schema))
        new = f"{alias}.{schema}.instances(True)[{PREFIX}start{k}:{PREFIX}end{k}]"
        edits.setdefault(node["line"] - 1, []).append((node["column"], node["end_column"], new))
    for index, line_edits in edits.items():
        line = rtext[index]
        assert line is not None
        for c0, c1, new in sorted(line_edits, reverse=True):
            if re.sub(r"\s", "", line[c0:c1]) != new.split("(True)")[0] + "()":
                raise Unbatchable("the render entry is laid out unexpectedly")
            line = line[:c0] + new + line[c1:]
        rtext[index] = line
    lf = last.facts
    for start, stop in [*lf.import_lines, *([lf.doc_lines] if lf.doc_lines else [])]:
        rtext[start:stop] = [None] * (stop - start)
    out.extend(line for line in rtext if line is not None)
    reads = any(f.reads_files for f in files)
    return StackProgram(stack_path, "\n".join(out) + "\n", stack_dir if reads else None)


# ------------------------------------------------------------------- running


def _mirror(src: Path, dst: Path, *, top: bool = True) -> None:
    """Hard-link (or copy) ``src``'s files into ``dst``; top-level ``.k`` files stay out
    (they would join the package)."""
    for entry in os.scandir(src):
        target = dst / entry.name
        if entry.is_symlink():
            raise Unbatchable("a stack that reads files holds a symbolic link")
        if entry.is_dir():
            target.mkdir()
            _mirror(Path(entry.path), target, top=False)
        elif entry.is_file() and not (top and entry.name.endswith(".k")):
            try:
                os.link(entry.path, target)
            except OSError:
                shutil.copy2(entry.path, target)


def _packages(root: Path) -> dict[str, str]:
    """Top-level directories of the repository, importable from the batch's directory."""
    return {
        e.name: e.path
        for e in os.scandir(root)
        if e.is_dir() and IDENT.match(e.name) and e.name not in SYSTEM_MODULES
    }


@dataclass(frozen=True)
class RunOutcome:
    resources: dict[str, Any]  # stack path -> the package's `resources`
    error: kcl.KclError | None
    blamed: frozenset[int]  # indexes of the programs the error names


def run_programs(
    root: Path, programs: Sequence[StackProgram], options: Sequence[tuple[str, Any]]
) -> RunOutcome:
    """Compile the programs as one KCL run."""
    work = Path(tempfile.mkdtemp(prefix="konfig-batch-"))
    try:
        main: list[str] = []
        for i, program in enumerate(programs):
            package = work / f"s{i}"
            package.mkdir()
            if program.reads_from is not None:
                _mirror(program.reads_from, package)
            (package / STACK_FILE).write_text(program.source, encoding="utf-8")
            main.append(f"import .s{i} as {PREFIX}s{i}")
        main.extend(f"r{i} = {PREFIX}s{i}.resources" for i in range(len(programs)))
        entry = work / "main.k"
        entry.write_text("\n".join(main) + "\n", encoding="utf-8")
        try:
            output = kcl.run([str(entry)], work_dir=work, options=options, packages=_packages(root))
        except kcl.KclError as exc:
            prefix = str(work.resolve()) + os.sep
            blamed = set()
            for diag in exc.diagnostics:
                if diag.file and diag.file.startswith(prefix):
                    head = diag.file[len(prefix) :].split(os.sep, 1)[0]
                    if head.startswith("s") and head[1:].isdigit():
                        blamed.add(int(head[1:]))
            text = exc.text
            for i in range(len(programs)):
                if f"{prefix}s{i}{os.sep}" in text:
                    blamed.add(i)
            return RunOutcome({}, exc, frozenset(blamed))
        if not isinstance(output, dict):
            raise kcl.KclError([], "the batch program printed no mapping")
        return RunOutcome(
            {p.stack_path: output.get(f"r{i}") for i, p in enumerate(programs)},
            None,
            frozenset(),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class BatchOutput:
    """What :func:`compile_together` made of a group of stacks."""

    resources: dict[str, Any] = field(default_factory=dict)  # stack path -> resources
    alone: dict[str, str] = field(default_factory=dict)  # stack path -> why alone
    size: dict[str, int] = field(default_factory=dict)  # stack path -> stacks in its run
    seconds: dict[str, float] = field(default_factory=dict)
    runs: int = 0


FAILED = "its batch failed: compiled alone for its own errors"
_planners: dict[str, Planner] = {}


def planner_for(root: Path) -> Planner:
    found = _planners.get(str(root))
    if found is None:
        found = Planner(root)
        _planners[str(root)] = found
    return found


def compile_together(
    root: Path,
    stacks: Sequence[tuple[str, Sequence[str]]],
    options: Sequence[tuple[str, Any]],
) -> BatchOutput:
    """Compile ``(stack path, entry files)`` with the same ``options`` and last entry file
    in as few KCL runs as possible. Stacks in ``alone`` must be compiled one by one."""
    out = BatchOutput()
    if not supported():
        out.alone = {path: "this kcl-lib counts instances differently" for path, _ in stacks}
        return out
    planner = planner_for(root)
    programs: list[StackProgram] = []
    for stack_path, files in stacks:
        try:
            programs.append(planner.program(stack_path, files))
        except Unbatchable as exc:
            out.alone[stack_path] = str(exc)
    pending: list[list[StackProgram]] = [programs] if programs else []
    if len(programs) == 1:
        out.alone[programs[0].stack_path] = "the only stack of its group"
        pending = []
    while pending:
        group = pending.pop()
        if len(group) == 1:
            out.alone[group[0].stack_path] = FAILED
            continue
        started = time.perf_counter()
        outcome = run_programs(root, group, options)
        out.runs += 1
        if outcome.error is None:
            share = (time.perf_counter() - started) / len(group)
            for program in group:
                out.resources[program.stack_path] = outcome.resources[program.stack_path]
                out.size[program.stack_path] = len(group)
                out.seconds[program.stack_path] = share
            continue
        if outcome.blamed:
            for i in sorted(outcome.blamed):
                out.alone[group[i].stack_path] = FAILED
            rest = [p for i, p in enumerate(group) if i not in outcome.blamed]
            if rest:
                pending.append(rest)
            continue
        half = len(group) // 2
        pending.extend([group[half:], group[:half]])
    return out


_PROBE = {
    "lib/s.k": "schema S:\n    x: int\n",
    "p/a.k": (
        "import lib\n_start = len(lib.S.instances(True))\nown = lib.S {x = 1}\n"
        "mine = [s.x for s in lib.S.instances(True)][_start:]\n"
    ),
    "main.k": "import lib\nimport p\nbefore = lib.S {x = 0}\nr = p.mine\n",
}


@cache
def supported() -> bool:
    """Whether this kcl-lib counts ``instances(True)`` over all packages, in evaluation
    order, as the batch assumes (checked once per process on a tiny program)."""
    work = Path(tempfile.mkdtemp(prefix="konfig-batch-probe-"))
    try:
        for rel, text in _PROBE.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text, encoding="utf-8")
        (work / "kcl.mod").write_text('[package]\nname = "probe"\n', encoding="utf-8")
        output = kcl.run([str(work / "main.k")], work_dir=work)
        return isinstance(output, dict) and output.get("r") == [1]
    except kcl.KclError:
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)
