"""``konfig init``: a new repository that works at once, from one command."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures.repos import AUTHOR, TEMPLATE_ROOT, KonfigRunner
from test_links import link_problems

from konfig import __version__
from konfig.repo.release import RECORD, digest, is_team_file, release_content
from konfig.repo.template import find_template, template_paths


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in AUTHOR.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CI", raising=False)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def works(konfig: KonfigRunner, repo: Path) -> None:
    """What a team runs first: each passes."""
    for args in (("list",), ("compile", "--all"), ("test", "--all"), ("check", "--all")):
        result = konfig(*args, cwd=repo)
        assert result.code == 0, (args, result.out, result.err)


def test_a_new_repository_with_the_examples_works_and_is_committed(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    dest = tmp_path / "acme-config"
    made = konfig("init", str(dest), "--name", "acme", "--json")
    assert made.code == 0, made.err
    data = json.loads(made.out)
    assert data["path"] == str(dest.resolve())
    assert (data["name"], data["kubernetesVersion"], data["examples"]) == ("acme", "1.32", True)
    assert data["contexts"] == {}
    assert data["template"] == {"source": "checkout", "path": str(TEMPLATE_ROOT)}
    # exactly the template's files, committed on main, nothing left over
    expected = template_paths(find_template().files)
    assert data["files"] == expected
    assert git(dest, "ls-files").splitlines() == sorted([*expected, RECORD])
    assert git(dest, "rev-parse", "HEAD") == data["commit"]
    assert git(dest, "branch", "--show-current") == data["branch"] == "main"
    assert git(dest, "status", "--porcelain") == ""
    assert git(dest, "log", "--format=%s") == (
        f"acme: a new Konfig repository (konfig init, konfig {__version__})"
    )
    # the release it runs is recorded: this konfig's version, the digest of each of the
    # release's files, and none of the team's (base/, appops/, kcl.mod, ...)
    record = json.loads((dest / RECORD).read_text(encoding="utf-8"))
    assert record["konfig"] == __version__
    release = release_content(find_template())
    assert record["files"] == {rel: digest(data) for rel, (data, _) in release.items()}
    assert {rel: digest((dest / rel).read_bytes()) for rel in release} == record["files"]
    assert not any(is_team_file(rel) for rel in record["files"])
    assert "tools/konfig/cli.py" in record["files"]
    assert "actions/setup/action.yml" in record["files"]
    # the workflows, the actions, .sops.yaml and the tools the actions install are there;
    # the tools' own tests and CI are not
    for needed in (
        ".github/workflows/preview.yml",
        ".github/workflows/apply.yml",
        ".github/workflows/drift.yml",
        "actions/setup/action.yml",
        ".sops.yaml",
        "pyproject.toml",
        "tools/konfig/cli.py",
    ):
        assert (dest / needed).is_file(), needed
    assert not (dest / "tools" / "tests").exists()
    assert not (dest / ".github" / "workflows" / "tools.yml").exists()
    assert 'name = "acme"' in (dest / "kcl.mod").read_text(encoding="utf-8")
    assert (dest / "hack" / "cluster").stat().st_mode & 0o111
    # its README and Makefile are the team's: every link resolves there, `make test`
    # runs konfig test and check on the stacks, not the tools' tests this repository lacks
    assert link_problems(dest / "README.md", dest) == []
    # as a user runs it: not a sub-make of this repository's `make test` (CI runs the
    # suite so; a sub-make prints "Entering directory '/tmp/pytest-of-...'")
    alone = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    make = subprocess.run(
        ["make", "-n", "test"], cwd=dest, capture_output=True, text=True, check=True, env=alone
    ).stdout
    assert "konfig test --all" in make
    assert "konfig check --all" in make
    assert "-m pytest" not in make, make
    assert "make unit" not in (dest / "README.md").read_text(encoding="utf-8")
    works(konfig, dest)


def test_without_examples_for_another_kubernetes_version(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    dest = tmp_path / "bare"
    made = konfig("init", str(dest), "--no-examples", "--kubernetes-version", "1.31", "--json")
    assert made.code == 0, made.err
    data = json.loads(made.out)
    assert data["examples"] is False
    assert data["schemasWritten"] > 0
    assert not (dest / "appops").exists()
    assert (
        yaml.safe_load((dest / "konfig.yaml").read_text(encoding="utf-8"))["kubernetesVersion"]
        == "1.31"
    )
    # base/pkg/k8s is what the generator makes for 1.31 and the template's vendored
    # CRDs (their schemas kept), and it is committed
    crds = sorted((dest / "base/pkg/k8s/crd").glob("*/vendor/*.yaml"))
    assert crds
    crd_args = [a for crd in crds for a in ("--crd", str(crd.relative_to(dest)))]
    assert konfig("gen", "schemas", "--check", *crd_args, cwd=dest).code == 0
    assert list((dest / "base/pkg/k8s/crd").glob("*/v1/*.k"))
    assert "v1.31.0" in (dest / "base/pkg/k8s/api/core/v1/pod.k").read_text(encoding="utf-8")
    assert git(dest, "status", "--porcelain") == ""
    works(konfig, dest)


def test_the_contexts_given_replace_the_examples_clusters(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    dest = tmp_path / "ctx"
    made = konfig("init", str(dest), "--context", "prod-eu", "--context", "edge-eu", "--json")
    assert made.code == 0, made.err
    assert json.loads(made.out)["contexts"] == {"admin": "prod-eu", "edge": "edge-eu"}
    contexts = {
        p.parent.relative_to(dest).as_posix(): yaml.safe_load(p.read_text(encoding="utf-8"))[
            "kubernetes"
        ]["context"]
        for p in dest.glob("appops/*/*/stack.yaml")
    }
    assert contexts["appops/http-echo/edge"] == "edge-eu"
    assert {c for s, c in contexts.items() if s != "appops/http-echo/edge"} == {"prod-eu"}
    assert konfig("test", "--all", cwd=dest).code == 0
    one = tmp_path / "one"
    assert konfig("init", str(one), "--context", "prod").code == 0
    edge = yaml.safe_load((one / "appops/http-echo/edge/stack.yaml").read_text(encoding="utf-8"))
    assert edge["kubernetes"]["context"] == "prod"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--name", "Acme Config"), "--name 'Acme Config' is not a usable repository name"),
        (
            ("--kubernetes-version", "1.99"),
            "kubernetes-validate has no schemas for Kubernetes 1.99",
        ),
        (("--kubernetes-version", "v1"), "--kubernetes-version 'v1' is not a version like 1.32"),
        (("--context", "a b"), "--context 'a b' is not a kubeconfig context name"),
        (("--context", "a", "--context", "b", "--context", "c"), "3 --context given"),
        (("--no-examples", "--context", "prod"), "--context names the clusters of the example"),
    ],
)
def test_bad_answers_are_usage_errors_and_create_nothing(
    konfig: KonfigRunner, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    dest = tmp_path / "new"
    result = konfig("init", str(dest), *args)
    assert result.code == 2
    assert message in result.err
    assert not dest.exists()


def test_a_directory_that_is_not_empty_is_refused(konfig: KonfigRunner, tmp_path: Path) -> None:
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine\n", encoding="utf-8")
    result = konfig("init", str(dest))
    assert result.code == 2
    assert f"{dest} is not empty: konfig init makes a new repository" in result.err
    assert sorted(p.name for p in dest.iterdir()) == ["notes.txt"]
    unusable = konfig("init", str(tmp_path / "My Config"))
    assert unusable.code == 2
    assert "the directory's name 'my config' is not a usable repository name" in unusable.err
    assert "hint: pass --name NAME" in unusable.err
    a_file = tmp_path / "file"
    a_file.write_text("", encoding="utf-8")
    assert konfig("init", str(a_file)).code == 2


def test_an_empty_directory_is_used_and_a_failed_commit_leaves_it_empty(
    konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "empty"
    dest.mkdir()
    # git without a name for the commit
    monkeypatch.setenv("GIT_AUTHOR_NAME", "")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "")
    failed = konfig("init", str(dest))
    assert failed.code == 1
    assert "git commit failed" in failed.err
    assert "git does not know who you are (empty ident name" in failed.err
    assert "hint: set `git config --global user.name NAME`" in failed.err
    assert list(dest.iterdir()) == []
    monkeypatch.setenv("GIT_AUTHOR_NAME", AUTHOR["GIT_AUTHOR_NAME"])
    monkeypatch.setenv("GIT_COMMITTER_NAME", AUTHOR["GIT_COMMITTER_NAME"])
    assert konfig("init", str(dest)).code == 0
    assert git(dest, "status", "--porcelain") == ""


def _on_a_terminal(args: list[str], answers: str, env: dict[str, str]) -> str:
    """Run konfig with a terminal for stdin and stderr, typing ``answers``; its output."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "konfig", *args],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    os.write(master, answers.encode())
    said = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed: konfig exited
            break
        if not chunk:
            break
        said += chunk
    proc.wait(timeout=120)
    os.close(master)
    assert proc.returncode == 0, said.decode(errors="replace")
    return said.decode(errors="replace")


