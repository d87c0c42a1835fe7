"""``konfig upgrade``: a repository made by the previous release, with its team's own
changes, brought to this one.

The previous release is real: the template at the commit its shipped manifest names
(``konfig/data/releases/0.1.0.json``), taken out of this repository's history with
``git archive``, and its own ``konfig init`` run from there (its package first on
``PYTHONPATH``) makes the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.repos import AUTHOR, TEMPLATE_ROOT, KonfigRunner

from konfig import __version__
from konfig.repo.release import (
    RECORD,
    TEAM,
    digest,
    is_team_file,
    release_content,
    shipped,
)
from konfig.repo.template import find_template


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in AUTHOR.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CI", raising=False)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def previous_release(tmp_path: Path) -> Path:
    """A checkout of the template at the previous release's commit."""
    old = shipped()
    assert old is not None and old.version != __version__
    commit = json.loads(
        (TEMPLATE_ROOT / "tools/konfig/data/releases" / f"{old.version}.json").read_text()
    )["commit"]
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=TEMPLATE_ROOT, check=False
    )
    assert found.returncode == 0, (
        f"release {old.version}'s commit {commit} is not in this clone's history: "
        "clone the whole history (a shallow clone has not got it)"
    )
    checkout = tmp_path / f"konfig-{old.version}"
    checkout.mkdir()
    archive = subprocess.run(
        ["git", "archive", commit], cwd=TEMPLATE_ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(checkout)], input=archive, check=True)
    git(checkout, "init", "--quiet")
    git(checkout, "add", "--all")
    git(checkout, "commit", "--quiet", "-m", f"konfig {old.version}")
    return checkout


