"""The schema generator: golden output on small fixtures, real KCL compiles of it, escaping,
determinism, and `konfig gen schemas --check` on the committed base/pkg/k8s.

Regenerate the goldens after an intended change with
``.venv/bin/python tools/tests/gen/test_gen.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from fixtures.repos import TEMPLATE_ROOT, KonfigRunner, RepoBuilder

from konfig.build import kcl
from konfig.gen import compare, generate
from konfig.gen.openapi import GenError, kubernetes_definitions_path, load_definitions
from konfig.gen.render import attribute_name, docstring_text, literal

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
GOLDEN = HERE / "golden"
PREFIX = "base.pkg.k8s"


def fixture_files() -> dict[str, str]:
    crd = yaml.safe_load((FIXTURES / "crd.yaml").read_text())
    return generate(
        load_definitions(FIXTURES / "definitions.json"),
        groups=("demo.example.com/v1",),
        crds=[("fixtures/crd.yaml", crd)],
        import_prefix=PREFIX,
        source="fixtures/definitions.json",
    )


def golden_files() -> dict[str, str]:
    return {
        p.relative_to(GOLDEN).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(GOLDEN.rglob("*.k"))
    }


def test_fixture_renders_to_golden_kcl() -> None:
    files = fixture_files()
    assert sorted(files) == sorted(golden_files())
    for rel, text in files.items():
        assert text == golden_files()[rel], f"{rel} differs from its golden"


def test_golden_covers_the_features() -> None:
    widget = golden_files()["api/demo/v1/widget.k"]
    spec = golden_files()["api/demo/v1/widgetspec.k"]
    backup = golden_files()["crd/ops_example_corp_io/v1alpha1/backup.k"]
    # kinds: apiVersion/kind pinned with defaults; status and List kinds left out
    assert 'apiVersion: "demo.example.com/v1" = "demo.example.com/v1"' in widget
    assert 'kind: "Widget" = "Widget"' in widget
    assert "status" not in widget.split('"""\n', 3)[-1]
    assert "widgetlist.k" not in " ".join(golden_files())
    assert "import base.pkg.k8s.apimachinery.pkg.apis.meta.v1 as meta_v1" in widget
    # required, enums, declared defaults, primitives, keywords and odd names
    assert "    size: int\n" in spec
    assert '    color?: "red" | "green"\n' in spec
    assert '    mode?: str = "auto"\n' in spec
    assert "    $type?: str\n" in spec
    assert '    "x-extra"?: bool\n' in spec
    assert "    port?: str | int\n" in spec
    assert "    limits?: {str:str | float}\n" in spec
    assert "    parts?: [Part]\n" in spec
    # CRD: nested objects become schemas named after their path, metadata is ObjectMeta
    assert "schema BackupSpecTarget:" in backup and "schema BackupSpecVolumesItem:" in backup
    assert "    metadata?: meta_v1.ObjectMeta\n" in backup
    assert '    method?: "snapshot" | "copy" = "snapshot"\n' in backup
    assert "    retention?: int = 7\n" in backup
    assert "    port?: int | str\n" in backup
    assert "lastRun" not in backup


def test_generated_kcl_compiles_and_types_fields(tmp_path: Path) -> None:
    (tmp_path / "kcl.mod").write_text('[package]\nname = "gen"\n')
    shutil.copytree(GOLDEN, tmp_path / "base" / "pkg" / "k8s")
    main = tmp_path / "main.k"
    main.write_text(
        "import base.pkg.k8s.api.demo.v1 as demo\n"
        "import base.pkg.k8s.crd.ops_example_corp_io.v1alpha1 as ops\n\n"
        'w = demo.Widget {metadata.name = "w", spec = {size = 2, type = "round", '
        '"x-extra" = True, port = "http", parts = [{name = "a"}]}}\n'
        'b = ops.Backup {metadata.name = "b", spec = {schedule = "@daily", '
        'target.bucket = "s3://x", volumes = [{name = "data"}]}}\n'
    )
    out = kcl.run([str(main)], work_dir=tmp_path, root=tmp_path)
    assert out["w"] == {
        "apiVersion": "demo.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {
            "mode": "auto",
            "parts": [{"name": "a"}],
            "port": "http",
            "size": 2,
            "type": "round",
            "x-extra": True,
        },
    }
    assert out["b"]["apiVersion"] == "ops.example-corp.io/v1alpha1"
    assert out["b"]["spec"]["method"] == "snapshot" and out["b"]["spec"]["retention"] == 7

    main.write_text(
        "import base.pkg.k8s.api.demo.v1 as demo\n\n"
        'w = demo.Widget {metadata.name = "w", spec = {size = "two"}}\n'
    )
    with pytest.raises(kcl.KclError) as info:
        kcl.run([str(main)], work_dir=tmp_path, root=tmp_path)
    first = info.value.diagnostics[0]
    assert (first.file, first.line) == ("main.k", 3)
    assert "expected int, got str(two)" in first.message

    main.write_text(
        "import base.pkg.k8s.api.demo.v1 as demo\n\n"
        'w = demo.Widget {metadata.name = "w", spec = {size = 1, color = "blue"}}\n'
    )
    with pytest.raises(kcl.KclError) as info:
        kcl.run([str(main)], work_dir=tmp_path, root=tmp_path)
    assert info.value.diagnostics[0].line == 3


def test_docstrings_and_names_are_escaped() -> None:
    text = docstring_text('say """hi""" to ${you} \\o/ "', 4)
    assert '"""' not in text
    assert "\\${you}" not in text.replace("\\$", "")  # every $ is escaped
    assert text.startswith("    ") and text.endswith('\\"')
    assert attribute_name("type") == "$type"
    assert attribute_name("x-kubernetes-foo") == '"x-kubernetes-foo"'
    assert attribute_name("replicas") == "replicas"
    assert literal({"a": [1, True, None, "x$"]}) == '{"a": [1, True, None, "x\\$"]}'


