"""Character budgets: GitHub's comment and step-summary limits, counting, cutting.

GitHub rejects a comment body over :data:`COMMENT_LIMIT` characters (HTTP 422) and a
step summary over :data:`SUMMARY_LIMIT_BYTES`; reports are rendered under a budget
counted by a :data:`Measure` (:func:`chars` for comments, UTF-8 bytes for summaries).

GitHub counts a comment's characters in UTF-16 code units, as JavaScript strings do: a
character beyond the Basic Multilingual Plane (an emoji, 😀) counts twice, so 40,000
emoji are 80,000 characters to GitHub although Python's ``len`` says 40,000.
:func:`chars` counts the same way (never less than ``len``, so it is safe for forges
that count code points, such as Gitea).
"""

from __future__ import annotations

from collections.abc import Callable

COMMENT_LIMIT = 65_536  # GitHub rejects longer comment bodies (HTTP 422)
DEFAULT_BUDGET = 60_000
SUMMARY_LIMIT_BYTES = 1_048_576  # $GITHUB_STEP_SUMMARY per step

Measure = Callable[[str], int]


def chars(text: str) -> int:
    """The length of ``text`` as GitHub counts it: UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def cut_section(section: str, room: int, measure: Measure) -> str:
    closing = "\n… (cut here: this stack's section is longer than the comment allows)\n"
    closing_fence = "```\n\n</details>\n\n"
    keep: list[str] = []
    used = measure(closing) + measure(closing_fence) + 8
    fence_open = False
    for line in section.splitlines(keepends=True):
        if used + measure(line) > room:
            break
        keep.append(line)
        used += measure(line)
        if line.startswith("```"):
            fence_open = not fence_open
    text = "".join(keep)
    if fence_open:
        text += "```\n"
    return text + closing + ("</details>\n\n" if "<details>" in text else "")
