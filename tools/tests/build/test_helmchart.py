"""konfig package --helm: the chart of every example stack (golden files), and the real
helm (built from its Go module: hack/helm) renders it back to the stack's objects and
lints it clean.

Rewrite the goldens after an intended change with ``KONFIG_UPDATE_GOLDEN=1`` and review
the diff (tools/tests/build/golden/charts/).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from fixtures.helm import Helm
from fixtures.repos import TEMPLATE_ROOT, KonfigRunner, RepoBuilder

from konfig.build.helmchart import chart, chart_name, escape
from konfig.build.rendered import dump
from konfig.spec import spec_from_items

GOLDEN = Path(__file__).parent / "golden" / "charts"
STACKS = sorted(
    p.parent.relative_to(TEMPLATE_ROOT / "appops").as_posix()
    for p in (TEMPLATE_ROOT / "appops").glob("*/*/stack.yaml")
)
REFUSED = {"reports/dev", "webshop/dev", "webshop/prod"}  # Secrets with values, Terraform


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("examples")
    for name in ("kcl.mod", "konfig.yaml", ".sops.yaml"):
        shutil.copy2(TEMPLATE_ROOT / name, root / name)
    shutil.copytree(TEMPLATE_ROOT / "base", root / "base")
    shutil.copytree(TEMPLATE_ROOT / "appops", root / "appops")
    return root


def _package(konfig: KonfigRunner, root: Path, stack: str, out: Path) -> Path:
    result = konfig("package", "--helm", stack, "--out", str(out), cwd=root)
    assert result.code == 0, result.err
    return out / chart_name(stack)


def _files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _objects(konfig: KonfigRunner, root: Path, stack: str) -> list[str]:
    """The stack's Kubernetes objects, each as canonical YAML, sorted."""
    result = konfig("compile", stack, cwd=root)
    assert result.code == 0, result.err
    resources = yaml.safe_load(result.out)["resources"]
    return sorted(dump(r["attributes"]).decode() for r in resources if r["type"] == "Kubernetes")


@pytest.mark.parametrize("stack", sorted(set(STACKS) - REFUSED))
def test_every_example_stack_packages_to_its_golden_chart(
    stack: str, examples: Path, konfig: KonfigRunner, tmp_path: Path
) -> None:
    folder = _package(konfig, examples, stack, tmp_path / "charts")
    files = _files(folder)
    golden = GOLDEN / chart_name(stack)
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        shutil.rmtree(golden, ignore_errors=True)
        for name, text in files.items():
            (golden / name).parent.mkdir(parents=True, exist_ok=True)
            (golden / name).write_text(text, encoding="utf-8")
    assert golden.is_dir(), f"{golden} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert files == _files(golden), f"{golden} differs (KONFIG_UPDATE_GOLDEN=1)"
    assert yaml.safe_load(files["values.yaml"]) == {}
    templates = sorted(t for n, t in files.items() if n.startswith("templates/"))
    assert templates == _objects(konfig, examples, stack)  # no {{ in the examples


@pytest.mark.parametrize("stack", sorted(REFUSED))
def test_stacks_with_secret_values_or_terraform_are_refused(
    stack: str, examples: Path, konfig: KonfigRunner, tmp_path: Path
) -> None:
    result = konfig("package", "--helm", stack, "--out", str(tmp_path / "charts"), cwd=examples)
    assert result.code == 1
    assert "not packaged" in result.err and ("publish/secret" in result.err)
    assert not (tmp_path / "charts").exists()


def test_a_go_template_in_an_object_is_escaped() -> None:
    text = 'a: "{{ .Values.x }} and {{- y }}"\n'
    assert escape(text) == 'a: "{{ "{{" }} .Values.x }} and {{ "{{" }}- y }}"\n'
    spec = spec_from_items(
        [
            {
                "id": "v1:ConfigMap:n:c",
                "attributes": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "c", "namespace": "n"},
                    "data": {"t": "{{ x }}"},
                },
            }
        ]
    )
    files = chart(spec, name="c", version="1.0.0", description="")
    assert sorted(files) == ["Chart.yaml", "templates/configmap_n_c.yaml", "values.yaml"]
    assert b'{{ "{{" }} x }}' in files["templates/configmap_n_c.yaml"]


def test_bad_usage_exits_2(repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path) -> None:
    repo_builder.stack("alpha", "dev")
    out = str(tmp_path / "o")
    assert konfig("package", "alpha/dev", "--out", out, cwd=repo_builder.root).code == 2
    bad = konfig(
        "package", "--helm", "alpha/dev", "--out", out, "--version", "v1", cwd=repo_builder.root
    )
    assert bad.code == 2 and "SemVer" in bad.err


TEMPLATED = """\
import base.pkg.models.frontend

app: frontend.Server {
    name = "alpha"
    namespace = "alpha-dev"
    image = "nginx:1.27.3"
    ports = [{port = 80}]
    annotations = {"example.com/template" = "{{ .Values.evil }} {{- include \\"x\\" . }}"}
}
"""


@pytest.mark.helm
@pytest.mark.parametrize("stack", sorted(set(STACKS) - REFUSED))
def test_helm_template_equals_the_stacks_objects_and_lint_is_clean(
    stack: str, examples: Path, konfig: KonfigRunner, tmp_path: Path, helm_bin: Helm
) -> None:
    folder = _package(konfig, examples, stack, tmp_path / "charts")
    lint = helm_bin.run("lint", "--strict", str(folder), cwd=tmp_path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in lint.stdout
    rendered = helm_bin.run("template", "release", str(folder), cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d is not None]
    assert sorted(dump(d).decode() for d in docs) == _objects(konfig, examples, stack)


@pytest.mark.helm
def test_helm_prints_a_go_template_of_an_object_unchanged(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path, helm_bin: Helm
) -> None:
    repo_builder.stack("alpha", "dev", main=TEMPLATED)
    folder = _package(konfig, repo_builder.root, "alpha/dev", tmp_path / "charts")
    rendered = helm_bin.run("template", "release", str(folder), cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d is not None]
    assert sorted(dump(d).decode() for d in docs) == _objects(
        konfig, repo_builder.root, "alpha/dev"
    )
    assert '{{ .Values.evil }} {{- include "x" . }}' in rendered.stdout
