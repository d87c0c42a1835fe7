"""``konfig owners``: whose approval a change needs, whether it has it, and the status
``konfig/owners`` (:mod:`konfig.pipeline.approvals`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from konfig.commands._common import cache_state, repository_root
from konfig.commands._console import echo_json, info, warn
from konfig.commands._options import forge_options
from konfig.detect import gitrepo
from konfig.detect.changeset import affected_stacks
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.pipeline.approvals import (
    STATUS_CONTEXT,
    Approval,
    Override,
    Requirement,
    confirm_classes,
    danger_overrides,
    overrides,
    owners_at,
    requirements,
    verdict,
)
from konfig.repo.owners import Owners

if TYPE_CHECKING:
    from konfig.detect.changeset import ChangeSet

if TYPE_CHECKING:
    from konfig.forge.client import GitHub


@click.command("owners")
@click.option(
    "--base",
    default=None,
    metavar="REF",
    help="The branch the change merges into (default: as `konfig changed`). The owners "
    "are read from its merge base with HEAD, never from the change.",
)
@click.option("--head", default="HEAD", show_default=True, metavar="REF", help="The change.")
@click.option("--repo", "repo_name", default=None, help="Repository as OWNER/NAME (with --pr).")
@click.option(
    "--pr",
    "number",
    default=None,
    type=click.IntRange(min=1),
    help="Pull request number: read its reviews from the forge (the approvals count only "
    "for its head, which must be --head's commit).",
)
@click.option(
    "--merged",
    "merged",
    default=None,
    metavar="SHA",
    help="The merge commit of a pull request (the apply job's pushed commit): the forge "
    "says which pull request was merged as SHA; the change is SHA against its first "
    "parent, the approvals those of the pull request's head (for `konfig apply "
    "--approvals`, the audit). A direct push: no approval.",
)
@click.option(
    "--post",
    is_flag=True,
    help=f"With --pr: set the commit status {STATUS_CONTEXT} of the head and write the sticky "
    "comment konfig:owners listing whose approval each stack needs.",
)
@click.option(
    "--dangers/--no-dangers",
    "with_dangers",
    default=True,
    show_default=True,
    help="List the danger classes konfig.yaml `dangers.confirm` names as overrides: this "
    "compiles the change's KCL (offline). The owners workflow passes --no-dangers: it holds "
    "a write token, and a pull request's KCL never runs where a token is; there the "
    "dangers wait in konfig/dangers for `/konfig confirm` (docs/danger.md).",
)
@forge_options(token_help="Environment variable holding the token (reads reviews, posts).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@click.pass_context
def command(
    ctx: click.Context,
    base: str | None,
    head: str,
    repo_name: str | None,
    number: int | None,
    merged: str | None,
    post: bool,
    with_dangers: bool,
    api_url: str,
    token_env: str,
    as_json: bool,
) -> int:
    """Whose approval each production stack the change affects needs, and who gave it.

    The affected stacks come from the change through the KCL import graph (as `konfig
    changed`): a change to base/ reaches every stack importing what changed. Each
    affected production stack needs an approval from an owner of its project
    (project.yaml `owners`, konfig.yaml `owners`), read at the merge base: the change
    cannot name its own owners. Exit 0 when every such stack has one (or none is
    affected), 1 when one is missing.

    \b
    Examples:
      konfig owners --base origin/main
      konfig owners --base origin/main --repo acme/config --pr 12 --post
      konfig owners --merged "$GITHUB_SHA" --repo acme/config --json
    """
    from konfig.forge.client import GitHub, current_approvals, parse_repo
    from konfig.forge.sticky import upsert_comment
    from konfig.report.owners import OWNERS_MARKER, render_owners

    if post and number is None:
        raise UsageError("--post needs --pr", hint="pass the pull request's number")
    if number is not None and repo_name is None:
        raise UsageError("--pr needs --repo OWNER/NAME")
    root = repository_root(ctx)
    if merged is not None:
        if number is not None or post or base is not None:
            raise UsageError(
                "--merged reads the pull request the forge names for SHA: "
                "it takes no --pr, --post or --base"
            )
        return _merged(
            root, merged, repo_name, api_url=api_url, token_env=token_env, as_json=as_json
        )
    if base is None:
        default = gitrepo.default_base(root)
        base = default.ref
        info(f"comparing with {base} ({default.why}); pass --base to choose another")
    changes = affected_stacks(root, base, head, cache=cache_state(root, git_required=True))
    owners = owners_at(root, changes.merge_base)
    if not owners.enabled:
        info(f"konfig.yaml at {changes.merge_base[:12]} has no `owners`: no approval is needed")
    change = gitrepo.rev_parse(root, head)
    needed, overridden = _needed(root, base, change, changes, owners, dangers=with_dangers)
    approvals: list[Approval] = []
    holding: dict[str, tuple[str, ...]] = {}
    if number is not None and repo_name is not None:
        repo_name = parse_repo(repo_name)
        token = os.environ.get(token_env, "")
        if not token:
            raise UsageError(f"no forge token in ${token_env}", hint="pass --token-env NAME")
        with GitHub(token, api_url=api_url) as client:
            pr_head = client.pull_head(repo_name, number)
            if pr_head != change:
                raise UsageError(
                    f"pull request #{number}'s head is {pr_head[:12]}, not {head} "
                    f"({change[:12]}): approvals are of the head",
                    hint="check out the pull request's head, or pass --head with its commit",
                )
            approvals = current_approvals(client.list_reviews(repo_name, number))
            holding = _holding(client, repo_name, number, change, approvals)
            result = verdict(needed, approvals, change, holding, overridden=overridden)
            if post:  # the comment first: it says who is asked, whatever the status does
                upsert_comment(
                    client,
                    repo_name,
                    number,
                    render_owners(result),
                    marker=OWNERS_MARKER,
                    head_sha=change,
                )
                client.set_status(
                    repo_name,
                    change,
                    context=STATUS_CONTEXT,
                    state="success" if result.ok else "failure",
                    description=result.summary(),
                )
    result = verdict(needed, approvals, change, holding, overridden=overridden)
    if as_json:
        echo_json(result.to_json())
    else:
        for s in result.stacks:
            who = ", ".join(s.requirement.owners) or "nobody"
            state = f"approved by {', '.join(s.approved_by)}" if s.satisfied else "waiting"
            click.echo(f"{s.requirement.stack}: needs one of {who}: {state}")
        for o in result.overrides:
            who = ", ".join(o.override.owners) or "nobody"
            state = f"approved by {', '.join(o.approved_by)}" if o.satisfied else "waiting"
            click.echo(
                f"{o.override.stack}: overrides {o.override.rule} ({o.override.reason}): "
                f"needs one of {who}: {state}"
            )
        info(result.summary())
    return EXIT_OK if result.ok else EXIT_FINDINGS


def _holding(
    client: GitHub, repo: str, number: int, head: str, approvals: list[Approval]
) -> dict[str, tuple[str, ...]]:
    """Per stack, who approved an earlier commit at which its change digest was already
    the head's (the reviewed record in Konfig's preview comment); nothing while the
    head's preview is not there yet."""
    from konfig.commands._reviewed import pull_record
    from konfig.forge.client import DEFAULT_MARKER
    from konfig.pipeline.reviewed import approvals_holding

    record, why = pull_record(client, repo, number, marker=DEFAULT_MARKER, author=None)
    if record is None or record.head != head:
        info(f"approvals of earlier commits do not count: {why or 'no preview of the head yet'}")
        return {}
    return approvals_holding(record, [(a.login, a.change) for a in approvals])


