"""Workflow runs through the forge's API: one run's progress (its status and the
artifacts it has uploaded so far) and a repository's list of runs, on GitHub and Gitea
alike (``GET /repos/{repo}/actions/runs[/{id}[/artifacts]]``), through
:meth:`konfig.forge.client.GitHub.get_json`. What to make of them is
:mod:`konfig.forge.runs` (plain data).

Both lists are paged: GitHub takes ``per_page`` (up to 100), Gitea ``limit`` (up to 50,
30 when not given, ``per_page`` ignored); both are sent, and a page shorter than
:data:`PAGE` is the last.
"""

from __future__ import annotations

from konfig.forge.client import GitHub, GitHubError
from konfig.forge.runs import RunProgress, WorkflowRun, run_from_json

PAGE = 50


def run_progress(client: GitHub, repo: str, run_id: int, *, pages: int = 10) -> RunProgress:
    """Workflow run ``run_id``'s status and the artifacts it has uploaded so far."""
    path = f"/repos/{repo}/actions/runs/{run_id}"
    run = client.get_json(path, "read the workflow run")
    if not isinstance(run, dict):
        raise GitHubError(f"GET {path} answered {type(run).__name__}, not an object")
    names: set[str] = set()
    ids: dict[str, int] = {}
    for page in range(1, pages + 1):
        data = client.get_json(
            f"{path}/artifacts",
            "read the workflow run's artifacts",
            {"per_page": PAGE, "limit": PAGE, "page": page},
        )
        listed = data.get("artifacts") if isinstance(data, dict) else None
        if not isinstance(listed, list):
            raise GitHubError(f"GET {path}/artifacts answered no `artifacts` list")
        for a in listed:
            if isinstance(a, dict) and "name" in a:
                names.add(str(a["name"]))
                if isinstance(a.get("id"), int):
                    ids.setdefault(str(a["name"]), a["id"])
        if len(listed) < PAGE:
            break
    return RunProgress(str(run.get("status") or ""), frozenset(names), tuple(sorted(ids.items())))


def list_runs(client: GitHub, repo: str, *, pages: int = 3, **filters: str) -> list[WorkflowRun]:
    """A repository's workflow runs, newest first, ``pages`` of :data:`PAGE` at most;
    ``filters`` as both forges take them (``event``, ``head_sha``)."""
    path = f"/repos/{repo}/actions/runs"
    found: list[WorkflowRun] = []
    for page in range(1, pages + 1):
        data = client.get_json(
            path,
            "list the workflow runs",
            {**filters, "per_page": PAGE, "limit": PAGE, "page": page},
        )
        listed = data.get("workflow_runs") if isinstance(data, dict) else None
        if not isinstance(listed, list):
            raise GitHubError(f"GET {path} answered no `workflow_runs` list")
        found += [r for r in map(run_from_json, listed) if r is not None]
        if len(listed) < PAGE:
            break
    return found
