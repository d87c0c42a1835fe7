"""The exceptions that cross stage boundaries and how they map to exit codes.

Stages raise these; only ``cli.py`` turns them into messages and exit codes:
0 ok, 1 findings or an expected failure, 2 usage error, 3 unexpected error.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_UNEXPECTED = 3


class KonfigError(Exception):
    """An expected failure the user can fix: reported without a traceback, exit 1."""

    exit_code = EXIT_FINDINGS

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class UsageError(KonfigError):
    """The command line asks for something that cannot be done: exit 2."""

    exit_code = EXIT_USAGE


class ConfigError(KonfigError):
    """A repository file (konfig.yaml, project.yaml, stack.yaml, ...) is invalid."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = file if line is None else f"{file}:{line}"
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.problem = message  # without the location
        self.file = file
        self.line = line
