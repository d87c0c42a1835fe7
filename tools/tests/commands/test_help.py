"""Every command's help, including commands added later: a whole one-line summary in
its group's command list, help text on every option, and an example of its use."""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import click
import git
import pytest
from fixtures.cluster import Cluster, kubeconfigs
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import TEMPLATE_ROOT, KonfigRunner

from konfig import cli
from konfig.commands._help import Group, summary


def _walk(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{' '.join(path)} lists {name} but cannot load it"
            yield from _walk(sub, (*path, name))


COMMANDS = list(_walk(cli.cli, ()))


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli.cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None
        command = found
    return command


def _name(path: tuple[str, ...]) -> str:
    return " ".join(("konfig", *path))


def test_every_command_is_walked() -> None:
    assert {p[0] for p in COMMANDS if p} >= set(cli.COMMANDS)
    assert ("gen", "contracts") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=_name)
def test_every_option_has_help(path: tuple[str, ...]) -> None:
    command = _command(path)
    bare = [
        "/".join(p.opts)
        for p in command.params
        if isinstance(p, click.Option) and not (p.help or "").strip()
    ]
    assert not bare, f"{_name(path)}: options without help: {', '.join(bare)}"


def examples(path: tuple[str, ...]) -> list[str]:
    """The command lines under ``Example:``/``Examples:`` in ``konfig <path> --help``
    (as printed: what a reader copies), comments after ``#`` dropped, a line ending in
    ``\\`` joined with the next as the shell would."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.run([*path, "--help"]) == 0
    lines = out.getvalue().splitlines()
    heading = [i for i, line in enumerate(lines) if line.strip() in ("Example:", "Examples:")]
    found: list[str] = []
    for line in lines[heading[0] + 1 :] if heading else []:
        if not line.startswith("    "):
            break
        text = line.split("  #")[0].strip()
        if found and found[-1].endswith("\\"):  # a shell continuation: one command
            found[-1] = found[-1][:-1] + text
        else:
            found.append(text)
    return found


EXAMPLES = [(path, line) for path in COMMANDS for line in examples(path)]


@pytest.mark.parametrize("path", COMMANDS, ids=_name)
def test_help_shows_an_example(path: tuple[str, ...]) -> None:
    found = examples(path)
    assert found, f"`{_name(path)} --help` has no Example: section"
    assert all(e.startswith("konfig ") for e in found), found
    if path:  # a command's examples run that command
        assert any(e.startswith(_name(path) + " ") or e == _name(path) for e in found), found


def _argv(line: str) -> list[str]:
    """The arguments of a ``konfig ...`` example as a shell passes them (``~``, ``$VAR``)."""
    # words, not paths: Path() would rewrite a JSON argument's "//"
    words = [os.path.expanduser(os.path.expandvars(w)) for w in shlex.split(line)]  # noqa: PTH111
    assert words[0] == "konfig"
    return words[1:]


def _parse(argv: list[str]) -> click.Command:
    """Parse ``argv`` as konfig would, down to the command it names, without running it:
    a misspelt option, a wrong type or a missing argument raises click's error."""
    command: click.Command = cli.cli
    ctx = command.make_context("konfig", list(argv))
    while isinstance(command, click.Group):
        rest = [*ctx._protected_args, *ctx.args]
        name, sub, args = command.resolve_command(ctx, rest)
        assert name is not None and sub is not None
        ctx = sub.make_context(name, args, parent=ctx)
        command = sub
    return command


