"""The repository's ``kcl.mod``: what KCL would silently ignore in it.

kcl-lib reads ``kcl.mod`` leniently: a file that is not TOML, an unknown table or a
``[package]`` without a name are ignored, and with them the package name, edition
and dependencies. Every command that compiles refuses such a file (rule
``structure/kcl-mod``, the same finding ``konfig check`` reports).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from konfig.repo.layout import ROOT_MARKER

KCL_MOD_RULE = "structure/kcl-mod"


@dataclass(frozen=True)
class KclModProblem:
    """What is wrong (and how to fix it), where."""

    message: str
    file: str
    line: int | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message} [{KCL_MOD_RULE}]"


KCL_MOD_TABLES = ("dependencies", "package", "profile")
_TOML_AT = re.compile(r"\s*\(at line (\d+), column \d+\)\s*$")


def kcl_mod_problems(root: Path) -> list[KclModProblem]:
    """The problems of the repository's kcl.mod: TOML, with ``[package]`` ``name``,
    known tables only."""
    rel = ROOT_MARKER
    try:
        text = (root / rel).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [KclModProblem(f"cannot read {rel}: {exc}", rel)]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_AT.search(str(exc))
        problem = _TOML_AT.sub("", str(exc))
        return [
            KclModProblem(
                f"{rel} is not valid TOML ({problem}): KCL ignores it, and with it the "
                "package name, edition and dependencies; fix the syntax",
                rel,
                int(found.group(1)) if found else None,
            )
        ]
    lines = text.splitlines()

    def line_of_table(name: str) -> int | None:
        header = re.compile(rf"^\s*\[\s*{re.escape(name)}\s*\]|^\s*{re.escape(name)}\s*=")
        return next((n for n, line in enumerate(lines, 1) if header.match(line)), None)

    findings: list[KclModProblem] = []
    for key in data:
        if key not in KCL_MOD_TABLES:
            findings.append(
                KclModProblem(
                    f"unknown table [{key}] in {rel} (KCL knows: {', '.join(KCL_MOD_TABLES)}): "
                    "KCL ignores it",
                    rel,
                    line_of_table(key),
                )
            )
    package = data.get("package")
    if not isinstance(package, dict):
        findings.append(
            KclModProblem(
                f'{rel} has no [package] table: add `[package]` with `name = "..."` (and '
                "edition, version)",
                rel,
                1,
            )
        )
    elif not isinstance(package.get("name"), str) or not package["name"]:
        findings.append(
            KclModProblem(
                f'[package] in {rel} has no `name`: add `name = "..."`',
                rel,
                line_of_table("package"),
            )
        )
    return findings
