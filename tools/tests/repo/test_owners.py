"""Owners: teams expanded to logins, the platform team's fallback, file:line problems, and
the two forges' CODEOWNERS files."""

from __future__ import annotations

import re

from konfig.repo.owners import Owners, ProjectFile, codeowners_text, resolve_owners

SETTINGS = {"platform": ["platform"], "teams": {"platform": ["root"], "web": ["ann", "bob"]}}


def test_teams_expand_to_logins_and_people_are_named_with_an_at() -> None:
    owners, problems = resolve_owners(
        SETTINGS,
        [
            ProjectFile("appops/shop", {"name": "shop", "owners": ["web", "@carol"]}),
            ProjectFile("appops/ops", {"name": "ops"}),
        ],
    )
    assert problems == []
    assert owners.of_project("appops/shop") == ("ann", "bob", "carol")
    assert owners.of_stack("appops/shop/prod") == ("ann", "bob", "carol")


def test_a_project_without_owners_and_a_new_project_belong_to_the_platform_team() -> None:
    owners, _ = resolve_owners(SETTINGS, [ProjectFile("appops/ops", {"name": "ops"})])
    assert owners.of_project("appops/ops") == ("root",)
    assert owners.of_stack("appops/brand-new/prod") == ("root",)


def test_an_unknown_team_is_a_problem_at_its_line_and_is_left_out() -> None:
    text = "name: shop\nowners:\n  - web\n  - wbe\n"
    owners, problems = resolve_owners(
        SETTINGS, [ProjectFile("appops/shop", {"name": "shop", "owners": ["web", "wbe"]}, text)]
    )
    assert [(p.file, p.line) for p in problems] == [("appops/shop/project.yaml", 4)]
    assert "'wbe' is no team" in problems[0].message and "platform, web" in problems[0].message
    assert owners.of_project("appops/shop") == ("ann", "bob")


def test_ownership_is_off_without_the_owners_key() -> None:
    owners, problems = resolve_owners(None, [ProjectFile("appops/a", {"owners": ["x"]})])
    assert owners == Owners() and not owners.enabled and problems == []


def test_github_codeowners_last_match_wins_and_gitea_lines_never_overlap() -> None:
    owners, _ = resolve_owners(
        SETTINGS,
        [
            ProjectFile("appops/http-echo", {"owners": ["web"]}),
            ProjectFile("appops/ops", {}),
        ],
    )
    github = codeowners_text(owners, "github").splitlines()
    assert [line for line in github if not line.startswith("#")] == [
        "* @root",
        "/appops/http-echo/ @ann @bob",
    ]
    gitea = [line for line in codeowners_text(owners, "gitea").splitlines() if line[:1] != "#"]
    assert gitea == ["!appops/.* @root", "appops/http\\\\-echo/.* @ann @bob", "appops/ops/.* @root"]

    # Gitea unescapes once and anchors the expression: each file matches one line
    def gitea_owners(path: str) -> list[str]:
        found = []
        for line in gitea:
            pattern, *who = line.split(" ")
            negative = pattern.startswith("!")
            expr = re.compile("^" + pattern.lstrip("!").replace("\\\\", "\\") + "$")
            if bool(expr.match(path)) != negative:
                found += who
        return found

    assert gitea_owners("appops/http-echo/prod/main.k") == ["@ann", "@bob"]
    assert gitea_owners("appops/ops/dev/main.k") == ["@root"]
    assert gitea_owners("base/pkg/models/frontend/server.k") == ["@root"]
