"""``konfig reviewed``: the reviewed record of the pull request a merge commit came from.

The apply job (``.github/workflows/apply.yml``) runs it with the pushed commit: the
forge says which pull request was merged as that commit, and Konfig's own comment on it
(found by its marker and its author, as ``konfig comment`` writes it) holds the record
``konfig apply --reviewed`` compares with. Which pull request and which comment are
asked of the forge, never taken from the branch; the comment is still read as hostile
input (:func:`konfig.pipeline.reviewed.read_reviewed`). A record too long for the comment
is the artifact the comment names, taken only from the privileged preview run and only
with the sha256 and size named (:func:`konfig.commands._reviewed.referenced_record`);
otherwise the command exits 1 and writes a record without stacks, so apply counts every
change as not the reviewed one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from konfig.commands._console import error, info, warn
from konfig.commands._options import forge_options
from konfig.commands._outputs import append_github_output, github_output_file
from konfig.commands._reviewed import comment_record
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.forge.client import DEFAULT_MARKER, GitHub, parse_repo
from konfig.forge.sticky import find_own_comment, own_login
from konfig.pipeline.reviewed import Reviewed, find_reference
from konfig.repo.files import WriteScope, atomic_write_text


@click.command("reviewed")
@click.option("--repo", "repo", required=True, help="Repository as OWNER/NAME.")
@click.option("--commit", required=True, metavar="SHA", help="The merge commit (the pushed one).")
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the record (for `konfig apply --reviewed FILE`) here.",
)
@click.option(
    "--marker", default=DEFAULT_MARKER, show_default=True, help="Konfig comment's marker."
)
@click.option(
    "--author",
    default=None,
    help="Login Konfig's comments are written as (default: asked, as `konfig comment` does).",
)
@click.option(
    "--github-output",
    is_flag=True,
    help="Also write `pr` and `stack-count` to $GITHUB_OUTPUT (the stacks: --out).",
)
@forge_options(token_help="Environment variable holding the token (pull requests: read).")
def command(
    repo: str,
    commit: str,
    out: Path,
    marker: str,
    author: str | None,
    github_output: bool,
    api_url: str,
    token_env: str,
) -> int:
    """Write the reviewed record of the pull request merged as commit SHA.

    With no such pull request (a direct push), or no Konfig comment on it, the record
    is empty: `konfig apply --reviewed` then treats every change as unreviewed (blocked
    for production stacks unless stack.yaml says onReviewedChanged: apply).

    \b
    Example:
      konfig reviewed --repo acme/config --commit "$GITHUB_SHA" --out reviewed.json
    """
    repo = parse_repo(repo)
    token = os.environ.get(token_env, "")
    if not token:
        raise UsageError(f"no forge token in ${token_env}")
    record = Reviewed()
    refused: str | None = None
    with GitHub(token, api_url=api_url) as client:
        number = client.merged_pull(repo, commit)
        if number is None:
            warn(f"{commit[:12]} is not a merged pull request (a direct push): no reviewed change")
        else:
            login, _ = own_login(client, author)
            found, _ = find_own_comment(
                client.list_comments(repo, number), marker=marker, author=login
            )
            if found is None:
                warn(f"pull request #{number} has no Konfig comment by {login}: no reviewed change")
            else:
                where = f"pull request #{number}'s comment"
                try:
                    record = comment_record(client, repo, found.body, where=where, number=number)
                except UsageError as exc:  # no live preview, or a record that does not hold
                    if find_reference(found.body) is None:
                        warn(f"{exc}: no reviewed change")
                    else:  # out of the comment and not the one reviewed: refused
                        refused = str(exc)
                        record = Reviewed(refused=refused)
                        error(
                            f"{exc}\n  every stack counts as not the reviewed change "
                            "(blocked where stack.yaml apply.onReviewedChanged is block)"
                        )
    # the record alone (checked above), so what apply reads is what was checked here
    text = json.dumps({**record.to_dict(), "pr": number}, indent=2) + "\n"
    atomic_write_text(out, text, scope=WriteScope.named(out, "--out"))
    info(
        f"reviewed record of {'pull request #' + str(number) if number else commit[:12]}: "
        f"{len(record.stacks)} stack(s) -> {out}"
    )
    if github_output:
        append_github_output(
            github_output_file(),
            {"pr": json.dumps(number), "stack-count": str(len(record.stacks))},
        )
    return EXIT_OK if refused is None else EXIT_FINDINGS
