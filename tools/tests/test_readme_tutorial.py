"""README.md's "Write your first stack", followed literally by a newcomer, works: in a
clone of this repository, and in a repository ``konfig init`` made.

The section's shell blocks and the file it shows are extracted from this checkout's
README.md (:mod:`tutorial`) and run in order, in one shell, in a fresh ``git clone`` of
this checkout, against the session's local cluster (the ``cluster`` fixture): the only
change to the text is ``hack/cluster up``, which prints that cluster's kubeconfig path
(:data:`tutorial.CLUSTER_UP`). The reader has the Quickstart's environment: ``konfig``
(this checkout's, from the running virtualenv) on ``PATH``, ``kubectl`` and ``git`` (with
a name and an e-mail for commits), and answers "y" when konfig asks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tutorial
from fixtures.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = float(os.environ.get("KONFIG_TUTORIAL_TIMEOUT", "900"))
READER_GIT = {
    "GIT_AUTHOR_NAME": "New Reader",
    "GIT_AUTHOR_EMAIL": "reader@example.invalid",
    "GIT_COMMITTER_NAME": "New Reader",
    "GIT_COMMITTER_EMAIL": "reader@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}


def reader_env(home: Path) -> dict[str, str]:
    """A newcomer's shell: the Quickstart's PATH, no cluster or key settings of ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KONFIG_", "KUBE", "SOPS_", "GIT_", "PYTEST", "GITHUB_"))
    }
    env.update(READER_GIT)
    env["HOME"] = str(home)
    env["NO_COLOR"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def fresh_clone(source: Path, dest: Path) -> Path:
    subprocess.run(
        ["git", "clone", "--quiet", str(source), str(dest)],
        check=True,
        capture_output=True,
        env={**os.environ, **READER_GIT},
    )
    return dest


def walk(readme: str, repo: Path, cluster: Cluster, home: Path) -> tutorial.Transcript:
    text = tutorial.script(readme, cluster.kubeconfig)
    done = tutorial.run(text, repo, reader_env(home), TIMEOUT)
    assert done.returncode == 0, (
        f"the tutorial failed (exit {done.returncode}):\n{done.output}\n--- script ---\n{text}"
    )
    return done


def said_as_the_readme_says(output: str) -> None:
    """What the section's comments promise: the preview's 3 creates, apply's health
    wait, status at the commit, nothing left to change, destroy's 3 deletes."""
    for promised in (
        "appops/hello/dev (context admin): 3 to create",
        "Apply complete: 3 created",
        "deployment.apps/hello   1/1",
        "all healthy, no drift",
        "0 to create, 0 to update, 0 to replace, 0 to delete, 3 unchanged (no changes)",
        "Destroy complete: 0 created, 0 updated, 0 replaced, 3 deleted",
    ):
        assert promised in output, f"{promised!r} not in the tutorial's output:\n{output}"


@pytest.mark.cluster
def test_the_tutorial_runs_as_written_in_a_fresh_clone(cluster: Cluster, tmp_path: Path) -> None:
    repo = fresh_clone(ROOT, tmp_path / "konfig")
    branch_before = subprocess.run(
        ["git", "branch", "--show-current"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    home = tmp_path / "home"
    home.mkdir()
    done = walk((ROOT / "README.md").read_text(encoding="utf-8"), repo, cluster, home)
    # konfig asked twice, and the reader said yes: apply's plan and destroy's.
    assert done.questions == ["apply these changes", "destroy these stacks"], done.output
    said_as_the_readme_says(done.output)
    # It ends where it started: the clone's branch, nothing of the tutorial's left in the
    # repository or in the cluster.
    status = subprocess.run(
        ["git", "status", "--porcelain", "--branch"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status.splitlines()[0].startswith(f"## {branch_before.strip()}"), status
    assert not (repo / "appops" / "hello").exists()
    left = cluster.kubectl(
        "get", "namespace", "hello-dev", "--ignore-not-found", "-o", "name"
    ).stdout
    assert left.strip() == "", left


@pytest.mark.cluster
def test_the_tutorial_runs_in_a_repository_konfig_init_made(
    cluster: Cluster, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    made = tmp_path / "acme-config"
    init = subprocess.run(
        ["konfig", "init", str(made), "--name", "acme", "--no-examples"],
        env=reader_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert init.returncode == 0, init.stderr
    # as a team does: push it to its forge (here a bare repository) and clone it
    forge = tmp_path / "acme-config.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(made), str(forge)], check=True)
    repo = fresh_clone(forge, tmp_path / "work")
    done = walk((ROOT / "README.md").read_text(encoding="utf-8"), repo, cluster, home)
    assert done.questions == ["apply these changes", "destroy these stacks"], done.output
    said_as_the_readme_says(done.output)
    assert not (repo / "appops").exists()


# -- the extraction, on a README made for it -----------------------------------------------

SAMPLE = """\
# Tool

## Write your first stack

```sh
git switch -c hello
mkdir -p appops/hello/dev
```

`appops/hello/dev/main.k`:

```python
x = 1
```

```sh
export KUBECONFIG="$(hack/cluster up)"
konfig apply hello/dev
```

## Next
```sh
not part of it
```
"""


def test_the_script_keeps_the_readme_order_writes_files_and_maps_only_cluster_up() -> None:
    text = tutorial.script(SAMPLE, Path("/run/k config"))
    assert text == (
        tutorial.PREAMBLE
        + "# README.md:5\ngit switch -c hello\nmkdir -p appops/hello/dev\n"
        + "# README.md:12: the file appops/hello/dev/main.k\n"
        + "cat > appops/hello/dev/main.k <<'KONFIG_README_FILE_END'\nx = 1\n"
        + "KONFIG_README_FILE_END\n"
        + "# README.md:16\n"
        + "export KUBECONFIG=\"$(printf '%s\\n' '/run/k config')\"\nkonfig apply hello/dev\n"
    )


def test_a_block_the_section_says_nothing_about_is_an_error() -> None:
    readme = SAMPLE.replace("`appops/hello/dev/main.k`:", "The model:")
    with pytest.raises(tutorial.TutorialError, match=r"README.md:12: a ```python block"):
        tutorial.script(readme, Path("/k"))
    outside = SAMPLE.replace("`appops/hello/dev/main.k`:", "`../main.k`:")
    with pytest.raises(tutorial.TutorialError, match="not a path in the repository"):
        tutorial.script(outside, Path("/k"))


def test_the_runner_answers_each_question_and_reports_a_failed_step(tmp_path: Path) -> None:
    asks = (
        tutorial.PREAMBLE
        + "for q in 'apply these changes' 'destroy these stacks'; do\n"
        + "  [ -t 0 ]\n"
        + '  read -r -p "Do you want to $q? [y/N]: " a; [ "$a" = y ]\n'
        + "done\n"
        + "false\n"
        + "echo never\n"
    )
    done = tutorial.run(asks, tmp_path, dict(os.environ), 60)
    assert done.questions == ["apply these changes", "destroy these stacks"]
    assert done.returncode == 1
    assert "+ README: false" in done.output
    assert "never" not in done.output.replace("echo never", "")
