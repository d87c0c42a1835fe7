"""The base models: their KCL unit tests, the example stacks against the strict Kubernetes
schemas, compile-time type errors, and what the render entry does for a whole stack
(namespaces, dependsOn kept inside the stack, the raw-manifest escape hatch)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from fixtures.repos import TEMPLATE_ROOT, KonfigRunner, RepoBuilder

from konfig.build import kcl
from konfig.build.compiler import compile_input, compile_one
from konfig.repo.layout import discover
from konfig.spec import Spec

EXAMPLES = discover(TEMPLATE_ROOT)
MODELS = TEMPLATE_ROOT / "base" / "pkg" / "models"
TEST_PACKAGES = sorted({p.parent for p in MODELS.rglob("*_test.k")})


def _compile(repo_root: Path, stack_index: int = 0) -> Spec:
    repo = discover(repo_root)
    result = compile_one(compile_input(repo, repo.stacks[stack_index]))
    assert result.spec is not None, str(result.error)
    return result.spec


@pytest.mark.parametrize("package", TEST_PACKAGES, ids=lambda p: p.name)
def test_kcl_unit_tests_pass(package: Path) -> None:
    cases = kcl.test(package, root=TEMPLATE_ROOT)
    assert len(cases) >= 8, f"{package}: only {len(cases)} test cases found"
    failed = [f"{c.name}: {c.error}" for c in cases if c.error is not None]
    assert not failed, "\n".join(failed)


def test_unit_tests_exist_for_frontend_and_backend() -> None:
    assert {p.name for p in TEST_PACKAGES} == {"frontend", "backend"}


_CHECK_MESSAGE = re.compile(r'^\s+.+, "(?P<msg>(?:[^"\\]|\\.)+)"\s*$')
# the message argument of `_fails(lambda {...}, "<message>")`, on the line closing the lambda
_EXPECTED = re.compile(r'\}, "(?P<msg>(?:[^"\\]|\\.)+)"\)\s*$')


def test_every_check_message_is_exercised_by_a_unit_test() -> None:
    tests = (MODELS / "frontend" / "frontend_test.k").read_text(encoding="utf-8")
    expected = [m.group("msg") for m in map(_EXPECTED.search, tests.splitlines()) if m]
    assert len(expected) >= 50
    untested = []
    count = 0
    for model in sorted((MODELS / "frontend").glob("*.k")):
        if model.name.endswith("_test.k"):
            continue
        in_check = False
        for line in model.read_text(encoding="utf-8").splitlines():
            if line.strip() == "check:":
                in_check = True
                continue
            if in_check and line and not line.startswith("        "):
                in_check = False
            match = _CHECK_MESSAGE.match(line) if in_check else None
            if match:
                count += 1
                # a test expects this message: its text up to the first interpolation
                # starts the expected text, or the expected text starts it
                fixed = match.group("msg").split("${")[0].strip()
                if not any(
                    len(e) >= 15 and (e.startswith(fixed) or fixed.startswith(e)) for e in expected
                ):
                    untested.append(f"{model.name}: {match.group('msg')}")
    assert count >= 50
    assert not untested, "check messages without a unit test:\n" + "\n".join(untested)


@pytest.mark.parametrize("stack", EXAMPLES.stacks, ids=lambda s: s.path)
def test_example_resources_validate_against_strict_kubernetes_schema(stack: object) -> None:
    result = compile_one(compile_input(EXAMPLES, stack))  # type: ignore[arg-type]
    assert result.spec is not None, str(result.error)
    version = f"{EXAMPLES.config.kubernetes_version}.0"
    for resource in result.spec.kubernetes():  # Terraform resources: konfig check
        if resource.api_version.startswith("monitoring.coreos.com/"):
            continue  # custom resources: konfig check validates them against the vendored CRDs
        try:
            kubernetes_validate.validate(resource.attributes, version, strict=True)
        except kubernetes_validate.ValidationError as exc:  # pragma: no cover - shown on failure
            pytest.fail(f"{resource.id}: {exc}")


def test_examples_cover_the_issue() -> None:
    projects = {s.project for s in EXAMPLES.stacks}
    assert len(projects) >= 4 and len(EXAMPLES.stacks) >= 7
    contexts = {s.kube_context for s in EXAMPLES.stacks}
    assert contexts == {"admin", "edge"}, "the examples use two clusters"
    kinds: set[str] = set()
    for stack in EXAMPLES.stacks:
        stack_dir = TEMPLATE_ROOT / stack.path
        assert (stack_dir / "ci-test" / "settings.yaml").is_file(), stack.path
        # The local cluster (`hack/cluster up`) or the second one (`--name edge`).
        assert stack.raw.get("kubernetes") in ({"context": "admin"}, {"context": "edge"}), (
            stack.path
        )
        spec = compile_one(compile_input(EXAMPLES, stack)).spec
        assert spec is not None
        kinds |= {r.kind for r in spec.resources}
        for r in spec.resources:
            pod = (r.attributes.get("spec") or {}).get("template", {}).get("spec") or (
                r.attributes.get("spec", {}).get("jobTemplate", {}).get("spec", {})
            ).get("template", {}).get("spec", {})
            for c in pod.get("containers", []) + pod.get("initContainers", []):
                tag = c["image"].rsplit("/", 1)[-1].partition(":")[2]
                assert tag and tag != "latest", f"{stack.path}: {c['image']} needs an explicit tag"
        if stack.name == "prod":
            replicas = {
                r.name: r.attributes["spec"].get("replicas")
                for r in spec.resources
                if r.kind == "Deployment"
            }
            budgets = {r.name for r in spec.resources if r.kind == "PodDisruptionBudget"}
            scaled = {
                r.name: r.attributes["spec"]["minReplicas"]
                for r in spec.resources
                if r.kind == "HorizontalPodAutoscaler"
            }
            for name, count in replicas.items():
                if (count or scaled.get(name, 0)) >= 2:
                    assert name in budgets, f"{stack.path}: {name} runs ≥2 pods without a PDB"
    assert {
        "Deployment",
        "Service",
        "Job",
        "CronJob",
        "ConfigMap",
        "Secret",
        "Ingress",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "ServiceAccount",
        "NetworkPolicy",
    } <= kinds


def test_replicas_two_fails_at_compile_time_with_file_and_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    repo_builder.stack(
        "shop",
        "dev",
        main=(
            "import base.pkg.models.frontend\n"
            "\n"
            "web = frontend.Server {\n"
            '    name = "web"\n'
            '    image = "nginx:1.27.3"\n'
            '    replicas = "two"\n'
            "}\n"
        ),
    )
    result = konfig("compile", "shop/dev", cwd=repo_builder.root)
    assert result.code == 1
    assert "appops/shop/dev/main.k:6" in result.err
    assert "expected int, got str(two)" in result.err


def test_wrong_kubernetes_field_type_fails_in_the_stack(repo_builder: RepoBuilder) -> None:
    repo_builder.stack(
        "shop",
        "dev",
        main=(
            "import base.pkg.models.frontend\n"
            "\n"
            "web = frontend.Server {\n"
            '    name = "web"\n'
            '    image = "nginx:1.27.3"\n'
            '    affinity = {nodeAffinity = "soon"}\n'
            "}\n"
        ),
    )
    repo = discover(repo_builder.root)
    result = compile_one(compile_input(repo, repo.stacks[0]))
    assert result.error is not None
    assert (result.error.file, result.error.line) == ("appops/shop/dev/main.k", 6)
    assert "expected NodeAffinity" in result.error.message


def test_render_entry_dedupes_namespaces_and_keeps_edges_inside_the_stack(
    repo_builder: RepoBuilder,
) -> None:
    repo_builder.stack(
        "shop",
        "dev",
        main=(
            "import base.pkg.models.frontend\n\n"
            'web = frontend.Server {\n    name = "web"\n    namespace = "shop"\n'
            '    image = "nginx:1.27.3"\n'
            '    env = {TOKEN = {secret = "made-elsewhere", key = "t"}, '
            'DB = {secret = "db", key = "url"}}\n'
            '    secrets = [{name = "db", stringData = {url = "postgres://db"}}]\n}\n'
            'worker = frontend.Server {\n    name = "worker"\n    namespace = "shop"\n'
            '    image = "busybox:1.36.1"\n}\n'
            'tool = frontend.Job {\n    name = "tool"\n    namespace = "default"\n'
            '    image = "busybox:1.36.1"\n}\n'
        ),
    )
    spec = _compile(repo_builder.root)
    by_id = spec.by_id()
    assert [r.id for r in spec.resources if r.kind == "Namespace"] == ["v1:Namespace:shop"]
    assert by_id["apps/v1:Deployment:shop:web"].depends_on == (
        "v1:Namespace:shop",
        "v1:Secret:shop:db",
    )
    # `default` is never created, so the Job depends on nothing
    assert by_id["batch/v1:Job:default:tool"].depends_on == ()
    assert by_id["v1:Secret:shop:db"].attributes["stringData"] == {"url": "postgres://db"}


def test_duplicate_ids_are_reported_against_the_stacks_main_k(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    """Not against the render entry (base/render/render.k): the user fixes main.k."""
    repo_builder.stack(
        "shop",
        "dev",
        main=(
            "import base.pkg.models.frontend\n\n"
            'a = frontend.Server {name = "web", namespace = "shop", image = "nginx:1.27.3"}\n'
            'b = frontend.Job {name = "x", namespace = "shop", image = "busybox:1.36.1", '
            'configMaps = [{name = "c"}]}\n'
            'c = frontend.Job {name = "y", namespace = "shop", image = "busybox:1.36.1", '
            'configMaps = [{name = "c"}]}\n'
        ),
    )
    result = konfig("check", "--format", "json", cwd=repo_builder.root)
    assert result.code == 1
    found = [f for f in json.loads(result.out) if f["rule"] == "spec/duplicate-id"]
    assert [(f["file"], f["line"], f["resource"]) for f in found] == [
        ("appops/shop/dev/main.k", 4, "v1:ConfigMap:shop:c")
    ]
    assert "render.k" not in result.out + result.err


def test_a_dangling_depends_on_of_raw_manifests_is_kept_for_check(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    """A dependsOn the author wrote naming an object the stack lacks is reported, never
    dropped by the render entry."""
    repo_builder.stack(
        "shop",
        "dev",
        main=(
            "import base.pkg.models.frontend\n\n"
            "extra = frontend.Manifests {\n"
            '    manifests = [{apiVersion = "v1", kind = "ConfigMap", '
            'metadata = {name = "cfg", namespace = "shop"}}]\n'
            '    dependsOn = ["v1:Secret:shop:missing"]\n'
            "}\n"
        ),
    )
    spec = _compile(repo_builder.root)
    assert spec.by_id()["v1:ConfigMap:shop:cfg"].depends_on == ("v1:Secret:shop:missing",)
    result = konfig("check", "--format", "json", cwd=repo_builder.root)
    assert result.code == 1
    assert [(f["rule"], f["file"], f["line"]) for f in json.loads(result.out)] == [
        ("spec/dangling-dependency", "appops/shop/dev/main.k", 4)
    ]


def test_raw_manifests_from_dicts_and_yaml_files(repo_builder: RepoBuilder) -> None:
    stack = repo_builder.stack(
        "shop",
        "dev",
        main=(
            "import file\nimport yaml\nimport base.pkg.models.frontend\n\n"
            'web = frontend.Server {name = "web", namespace = "shop", image = "nginx:1.27.3"}\n'
            "extras = frontend.Manifests {\n"
            '    manifests = yaml.decode_all(file.read("extra.yaml")) + [{\n'
            '        apiVersion = "v1", kind = "Namespace", metadata.name = "shop"\n'
            '        metadata.labels = {"team" = "a"}\n'
            "    }]\n"
            "}\n"
        ),
    )
    (stack / "extra.yaml").write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "raw", "namespace": "shop"},
                    "data": {"a": "b"},
                },
                None,
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": "shop-reader"},
                    "rules": [],
                },
            ]
        )
    )
    spec = _compile(repo_builder.root)
    by_id = spec.by_id()
    assert by_id["v1:ConfigMap:shop:raw"].attributes["data"] == {"a": "b"}
    assert by_id["v1:ConfigMap:shop:raw"].depends_on == ("v1:Namespace:shop",)
    assert by_id["rbac.authorization.k8s.io/v1:ClusterRole:shop-reader"].depends_on == ()
    # the stack's own Namespace manifest replaces the generated one
    namespaces = [r for r in spec.resources if r.kind == "Namespace"]
    assert len(namespaces) == 1
    assert namespaces[0].attributes["metadata"]["labels"] == {"team": "a"}
