"""``konfig pr``: the open pull request of a commit, as the forge says.

The privileged half of the pull-request pipeline (``workflow_run``, docs/security.md)
learns only which commit the unprivileged run was for. Which pull request that is,
whether it comes from a fork and what its base is are asked here, from the forge's
API: never from the artifact or the branch, which the pull request controls.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import click

from konfig.commands._common import repository_root
from konfig.commands._console import info, warn
from konfig.commands._options import forge_options
from konfig.commands._outputs import append_github_output, github_output_file
from konfig.detect import gitrepo
from konfig.errors import EXIT_FINDINGS, EXIT_OK, KonfigError, UsageError
from konfig.forge.artifacts import MAX_BYTES, ArtifactError, unpack
from konfig.forge.client import DEFAULT_MARKER, GitHub, GitHubError, PullRequest, parse_repo
from konfig.forge.runlist import list_runs, run_progress
from konfig.forge.runs import (
    RunProgress,
    latest_with_artifact,
    of_branch_push,
    of_pull_request,
    wait_for_artifacts,
)
from konfig.forge.sticky import find_own_comment, own_login
from konfig.pipeline.reusing import previous_run as previous_of


@click.command("pr")
@click.option("--repo", "repo", required=True, help="Repository as OWNER/NAME.")
@click.option(
    "--head-sha",
    required=True,
    metavar="SHA",
    help="The commit: the pull request whose head it is now.",
)
@click.option(
    "--base-ref",
    default=None,
    metavar="BRANCH",
    help="Only a pull request into BRANCH (e.g. the default branch).",
)
@click.option(
    "--live-label",
    default=None,
    metavar="LABEL",
    help="A pull request from a fork that carries LABEL (which only people with triage "
    "rights can set) gets the live preview of its compiled Specs: `live` is true for it. "
    "Without: `live` is true for pull requests from this repository only.",
)
@click.option(
    "--previous-run",
    is_flag=True,
    help="Also name the workflow run of the pull request's last live preview, as Konfig's "
    "own comment on it records (found by its marker and its author): `previous-run`, "
    "empty when there is none. Its preview artifacts let `konfig preview --reuse` re-use "
    "the stacks that did not change since.",
)
@click.option(
    "--author",
    default=None,
    help="--previous-run: the login Konfig comments as (default: the token's own, as "
    "`konfig comment` finds it).",
)
@click.option(
    "--wait-run",
    "wait_run",
    type=click.IntRange(min=1),
    default=None,
    metavar="RUN_ID",
    help="Once the pull request is found, wait until workflow run RUN_ID has uploaded "
    "every --wait-artifact, or has ended without them, or --wait-timeout passed: "
    "`waited` is `ready`, `ended` or `timeout`, and `run-ended` whether the run had "
    "completed at the wait's last look, `true` or `false` (the privileged half waits so "
    "for the unprivileged run it started with).",
)
@click.option(
    "--wait-artifact",
    "wait_artifacts",
    multiple=True,
    metavar="NAME",
    help="--wait-run: an artifact to wait for (repeatable).",
)
@click.option(
    "--wait-timeout",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="--wait-run: stop waiting after this long.",
)
@click.option(
    "--download",
    "downloads",
    multiple=True,
    metavar="NAME",
    help="Download artifact NAME, if the run it comes from has one, and unpack it into "
    "--download-dir/NAME, as data (a zip whose every member must be a plain file inside "
    "that folder): from the run --own-artifact or --base-artifact found when NAME is "
    "theirs, else from the --wait-run run once the wait is over (ready, or the run "
    "ended). Repeatable.",
)
@click.option(
    "--download-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="--download: where each artifact's folder is made (they must not exist yet).",
)
@click.option(
    "--own-artifact",
    "own_artifact",
    default=None,
    metavar="WORKFLOW:NAME",
    help="Also name the newest run of workflow file WORKFLOW for this pull request that "
    "uploaded artifact NAME and ran the WORKFLOW this head has (.github/workflows/WORKFLOW "
    "the same at its head commit, read from the git repository here): `own-run` (empty: "
    "none). The unprivileged run restores its compile cache from there (docs/speed.md): "
    "data of the pull request's own, for its own side only, and never from a run of "
    "another definition (a pull request that changed the workflow to upload forged "
    "entries and changed it back).",
)
@click.option(
    "--base-artifact",
    "base_artifact",
    default=None,
    metavar="WORKFLOW:NAME",
    help="Also name the newest run of WORKFLOW on a push to the pull request's base "
    "branch at its base commit that uploaded artifact NAME: `base-run` (empty: none). "
    "The base-side Specs of the offline preview come from there (a run only a push to "
    "that branch starts: docs/security.md).",
)
@click.option(
    "--github-output",
    is_flag=True,
    help="Also write `found`, `number`, `fork`, `live`, `base-sha`, `base-ref`, "
    "`head-sha` (and `previous-run`, `waited`, `run-ended`, `downloaded`, `own-run`, "
    "`base-run`) to "
    "$GITHUB_OUTPUT.",
)
@forge_options(token_help="Environment variable holding the token (pull requests: read).")
@click.pass_context
def command(
    ctx: click.Context,
    repo: str,
    head_sha: str,
    base_ref: str | None,
    live_label: str | None,
    previous_run: bool,
    author: str | None,
    wait_run: int | None,
    wait_artifacts: tuple[str, ...],
    wait_timeout: float,
    downloads: tuple[str, ...],
    download_dir: Path | None,
    own_artifact: str | None,
    base_artifact: str | None,
    github_output: bool,
    api_url: str,
    token_env: str,
) -> int:
    """Find the open pull request whose head is commit SHA.

    Exit 0 with its number, whether it comes from a fork and its base commit; exit 1
    when no open pull request has that head (closed, or pushed to since). Several: the
    lowest number.

    \b
    Example:
      konfig pr --repo acme/config --head-sha "$HEAD_SHA" --base-ref main \\
        --api-url "$GITHUB_API_URL" --github-output
    """
    repo = parse_repo(repo)
    if (wait_run is None) != (not wait_artifacts):
        raise UsageError(
            "--wait-run and --wait-artifact go together",
            hint='e.g. --wait-run "$RUN_ID" --wait-artifact konfig-offline',
        )
    if len(head_sha) not in (40, 64) or any(c not in "0123456789abcdef" for c in head_sha):
        raise UsageError(f"--head-sha {head_sha!r} is not a full commit id (hex, lower case)")
    own = _workflow_artifact("--own-artifact", own_artifact)
    based = _workflow_artifact("--base-artifact", base_artifact)
    found_names = {spec[1] for spec in (own, based) if spec is not None}
    # each name downloaded from the run found for it, the others from the waited run
    from_wait = tuple(n for n in downloads if n not in found_names)
    if downloads and (download_dir is None or (from_wait and wait_run is None)):
        raise UsageError(
            "--download goes with --download-dir and a run to download from "
            "(--wait-run, or the NAME of --own-artifact/--base-artifact)",
            hint='e.g. --download konfig-offline --download-dir "$RUNNER_TEMP/offline"',
        )
    output = github_output_file() if github_output else None
    token = os.environ.get(token_env, "")
    if not token:
        raise UsageError(
            f"no token in ${token_env}",
            hint="in a workflow: env: {GITHUB_TOKEN: ${{ github.token }}}",
        )
    # the checkout the earlier runs' workflow is compared in: found (or refused) first
    same = _same_workflow(ctx, own[0], head_sha) if own is not None else None
    with GitHub(token, api_url=api_url) as client:
        pulls = client.open_pulls_at(repo, head_sha)
        if base_ref is not None:
            pulls = [p for p in pulls if p.base_ref == base_ref]
        run = _previous_run(client, repo, pulls[0].number, author) if pulls and previous_run else ""
        waited = ""
        ended = False
        got: list[str] = []
        if pulls and wait_run is not None:
            waited, progress = _wait(client, repo, wait_run, wait_artifacts, wait_timeout)
            ended = progress.ended
            if waited != "timeout" and download_dir is not None:
                got = _download(client, repo, wait_run, progress, from_wait, download_dir)
        found_runs: dict[str, str] = {}
        if pulls:
            found_runs, sources = _artifact_runs(client, repo, pulls[0], own, based, same)
            for name in dict.fromkeys(n for n in downloads if n in found_names):
                if name in sources and download_dir is not None:
                    run_id, at = sources[name]
                    got += _download(client, repo, run_id, at, (name,), download_dir)
    if not pulls:
        into = f" into {base_ref}" if base_ref else ""
        info(f"no open pull request{into} has head {head_sha} (closed, or pushed to since)")
        if output is not None:
            append_github_output(output, {"found": "false"})
        return EXIT_FINDINGS
    pr = pulls[0]
    origin = f"from the fork {pr.head_repo}" if pr.fork else "from this repository"
    base = f"into {pr.base_ref} at {pr.base_sha}"
    live = not pr.fork or (live_label is not None and live_label in pr.labels)
    info(f"pull request #{pr.number} at {pr.head_sha} ({origin}), {base}")
    if pr.fork and live:
        info(f"it carries the label {live_label}: the live preview of its compiled Specs runs")
    if previous_run:
        info(
            f"its last live preview: run {run}"
            if run
            else "no live preview of it yet (no run named in Konfig's comment)"
        )
    if output is not None:
        append_github_output(
            output,
            {
                **({"previous-run": run} if previous_run else {}),
                **({"waited": waited, "run-ended": "true" if ended else "false"} if waited else {}),
                **({"downloaded": " ".join(got)} if downloads else {}),
                **found_runs,
                "found": "true",
                "number": str(pr.number),
                "fork": "true" if pr.fork else "false",
                "live": "true" if live else "false",
                "base-sha": pr.base_sha,
                "base-ref": pr.base_ref,
                "head-sha": pr.head_sha,
            },
        )
    return EXIT_OK


def _previous_run(client: GitHub, repo: str, number: int, author: str | None) -> str:
    """The run Konfig's own comment on pull request ``number`` names ("": none)."""
    login, _ = own_login(client, author)
    found, _ = find_own_comment(
        client.list_comments(repo, number), marker=DEFAULT_MARKER, author=login
    )
    return (previous_of(found.body) or "") if found is not None else ""


