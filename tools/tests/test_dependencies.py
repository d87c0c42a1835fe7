"""Reproducible installs: every third-party import is declared, every package pinned."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# Modules of this repository that tests and scripts import by name: the package,
# the test helpers beside the tests (pytest puts tools/tests on sys.path), the test
# folders (a test may import another's helpers: ``from commands.test_preview import``)
# and hack/.
LOCAL = {
    "konfig",
    "fixtures",
    "__future__",
    *(p.stem for p in (ROOT / "tools/tests").glob("*.py")),
    *(p.parent.name for p in (ROOT / "tools/tests").glob("*/test_*.py")),
    *(p.stem for p in (ROOT / "hack").glob("*.py")),
}
RUNTIME = PYPROJECT["project"]["dependencies"]
EVERYTHING = RUNTIME + PYPROJECT["project"]["optional-dependencies"]["dev"]


def _name(requirement: str) -> str:
    """A distribution's normalised name (PEP 503) from a requirement string."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _imports(paths: list[Path]) -> dict[str, str]:
    """Top-level modules imported by ``paths`` (absolute imports), each with one file."""
    found: dict[str, str] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def _third_party(imports: dict[str, str]) -> dict[str, str]:
    return {m: f for m, f in imports.items() if m not in sys.stdlib_module_names and m not in LOCAL}


def _undeclared(paths: list[Path], requirements: list[str]) -> dict[str, str]:
    """Third-party modules imported by ``paths`` that no requirement provides."""
    declared = {_name(r) for r in requirements}
    owners = packages_distributions()
    return {
        module: where
        for module, where in _third_party(_imports(paths)).items()
        if not {_name(d) for d in owners.get(module, [module])} & declared
    }


def test_every_import_of_the_package_is_a_declared_dependency() -> None:
    undeclared = _undeclared(sorted((ROOT / "tools/konfig").rglob("*.py")), RUNTIME)
    assert not undeclared, f"imported but not in [project].dependencies: {undeclared}"


def test_every_import_of_tests_and_scripts_is_declared() -> None:
    paths = [*sorted((ROOT / "tools/tests").rglob("*.py")), *sorted((ROOT / "hack").glob("*.py"))]
    undeclared = _undeclared(paths, EVERYTHING)
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_every_declared_package_is_pinned_in_the_constraints() -> None:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"constraints.txt: not an exact pin: {line!r}"
            pins[_name(name)] = version
    deps = (
        PYPROJECT["project"]["dependencies"] + PYPROJECT["project"]["optional-dependencies"]["dev"]
    )
    missing = sorted({_name(r) for r in deps} - set(pins))
    assert not missing, f"declared in pyproject.toml but not pinned in constraints.txt: {missing}"