def test_generation_is_deterministic() -> None:
    defs = load_definitions(kubernetes_definitions_path("1.32"))
    first = generate(defs, import_prefix=PREFIX, source="s")
    second = generate(json.loads(json.dumps(defs)), import_prefix=PREFIX, source="s")
    assert first == second
    assert "api/apps/v1/deployment.k" in first and "api/rbac/v1/clusterrole.k" in first


def test_unknown_version_and_bad_crd_are_clear_errors() -> None:
    with pytest.raises(GenError, match=r"no schemas for Kubernetes 1\.7"):
        kubernetes_definitions_path("1.7")
    with pytest.raises(GenError, match="not a CustomResourceDefinition"):
        generate(None, crds=[("x.yaml", {"kind": "ConfigMap"})], import_prefix=PREFIX, source="")


def test_committed_schemas_are_up_to_date(konfig: KonfigRunner) -> None:
    # konfig.yaml lists the vendored CRDs (schemaCrds): the check needs no --crd
    vendored = sorted(
        p.relative_to(TEMPLATE_ROOT).as_posix()
        for p in (TEMPLATE_ROOT / "base/pkg/k8s/crd/monitoring_coreos_com/vendor").glob("*.yaml")
    )
    config = yaml.safe_load((TEMPLATE_ROOT / "konfig.yaml").read_text(encoding="utf-8"))
    assert sorted(config["schemaCrds"]) == vendored and len(vendored) == 3
    result = konfig("gen", "schemas", "--check", cwd=TEMPLATE_ROOT)
    assert result.code == 0, result.out + result.err


def test_schema_crds_of_konfig_yaml_are_generated_and_must_exist(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    shutil.copy(FIXTURES / "crd.yaml", repo_builder.root / "backup-crd.yaml")
    config = repo_builder.root / "konfig.yaml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("schemaCrds:\n", "schemaCrds:\n  - backup-crd.yaml\n"))
    assert konfig("gen", "schemas", "--check", cwd=repo_builder.root).code == 1
    assert konfig("gen", "schemas", cwd=repo_builder.root).code == 0
    assert (repo_builder.root / "base/pkg/k8s/crd/ops_example_corp_io/v1alpha1/backup.k").is_file()
    assert (repo_builder.root / "base/pkg/k8s/crd/monitoring_coreos_com/v1/podmonitor.k").is_file()
    assert konfig("gen", "schemas", "--check", cwd=repo_builder.root).code == 0
    for listed, said in (
        ("gone.yaml", "does not exist"),
        ("../../x.yaml", "outside the repository"),
    ):
        config.write_text(text.replace("schemaCrds:\n", f"schemaCrds:\n  - {listed}\n"))
        result = konfig("gen", "schemas", cwd=repo_builder.root)
        assert result.code == 2 and said in result.err, result.err


def test_check_reports_stale_files_and_write_fixes_them(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    out = repo_builder.root / "base/pkg/k8s"
    deployment = out / "api/apps/v1/deployment.k"
    deployment.write_text(deployment.read_text() + "# edited by hand\n")
    (out / "api/core/v1/configmap.k").unlink()
    stale = out / "api/core/v1/gone.k"
    stale.write_text('"""\nThis file was generated by `konfig gen schemas`. DO NOT EDIT.\n"""\n')
    handwritten = out / "api/core/v1/helpers.k"
    handwritten.write_text("# kept: not generated\n")

    result = konfig("gen", "schemas", "--check", cwd=repo_builder.root)
    assert result.code == 1
    assert "base/pkg/k8s/api/apps/v1/deployment.k: out of date" in result.out
    assert "base/pkg/k8s/api/core/v1/configmap.k: missing" in result.out
    assert "base/pkg/k8s/api/core/v1/gone.k: no longer generated" in result.out
    assert "helpers.k" not in result.out

    assert konfig("gen", "schemas", cwd=repo_builder.root).code == 0
    assert konfig("gen", "schemas", "--check", cwd=repo_builder.root).code == 0
    assert not stale.exists() and handwritten.exists()
    assert "# edited by hand" not in deployment.read_text()


def test_crd_option_adds_schemas(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    shutil.copy(FIXTURES / "crd.yaml", repo_builder.root / "backup-crd.yaml")
    result = konfig("gen", "schemas", "--crd", "backup-crd.yaml", cwd=repo_builder.root)
    assert result.code == 0, result.err
    generated = repo_builder.root / "base/pkg/k8s/crd/ops_example_corp_io/v1alpha1/backup.k"
    expected = golden_files()["crd/ops_example_corp_io/v1alpha1/backup.k"]
    assert generated.read_text() == expected.replace("fixtures/crd.yaml", "backup-crd.yaml")
    # without the CRD the check sees the file as no longer generated
    assert konfig("gen", "schemas", "--check", cwd=repo_builder.root).code == 1
    assert compare({}, repo_builder.root / "base/pkg/k8s").extra


def test_out_outside_the_repository_is_a_usage_error(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    result = konfig("gen", "schemas", "--out", str(tmp_path / "elsewhere"), cwd=repo_builder.root)
    assert result.code == 2
    assert "outside the repository" in result.err


if __name__ == "__main__":
    shutil.rmtree(GOLDEN, ignore_errors=True)
    for rel, text in fixture_files().items():
        path = GOLDEN / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(fixture_files())} golden files under {GOLDEN}", file=sys.stderr)
