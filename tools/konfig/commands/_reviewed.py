"""What apply and status say of reviewed changes (``konfig apply --reviewed``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from konfig.commands._console import info, warn
from konfig.engine.stackrun import StackResult
from konfig.errors import KonfigError, UsageError
from konfig.pipeline.reviewed import (
    RECORD_FILE,
    Reference,
    Reviewed,
    Verdict,
    find_reference,
    read_referenced,
    read_reviewed,
)

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
        where = f"pull request #{number}'s comment"
        return comment_record(client, repo, found.body, where=where, number=number), None
    except UsageError as exc:
        return None, str(exc)


def comment_record(
    client: GitHub, repo: str, body: str, *, where: str, number: int | None
) -> Reviewed:
    """The reviewed record of Konfig's comment ``body``: hidden in it, or (a long one)
    the artifact its reference names, fetched and checked (:func:`referenced_record`).
    UsageError when there is none or it is not the reviewed one."""
    ref = find_reference(body)
    if ref is None:
        return read_reviewed(body, where=where)
    return referenced_record(client, repo, ref, where=where, number=number)


# What the artifact's archive may weigh (the record is at most MAX_JSON bytes).
_MAX_ARCHIVE = 64 * 1024 * 1024


def referenced_record(
    client: GitHub, repo: str, ref: Reference, *, where: str, number: int | None
) -> Reviewed:
    """The record ``ref`` names, only from the privileged preview run
    (:func:`konfig.forge.runs.of_privileged_preview`: preview-cluster.yml or
    preview-requested.yml, ``workflow_run`` on the default branch, never a pull request's
    own run), unpacked as hostile data, and only when its bytes are those ``ref`` names
    (:func:`konfig.pipeline.reviewed.read_referenced`) and it is pull request
    ``number``'s. UsageError otherwise (a run of another workflow, an artifact gone or
    expired, other bytes): the record reviewed is not at hand."""
    import tempfile

    from konfig.forge.artifacts import unpack
    from konfig.forge.runlist import run_progress
    from konfig.forge.runs import PRIVILEGED_WORKFLOWS, of_privileged_preview, run_from_json
    from konfig.pipeline.reviewed import MAX_JSON

    at = f"artifact {ref.artifact} of run {ref.run}"
    try:
        about = client.get_json(f"/repos/{repo}", "read the repository")
        branch = str(about.get("default_branch") or "") if isinstance(about, dict) else ""
        run = run_from_json(
            client.get_json(f"/repos/{repo}/actions/runs/{ref.run}", "read the workflow run")
        )
        if run is None or not branch or not of_privileged_preview(run, repo=repo, branch=branch):
            raise UsageError(
                f"{where}: the record is in {at}, not a run of "
                f"{' or '.join(PRIVILEGED_WORKFLOWS)} on the default branch "
                f"({branch or 'unknown'}) started by workflow_run: not the reviewed record",
                hint="only the privileged preview run's artifact counts; preview again",
            )
        artifact_id = run_progress(client, repo, ref.run).artifact_id(ref.artifact)
        if artifact_id is None:
            raise UsageError(
                f"{where}: {at} is not there (expired or deleted): the reviewed record is gone",
                hint="preview the pull request again (a new push or a re-run), then merge",
            )
        data = client.download_artifact(repo, artifact_id, limit=_MAX_ARCHIVE)
        with tempfile.TemporaryDirectory(prefix="konfig-reviewed-") as tmp:
            folder = Path(tmp) / "artifact"
            files = unpack(data, folder, name=ref.artifact, limit=MAX_JSON)
            if RECORD_FILE not in files:
                raise UsageError(f"{where}: {at} holds no {RECORD_FILE}: not the reviewed record")
            raw = (folder / RECORD_FILE).read_bytes()
    except UsageError:
        raise
    except (KonfigError, OSError) as exc:
        raise UsageError(f"{where}: cannot read {at}: {exc}") from None
    record = read_referenced(ref, raw, where=f"{where} ({at})")
    if number is not None and record.pr is not None and record.pr != number:
        raise UsageError(f"{where}: {at} is the record of pull request #{record.pr}, not #{number}")
    return record