# What running an example needs beyond a clone of the example repository. Examples of
# the other commands run in test_examples_run; these run against the test cluster
# (read-only commands) or are parsed only, each for the reason given.
NEEDS_CLUSTER = {"preview", "pending", "status", "drift"}
NOT_RUN = {
    "apply": "writes to the cluster (asks first); tests/commands/test_apply.py applies",
    "destroy": "deletes from the cluster; tests/commands/test_destroy.py destroys",
    "comment": "posts to a GitHub pull request; tests/commands/test_comment.py posts",
    "issue": "opens or closes a GitHub issue; tests/forge/test_issues.py does",
    "pr": "asks a forge's API; tests/forge/test_gitea.py asks Gitea",
    "reviewed": "asks a forge's API; tests/forge/test_gitea.py asks Gitea",
    "approved": "reads reviews, sets a status; tests/forge/test_reviewed_gitea.py does",
    "stale": "reads pull requests, posts; tests/forge/test_reviewed_gitea.py does",
    "dangers": "asks a forge's API; tests/forge/test_dangers_gitea.py asks Gitea",
    "owners --pr": "reads reviews, posts a status; tests/forge/test_owners_gitea.py asks Gitea",
    "owners --merged": "asks the forge for a merged pull request; test_owners_gitea.py asks Gitea",
    "preview --specs": "reads a CI run's compiled Specs and its previous preview; "
    "tests/commands/test_preview_reuse.py previews them",
    "report": "reads the results of a CI run; tests/commands/test_report.py has them",
    "release": "hands objects over to a pull controller; tests/engine/test_handoff.py does",
    "secrets edit": "opens $EDITOR",
    "secrets encrypt": "replaces the plaintext file it is given",
    "secrets rotate": "needs the decryption key of the example repository",
    "upgrade": "needs a repository konfig init made; tests/commands/test_upgrade.py upgrades",
}


def _needs(argv: list[str]) -> str:
    name = " ".join(argv[:2]) if argv[0] in ("secrets", "gen") else argv[0]
    if argv[0] == "owners" and "--pr" in argv:
        name = "owners --pr"
    if argv[0] == "owners" and "--merged" in argv:
        name = "owners --merged"
    if argv[0] == "preview" and "--specs" in argv:
        name = "preview --specs"
    if name in NOT_RUN or argv[0] in NOT_RUN:
        return "nothing"
    return "cluster" if argv[0] in NEEDS_CLUSTER else "clone"


# Files an example reads that an earlier step of the workflow writes (CI: preview,
# report, apply): present (empty) when the examples are parsed.
INPUTS = {
    "preview.json": "konfig preview --format json --out preview.json",
    "comment.md": "konfig report --out comment.md",
    "results": "the compile/test/check/preview outputs of CI's jobs",
    "apply.json": "konfig apply --json > apply.json",
    "reviewed.json": "konfig reviewed --out reviewed.json",
}


