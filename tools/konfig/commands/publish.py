"""``konfig publish``: write the pull-delivery stacks' rendered manifests (docs/pull.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from konfig.commands._common import (
    cache_state,
    compile_settings,
    load_repository,
    repository_root,
)
from konfig.commands._console import echo_json, error, info, warn
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.repo.files import WriteScope, update_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from konfig.pipeline.publishing import FolderDiff, RenderedStack
    from konfig.repo.layout import Repository


@click.command("publish")
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write the rendered trees to DIR/<branch>/ instead of committing them (no git "
    "write; the work tree may be uncommitted).",
)
@click.option(
    "--branch",
    "extra_branches",
    multiple=True,
    metavar="BRANCH",
    help="Also prune this rendered branch (a branch no pull stack names any more).",
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Compile workers.")
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="Write nothing: print each stack folder's diff against the rendered branch as "
    "published (origin/BRANCH, else BRANCH) and its digest, for the pull request's review.",
)
@click.option(
    "--expect",
    "expects",
    multiple=True,
    metavar="STACK=DIGEST",
    help="Publish only if STACK's folder still has the DIGEST reviewed (from --diff); "
    "else write nothing, exit 1. Repeatable.",
)
@click.option(
    "--reviewed",
    "reviewed_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The reviewed record (`konfig reviewed --out`, the pull request's Konfig comment, "
    "`konfig report --reviewed-out` or the preview JSON): a stack whose rendered folder is "
    "not the one reviewed (or changes unreviewed) is kept as it is when stack.yaml "
    "apply.onReviewedChanged is block (exit 1), published with a warning when apply.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was published as JSON.")
@click.pass_context
def command(
    ctx: click.Context,
    out: Path | None,
    extra_branches: tuple[str, ...],
    jobs: int | None,
    show_diff: bool,
    expects: tuple[str, ...],
    reviewed_file: Path | None,
    as_json: bool,
) -> int:
    """Render every stack in pull delivery onto its rendered branch.

    Each stack whose stack.yaml says `delivery: {mode: pull, target: {cluster: C}}` is
    compiled and written, as canonical YAML with a kustomization.yaml, to the folder
    C/<project>/<stack>/ of the branch `target.branch` (default `rendered`): one commit
    per branch naming the source commit (HEAD) and the stacks, none when nothing
    changed. Folders of stacks no longer in pull mode there are removed. A Secret with
    values or a Terraform resource is refused (publish/secret, publish/terraform), and
    the stack's folder stays as it was. The branch is local: push it with
    `git push origin rendered`.

    \b
    Examples:
      konfig publish                       # commit onto the rendered branch(es)
      konfig publish --out rendered/       # write the trees to a folder instead
      konfig publish --diff                # what a merge would publish, and its digests
    """
    from konfig.pipeline.applying import check_committed
    from konfig.pipeline.publishing import (
        diff_against,
        publish,
        pull_stacks,
        render_stacks,
        tree,
        unexpected,
    )

    if show_diff and (out is not None or expects or reviewed_file is not None):
        raise UsageError("--diff writes nothing: give it without --out, --expect and --reviewed")
    expected = _expected(expects)
    reviewed = None
    if reviewed_file is not None:
        from konfig.commands._reviewed import read_reviewed_file

        reviewed = read_reviewed_file(reviewed_file)
    root = repository_root(ctx)
    state = cache_state(root, enabled=True, git_required=out is None)
    repo = load_repository(ctx, state=state)
    stacks = pull_stacks(repo)
    source = ""
    if out is None and not show_diff:
        source = check_committed(repo, stacks, allow_dirty=False, verb="publish").commit
    rendered = render_stacks(repo, stacks, jobs=jobs, state=state, settings=compile_settings())
    if reviewed is not None:
        rendered = _verified(repo, rendered, reviewed.published)
    failed = [r for r in rendered if not r.ok]
    for r in failed:
        where = r.where[0] if r.where[1] is None else f"{r.where[0]}:{r.where[1]}"
        if r.error is not None:
            error(f"{r.path}: not published: compile failed\n  {r.error}".replace("\n", "\n  "))
        if r.blocked is not None:
            error(
                f"{r.blocked}\n  not published, its folder kept as it is (stack.yaml "
                "apply.onReviewedChanged: block)\n  hint: preview it again in a pull request "
                "(konfig publish --diff shows the folder), review, merge; or set "
                "onReviewedChanged: apply"
            )
        for refusal in r.refused:
            error(
                f"{where}: {r.path}: not published: {refusal.message} [{refusal.rule}]\n"
                f"  hint: {refusal.hint}"
            )
    commits = []
    diffs = []
    wrong = unexpected(rendered, {repo.stack(k).path: v for k, v in expected.items()})
    for path, want, found in wrong:
        error(
            f"{path}: not published: its rendered folder is {found}, not the {want} "
            "reviewed; nothing was written\n  hint: the stack changed since the review "
            "(a later merge, a changed base): preview it again (konfig publish --diff)"
        )
    if wrong:
        return EXIT_FINDINGS
    if show_diff:
        diffs = diff_against(repo, rendered)
        if not as_json:
            for change in diffs:
                what = "changes" if change.diff else "no change"
                click.echo(
                    f"# {change.path} -> {change.branch}:{change.folder}/ ({what}) {change.digest}"
                )
                click.echo(change.diff, nl=False)
    elif out is not None:
        scope = WriteScope.named(out, "--out", folder=True)
        for branch in sorted({r.branch for r in rendered}):
            files = tree([r for r in rendered if r.branch == branch and r.ok])
            for path, data in files.items():
                update_text(out / branch / path, data.decode("utf-8"), scope=scope)
    else:
        commits = publish(repo, rendered, source=source, extra_branches=extra_branches)
        for c in commits:
            if c.commit is None:
                info(f"{c.branch}: up to date, nothing committed")
            else:
                info(f"{c.branch}: {c.commit[:12]} ({len(c.changed)} stack folders changed)")
    if not stacks:
        info("no stack is in pull delivery (stack.yaml `delivery: {mode: pull, ...}`)")
    if as_json:
        echo_json(
            {
                "source": source or None,
                "stacks": [
                    {
                        "path": r.path,
                        "branch": r.branch,
                        "folder": r.folder,
                        "ok": r.ok,
                        "files": sorted(r.files),
                        "refused": [
                            {"rule": x.rule, "resource": x.resource, "message": x.message}
                            for x in r.refused
                        ],
                        "error": r.error,
                        "blocked": r.blocked,
                        **_diff_json(diffs, r.path),
                    }
                    for r in rendered
                ],
                "commits": [
                    {
                        "branch": c.branch,
                        "commit": c.commit,
                        "changed": list(c.changed),
                        "removed": list(c.removed),
                    }
                    for c in commits
                ],
            }
        )
    return EXIT_FINDINGS if failed else EXIT_OK


def _verified(
    repo: Repository, rendered: list[RenderedStack], published: Mapping[str, str]
) -> list[RenderedStack]:
    """``rendered`` with the stacks whose folder is not the one reviewed blocked (as
    their stack.yaml apply.onReviewedChanged says); one line per stack on stderr."""
    from konfig.pipeline.publishing import blocked_by, verify_published

    by_path = {s.path: s for s in repo.stacks}
    verdicts = verify_published(
        repo,
        rendered,
        published,
        lambda path: by_path[path].on_reviewed_changed(repo.config.production_stacks),
    )
    for v in verdicts:
        if v.status == "reviewed":
            info(v.explain())
        elif not v.blocked:
            warn(v.explain() + "\n  published anyway: stack.yaml apply.onReviewedChanged is apply")
    return blocked_by(rendered, verdicts)


def _expected(expects: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in expects:
        stack, sep, digest = item.partition("=")
        if not sep or not stack or not digest.startswith("sha256:") or len(digest) != 71:
            raise UsageError(
                f"--expect {item!r}: expected STACK=sha256:<64 hex digits> "
                "(the digest konfig publish --diff printed)"
            )
        out[stack] = digest
    return out


def _diff_json(diffs: list[FolderDiff], path: str) -> dict[str, object]:
    for change in diffs:
        if change.path == path:
            return {"digest": change.digest, "base": change.base or None, "diff": change.diff}
    return {}