def _workflow_artifact(option: str, given: str | None) -> tuple[str, str] | None:
    if given is None:
        return None
    workflow, sep, name = given.partition(":")
    if not sep or not workflow or not name or "/" in workflow:
        raise UsageError(
            f"{option} {given!r} is not WORKFLOW:NAME",
            hint=f"e.g. {option} preview.yml:konfig-verify-0 (the workflow's file name)",
        )
    return workflow, name


def _artifact_runs(
    client: GitHub,
    repo: str,
    pr: PullRequest,
    own: tuple[str, str] | None,
    based: tuple[str, str] | None,
    same_workflow: Callable[[str], bool] | None = None,
) -> tuple[dict[str, str], dict[str, tuple[int, RunProgress]]]:
    """`own-run` and `base-run` (:func:`konfig.forge.runs.latest_with_artifact`), and the
    run each artifact name was found in, with what the forge said of it (its ids)."""
    found: dict[str, str] = {}
    seen: dict[int, RunProgress] = {}
    sources: dict[str, tuple[int, RunProgress]] = {}

    def artifacts(run_id: int) -> frozenset[str]:
        seen[run_id] = run_progress(client, repo, run_id)
        return seen[run_id].artifacts

    if own is not None:
        workflow, name = own
        run = latest_with_artifact(
            list_runs(client, repo),
            lambda r: (
                of_pull_request(
                    r, workflow, pr.number, head_repo=pr.head_repo or "", head_ref=pr.head_ref
                )
                and (same_workflow is None or same_workflow(r.head_sha))
            ),
            artifacts,
            name,
        )
        found["own-run"] = "" if run is None else str(run)
        if run is not None:
            sources[name] = (run, seen[run])
        info(f"{name} of an earlier {workflow} run of #{pr.number}: {run or 'none'}")
    if based is not None:
        workflow, name = based
        run = latest_with_artifact(
            list_runs(client, repo, event="push", head_sha=pr.base_sha),
            lambda r: of_branch_push(
                r, workflow, repo=pr.base_repo, branch=pr.base_ref, sha=pr.base_sha
            ),
            artifacts,
            name,
        )
        found["base-run"] = "" if run is None else str(run)
        if run is not None:
            sources[name] = (run, seen[run])
        where = f"{pr.base_ref} at {pr.base_sha[:12]}"
        info(f"{name} of a {workflow} run on a push to {where}: {run or 'none'}")
    return found, sources


