"""``konfig report``: the pull-request report (comment body and job summary) as markdown,
or as JSON with ``--json`` (docs/report.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from konfig.commands._console import info, warn
from konfig.errors import EXIT_OK, UsageError
from konfig.pipeline.reviewed import RECORD_FILE, placed, record_bytes
from konfig.repo.files import WriteScope, append_text, atomic_write_bytes, atomic_write_text
from konfig.report import comment, pull_request, records
from konfig.report.applied import build_apply, render_apply
from konfig.report.budget import (
    COMMENT_LIMIT,
    DEFAULT_BUDGET,
    SUMMARY_LIMIT_BYTES,
    chars,
)
from konfig.report.inputs import Document, ReportInputError, read, validated
from konfig.report.modes import Origin

FC = TypeVar("FC", bound=Callable[..., Any])

# Files `--results DIR` picks up (what the workflow's jobs upload as artifacts).
RESULT_FILES = {
    "preview.json": "preview",
    "changed.json": "changed",
    "compile.json": "compile",
    "test.json": "test",
    "check.json": "check",
}


def _paths(help_text: str, flag: str) -> Callable[[FC], FC]:
    return click.option(
        flag,
        multiple=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help=help_text + " Repeatable; a missing file is reported in the report, not fatal.",
    )


@click.command("report")
@_paths("Preview JSON (konfig preview --format json).", "--preview")
@click.option(
    "--changed",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Change set JSON (konfig changed --json): the 'why affected' column.",
)
@_paths("Compile summary JSON (konfig compile --json).", "--compile")
@_paths("Test results JSON (konfig test --json).", "--test")
@_paths("Check findings JSON (konfig check --format json).", "--check")
@_paths("Apply results JSON (konfig apply --json): renders the apply report.", "--apply")
@_paths("Destroy results JSON (konfig destroy --json): part of the apply report.", "--destroy")
@click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    multiple=True,
    help="Directory searched recursively for preview.json, changed.json, compile.json, "
    "test.json and check.json (the gathered artifacts of a fanned-out run).",
)
@click.option(
    "--expect",
    default="",
    metavar="KINDS",
    help="Comma-separated results that must be present (preview, changed, compile, test, "
    "check): a kind with no file found is reported as missing (its job failed).",
)
@click.option(
    "--offline-preview",
    "offline_preview",
    type=click.Path(dir_okay=False, path_type=Path),
    multiple=True,
    help="An offline preview (konfig preview --offline --format json), e.g. the one a pull "
    "request's unprivileged run computed: read as data, checked against its contract, and "
    "refused unless its mode is offline, its head is --sha and its base --base-sha. Never "
    "picked up by --results. Repeatable: one per shard (--shard I/N).",
)
@click.option(
    "--base-sha",
    default=None,
    metavar="SHA",
    help="The pull request's base commit as the forge says: --offline-preview must be of it.",
)
@click.option(
    "--pr-from",
    "pr_from",
    type=click.Choice(["fork", "same-repo"]),
    default=None,
    help="Where the pull request comes from (konfig pr's `fork`): the comment's first line "
    "says why its mode ran.",
)
@click.option(
    "--live-follows",
    is_flag=True,
    help="This offline comment is replaced by the live preview when that is ready (the "
    "first line says so).",
)
@click.option("--sha", required=True, help="Head commit the report is about.")
@click.option(
    "--pr",
    "pr",
    type=click.IntRange(min=1),
    default=None,
    help="The pull request's number, recorded in the reviewed record (konfig status "
    "names it once the change is applied).",
)
@click.option("--run-url", default=None, help="Link to the workflow run (footer).")
@click.option(
    "--run-id",
    default=None,
    metavar="ID",
    help="The workflow run whose live previews this is (github.run_id): named, hidden, in "
    "the comment, so that the next push's preview re-uses its unchanged stacks "
    "(`konfig pr --previous-run`, `konfig preview --reuse`).",
)
@click.option(
    "--budget",
    type=click.IntRange(min=2_000, max=COMMENT_LIMIT),
    default=DEFAULT_BUDGET,
    show_default=True,
    help="Maximum characters of the comment body.",
)
@click.option("--title", default="Konfig preview", show_default=True, help="Heading text.")
@click.option(
    "--placeholder",
    is_flag=True,
    help="Render the 'preview running' placeholder for --sha instead of a report.",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the comment body to FILE instead of stdout.",
)
@click.option(
    "--full-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the full report (within 1 MiB, no comment budget) to FILE, e.g. "
    "for an artifact.",
)
@click.option(
    "--reviewed-out",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default=None,
    help="Also write the reviewed record (each previewed stack's change digest, the "
    "record the comment hides; docs/contracts/review.md) to FILE (`-`: stdout), for "
    "`konfig apply --reviewed`.",
)
@click.option(
    "--reviewed-artifact",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="When the reviewed record is too long for the comment (docs/review.md), write it "
    "to DIR/reviewed.json, the exact bytes the comment's hidden reference names (with "
    "--run-id: this run uploads DIR as artifact konfig-reviewed); nothing otherwise.",
)
@click.option(
    "--blocked-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --apply: when a stack's change was not the reviewed one (blocked, or "
    "applied by its policy), write what differs, why and how to release it to FILE "
    "(for the merged pull request and the deploy issue); nothing otherwise.",
)
@click.option(
    "--summary-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Append the full report (up to GitHub's 1 MiB step-summary limit) to FILE; "
    "in a workflow pass $GITHUB_STEP_SUMMARY.",
)
@click.option(
    "--layout",
    type=click.Choice(["auto", "stacks", "grouped"]),
    default="auto",
    show_default=True,
    help="stacks: a section per stack; grouped: each distinct change once, then the "
    "exceptions; auto: grouped when many stacks change (docs/report.md).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Write the report as JSON (stacks, distinct changes, exceptions) instead of the "
    "comment: the contract is docs/contracts/report.md.",
)
@click.option(
    "--post",
    is_flag=True,
    help="Also post the comment body on pull request --pr of --repo, as `konfig comment` "
    "does (Konfig's one comment, created or updated in place, only while --sha is still "
    "the pull request's head): render and post in one process.",
)
@click.option("--repo", default=None, help="--post: the repository, as OWNER/NAME.")
@click.option(
    "--author",
    default=None,
    help="--post: the login the token comments as (as `konfig comment --author`).",
)
@click.option(
    "--api-url",
    default=None,
    help="--post: the forge's API base URL (default GitHub's; Gitea: https://HOST/api/v1).",
)
@click.option(
    "--token-env",
    default="GITHUB_TOKEN",
    show_default=True,
    help="--post: the environment variable holding the token (pull requests: write).",
)
def command(
    preview: Sequence[Path],
    changed: Path | None,
    compile: Sequence[Path],
    test: Sequence[Path],
    check: Sequence[Path],
    apply: Sequence[Path],
    destroy: Sequence[Path],
    results: Sequence[Path],
    expect: str,
    offline_preview: Sequence[Path],
    base_sha: str | None,
    pr_from: Origin | None,
    live_follows: bool,
    sha: str,
    pr: int | None,
    run_url: str | None,
    run_id: str | None,
    budget: int,
    title: str,
    placeholder: bool,
    out: Path | None,
    full_out: Path | None,
    reviewed_out: Path | None,
    reviewed_artifact: Path | None,
    summary_file: Path | None,
    blocked_out: Path | None,
    layout: comment.Layout,
    as_json: bool,
    post: bool,
    repo: str | None,
    author: str | None,
    api_url: str | None,
    token_env: str,
) -> int:
    """Render the markdown report of a pull request from the stages' JSON.

    The comment body stays under --budget characters. With a few stacks: heading and
    summary table first, then whole per-stack sections (failures, then changes), then
    compact sections without diffs; a section is cut inside only as a last resort.
    With many stacks (--layout grouped): each distinct change once with the stacks it
    occurs in, then the exceptions (failed stacks, stacks whose change differs). The
    footer says what was left out. The full report, with every stack's diff, goes to
    --summary-file and --full-out.

    \b
    Examples:
      konfig report --results results/ --sha "$SHA" --out comment.md --summary-file summary.md
      konfig report --apply apply.json --sha "$SHA"
      konfig report --results results/ --sha "$SHA" --pr 12 --post --repo acme/config
    """
    if reviewed_out is not None and str(reviewed_out) == "-" and out is None:
        raise UsageError(
            "--reviewed-out - prints the record on stdout: write the comment with --out FILE"
        )
    if run_id is not None and not run_id.isdecimal():
        raise UsageError(f"--run-id {run_id!r} is not a run id (a number: github.run_id)")
    poster = _poster(post, repo, pr, sha, author, api_url, token_env, as_json=as_json)
    if placeholder:
        _emit(comment.render_placeholder(sha, run_url), out)
        poster(comment.render_placeholder(sha, run_url))
        return EXIT_OK
    if apply or destroy:
        if preview or changed or compile or test or check or results:
            raise UsageError("--apply/--destroy make the apply report: give no PR inputs")
        if post:
            raise UsageError("--post posts a pull request's report: not with --apply/--destroy")
        return _apply_report(apply, destroy, sha, run_url, out, summary_file, blocked_out)
    files: dict[str, list[Path]] = {
        "preview": list(preview),
        "changed": [changed] if changed else [],
        "compile": list(compile),
        "test": list(test),
        "check": list(check),
    }
    for directory in results:
        if not directory.exists():
            # No artifact was uploaded at all (every job failed early): say so, render.
            warn(f"{directory}: does not exist; no results found there")
            continue
        if not directory.is_dir():
            raise UsageError(f"{directory}: not a directory", hint="pass the artifacts directory")
        for path in sorted(directory.rglob("*.json")):
            if path.name in RESULT_FILES:
                files[RESULT_FILES[path.name]].append(path)
    expected = [k.strip() for k in expect.split(",") if k.strip()]
    unknown = sorted(set(expected) - set(files))
    if unknown:
        raise UsageError(
            f"--expect: unknown result kind(s) {', '.join(unknown)}",
            hint=f"use {', '.join(files)}",
        )
    if offline_preview:
        if files["preview"]:
            raise UsageError(
                "--offline-preview and a live preview (--preview, preview.json under "
                "--results) cannot go together: one comment shows one mode"
            )
        files["preview"] += offline_preview
    if not any(files.values()) and not expected:
        raise UsageError(
            "no inputs", hint="pass --preview, --changed, --compile, --test, --check or --results"
        )

    missing: list[str] = []
    docs: dict[str, list[Document]] = {key: [] for key in files}
    for key, paths in files.items():
        for path in paths:
            doc = _load(path)
            if doc is None:
                warn(f"{path}: not found; the report says the {key} results are missing")
                missing.append(f"{key} ({path.name})")
            else:
                if key == "preview" and path in offline_preview:
                    _check_offline(doc, path, sha=sha, base_sha=base_sha)
                docs[key].append(doc)
    for key in expected:
        if not files[key]:
            warn(f"no {key} results found; the report says they are missing")
            missing.append(key)
    if len(docs["changed"]) > 1:
        raise UsageError("give one change set (--changed or one changed.json under --results)")
    inputs = pull_request.Inputs(
        previews=docs["preview"],
        changed=docs["changed"][0] if docs["changed"] else None,
        compile=docs["compile"],
        tests=docs["test"],
        checks=docs["check"],
        missing=missing,
    )
    try:
        report = pull_request.build(
            inputs,
            sha=sha,
            run_url=run_url,
            pr=pr,
            origin=pr_from,
            live_follows=live_follows,
            run_id=run_id,
        )
    except ReportInputError as exc:
        raise UsageError(str(exc), hint="pass the JSON the named konfig command printed") from exc

    chosen = comment.choose_layout(report, layout, budget=budget)
    if as_json:
        text = json.dumps(comment.to_json(report, layout=chosen), indent=2) + "\n"
        _emit(text, out)
    else:
        shown = comment.render(report, budget=budget, title=title, layout=chosen)
        _emit(shown.text, out)
        poster(shown.text)
        if shown.truncated:
            left_out = "exceptions" if shown.layout == "grouped" else "stack diffs"
            info(
                f"report truncated to {chars(shown.text)} characters (budget {budget}): "
                f"{len(shown.omitted)} {left_out} left out, {len(shown.cut)} cut"
            )
    if full_out is not None:
        full = comment.render_full(
            report, budget=SUMMARY_LIMIT_BYTES - 1024, title=title, layout=chosen
        )
        atomic_write_text(full_out, full.text, scope=WriteScope.named(full_out, "--full-out"))
    if summary_file is not None:
        _append_summary(report, summary_file, title, chosen)
    if reviewed_artifact is not None and report.reviewed.stacks:
        _, ref = placed(report.reviewed, int(report.run_id) if report.run_id else None)
        if ref is not None:  # the comment names it: the run uploads these bytes
            target = reviewed_artifact / RECORD_FILE
            target.parent.mkdir(parents=True, exist_ok=True)
            scope = WriteScope.named(target, "--reviewed-artifact")
            atomic_write_bytes(target, record_bytes(report.reviewed), scope=scope)
            info(
                f"the reviewed record is out of the comment ({ref.size} bytes, sha256 "
                f"{ref.sha256[:12]}): {target}, for artifact {ref.artifact} of run {ref.run}"
            )
    if reviewed_out is not None:
        record = json.dumps(report.reviewed.to_dict(), indent=2) + "\n"
        if str(reviewed_out) == "-":
            click.echo(record, nl=False)
        else:
            scope = WriteScope.named(reviewed_out, "--reviewed-out")
            atomic_write_text(reviewed_out, record, scope=scope)
    return EXIT_OK


def _poster(
    post: bool,
    repo: str | None,
    pr: int | None,
    sha: str,
    author: str | None,
    api_url: str | None,
    token_env: str,
    *,
    as_json: bool,
) -> Callable[[str], None]:
    """What --post does with the rendered body (nothing without it); its options checked
    before anything is rendered."""
    if not post:
        if repo is not None or author is not None or api_url is not None:
            raise UsageError("--repo, --author and --api-url go with --post")
        return lambda _body: None
    if repo is None or pr is None:
        raise UsageError(
            "--post needs --repo and --pr", hint='e.g. --post --repo "$REPOSITORY" --pr 12'
        )
    if as_json:
        raise UsageError("--post posts the comment: not with --json")
    # the forge's modules load only when posting (they cost a third of a second)
    from konfig.commands._posting import post_comment
    from konfig.forge.client import DEFAULT_API_URL, DEFAULT_MARKER, parse_repo

    full_name = parse_repo(repo)

    def send(body: str) -> None:
        post_comment(
            repo=full_name,
            number=pr,
            body=body,
            marker=DEFAULT_MARKER,
            author=author,
            head_sha=sha,
            api_url=api_url or DEFAULT_API_URL,
            token_env=token_env,
        )

    return send


def _check_offline(doc: Document, path: Path, *, sha: str, base_sha: str | None) -> None:
    """An offline preview made elsewhere (a pull request's own run): its contract, its
    mode and the commits it names, before anything of it is rendered."""
    try:
        data = validated("preview", doc)
    except ReportInputError as exc:
        raise UsageError(str(exc), hint="pass what konfig preview --offline wrote") from None
    mode = data.get("mode") or {"name": "live"}
    wrong = ""
    if mode["name"] != "offline":
        wrong = f"its mode is {mode['name']}, not offline"
    elif mode["head"] != sha:
        wrong = f"it is of head {mode['head'][:12]}, not --sha {sha[:12]}"
    elif base_sha is not None and mode["base"] != base_sha:
        wrong = f"it is of base {mode['base'][:12]}, not --base-sha {base_sha[:12]}"
    if wrong:
        raise UsageError(
            f"{path}: refused as --offline-preview: {wrong}",
            hint="pass the offline preview of this pull request's head and base",
        )


def _load(path: Path) -> Document | None:
    try:
        return read(path)
    except ReportInputError as exc:
        raise UsageError(
            str(exc), hint="pass the file a konfig command wrote with --json / --format json"
        ) from None


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        click.echo(text, nl=False)
    else:
        atomic_write_text(out, text, scope=WriteScope.named(out, "--out"))
        info(f"wrote {out} ({chars(text)} characters)")


def _append_summary(report: records.Report, path: Path, title: str, layout: comment.Layout) -> None:
    used = path.stat().st_size if path.exists() else 0
    room = SUMMARY_LIMIT_BYTES - used - 1024
    if room < 2_000:
        warn(f"{path}: the step summary is full ({used} bytes); the report is not added")
        return
    full = comment.render_full(report, budget=room, title=title, layout=layout)
    append_text(
        path,
        full.text if used == 0 else "\n" + full.text,
        scope=WriteScope.named(path, "--summary-file"),
    )
    info(f"appended the full report to {path}")


def _apply_report(
    apply: Sequence[Path],
    destroy: Sequence[Path],
    sha: str,
    run_url: str | None,
    out: Path | None,
    summary_file: Path | None,
    blocked_out: Path | None = None,
) -> int:
    missing: list[str] = []
    docs: dict[str, list[Document]] = {"apply": [], "destroy": []}
    for key, paths in (("apply", apply), ("destroy", destroy)):
        for path in paths:
            doc = _load(path)
            if doc is None:
                warn(f"{path}: not found; the report says the {key} results are missing")
                missing.append(f"{key} ({path.name})")
            else:
                docs[key].append(doc)
    try:
        report = build_apply(
            docs["apply"], docs["destroy"], sha=sha, run_url=run_url, missing=missing
        )
    except ReportInputError as exc:
        raise UsageError(str(exc), hint="pass the JSON the named konfig command printed") from exc
    text = render_apply(report)
    _emit(text, out)
    if summary_file is not None:
        used = summary_file.stat().st_size if summary_file.exists() else 0
        text = render_apply(report, budget=SUMMARY_LIMIT_BYTES - used - 1024)
        append_text(
            summary_file,
            text if used == 0 else "\n" + text,
            scope=WriteScope.named(summary_file, "--summary-file"),
        )
        info(f"appended the apply report to {summary_file}")
    if blocked_out is not None:
        from konfig.report.reviewed import render_unreviewed

        # (checked against the apply contract by build_apply above)
        unreviewed = render_unreviewed([d.data for d in docs["apply"]], sha=sha, run_url=run_url)
        if unreviewed is not None:
            atomic_write_text(
                blocked_out, unreviewed, scope=WriteScope.named(blocked_out, "--blocked-out")
            )
            info(f"a stack's change was not the reviewed one: {blocked_out}")
    return EXIT_OK
