"""``konfig upgrade``: the repository's tools, actions and workflows from the release it
runs to this konfig's, the team's ``base/`` and ``appops/`` untouched.

The steps are those of :mod:`konfig.pipeline.upgrading`; which files are the release's:
:mod:`konfig.repo.release`.
"""

from __future__ import annotations

import click

from konfig.commands._common import repository_root
from konfig.commands._console import info
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.pipeline.upgrading import ADD, CHANGE, REMOVE, UpgradePlan, plan_upgrade, upgrade
from konfig.repo.release import TEAM
from konfig.repo.template import NoTemplate, find_template

_VERB = {ADD: "add", CHANGE: "update", REMOVE: "remove"}


def _show(plan: UpgradePlan) -> None:
    info(
        f"konfig {plan.old.version} -> {plan.new_version} (the repository's release: "
        f"{plan.old.origin}; the new one: {plan.template.kind} {plan.template.root})"
    )
    for version, text in plan.changelog:
        info(f"\nCHANGELOG.md, {version}:")
        for line in text.splitlines():
            info(f"  {line}")
    if plan.changelog:
        info("")
    for step in plan.steps:
        line = f"  {_VERB[step.action]:<7} {step.path}"
        if step.conflict:
            line += f"  CONFLICT: {step.conflict}"
        info(line)
    counts = {a: sum(1 for s in plan.steps if s.action == a) for a in _VERB}
    info(
        f"{counts[ADD]} to add, {counts[CHANGE]} to update, {counts[REMOVE]} to remove, "
        f"{len(plan.conflicts)} changed here; {', '.join(TEAM)}: untouched"
    )


@click.command("upgrade")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Replace the release's files you changed too (git diff shows your change).",
)
@click.pass_context
def command(ctx: click.Context, dry_run: bool, force: bool) -> int:
    """Upgrade the repository's tools, actions and workflows to this konfig's release.

    The repository records the release it runs in .konfig/release.json (konfig init
    writes it). Every file of that release you did not change is replaced by this
    release's, added or removed; base/, appops/, kcl.mod, konfig.yaml and .sops.yaml
    are yours and never touched. It shows the CHANGELOG.md entries and each file first.
    A release file you changed is a conflict: nothing is written unless --force. It
    needs a clean work tree, and commits nothing: review `git diff`, then commit.
    Exit 0, 1 for conflicts or uncommitted changes (nothing written), 2 when the
    repository runs a newer release.

    \b
    Examples:
      konfig upgrade --dry-run    # what this konfig's release changes, the changelog
      konfig upgrade              # then: git diff; git add -A; git commit
      konfig upgrade --force      # also the release's files you changed
    """
    root = repository_root(ctx)
    try:
        template = find_template()
    except NoTemplate as exc:
        raise UsageError(
            str(exc),
            hint="install konfig from a built package, or run it from a clone of "
            "the Konfig template",
        ) from None
    plan = plan_upgrade(root, template)
    _show(plan)
    if not plan.steps and plan.old.version == plan.new_version:
        info(f"up to date: the repository runs konfig {plan.new_version}'s files")
        return EXIT_OK
    if dry_run:
        return EXIT_FINDINGS if plan.conflicts and not force else EXIT_OK
    done = upgrade(plan, force=force)
    info(
        f"wrote {len(done.written)} files, removed {len(done.removed)}; "
        f"review with `git diff`, then "
        f'`git add -A && git commit -m "konfig {plan.new_version}"`'
    )
    return EXIT_OK