def _same_workflow(ctx: click.Context, workflow: str, head: str) -> Callable[[str], bool]:
    """Whether commit SHA has the workflow file ``head`` has (read from the git
    repository here: the checkout, with the pull request's history). A commit git does
    not have here (pushed over since), or without the file: no."""
    root = repository_root(ctx)
    path = f".github/workflows/{workflow}"

    def at(sha: str) -> bytes | None:
        try:
            return gitrepo.file_at(root, sha, path)
        except KonfigError:
            return None

    mine = at(head)

    def same(sha: str) -> bool:
        if mine is None:
            return False
        theirs = at(sha)
        if theirs != mine:
            info(f"run of {sha[:12]}: not taken, its {path} is not this head's")
        return theirs == mine

    return same


def _download(
    client: GitHub,
    repo: str,
    run_id: int,
    progress: RunProgress,
    names: tuple[str, ...],
    into: Path,
) -> list[str]:
    """Download and unpack each artifact of ``names`` the run has (by the id the wait
    last read) into ``into/<name>``; the names downloaded."""
    got: list[str] = []
    for name in dict.fromkeys(names):
        artifact_id = progress.artifact_id(name)
        if artifact_id is None:
            info(f"run {run_id} has no artifact {name}: not downloaded")
            continue
        started = time.monotonic()
        try:
            data = client.download_artifact(repo, artifact_id, limit=MAX_BYTES)
            files = unpack(data, into / name, name=name)
        except (ArtifactError, GitHubError) as exc:
            # nothing of it is kept: the step that reads it finds it missing and says so
            shutil.rmtree(into / name, ignore_errors=True)
            warn(f"{exc}: not downloaded")
            continue
        took = time.monotonic() - started
        info(f"downloaded {name} ({len(files)} files, {len(data)} bytes, {took:.1f} s)")
        got.append(name)
    return got


def _wait(
    client: GitHub, repo: str, run_id: int, names: tuple[str, ...], timeout: float
) -> tuple[str, RunProgress]:
    """Wait for run ``run_id``'s artifacts ``names`` (:func:`wait_for_artifacts`)."""
    started = time.monotonic()
    outcome, progress = wait_for_artifacts(
        lambda: run_progress(client, repo, run_id),
        names,
        timeout=timeout,
        clock=time.monotonic,
        sleep=time.sleep,
    )
    took = time.monotonic() - started
    wanted = ", ".join(names)
    if outcome == "ready":
        info(f"run {run_id} uploaded {wanted} ({took:.1f} s of waiting)")
    else:
        missing = ", ".join(n for n in names if n not in progress.artifacts)
        why = "ended" if outcome == "ended" else f"is still {progress.status} after {took:.0f} s"
        info(f"run {run_id} {why} without {missing}")
    return outcome, progress