def test_on_a_terminal_it_asks_what_the_flags_do_not_say(tmp_path: Path) -> None:
    env = {**os.environ, **AUTHOR}
    env.pop("CI", None)
    dest = tmp_path / "asked"
    said = _on_a_terminal(["init", str(dest), "--kubernetes-version", "1.32"], "acme\nn\n", env)
    assert "Repository (team) name [asked]:" in said
    assert "Include the example stacks? [Y/n]:" in said
    assert "Kubernetes version" not in said  # given as a flag
    assert "contexts" not in said  # no examples: nothing to ask
    assert 'name = "acme"' in (dest / "kcl.mod").read_text(encoding="utf-8")
    assert not (dest / "appops").exists()
    # in CI, a terminal or not, it never asks: the defaults
    ci = tmp_path / "in-ci"
    said = _on_a_terminal(["init", str(ci)], "", {**env, "CI": "true"})
    assert "[" not in said.split("created")[0]
    assert 'name = "in-ci"' in (ci / "kcl.mod").read_text(encoding="utf-8")
    assert (ci / "appops").is_dir()


def test_without_examples_sops_yaml_names_the_teams_recipients(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    recipients = []
    for name in ("prod", "other"):
        made = konfig("secrets", "keygen", "-o", str(tmp_path / f"{name}.key"), cwd=tmp_path)
        assert made.code == 0, made.err
        recipients.append(made.out.strip())
    dest = tmp_path / "team"
    args = ["--no-examples", "--age-recipient", recipients[0], "--age-recipient", recipients[1]]
    made = konfig("init", str(dest), *args, "--json")
    assert made.code == 0, made.err
    assert json.loads(made.out)["recipients"] == recipients
    # a production stack's secret is encrypted for the first, any other stack's for
    # the second, and both pass `konfig secrets check`
    for stack, recipient in (("prod", recipients[0]), ("staging", recipients[1])):
        secret = dest / "appops" / "shop" / stack / "secrets.enc.yaml"
        secret.parent.mkdir(parents=True)
        secret.write_text("password: s3cret\n", encoding="utf-8")
        encrypted = konfig("secrets", "encrypt", str(secret), cwd=dest)
        assert encrypted.code == 0, encrypted.err
        sops = yaml.safe_load(secret.read_text(encoding="utf-8"))["sops"]
        assert [a["recipient"] for a in sops["age"]] == [recipient]
    checked = konfig("secrets", "check", cwd=dest)
    assert checked.code == 0, checked.out + checked.err
    assert git(dest, "status", "--porcelain", "--", ".sops.yaml") == ""
    # with the examples (encrypted for the template's recipients), or a bad one: refused
    refused = konfig("init", str(tmp_path / "x"), "--age-recipient", recipients[0])
    assert refused.code == 2
    assert "--age-recipient needs --no-examples" in refused.err
    bad = konfig("init", str(tmp_path / "y"), "--no-examples", "--age-recipient", "age1nope")
    assert bad.code == 2
    assert "not a valid age recipient" in bad.err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
