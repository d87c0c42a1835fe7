"""Commands load only what they need: the heavy libraries (the Kubernetes client, GitPython,
networkx, jinja2, kubernetes-validate, rich, kcl-lib) stay out of the commands that do
not use them. Measured by the modules a real ``konfig`` process has loaded at exit;
the CPU seconds this saves are measured by ``hack/bench_startup.py``, not here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import TEMPLATE_ROOT, RepoBuilder
from kubeutil import unique

from konfig import __version__

HEAVY = ("kubernetes", "git", "networkx", "jinja2", "kubernetes_validate", "rich", "kcl_lib")

# runs the konfig CLI, then prints the top-level modules it loaded (as JSON, on stderr)
RUNNER = """\
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["konfig", *sys.argv[1:]]
from konfig.__main__ import main
main()
"""


def loaded(args: list[str], cwd: Path) -> tuple[int, set[str], str]:
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, *args], cwd=cwd, capture_output=True, text=True
    )
    modules = set(json.loads(proc.stderr.strip().splitlines()[-1]))
    return proc.returncode, modules | {m.split(".")[0] for m in modules}, proc.stdout


def test_version_is_answered_before_the_cli_loads() -> None:
    code, modules, out = loaded(["--version"], TEMPLATE_ROOT)
    assert code == 0
    assert "click" not in modules and "yaml" not in modules
    clicks = subprocess.run(
        [sys.executable, "-c", "from konfig import cli; cli.run(['--version'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out == clicks.stdout == f"konfig, version {__version__}\n"


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["list"], set()),
        (["compile", "--help"], set()),
        (["changed", "--help"], {"git"}),
        # the kubernetes client only for a kubeconfig konfig does not read itself;
        # the apply order with graphlib, not networkx
        (["preview", "--help"], set()),
    ],
)
def test_commands_leave_out_what_they_do_not_use(args: list[str], allowed: set[str]) -> None:
    code, modules, _ = loaded(args, TEMPLATE_ROOT)
    assert code == 0
    assert modules & set(HEAVY) <= allowed


def test_list_loads_no_logging_and_no_package_resources() -> None:
    """`konfig list` (goal: start-up close to Python's and click's own) sets up no
    logging and reads the contracts' schemas from the package directory. (The first run
    in a fresh clone validates konfig.yaml and remembers it: the second is measured.)"""
    loaded(["list"], TEMPLATE_ROOT)
    code, modules, out = loaded(["list"], TEMPLATE_ROOT)
    assert code == 0 and "appops/guestbook/dev" in out
    assert not modules & {"logging", "importlib.resources", "tempfile", "jsonschema", "urllib3"}


def test_compile_from_the_cache_loads_no_compiler(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("shop", "dev")
    code, modules, _ = loaded(["compile", "--all"], repo_builder.root)  # fills the cache
    assert code == 0 and "kcl_lib" not in modules  # workers load it, konfig does not
    code, modules, out = loaded(["compile", "--all"], repo_builder.root)
    assert code == 0 and "Deployment" in out
    assert not modules & {"kcl_lib", "networkx", "rich", "kubernetes", "jinja2"}
    # nor the worker pool, nor importlib.metadata (kcl-lib's version comes from its
    # dist-info directory's name)
    assert not modules & {"konfig.build.workers", "konfig.build.batch", "importlib.metadata"}


def test_changed_validates_an_unchanged_konfig_yaml_once(repo_builder: RepoBuilder) -> None:
    """konfig.yaml found valid is remembered in the cache: a later ``konfig changed``
    (a new push) neither validates it again nor imports jsonschema; an edited
    konfig.yaml is validated again."""
    root = repo_builder.root
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack("shop", "dev")
    git_init(root)
    git_commit(root, "base")
    repo_builder.write("appops/shop/dev/main.k", "import base.pkg.models.frontend\n")
    git_commit(root, "first push")
    args = ["changed", "--base", "HEAD~1", "--json"]
    code, modules, _ = loaded(args, root)
    assert code == 0 and "jsonschema" in modules  # the first run validates
    repo_builder.write("appops/shop/dev/main.k", "import base.pkg.models.frontend\n\n")
    git_commit(root, "second push")
    code, modules, out = loaded(args, root)
    assert code == 0 and "appops/shop/dev" in out
    assert "jsonschema" not in modules
    konfig_yaml = root / "konfig.yaml"
    konfig_yaml.write_text(konfig_yaml.read_text() + "\n# edited\n")
    git_commit(root, "konfig.yaml edited")
    code, modules, _ = loaded(args, root)
    assert code == 0 and "jsonschema" in modules


# What a preview and an apply of a stack without secret references and without
# Terraform resources do not load: urllib3 (konfig's own requests use http.client; it
# comes only with a proxy or the kubernetes client), the SOPS file module and
# cryptography, age (no key given), the OpenTofu runtime, the compiler's worker pool
# (every Spec from the cache), and the import graph (the tree is clean: konfig's cache
# ignores itself in git, whatever the repository's .gitignore says).
NOT_ON_THE_PLAIN_PATH = {
    "urllib3",
    "cryptography",
    "pyrage",
    "konfig.secrets.sopsfile",
    "konfig.tofu.runner",
    "konfig.tofu.plan_apply",
    "konfig.build.workers",
    "konfig.detect.changeset",
    *HEAVY,
}


@pytest.mark.cluster
def test_preview_and_apply_of_a_plain_stack_load_only_what_it_needs(
    repo_builder: RepoBuilder, cluster: Cluster
) -> None:
    root = repo_builder.root
    project = unique("lean")
    repo_builder.stack(project, "dev")  # a Server: no secrets, no database
    git_init(root)  # no .gitignore
    git_commit(root, "a stack")
    kc = ["--kubeconfig", str(cluster.kubeconfig)]
    code, _, _ = loaded(["compile", f"{project}/dev"], root)  # fills the compile cache
    assert code == 0

    code, modules, out = loaded(["preview", f"{project}/dev", "--format", "json", *kc], root)
    assert code == 0 and '"create": ' in out, out
    assert "konfig.engine.kube" in modules  # it did talk to the cluster
    assert not modules & NOT_ON_THE_PLAIN_PATH, sorted(modules & NOT_ON_THE_PLAIN_PATH)

    # apply (not on a terminal: no live region, so no rich) imports the OpenTofu runtime
    # (its credential checks, plans and applies) only for stacks with Terraform resources
    code, modules, out = loaded(["apply", f"{project}/dev", "--yes", "--no-wait", *kc], root)
    assert code == 0, out
    assert "konfig.engine.applier" in modules  # it did apply
    unwanted = NOT_ON_THE_PLAIN_PATH | {"konfig.tofu.hybrid", "konfig.tofu.preflight"}
    assert not modules & unwanted, sorted(modules & unwanted)
    code, _, out = loaded(["destroy", f"{project}/dev", "--yes", *kc], root)
    assert code == 0, out
