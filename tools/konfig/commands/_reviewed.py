"""What apply and status say of reviewed changes (``konfig apply --reviewed``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from konfig.commands._console import info, warn
from konfig.engine.stackrun import StackResult
from konfig.errors import UsageError
from konfig.pipeline.reviewed import Reviewed, Verdict, read_reviewed

if TYPE_CHECKING:  # apply imports this module; only the forge commands need the client
    from konfig.forge.client import Comment, GitHub


def read_reviewed_file(path: Path) -> Reviewed:
    """The record in ``--reviewed FILE`` (read before anything else runs)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--reviewed {path}: cannot read it: {exc}") from None
    return read_reviewed(text, where=f"--reviewed {path}")


def blocked(verdicts: Sequence[Verdict]) -> set[str]:
    return {v.path for v in verdicts if v.blocked}


def show_verdicts(verdicts: Sequence[Verdict]) -> None:
    """One line per stack (stderr): reviewed, or how it changed and what happens."""
    for v in verdicts:
        if v.status == "reviewed":
            info(f"{v.path}: the reviewed change (digest {v.digest[:12]})")
        elif v.blocked:
            warn(v.explain() + "\n  not applied: stack.yaml apply.onReviewedChanged is block")
        else:
            warn(v.explain() + "\n  applied anyway: stack.yaml apply.onReviewedChanged is apply")
        if v.cluster_differs:
            listed = ", ".join(f"{i} {p}" for i, p in v.cluster_differs[:10])
            info(f"{v.path}: the cluster already differs, not by this change: {listed}")


def blocked_result(verdict: Verdict) -> StackResult:
    """A stack blocked because its change is not the reviewed one: not applied."""
    return StackResult(
        verdict.path,
        False,
        (),
        verdict.explain()
        + "\n  not applied (stack.yaml apply.onReviewedChanged: block): preview again, "
        "review, merge; or set onReviewedChanged: apply",
    )


def pull_comment(
    client: GitHub, repo: str, number: int, *, marker: str, author: str | None
) -> tuple[Comment | None, str]:
    """Konfig's own comment on pull request ``number`` (found by marker and author, as
    ``konfig comment`` writes it), or None; and the login looked for."""
    from konfig.forge.sticky import find_own_comment, own_login

    login, _ = own_login(client, author)
    found, _ = find_own_comment(client.list_comments(repo, number), marker=marker, author=login)
    return found, login


def pull_record(
    client: GitHub, repo: str, number: int, *, marker: str, author: str | None
) -> tuple[Reviewed | None, str | None]:
    """The reviewed record in Konfig's own comment on pull request ``number``, or None
    and why not. The record is hostile input, checked by :func:`read_reviewed`."""
    found, login = pull_comment(client, repo, number, marker=marker, author=author)
    if found is None:
        return None, f"pull request #{number} has no Konfig comment by {login}"
    try:
        return read_reviewed(found.body, where=f"pull request #{number}'s comment"), None
    except UsageError as exc:
        return None, str(exc)