def run_konfig_of(checkout: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """That release's own konfig (its package first on the import path)."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "tools"), "CI": "1"}
    return subprocess.run(
        [sys.executable, "-m", "konfig", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def team_files(repo: Path) -> dict[str, bytes]:
    return {
        rel: (repo / rel).read_bytes()
        for rel in git(repo, "ls-files").splitlines()
        if is_team_file(rel)
    }


def test_from_the_previous_release_the_teams_changes_survive_and_the_tools_are_new(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    old_release = previous_release(tmp_path)
    repo = tmp_path / "acme-config"
    made = run_konfig_of(old_release, "init", str(repo), "--name", "acme", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    old = shipped()
    assert old is not None
    assert git(repo, "log", "--format=%s") == (
        f"acme: a new Konfig repository (konfig init, konfig {old.version})"
    )
    # that release wrote no record; the manifest this konfig ships for it is exactly
    # the digests of the release files its init wrote
    assert not (repo / RECORD).exists()
    written = [rel for rel in git(repo, "ls-files").splitlines() if not is_team_file(rel)]
    assert old.files == {rel: digest((repo / rel).read_bytes()) for rel in written}

    # the team's own work: a changed stack, a new stack, a changed model; a release file
    # this release leaves as it was, changed by the team; and one both changed
    new = release_content(find_template())
    (repo / "appops/guestbook/dev/main.k").write_text(
        (repo / "appops/guestbook/dev/main.k").read_text() + "\n# the team's note\n"
    )
    hello = repo / "appops/guestbook/canary"
    hello.mkdir()
    (hello / "stack.yaml").write_text("name: canary\nkubernetes:\n  context: admin\n")
    (hello / "main.k").write_text((repo / "appops/guestbook/dev/main.k").read_text())
    models = repo / "base/pkg/models/frontend/server.k"
    assert models.is_file()
    models.write_text(models.read_text() + "\n# platform team: our own default\n")
    kept_as_is = next(
        rel
        for rel in sorted(old.files)
        if rel in new and digest(new[rel][0]) == old.files[rel] and rel.endswith(".md")
    )
    (repo / kept_as_is).write_text((repo / kept_as_is).read_text() + "\nOur runbook.\n")
    both = "tools/konfig/__init__.py"  # the version: every release changes it
    assert digest(new[both][0]) != old.files[both]
    (repo / both).write_text((repo / both).read_text() + "# patched here\n")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "the team's changes")
    ours = team_files(repo)
    head = git(repo, "rev-parse", "HEAD")

    # what would change: the changelog since that release, each file, the conflict
    shown = konfig("upgrade", "--dry-run", cwd=repo)
    assert shown.code == 1, shown.err
    assert f"konfig {old.version} -> {__version__}" in shown.err
    assert f"CHANGELOG.md, {__version__}:" in shown.err
    assert f"CHANGELOG.md, {old.version}:" not in shown.err
    assert f"update  {both}  CONFLICT: changed here since {old.version}" in shown.err
    assert "add     CHANGELOG.md" in shown.err
    assert kept_as_is not in shown.err
    for step_line in shown.err.splitlines():
        if step_line.startswith(("  add ", "  update ", "  remove ")):
            assert not is_team_file(step_line.split()[1]), step_line
    # refused while a file of both is in the way: nothing written
    refused = konfig("upgrade", cwd=repo)
    assert refused.code == 1
    assert "1 of the release's files changed here: nothing was written" in refused.err
    assert git(repo, "status", "--porcelain") == ""

    done = konfig("upgrade", "--force", cwd=repo)
    assert done.code == 0, done.err
    # the team's files are as the team left them, byte for byte
    assert team_files(repo) == ours
    assert git(repo, "diff", "--name-only", head, "--", *TEAM) == ""
    # every release file is this release's, but the one the team changed and this
    # release did not
    for rel, (data, mode) in new.items():
        if rel == kept_as_is:
            assert (repo / rel).read_text().endswith("\nOur runbook.\n")
            continue
        assert (repo / rel).read_bytes() == data, rel
        # executable or not, as git keeps it
        assert bool((repo / rel).stat().st_mode & 0o100) == bool(mode & 0o100), rel
    gone = set(old.files) - set(new)
    assert not any((repo / rel).exists() for rel in gone)
    assert (repo / "CHANGELOG.md").is_file()
    record = json.loads((repo / RECORD).read_text())
    assert record["konfig"] == __version__
    assert record["files"] == {rel: digest(data) for rel, (data, _) in new.items()}

    # the repository runs on its new tools: their version, and the team's stacks compile
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", f"konfig {__version__}")
    version = run_konfig_of(repo, "--version", cwd=repo)
    assert version.stdout.strip() == f"konfig, version {__version__}", version.stderr
    compiled = run_konfig_of(repo, "compile", "guestbook/dev", "guestbook/canary", cwd=repo)
    assert compiled.returncode == 0, compiled.stderr

    # once more: nothing to do
    again = konfig("upgrade", cwd=repo)
    assert again.code == 0, again.err
    assert f"up to date: the repository runs konfig {__version__}'s files" in again.err
    assert git(repo, "status", "--porcelain") == ""


def test_a_dirty_tree_or_a_newer_release_is_refused(konfig: KonfigRunner, tmp_path: Path) -> None:
    repo = tmp_path / "config"
    assert konfig("init", str(repo), "--name", "config", "--no-examples").code == 0
    assert konfig("upgrade", cwd=repo).code == 0  # made by this release: up to date
    # a repository whose record says an older release, with a change not committed
    record = json.loads((repo / RECORD).read_text())
    record["konfig"] = "0.1.0"
    (repo / RECORD).write_text(json.dumps(record))
    git(repo, "commit", "--quiet", "-am", "an older record")
    readme = repo / "README.md"
    readme.write_text(readme.read_text() + "\nlocal\n")
    dirty = konfig("upgrade", cwd=repo)
    assert dirty.code == 1
    assert "uncommitted changes (README.md): nothing was written" in dirty.err
    assert (repo / RECORD).read_text() == json.dumps(record)
    git(repo, "checkout", "--", "README.md")
    record["konfig"] = "9.0.0"
    (repo / RECORD).write_text(json.dumps(record))
    newer = konfig("upgrade", "--dry-run", cwd=repo)
    assert newer.code == 2
    assert f"runs konfig 9.0.0 ({RECORD}), newer than this konfig {__version__}" in newer.err
    (repo / RECORD).write_text("{not json")
    broken = konfig("upgrade", cwd=repo)
    assert broken.code == 1
    assert f"{RECORD}: not a release record" in broken.err
