"""``konfig matrix``: split a JSON list of stacks into chunks for a GitHub Actions matrix.

GitHub Actions is the distributed engine: many changed stacks become at most
``--max-jobs`` parallel jobs, each given a JSON array of stacks. The output is a
JSON array of ``{"index": N, "stacks": "<JSON array>"}`` objects, usable as
``strategy.matrix.include``; the stacks stay a JSON string so paths with spaces or
commas survive the trip through the matrix untouched.
"""

from __future__ import annotations

import json
from typing import Any

import click

from konfig.commands._console import echo_json
from konfig.commands._outputs import append_github_output, github_output_file
from konfig.errors import EXIT_OK, UsageError


def chunks(stacks: list[str], max_jobs: int, *, keep_one: bool = False) -> list[dict[str, Any]]:
    """Contiguous, balanced chunks of the sorted stacks (one project stays together
    as far as possible, which shares compile caches). ``keep_one``: one empty chunk
    when there are no stacks (e.g. only deleted stacks to preview)."""
    ordered = sorted(dict.fromkeys(stacks))
    if not ordered:
        return [{"index": 0, "stacks": "[]"}] if keep_one else []
    count = min(max_jobs, len(ordered))
    size, extra = divmod(len(ordered), count)
    out: list[dict[str, Any]] = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        out.append({"index": index, "stacks": json.dumps(ordered[start:end])})
        start = end
    return out


def _parse(name: str, text: str) -> list[str]:
    try:
        value = json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name}: not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{name}: expected a JSON array of stack paths, got {text[:80]!r}")
    return value


@click.command("matrix")
@click.option("--stacks", "stacks_json", required=True, help="JSON array of stack paths.")
@click.option(
    "--deleted",
    "deleted_json",
    default="[]",
    show_default=True,
    help="JSON array of deleted stacks: with none changed, one empty chunk is kept.",
)
@click.option(
    "--max-jobs",
    type=click.IntRange(min=1, max=256),
    default=16,
    show_default=True,
    help="At most this many chunks (GitHub allows 256 jobs per matrix).",
)
@click.option(
    "--github-output",
    is_flag=True,
    help="Append `matrix` (the JSON array) and `count` to $GITHUB_OUTPUT.",
)
def command(stacks_json: str, deleted_json: str, max_jobs: int, github_output: bool) -> int:
    """Split the stacks of --stacks into at most --max-jobs matrix chunks.

    \b
    Example:
      konfig matrix --stacks '["appops/a/dev", "appops/b/dev"]' --max-jobs 16
    """
    stacks = _parse("--stacks", stacks_json)
    deleted = _parse("--deleted", deleted_json)
    matrix = chunks(stacks, max_jobs, keep_one=bool(deleted))
    if github_output:
        append_github_output(
            github_output_file(), {"matrix": json.dumps(matrix), "count": str(len(matrix))}
        )
    echo_json(matrix)
    return EXIT_OK
