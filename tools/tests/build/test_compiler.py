from pathlib import Path

import pytest
import yaml
from fixtures.repos import TEMPLATE_ROOT, RepoBuilder

from konfig.build.compiler import compile_input, compile_many, compile_one
from konfig.ids import resource_id
from konfig.repo.layout import discover

EXAMPLES = discover(TEMPLATE_ROOT)


@pytest.mark.parametrize("stack", EXAMPLES.stacks, ids=lambda s: s.path)
def test_every_example_stack_compiles(stack: object) -> None:
    result = compile_one(compile_input(EXAMPLES, stack))  # type: ignore[arg-type]
    assert result.error is None, str(result.error)
    assert result.spec is not None and result.spec.resources
    ids = {r.id for r in result.spec.resources}
    for resource in result.spec.resources:
        if resource.is_terraform:  # webshop/prod's database: <namespace>/<provider>:<type>:<name>
            assert resource.id == resource.terraform.id
        else:
            assert resource.type == "Kubernetes"
            assert resource.id == resource_id(resource.attributes)
        assert set(resource.depends_on) <= ids, f"{resource.id} depends on unknown ids"


def test_examples_have_no_layout_problems() -> None:
    assert EXAMPLES.problems == ()
    assert len(EXAMPLES.stacks) >= 3


def test_default_entry_files_order(repo_builder: RepoBuilder) -> None:
    repo_builder.write("appops/shop/base/base.k", "import base.pkg.models.frontend\n")
    repo_builder.write("appops/shop/base/base_test.k", "")
    repo_builder.stack("shop", "dev")
    repo = discover(repo_builder.root)
    inputs = compile_input(repo, repo.stacks[0])
    rel = [str(Path(f).relative_to(repo_builder.root)) for f in inputs.files]
    assert rel == ["appops/shop/base/base.k", "appops/shop/dev/main.k", "base/render/render.k"]
    assert inputs.options == (("env", "dev"),)


def test_kcl_yaml_entry_files_and_options(repo_builder: RepoBuilder) -> None:
    stack = repo_builder.stack("shop", "dev", main="import base.pkg.models.frontend\n")
    repo_builder.write(
        "appops/shop/dev/app.k",
        (
            "import base.pkg.models.frontend\n"
            'app = frontend.Server {name = "shop", image = option("image")}\n'
        ),
    )
    repo_builder.write(
        "appops/shop/dev/kcl.yaml",
        (
            "kcl_cli_configs:\n  file:\n    - app.k\n    - ${KCL_MOD}/base/render/render.k\n"
            "kcl_options:\n  - key: image\n    value: nginx:1.0\n"
        ),
    )
    repo = discover(repo_builder.root)
    result = compile_one(compile_input(repo, repo.stacks[0]))
    assert result.spec is not None, str(result.error)
    deploy = result.spec.by_id()["apps/v1:Deployment:shop:shop"]
    assert deploy.attributes["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.0"
    assert stack.exists()


def test_type_error_names_file_and_line(repo_builder: RepoBuilder) -> None:
    repo_builder.stack(
        "shop",
        "dev",
        main=(
            "import base.pkg.models.frontend\n\n"
            'app = frontend.Server {\n    name = "shop"\n    image = "nginx:1"\n'
            '    replicas = "two"\n}\n'
        ),
    )
    repo = discover(repo_builder.root)
    result = compile_one(compile_input(repo, repo.stacks[0]))
    assert result.error is not None
    assert (result.error.file, result.error.line) == ("appops/shop/dev/main.k", 6)
    assert "expected int, got str(two)" in result.error.message


def test_failed_check_names_the_message(repo_builder: RepoBuilder) -> None:
    repo_builder.stack(
        "shop",
        "dev",
        main=(
            "import base.pkg.models.frontend\n\n"
            'app = frontend.Server {\n    name = "shop"\n    image = "nginx:1"\n'
            "    replicas = -1\n}\n"
        ),
    )
    repo = discover(repo_builder.root)
    result = compile_one(compile_input(repo, repo.stacks[0]))
    assert result.error is not None
    assert result.error.file == "appops/shop/dev/main.k"
    assert result.error.line == 3
    assert any("replicas must be ≥ 0, got -1" in d for d in result.error.details)


def test_missing_main_is_reported(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("shop", "dev").joinpath("main.k").unlink()
    repo = discover(repo_builder.root)
    result = compile_one(compile_input(repo, repo.stacks[0]))
    assert result.error is not None
    assert result.error.message == "entry file not found: appops/shop/dev/main.k"


def test_parallel_equals_serial(repo_builder: RepoBuilder) -> None:
    for name in ("a", "b", "c", "d"):
        repo_builder.stack(name, "dev")
    repo = discover(repo_builder.root)
    inputs = [compile_input(repo, s) for s in repo.stacks]
    serial = compile_many(inputs, jobs=1)
    parallel = compile_many(inputs, jobs=2)
    assert [r.stack_path for r in parallel] == [i.stack_path for i in inputs]
    assert [r.spec for r in serial] == [r.spec for r in parallel]
    assert all(r.ok for r in parallel)
    assert yaml.safe_load(serial[0].spec.to_yaml())["resources"]  # type: ignore[union-attr]


def test_parallel_reports_broken_stack(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("a", "dev")
    repo_builder.stack("b", "dev", main="a = {\n  b = \n")
    repo_builder.stack("c", "dev")
    repo = discover(repo_builder.root)
    inputs = [compile_input(repo, s) for s in repo.stacks]
    seen: list[str] = []
    results = compile_many(inputs, jobs=2, progress=lambda r: seen.append(r.stack_path))
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].error is not None and results[1].error.file == "appops/b/dev/main.k"
    assert sorted(seen) == [i.stack_path for i in inputs]
