"""GitHub Actions step outputs (``$GITHUB_OUTPUT``), for changed, pending and matrix."""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from konfig.errors import UsageError
from konfig.repo.files import WriteScope, append_text

GITHUB_OUTPUT = "GITHUB_OUTPUT"


def github_output_file() -> Path:
    """The file ``$GITHUB_OUTPUT`` names; a usage error when it is not set."""
    raw = os.environ.get(GITHUB_OUTPUT)
    if not raw:
        raise UsageError(
            f"--github-output needs ${GITHUB_OUTPUT}",
            hint="it is set inside GitHub Actions; elsewhere export it to a file path",
        )
    return Path(raw)


def append_github_output(path: Path, outputs: dict[str, str]) -> None:
    """Append ``name<<DELIM`` blocks (GitHub's multi-line format) in one write.

    The delimiter is random and checked against the value, so no value can end a block
    early and inject another output.
    """
    blocks: list[str] = []
    for name, value in outputs.items():
        delimiter = f"KONFIG_EOF_{secrets.token_hex(8)}"
        while delimiter in value:
            delimiter = f"KONFIG_EOF_{secrets.token_hex(8)}"
        blocks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    append_text(path, "".join(blocks), scope=WriteScope.named(path, "$GITHUB_OUTPUT"))


def write_stack_outputs(
    path: Path, stack_paths: Sequence[str], deleted_stacks: Sequence[str], projects: Sequence[str]
) -> None:
    """Append ``has-changes`` (true/false) and the counts ``stack-count``,
    ``deleted-count`` and ``project-count``: what changed and pending output.

    Never the lists: GitHub holds at most 1 MB of outputs a job (50 MB a run), and a
    step's environment variable or argument at most 128 KiB on Linux, so 10,000 stack
    paths in an output break the job that writes them or the step that reads them. The
    lists are in the ``--json`` output (a file, an artifact)."""
    append_github_output(
        path,
        {
            "has-changes": "true" if stack_paths or deleted_stacks else "false",
            "stack-count": str(len(stack_paths)),
            "deleted-count": str(len(deleted_stacks)),
            "project-count": str(len(projects)),
        },
    )
