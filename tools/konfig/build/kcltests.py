"""KCL unit tests: every ``*_test.k`` under ``base/`` and ``appops/``.

A KCL package is a directory; kcl-lib runs the ``test_*`` lambdas of a package's
``*_test.k`` files. We run one package at a time so each result knows its package,
and find the file and line that defines each test so reports can point at it.

The tests are code from the pull request like the stacks: they run in worker
processes (:mod:`konfig.build.workers`: an empty environment, limits) after the
source rules (:mod:`konfig.build.sourcerules`), never in the calling process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from konfig.build import kcl
from konfig.build.limits import Limits
from konfig.build.sourcerules import package_files
from konfig.repo.layout import is_within

TEST_SUFFIX = "_test.k"
TEST_ROOTS = ("base", "appops")


@dataclass(frozen=True)
class UnitTestResult:
    """One test case of a KCL package; ``message`` is empty when it passed."""

    package: str  # directory relative to the repository root, POSIX
    name: str
    passed: bool
    seconds: float = 0.0
    file: str | None = None  # where the test is defined, or where it failed
    line: int | None = None
    message: str = ""

    @property
    def id(self) -> str:
        return f"{self.package}::{self.name}"


def discover_packages(root: Path, within: Sequence[str] | None = None) -> list[str]:
    """Directories under base/ and appops/ holding ``*_test.k`` files, sorted.

    With ``within``, only packages inside one of those directories (relative paths).
    """
    if within is not None and not within:
        return []
    found: set[str] = set()
    for top in TEST_ROOTS:
        start = root / top
        if not start.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if any(f.endswith(TEST_SUFFIX) for f in filenames):
                rel = Path(dirpath).relative_to(root).as_posix()
                if within is None or any(is_within(rel, w) for w in within):
                    found.add(rel)
    return sorted(found)


_TEST_DEF = re.compile(r"^(?P<name>test_\w*)\s*=\s*lambda\b", re.M)


def _definitions(root: Path, package: str) -> dict[str, tuple[str, int]]:
    """Map each test lambda name of a package to (file, line) where it is defined."""
    where: dict[str, tuple[str, int]] = {}
    for path in sorted((root / package).glob(f"*{TEST_SUFFIX}")):
        text = path.read_text(encoding="utf-8")
        for match in _TEST_DEF.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            rel = (PurePosixPath(package) / path.name).as_posix()
            where.setdefault(match.group("name"), (rel, line))
    return where


def run_package(root: Path, package: str) -> list[UnitTestResult]:
    """Run one package's tests (in this process: :func:`run_packages` runs them in
    workers). A package that does not compile, or that a source rule refuses, is one
    failed result."""
    from konfig.build.compiler import rules_for

    refused = rules_for(root).findings(package_files(root / package))
    if refused:
        rule = refused[0]
        return [
            UnitTestResult(
                package=package,
                name="<compile>",
                passed=False,
                file=rule.file,
                line=rule.line,
                message=f"{rule.message} [{rule.rule}]",
            )
        ]
    try:
        cases = kcl.test(root / package, root=root)
    except kcl.KclError as exc:
        first = exc.diagnostics[0] if exc.diagnostics else None
        return [
            UnitTestResult(
                package=package,
                name="<compile>",
                passed=False,
                file=first.file if first else None,
                line=first.line if first else None,
                message=exc.summary(),
            )
        ]
    defined = _definitions(root, package)
    results: list[UnitTestResult] = []
    for case in cases:
        file, line = defined.get(case.name, (None, None))
        if case.error is None:
            results.append(UnitTestResult(package, case.name, True, case.seconds, file, line))
            continue
        err = case.error
        results.append(
            UnitTestResult(
                package=package,
                name=case.name,
                passed=False,
                seconds=case.seconds,
                file=err.file or file,
                line=err.line if err.file else line,
                message=f"{err.kind}: {err.message}",
            )
        )
    return results


def _run_task(task: tuple[str, str]) -> list[UnitTestResult]:
    return run_package(Path(task[0]), task[1])


def run_packages(
    root: Path, packages: Iterable[str], *, jobs: int = 1, limits: Limits | None = None
) -> list[UnitTestResult]:
    """Run the packages' tests in up to ``jobs`` worker processes; results in order. A
    package whose worker dies (a limit hit) is one failed result saying which limit."""
    from konfig.build import workers

    wanted = list(packages)
    if not wanted:
        return []
    limits = limits or Limits()
    by_package: dict[str, list[UnitTestResult]] = {}
    # kcl-lib's test runner writes a temporary file into the package it tests
    writable = [str(root / package) for package in wanted]
    pool = workers.Pool[tuple[str, str]](
        min(jobs, len(wanted)), limits, root=root, writable=writable
    )
    with pool:
        for package in wanted:
            pool.submit(_run_task, (str(root), package))
        for (_, package), outcome in pool.outcomes():
            if isinstance(outcome, workers.Done):
                by_package[package] = list(outcome.value)
                continue
            if isinstance(outcome, workers.Died):
                message = f"KCL {outcome.reason}; the tests of this package were stopped"
            else:
                message = f"internal error while testing: {outcome.message}"
            by_package[package] = [UnitTestResult(package, "<run>", False, message=message)]
    return [result for package in wanted for result in by_package[package]]
