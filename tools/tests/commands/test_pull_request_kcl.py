"""What a pull request's KCL can do during compile, test and check (issue 26, finding 1
and the KCL classes of finding 7): it reads no credential from the environment nor from
any file outside its stack, changes nothing in the work tree, and a plugin import or a
function of ``file`` that writes is refused with the file and line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder
from kubeutil import unique
from pyrage import x25519

# every kind of credential konfig or CI may hold while it compiles a pull request
CANARIES = {
    "SOPS_AGE_KEY": str(x25519.Identity.generate()),
    "KONFIG_TERRAFORM_ENV": '{"PGPASSWORD": "canary-terraform-env"}',
    "KONFIG_PREVIEW_TERRAFORM_ENV": '{"PGPASSWORD": "canary-preview-terraform-env"}',
    "KONFIG_PREVIEW_KUBECONFIG": "canary-preview-kubeconfig-data",
    "GITHUB_TOKEN": "canary-github-token",
    "PGPASSWORD": "canary-pg-password",
    "AWS_SECRET_ACCESS_KEY": "canary-aws-secret",
}

ADMIN = "kubernetes:\n  context: admin\n"

# the issue's reproduction, word for word
ISSUE_MAIN = """\
import file
import base.pkg.models.frontend

leak = frontend.Manifests {manifests = [{apiVersion = "v1", kind = "ConfigMap", metadata = {name = "x", namespace = "n"}, data = {k = file.read_env("SOPS_AGE_KEY") or ""}}]}
"""  # noqa: E501

EVERY_VARIABLE = (
    "import file\nimport base.pkg.models.frontend\n\n"
    'leak = frontend.Manifests {manifests = [{apiVersion = "v1", kind = "ConfigMap", '
    'metadata = {name = "y", namespace = "n"}, data = {'
    + ", ".join(f'k{i} = file.read_env("{name}") or ""' for i, name in enumerate(CANARIES))
    + "}}]}\n"
)


def _canaries_in(text: str) -> list[str]:
    return [name for name, value in CANARIES.items() if value in text or "CANARY" in text]


def _tree_text(root: Path) -> str:
    return "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    )


@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)


def test_read_env_gets_no_credential_in_compile_out_cache_or_golden(
    repo_builder: RepoBuilder, konfig: KonfigRunner, canaries: None, tmp_path: Path
) -> None:
    repo_builder.stack("leak", "dev", main=ISSUE_MAIN)
    repo_builder.stack("every", "dev", main=EVERY_VARIABLE)
    root = repo_builder.root
    single = konfig("compile", "leak/dev", cwd=root)
    assert single.code == 0, single.err
    assert "k: ''" in single.out  # read_env found nothing: the `or ""` branch
    out = tmp_path / "out"
    both = konfig("compile", "--all", "-j", "2", "--out", str(out), cwd=root)
    assert both.code == 0, both.err
    update = konfig("test", "--update", "--no-unit", cwd=root)
    assert update.code == 0, update.err
    goldens = list(root.glob("appops/*/dev/ci-test/stdout.golden.yaml"))
    assert len(goldens) == 2
    cache = root / ".cache" / "konfig" / "compile"
    assert cache.is_dir() and any(cache.rglob("*"))
    for where in (single.out + single.err + both.out + both.err + update.out + update.err,):
        assert _canaries_in(where) == []
    for folder in (out, cache, root / "appops"):
        assert _canaries_in(_tree_text(folder)) == [], folder


def test_kcl_unit_tests_see_an_empty_environment(
    repo_builder: RepoBuilder, konfig: KonfigRunner, canaries: None
) -> None:
    names = ", ".join(f'"{n}"' for n in CANARIES)
    repo_builder.write("base/pkg/envprobe/probe.k", "import file\n\nnames = [" + names + "]\n")
    repo_builder.write(
        "base/pkg/envprobe/probe_test.k",
        "import file\n\ntest_no_variable = lambda {\n"
        "    seen = [n for n in names if file.read_env(n)]\n"
        '    assert not seen, "the tests see ${seen}"\n'
        "}\n",
    )
    result = konfig("test", "--all", "--json", cwd=repo_builder.root)
    units = {(u["package"], u["name"]): u for u in json.loads(result.out)["unitTests"]}
    probe = units[("base/pkg/envprobe", "test_no_variable")]
    assert probe["passed"], probe["message"]
    assert result.code == 0
    assert _canaries_in(result.out + result.err) == []


def _reads(path_expr: str) -> str:
    return (
        "import file\nimport base.pkg.models.frontend\n\n"
        f"data = file.read({path_expr})\n"
        'leak = frontend.Manifests {manifests = [{apiVersion = "v1", kind = "ConfigMap", '
        'metadata = {name = "z", namespace = "n"}, data = {k = data}}]}\n'
    )


def test_reads_outside_the_stack_hand_kcl_no_secret(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    canaries: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("token: CANARY-kubeconfig\n")
    monkeypatch.setenv("HOME", str(home))
    outside = tmp_path / "outside.txt"
    outside.write_text("CANARY-outside\n")
    root = repo_builder.root
    (root / "repo-secret.txt").write_text("CANARY-in-the-repository-root\n")
    routes = {
        "selfenv": '"/proc/self/environ"',
        "konfigenv": f'"/proc/{os.getpid()}/environ"',
        "kube": f'"{home}/.kube/config"',
        "tilde": '"~/.kube/config"',
        "absolute": f'"{outside}"',
        "dotdot": '"../../../../outside.txt"',
        "root": '"../../../repo-secret.txt"',
        "gitconfig": '"../../../.git/config"',
        "link": '"link.txt"',
    }
    # kcl-lib lets a file read its own directory and below: from the root, .git too
    repo_builder.write("rootreader.k", 'import file\n\ndata = file.read(".git/config")\n')
    repo_builder.stack(
        "fromroot",
        "dev",
        main=_reads('"main.k"')
        .replace("import file\n", "import rootreader\nimport file\n")
        .replace('data = file.read("main.k")', "data = rootreader.data"),
    )
    for name, expr in routes.items():
        stack = repo_builder.stack(name, "dev", main=_reads(expr))
        if name == "link":
            (stack / "link.txt").symlink_to(outside)
    git_init(root)
    with (root / ".git" / "config").open("a") as config:
        config.write('[http]\n\textraheader = "AUTHORIZATION: basic CANARY-token"\n')
    git_commit(root, "stacks that read outside themselves")
    assert "CANARY-token" in (root / ".git" / "config").read_text()
    result = konfig("compile", "--all", "-j", "2", cwd=root)
    assert result.code == 1
    assert _canaries_in(result.out + result.err) == []
    for name in routes:
        assert f"appops/{name}/dev/main.k:4:" in result.err, name
    assert "rootreader.k:3:8: `file.read` in a file at the repository root" in result.err
    assert "[kcl/root-read]" in result.err


def _policy_reports(root: Path, message: str, imports: str = "") -> None:
    entry = root / "base/pkg/policies/evaluate/main.k"
    text = entry.read_text(encoding="utf-8")
    text = text.replace(
        "import base.pkg.policies\n", "import base.pkg.policies\nimport file\n" + imports
    )
    text = text.replace(
        "violations = policies.evaluate(policies.Input {**i})",
        f'violations = [{{rule = "image-tag", id = "", message = {message}}}]',
    )
    entry.write_text(text, encoding="utf-8")


def test_a_policy_gets_no_variable(
    repo_builder: RepoBuilder, konfig: KonfigRunner, canaries: None
) -> None:
    root = repo_builder.root
    _policy_reports(root, '"seen: " + (file.read_env("PGPASSWORD") or "nothing")')
    repo_builder.stack("pol", "dev")
    result = konfig("check", "pol/dev", cwd=root)
    assert result.code == 1
    assert "seen: nothing [policy/image-tag]" in result.out
    assert _canaries_in(result.out + result.err) == []


def test_a_policy_reads_nothing_of_git(
    repo_builder: RepoBuilder, konfig: KonfigRunner, canaries: None
) -> None:
    root = repo_builder.root
    repo_builder.write("polroot.k", 'import file\n\ndata = file.read(".git/config")\n')
    _policy_reports(root, "polroot.data", imports="import polroot\n")
    repo_builder.stack("pol", "dev")
    git_init(root)
    with (root / ".git" / "config").open("a") as config:
        config.write('[http]\n\textraheader = "AUTHORIZATION: basic CANARY-token"\n')
    git_commit(root, "a policy that reads the checkout's token")
    result = konfig("check", "pol/dev", cwd=root)
    assert result.code == 1
    assert _canaries_in(result.out + result.err) == []
    assert "polroot.k:3: error: the policies cannot run: `file.read`" in result.out
    assert "[kcl/root-read]" in result.out


SIDE_EFFECTS = {
    "write": 'import file\n\n_x = file.write("written.txt", "x")\n',
    "alias": 'import file as f\n\n_x = [f.mkdir][0]("made")\n',
    "delete": 'import file\n\n_x = file.delete("stack.yaml")\n',
    "copy": 'import file\n\n_x = file.cp("stack.yaml", "copy.yaml")\n',
    "move": 'import file as fs\n\n_x = fs.mv("stack.yaml", "moved.yaml")\n',
    # json/yaml write wherever they are told, relative to the process's directory
    "json": 'import json\n\n_x = json.dump_to_file({"a": 1}, "dumped.json")\n',
    "yaml": 'import yaml as y\n\n_x = y.dump_all_to_file([{"a": 1}], "../dumped.yaml")\n',
    "hash": 'import crypto\n\n_x = crypto.filesha256("/etc/hostname")\n',
}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not {".git", ".cache"} & set(p.relative_to(root).parts)
    } | {
        p.relative_to(root).as_posix() + "/": b""
        for p in root.rglob("*")
        if p.is_dir() and not {".git", ".cache"} & set(p.relative_to(root).parts)
    }


def test_compile_check_and_test_change_nothing_in_the_work_tree(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    for name, effect in SIDE_EFFECTS.items():
        main = effect + "\n" + SIMPLE_MAIN.format(name=name, namespace=f"{name}-dev")
        main = "import base.pkg.models.frontend\n" + main.replace(
            "import base.pkg.models.frontend\n", ""
        )
        repo_builder.stack(name, "dev", main=main)
    repo_builder.write("base/pkg/writer/w.k", "import file\n\nx = 1\n")
    repo_builder.write(
        "base/pkg/writer/w_test.k",
        'import file\n\ntest_writes = lambda {\n    file.write("from-test.txt", "x")\n}\n',
    )
    root = repo_builder.root
    git_init(root)
    git_commit(root, "stacks with side effects")
    before = _snapshot(root)
    outside = set(root.parent.iterdir())
    compiled = konfig("compile", "--all", "--json", cwd=root)
    checked = konfig("check", "--all", cwd=root)
    tested = konfig("test", "--all", cwd=root)
    assert _snapshot(root) == before
    assert set(root.parent.iterdir()) == outside
    assert compiled.code == 1 and checked.code == 1 and tested.code == 1
    for name in SIDE_EFFECTS:
        where = f"appops/{name}/dev/main.k:4"
        assert where in checked.out, (name, checked.out)
        assert f"{where}: error: appops/{name}/dev does not compile: `" in checked.out
    assert checked.out.count("[kcl/side-effect]") >= len(SIDE_EFFECTS) - 1
    assert "appops/hash/dev/main.k:4: error:" in checked.out
    assert "[kcl/file-hash]" in checked.out
    assert "base/pkg/writer/w_test.k:4" in tested.out + tested.err
    assert "[kcl/side-effect]" in tested.out + tested.err


def test_plugin_import_is_refused_with_file_and_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    main = SIMPLE_MAIN.format(name="plug", namespace="plug-dev").replace(
        "import base.pkg.models.frontend\n",
        'import base.pkg.models.frontend\nimport kcl_plugin.hello\n\n_v = hello.say("x")\n',
    )
    repo_builder.stack("plug", "dev", main=main)
    repo_builder.write("base/pkg/plugged/p.k", "import kcl_plugin.secrets as s\n\nv = s.get()\n")
    repo_builder.stack(
        "deep",
        "dev",
        main="import base.pkg.plugged\n\n" + SIMPLE_MAIN.format(name="d", namespace="d"),
    )
    root = repo_builder.root
    compiled = konfig("compile", "plug/dev", cwd=root)
    assert compiled.code == 1
    assert "appops/plug/dev/main.k:2: `import kcl_plugin.hello`" in compiled.err
    assert "[kcl/plugin]" in compiled.err
    checked = konfig("check", "--all", cwd=root)
    assert checked.code == 1
    assert "appops/plug/dev/main.k:2: error:" in checked.out
    assert "base/pkg/plugged/p.k:1: error:" in checked.out
    assert "[kcl/plugin]" in checked.out


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('[package\nname = "konfig"\n', 1, "kcl.mod is not valid TOML"),
        ('[package]\nname = "konfig"\n\n[dependencie]\nk8s = "1.31"\n', 4, "unknown table"),
    ],
)
def test_a_malformed_kcl_mod_is_refused_by_every_command(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    tmp_path: Path,
    text: str,
    line: int,
    words: str,
) -> None:
    repo_builder.stack("alpha", "dev")
    root = repo_builder.root
    (root / "kcl.mod").write_text(text, encoding="utf-8")
    kubeconfig = tmp_path / "nowhere.yaml"
    for args in (
        ("compile", "alpha/dev"),
        ("test", "alpha/dev"),
        ("check", "alpha/dev"),
        ("preview", "alpha/dev", "--kubeconfig", str(kubeconfig)),
        ("apply", "alpha/dev", "--kubeconfig", str(kubeconfig), "--yes"),
    ):
        result = konfig(*args, cwd=root)
        assert result.code == 1, (args, result.err)
        if args[0] == "check":  # the finding, and no stack compiled with that kcl.mod
            assert f"kcl.mod:{line}: error: {words}" in result.out, result.out
            assert "[structure/kcl-mod]" in result.out
            assert "checked 0 stack(s)" in result.err
            continue
        assert f"kcl.mod:{line}: {words}" in result.err, (args, result.err)
        assert "[structure/kcl-mod]" in result.err, args


@pytest.mark.cluster
def test_read_env_gets_no_credential_into_a_preview(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    canaries: None,
    cluster: Cluster,
    tmp_path: Path,
) -> None:
    """preview takes the age key out of its environment, but every other credential CI
    gives it (provider credentials, tokens) was KCL's to read."""
    namespace = unique("leak")
    cluster.kubectl("create", "namespace", namespace)
    main = EVERY_VARIABLE.replace('namespace = "n"', f'namespace = "{namespace}"')
    repo_builder.stack("leak", "dev", main=main, stack_yaml=f"name: dev\n{ADMIN}")
    root = repo_builder.root
    seen = ""
    for fmt in ("text", "markdown", "json"):
        out = tmp_path / f"preview.{fmt}"
        args = ["preview", "leak/dev", "--format", fmt, "--out", str(out)]
        args += ["--kubeconfig", str(cluster.kubeconfig), *(["--diff"] if fmt == "text" else [])]
        result = konfig(*args, cwd=root)
        assert result.code == 0, result.err
        seen += result.out + result.err + out.read_text(encoding="utf-8")
    assert "ConfigMap" in seen and namespace in seen
    assert _canaries_in(seen) == []
