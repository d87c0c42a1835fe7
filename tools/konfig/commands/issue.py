"""``konfig issue``: keep one issue open while a condition holds (the drift issue)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from konfig.commands._console import info
from konfig.commands._options import forge_options
from konfig.errors import EXIT_OK, UsageError
from konfig.forge.client import GitHub, parse_repo
from konfig.forge.issues import DRIFT_MARKER, sync_issue
from konfig.forge.sticky import own_login


@click.command("issue")
@click.option("--repo", "repo", required=True, help="Repository as OWNER/NAME.")
@click.option(
    "--title",
    default="Konfig: the clusters drifted from main",
    show_default=True,
    help="Title of the issue (set when it is created or updated).",
)
@click.option(
    "--body-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Markdown body (e.g. `konfig drift --format markdown --out FILE`): open or update.",
)
@click.option(
    "--resolved",
    is_flag=True,
    help="The condition is gone: comment on the open issue and close it (if there is one).",
)
@click.option(
    "--comment",
    "resolved_comment",
    default="Resolved: no drift any more.",
    show_default=True,
    help="With --resolved: the closing comment.",
)
@click.option(
    "--marker",
    default=DRIFT_MARKER,
    show_default=True,
    help="Hidden marker that identifies the issue; one open issue per marker.",
)
@click.option(
    "--author",
    default=None,
    help="Login the token writes as. Default: the token's own (GET /user: Gitea's job "
    "token, personal access tokens), github-actions[bot] where GET /user is refused "
    "(GITHUB_TOKEN); give <app-slug>[bot] for a GitHub App token.",
)
@forge_options(token_help="Variable holding the token.")
def command(
    repo: str,
    title: str,
    body_file: Path | None,
    resolved: bool,
    resolved_comment: str,
    marker: str,
    author: str | None,
    api_url: str,
    token_env: str,
) -> int:
    """Keep one issue open while a condition holds (the drift issue).

    Create it once, update it in place when the body changes (nothing is sent when it
    does not), and with --resolved comment and close it.

    The issue is found by its hidden marker and its author among the open issues (all
    pages); issues anyone else wrote are never touched.

    actions/drift runs `konfig drift --format markdown --out drift.md
    --detailed-exitcode`, then the first example when it exits 2 (drift), the second
    when it exits 0.

    \b
    Example:
      konfig issue --repo acme/config --body-file drift.md
      konfig issue --repo acme/config --resolved
    """
    repo = parse_repo(repo)
    if (body_file is None) == (not resolved):
        raise UsageError("give --body-file (open or update the issue) or --resolved (close it)")
    body = None
    if body_file is not None:
        try:
            body = body_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{body_file}: cannot read the body: {exc}") from None
    token = os.environ.get(token_env, "")
    if not token:
        raise UsageError(
            f"no token in ${token_env}",
            hint="in a workflow: env: {GITHUB_TOKEN: ${{ github.token }}} with issues: write",
        )
    with GitHub(token, api_url=api_url) as client:
        login, source = own_login(client, author)
        result = sync_issue(
            client,
            repo,
            title=title,
            body=body,
            marker=marker,
            author=login,
            resolved_comment=resolved_comment,
        )
    where = f": {result.issue.url or '#' + str(result.issue.number)}" if result.issue else ""
    info(f"issue {result.action}{where} (as {login}, from {source})")
    if result.closed_duplicates:
        info(f"closed duplicates: {', '.join('#' + str(n) for n in result.closed_duplicates)}")
    return EXIT_OK
