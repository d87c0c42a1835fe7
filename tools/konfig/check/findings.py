"""Findings: what `konfig check` reports, each with a rule id, severity and location."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """One problem: ``rule`` is ``<category>/<name>`` (structure, spec, schema, policy, ...)."""

    rule: str
    message: str
    file: str | None = None  # relative to the repository root, POSIX
    line: int | None = None
    severity: Severity = Severity.ERROR
    stack: str | None = None  # the stack path, when the finding belongs to one
    resource: str | None = None  # the resource id, for findings on a Spec

    def location(self) -> str:
        if self.file is None:
            return ""
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def __str__(self) -> str:
        where = self.location()
        text = f"{where}: {self.severity}: {self.message}" if where else self.message
        return f"{text} [{self.rule}]"

    def sort_key(self) -> tuple[str, int, str, str, str]:
        return (self.file or "", self.line or 0, self.rule, self.resource or "", self.message)


def sorted_findings(findings: list[Finding]) -> list[Finding]:
    """Deterministic order, duplicates dropped."""
    return sorted(set(findings), key=Finding.sort_key)
