"""``konfig comment``: create or update Konfig's one sticky comment on a pull request."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from konfig.commands._console import info, warn
from konfig.commands._options import forge_options
from konfig.errors import EXIT_OK, UsageError
from konfig.forge.client import DEFAULT_MARKER, GITHUB_ACTIONS_LOGIN, GitHub, parse_repo
from konfig.forge.sticky import upsert_comment
from konfig.report.reviewed import carried_body


@click.command("comment")
@click.option("--repo", "repo", required=True, help="Repository as OWNER/NAME.")
@click.option(
    "--pr", "number", required=True, type=click.IntRange(min=1), help="Pull request number."
)
@click.option(
    "--body-file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Markdown body (e.g. from `konfig report`); `-` reads stdin.",
)
@click.option(
    "--marker",
    default=DEFAULT_MARKER,
    show_default=True,
    help="Hidden marker that identifies the comment; one comment per marker and PR.",
)
@click.option(
    "--author",
    default=None,
    help="Login the token comments as. Default: asked with GET /user; where the token "
    f"may not ask (GitHub's GITHUB_TOKEN), {GITHUB_ACTIONS_LOGIN}. Set it for a GitHub "
    "App installation token (<app-slug>[bot]).",
)
@click.option(
    "--head-sha",
    default=None,
    metavar="SHA",
    help="Write only while SHA is still the pull request's head: a run that a newer push "
    "overtook never overwrites the newer report.",
)
@forge_options(token_help="Environment variable holding the token.")
def command(
    repo: str,
    number: int,
    body_file: Path,
    marker: str,
    author: str | None,
    head_sha: str | None,
    api_url: str,
    token_env: str,
) -> int:
    """Create Konfig's comment on a pull request, or update it in place.

    The comment is found by its hidden marker and its author across all pages of
    comments; an unchanged body sends no write; when two runs created one each, the
    oldest is kept and the others deleted; a body over GitHub's 65,536
    characters is refused before anything is sent. A body with a reviewed record
    (`konfig report`) keeps the change digests of the heads previewed before (read
    from the comment it replaces) and says which stacks changed since (docs/review.md).

    \b
    Example:
      konfig comment --repo acme/config --pr 12 --body-file comment.md \\
        --head-sha "$HEAD_SHA" --api-url "$GITHUB_API_URL"
    """
    repo = parse_repo(repo)
    body = _read_body(body_file)
    token = os.environ.get(token_env, "")
    if not token:
        raise UsageError(
            f"no GitHub token in ${token_env}",
            hint="in a workflow: env: {GITHUB_TOKEN: ${{ github.token }}}",
        )
    notes: list[str] = []

    def carried(previous: str | None, text: str) -> str:
        out = carried_body(previous, text)
        if out.warning:
            notes.append(out.warning)
        return out.text

    with GitHub(token, api_url=api_url) as client:
        result = upsert_comment(
            client,
            repo,
            number,
            body,
            marker=marker,
            author=author,
            head_sha=head_sha,
            transform=carried,
        )
    for note in notes:
        warn(note)
    if result.comment is None:
        info(
            f"comment not written: the pull request's head is now {result.head}, this body "
            f"is about {head_sha} (the run for the newer head reports)"
        )
        return EXIT_OK
    info(
        f"comment {result.action}: {result.comment.url or result.comment.id} "
        f"(as {result.author}, from {result.author_source})"
    )
    if result.duplicates:
        warn(
            f"deleted {len(result.duplicates)} duplicate comment(s) with the same marker "
            f"({', '.join(str(d) for d in result.duplicates)}); kept the oldest, "
            f"{result.comment.id}"
        )
    return EXIT_OK


def _read_body(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"{path}: no such file", hint="pass the file `konfig report --out` wrote"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the body: {exc}") from None
