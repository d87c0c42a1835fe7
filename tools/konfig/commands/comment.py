"""``konfig comment``: create or update Konfig's one sticky comment on a pull request."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from konfig.commands._options import forge_options
from konfig.commands._posting import post_comment
from konfig.errors import EXIT_OK, UsageError
from konfig.forge.client import DEFAULT_MARKER, GITHUB_ACTIONS_LOGIN, parse_repo


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
    post_comment(
        repo=repo,
        number=number,
        body=body,
        marker=marker,
        author=author,
        head_sha=head_sha,
        api_url=api_url,
        token_env=token_env,
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