def _merged(
    root: Path, merged: str, repo_name: str | None, *, api_url: str, token_env: str, as_json: bool
) -> int:
    """``--merged SHA``: the owners' approvals of the pull request merged as SHA, for the
    audit of its apply (``konfig apply --approvals``). The change is SHA against its first
    parent (a merge, a squash or a rebase all leave that parent as the branch was); the
    owners are read there; the approvals are the pull request's, of its head."""
    from konfig.forge.client import GitHub, current_approvals, parse_repo

    if repo_name is None:
        raise UsageError("--merged needs --repo OWNER/NAME")
    repo_name = parse_repo(repo_name)
    commit = gitrepo.rev_parse(root, merged)
    token = os.environ.get(token_env, "")
    if not token:
        raise UsageError(f"no forge token in ${token_env}", hint="pass --token-env NAME")
    try:
        parent = gitrepo.rev_parse(root, f"{commit}^1")
    except UsageError:  # the repository's first commit: nothing was merged
        parent = None
    needed: tuple[Requirement, ...] = ()
    overridden: tuple[Override, ...] = ()
    if parent is not None:
        changes = affected_stacks(root, parent, commit, cache=cache_state(root, git_required=True))
        owners = owners_at(root, changes.merge_base)
        needed, overridden = _needed(root, parent, commit, changes, owners, dangers=True)
    approvals: list[Approval] = []
    holding: dict[str, tuple[str, ...]] = {}
    change = commit
    with GitHub(token, api_url=api_url) as client:
        found = client.merged_pull(repo_name, commit)
        if found is None:
            warn(f"{commit[:12]} is not a merged pull request (a direct push): no approval")
        else:
            change = client.pull_head(repo_name, found)
            approvals = current_approvals(client.list_reviews(repo_name, found))
            info(f"{commit[:12]} merged pull request #{found} (head {change[:12]})")
            # as konfig/owners counted them: an earlier commit's approval too, for a stack
            # whose change digest it left as it is
            holding = _holding(client, repo_name, found, change, approvals)
    result = verdict(needed, approvals, change, holding, overridden=overridden)
    if as_json:
        echo_json({**result.to_json(), "pr": found})
    else:
        for s in result.stacks:
            who = ", ".join(s.approved_by) or "no owner"
            click.echo(f"{s.requirement.stack}: approved by {who}")
        info(result.summary())
    return EXIT_OK if result.ok else EXIT_FINDINGS


def _needed(
    root: Path, base: str, head: str, changes: ChangeSet, owners: Owners, *, dangers: bool
) -> tuple[tuple[Requirement, ...], tuple[Override, ...]]:
    """The production stacks' requirements and the policy overrides of the change (base
    and head: commits or refs). The danger classes konfig.yaml ``dangers.confirm`` lists
    at the merge base come from the offline preview of the change (no cluster: every
    class but a cascade's count); it is compiled only when that list is not empty."""
    if not owners.enabled:
        return (), ()
    needed = requirements(root, changes, owners)
    found = overrides(root, changes, head, owners)
    confirm = confirm_classes(root, changes.merge_base) if dangers else ()
    if confirm and (changes.stacks or changes.deleted_stacks):
        from konfig.commands._common import compile_settings
        from konfig.pipeline.offline import offline_preview

        info(f"konfig.yaml `dangers.confirm` lists {', '.join(confirm)}: the offline preview")
        done = offline_preview(
            root,
            base,
            head,
            state=cache_state(root, git_required=True),
            settings=compile_settings(),
        )
        plans = [s.plan for s in done.preview.stacks if s.plan is not None]
        found += danger_overrides(plans, confirm, owners)
    return needed, found
