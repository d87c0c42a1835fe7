"""The words that say which mode a preview ran in, and why: the first line of the PR
comment and of ``konfig preview --offline``'s text and markdown (docs/report.md).

A mode is never swapped silently: the live preview says it is live, a render diff says
which two commits it compares and that no cluster took part.
"""

from __future__ import annotations

from typing import Literal

Origin = Literal["fork", "same-repo"]


def mode_line(
    name: str,
    *,
    base: str | None = None,
    merge: str | None = None,
    origin: Origin | None = None,
    live_follows: bool = False,
) -> str:
    """``name``: live or offline; ``origin``: where the pull request comes from (None:
    not a pull request's run); ``live_follows``: the live preview replaces this one."""
    if name == "live":
        if origin == "fork":
            return (
                "fork PR: live preview of its compiled Specs against the clusters "
                "(a maintainer's label opted it in)"
            )
        return "live preview against the clusters"
    what = f"render diff of base `{str(base)[:12]}…` vs merge `{str(merge)[:12]}…`"
    if not live_follows:
        why = "no cluster access"
    elif origin == "fork":
        why = (
            "no cluster access yet: a maintainer's label asked for the live preview of its "
            "compiled Specs, which replaces this"
        )
    else:
        why = "no cluster access yet: the live preview against the clusters replaces this"
    return f"{'fork PR: ' if origin == 'fork' else 'offline: '}{what} ({why})"
