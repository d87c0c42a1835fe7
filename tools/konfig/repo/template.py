"""The template a new repository is made from (``konfig init``), and where it comes from.

The template is the Konfig repository's own tracked files (``git ls-files``), minus what
only the Konfig project itself uses to develop and test the tools (:data:`DEVELOPMENT`),
and minus the example stacks (``appops/``) when a team does not want them. So a new
repository has the workflows (``preview``, ``apply``, ``drift``), every action, the tools
those actions install (``tools/konfig``, ``pyproject.toml``, ``constraints.txt``),
``base/``, ``kcl.mod``, ``konfig.yaml``, ``.sops.yaml``, the docs, and the scripts that
start a local cluster, a sops CLI and OpenTofu (``hack/cluster``, ``hack/sops``,
``hack/tofu``).

Two sources, one file list:

- **a checkout**: konfig runs from a clone of the template (``pip install -e``, or
  ``actions/setup``, which runs the tools of the checkout it is given): the files are
  those git tracks there, as they are in the work tree;
- **the package**: a built konfig wheel carries the same files under
  ``konfig/data/template/`` (``setup.py`` copies them at build time with
  :func:`template_paths`), so ``pip install konfig`` can make a repository without a
  clone of the template.

This module uses the standard library only: ``setup.py`` loads it by path to build the
wheel before konfig's dependencies exist.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

PACKAGE = Path(__file__).resolve().parents[1]
# Where a built wheel keeps the template, inside the package.
PACKAGED = PACKAGE / "data" / "template"
# A clone of the template holds the package at tools/konfig.
CHECKOUT = PACKAGE.parents[1]

# What only the Konfig project uses: its own CI (the tools' tests, the actions' tests,
# the CI entry point), the tools' tests, the hooks it publishes for other repositories,
# and its developer scripts (benchmarks, the test forge, the generators of test data and
# of the vendored provider schema). A path ending in "/" is a folder.
DEVELOPMENT = (
    ".ci/",
    ".github/workflows/actions.yml",
    ".github/workflows/tools.yml",
    ".pre-commit-hooks.yaml",
    "tools/tests/",
    "hack/bench_",
    "hack/forge",
    "hack/forge.d/",
    "hack/gen_monorepo.py",
    "hack/provider_schema.py",
)
# The example stacks: optional.
EXAMPLES = "appops/"

# Files a new repository gets rendered rather than copied: the parts that speak of the
# Konfig project's own development (its tests, its CI, ``../shared`` beside its clone)
# are marked in them and left out. A line holding the marker after other text is left
# out alone; a line that is only the marker opens a block, closed by the marker with a
# "/" (``<!-- /konfig:project-only -->``, ``# /konfig:project-only``). HTML comments in
# markdown, so GitHub shows the project's README without them.
RENDERED = ("README.md", "Makefile")
PROJECT_ONLY = "konfig:project-only"
_MARKER = re.compile(r"(?:<!--|#)\s*(/?)" + re.escape(PROJECT_ONLY) + r"\s*(?:-->)?\s*$")


class TemplateError(Exception):
    """A rendered file's project-only markers do not pair up."""


def render(rel: str, text: str) -> str:
    """``text`` of the template's file ``rel`` as a new repository gets it."""
    if rel not in RENDERED:
        return text
    out: list[str] = []
    opened: int | None = None
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        marker = _MARKER.search(line)
        if marker is None:
            if opened is None:
                out.append(line)
            continue
        alone = not line[: marker.start()].strip()
        closing = bool(marker.group(1))
        if not alone and not closing:
            continue  # one line left out
        if not alone or closing == (opened is None):
            raise TemplateError(
                f"{rel}:{number}: a {'closing' if closing else 'nested'} {PROJECT_ONLY} "
                f"marker {'without its opening one' if closing else 'inside a block'}"
            )
        opened = None if closing else number
    if opened is not None:
        raise TemplateError(f"{rel}:{opened}: a {PROJECT_ONLY} block that is never closed")
    return "".join(out)


def _matches(path: str, rule: str) -> bool:
    if rule.endswith("/"):
        return path.startswith(rule)
    if rule.endswith("_"):  # a prefix of file names: hack/bench_*
        return path.startswith(rule)
    return path == rule


def template_paths(tracked: Iterable[str], *, examples: bool = True) -> list[str]:
    """The template's files among the ``tracked`` paths (relative, "/"-separated)."""
    rules = DEVELOPMENT if examples else (*DEVELOPMENT, EXAMPLES)
    return sorted(p for p in tracked if not any(_matches(p, r) for r in rules))


def tracked_files(root: Path) -> list[str]:
    """The files git tracks in ``root`` that exist in its work tree."""
    out = subprocess.run(
        ["git", "-c", "core.quotePath=off", "ls-files", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [f for f in out.split("\0") if f and (root / f).is_file()]


@dataclass(frozen=True)
class TemplateSource:
    """Where the template's files are read: ``root`` holds each of ``files``."""

    kind: str  # "package" or "checkout"
    root: Path
    files: tuple[str, ...]  # every file, the examples included


def content(source: TemplateSource, rel: str) -> bytes:
    """The bytes of the template's file ``rel`` as a new repository gets them."""
    data = (source.root / rel).read_bytes()
    if rel in RENDERED:
        return render(rel, data.decode("utf-8")).encode("utf-8")
    return data


class NoTemplate(Exception):
    """Neither the package nor a checkout around it holds the template."""


def _is_template(root: Path) -> bool:
    return all((root / name).exists() for name in ("kcl.mod", "konfig.yaml", "base", "actions"))


def find_template(
    packaged: Path = PACKAGED, checkout: Path = CHECKOUT, *, use_git: bool = True
) -> TemplateSource:
    """The template this konfig carries: in its package (a built wheel), else the
    checkout it runs from (an editable install, or the tools checkout of a workflow)."""
    if packaged.is_dir():
        files: list[str] = []
        for directory, subdirs, names in os.walk(packaged):
            # installing compiles the template's Python files too (pip does): not its files
            subdirs[:] = [d for d in subdirs if d != "__pycache__"]
            top = Path(directory).relative_to(packaged)
            files.extend(PurePosixPath(top, name).as_posix() for name in names)
        files.sort()
        return TemplateSource("package", packaged, tuple(files))
    if use_git and _is_template(checkout) and (checkout / ".git").exists():
        return TemplateSource("checkout", checkout, tuple(sorted(tracked_files(checkout))))
    raise NoTemplate(
        f"this konfig carries no template: neither {packaged} (a built package) nor a "
        f"clone of the Konfig template around {PACKAGE} (an editable install)"
    )