@pytest.mark.parametrize(("path", "line"), EXAMPLES, ids=[line for _, line in EXAMPLES])
def test_examples_parse(
    path: tuple[str, ...], line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in INPUTS:
        (tmp_path / name).mkdir() if "." not in name else (tmp_path / name).touch()
    monkeypatch.chdir(tmp_path)
    _parse(_argv(line))


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A clone of the example repository as a newcomer has one: ``origin/main`` is the
    upstream, the work tree has no changes. Module-wide: the examples share its cache."""
    base = tmp_path_factory.mktemp("examples")
    upstream = base / "upstream"
    upstream.mkdir()
    for name in ("kcl.mod", "konfig.yaml", ".sops.yaml"):
        shutil.copy2(TEMPLATE_ROOT / name, upstream / name)
    for name in ("base", "appops", "docs", ".vscode"):
        shutil.copytree(TEMPLATE_ROOT / name, upstream / name)
    for name in (".github/CODEOWNERS", ".gitea/CODEOWNERS"):  # konfig check reads them
        (upstream / name).parent.mkdir(exist_ok=True)
        shutil.copy2(TEMPLATE_ROOT / name, upstream / name)
    (upstream / ".gitignore").write_text(".cache/\n")
    git_init(upstream)
    git_commit(upstream, "the example repository")
    work = base / "work"
    git.Repo.clone_from(upstream, work)
    before = Path.cwd()
    yield work
    os.chdir(before)


def _run(line: str, clone: Path, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    home = clone.parent / "home"
    monkeypatch.setenv("HOME", str(home))
    # a newcomer's git knows who they are (konfig init commits)
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "New Reader")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "reader@example.invalid")
    monkeypatch.setenv("GITHUB_OUTPUT", str(clone.parent / "github-output"))
    monkeypatch.setenv("SHA", "0" * 40)
    monkeypatch.setenv("STACKS", '["appops/guestbook/dev", "appops/guestbook/prod"]')
    argv = _argv(line)
    result = konfig(*argv, cwd=clone)
    allowed = {0, 2} if "--detailed-exitcode" in argv else {0}
    assert result.code in allowed, f"{line}: exit {result.code}\n{result.err}"


LINES = list(dict.fromkeys(line for _, line in EXAMPLES))  # a group repeats its commands'
RUN_IN_CLONE = [line for line in LINES if _needs(_argv(line)) == "clone"]
RUN_ON_CLUSTER = [line for line in LINES if _needs(_argv(line)) == "cluster"]


@pytest.mark.parametrize("line", RUN_IN_CLONE)
def test_examples_run(
    line: str, clone: Path, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(line, clone, konfig, monkeypatch)


@pytest.fixture(scope="module")
def monitoring_crds(cluster: Cluster, edge_cluster: Cluster) -> None:
    """The Prometheus Operator's CRDs on both clusters, as a cluster running the operator
    has them: http-echo/prod declares a ServiceMonitor and a PrometheusRule (without this
    the examples passed only when an earlier test of the session had installed them)."""
    vendor = Path(__file__).resolve().parents[3] / "base/pkg/k8s/crd/monitoring_coreos_com/vendor"
    crds = sorted(vendor.glob("*.yaml"))
    assert crds
    for c in (cluster, edge_cluster):
        for crd in crds:
            c.kubectl("apply", "--server-side", "-f", str(crd))
        c.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")


@pytest.mark.cluster
@pytest.mark.parametrize("line", RUN_ON_CLUSTER)
def test_cluster_examples_run(
    line: str,
    clone: Path,
    cluster: Cluster,
    edge_cluster: Cluster,
    konfig: KonfigRunner,
    monkeypatch: pytest.MonkeyPatch,
    monitoring_crds: None,
) -> None:
    # The example repository's stacks use two clusters (contexts admin and edge).
    monkeypatch.setenv("KUBECONFIG", kubeconfigs(cluster, edge_cluster))
    _run(line, clone, konfig, monkeypatch)


def test_every_example_is_run_or_says_why_not() -> None:
    commands = {" ".join(_argv(line)[:2]) for line in LINES}
    for name in NOT_RUN:
        assert any(c.startswith(name.split(" --")[0]) for c in commands), f"{name}: no example"
    assert RUN_IN_CLONE and RUN_ON_CLUSTER


@pytest.mark.parametrize(
    "path", [p for p in COMMANDS if isinstance(_command(p), click.Group)], ids=_name
)
def test_command_lists_show_whole_summaries(path: tuple[str, ...], konfig: KonfigRunner) -> None:
    group = _command(path)
    assert isinstance(group, Group), f"{_name(path)}: use konfig.commands._help.Group"
    result = konfig(*path, "--help")
    lines = result.out.splitlines()
    start = lines.index("Commands:") + 1
    listed: dict[str, str] = {}
    name = ""
    for line in lines[start:]:
        if not line.strip():
            break
        head, _, text = line.strip().partition("  ")
        if line.startswith("  ") and not line.startswith("   "):
            name = head
            listed[name] = text.strip()
        else:
            listed[name] += " " + line.strip()
    ctx = click.Context(group)
    for sub_name in group.list_commands(ctx):
        sub = group.get_command(ctx, sub_name)
        assert sub is not None
        whole = summary(sub)
        assert listed[sub_name] == whole, f"{sub_name}: {listed[sub_name]!r} is cut off"
        assert whole.endswith(".") and not whole.endswith("..."), (
            f"{_name((*path, sub_name))}: the first sentence of its help should end with '.'"
        )
        assert len(whole) <= 100, f"{_name((*path, sub_name))}: a shorter first sentence"
