"""Ownership rules (:mod:`konfig.repo.owners`), when konfig.yaml has ``owners``:

- ``owners/unknown-team``: an owner in project.yaml or ``owners.platform`` that is no
  team of ``owners.teams`` nor ``@login`` (file and line);
- ``owners/codeowners-stale``: ``.github/CODEOWNERS`` or ``.gitea/CODEOWNERS`` is not
  what ``konfig gen codeowners`` writes from the owners (missing, edited by hand, or a
  project's owners changed since): the forge would ask the wrong people.
"""

from __future__ import annotations

from konfig.check.findings import Finding
from konfig.repo.layout import Repository
from konfig.repo.owners import STALE_RULE, UNKNOWN_TEAM_RULE, repository_owners, stale_codeowners


def check_owners(repo: Repository) -> list[Finding]:
    """The ownership findings of the work tree (none while ownership is off)."""
    owners, problems = repository_owners(repo.root, repo.config, repo.projects)
    if not owners.enabled:
        return []
    findings = [Finding(UNKNOWN_TEAM_RULE, p.message, p.file, p.line) for p in problems]
    for rel in stale_codeowners(repo.root, owners):
        what = "missing" if not (repo.root / rel).is_file() else "not what the owners say"
        findings.append(
            Finding(
                STALE_RULE,
                f"{rel} is {what} (konfig.yaml `owners`, the projects' `owners`): run "
                "`konfig gen codeowners` and commit it",
                rel,
            )
        )
    return findings
