"""Batch compile (many stacks per KCL run) against a run per stack: byte-identical Specs,
the same errors, and a run of its own for every stack the batch cannot express.

A corpus repository holds one project per case. It is compiled once with
``compile_many`` (batches in worker processes) and once stack by stack with
``compile_one`` (each stack its own KCL run, as konfig did before batching); every
case checks that both agree and that its stack went the way the case expects (into a
batch, or alone and why).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixtures.monorepo import load_generator
from fixtures.repos import TEMPLATE_ROOT, RepoBuilder, copy_template

from konfig.build import kclsource
from konfig.build.compiler import CompileResult, compile_input, compile_many, compile_one
from konfig.repo.layout import discover

SERVER = """\
import base.pkg.models.frontend

app: frontend.Server {{
    name = "{name}"
    image = "nginx:1.27.3"
    namespace = "{name}-ns"
    ports = [{{port = 80}}]
}}
"""


@dataclass(frozen=True)
class Case:
    name: str
    main: str
    base: str | None = None  # the project's base/base.k
    extra: tuple[tuple[str, str], ...] = ()  # more files: (path in the project, text)
    alone: str | None = None  # None: must be batched; else a part of the reason
    fails: bool = False  # the stack does not compile (the same error both ways)


BASE = """\
import base.pkg.models.frontend
import base.pkg.lib0 as lib

# the project's defaults
app: frontend.Server {
    name = "merged"
    image = "registry.example.com/merged:1.0.0"
    replicas = 1
    labels = lib.labels
    env = {"FROM_BASE" = "yes", "LEVEL" = "info"}
    ports = [{port = 8080, name = "http"}]
    readinessProbe = {httpGet = {path = "/ready", port = "http"}}
    configMaps = [{name = "conf", data = {"a.txt" = \"\"\"line one
line two ünïcode 😀
\"\"\"}}]
}
"""

CASES = [
    Case(
        "merge",
        base=BASE,
        main="""\
import base.pkg.models.frontend

app: frontend.Server {
    namespace = "merge-ns"  # a comment in the body
    replicas = 3
    env = {"LEVEL" = "debug"}
    labels: {"team" = "a"}
    ports += [{port = 9090, name = "metrics"}]
    readinessProbe.periodSeconds = 7
    "resources" = "medium"
}  # a comment after the brace
""",
    ),
    Case(
        "one-line-bodies",
        base=(
            'import base.pkg.models.frontend\napp: frontend.Server {name = "one", image = "x:1"}\n'
        ),
        main='import base.pkg.models.frontend\napp: frontend.Server {namespace = "one-ns"}\n',
    ),
    Case(
        "three-files",
        base='import base.pkg.models.frontend\napp: frontend.Server {\n    name = "three"\n}\n',
        extra=(
            (
                "base/more.k",
                'import base.pkg.models.frontend as fe\n\napp: fe.Server {\n    image = "x:2"\n}\n',
            ),
        ),
        main=(
            "import base.pkg.models.frontend\n\n"
            'app: frontend.Server {\n    namespace = "three-ns"\n}\n'
        ),
    ),
    Case(
        "mixed-declarations",
        base='import base.pkg.models.frontend\napp: frontend.Server {\n    name = "mixed"\n}\n',
        main=('import base.pkg.models.frontend\n\napp = frontend.Server {\n    image = "x:1"\n}\n'),
        alone="both with",
        fails=True,
    ),
    Case(
        "options-and-lambdas",
        main="""\
import base.pkg.models.frontend
import base.pkg.lib1 as extra

_env = option("env")
make = lambda n: str -> frontend.Server {
    frontend.Server {
        name = n, image = "x:1", namespace = "lam-${_env}"
        replicas = extra.replicas_for(_env)
    }
}
servers = [make(n) for n in ["lam-a", "lam-b"]]
if _env == "dev":
    debug = True
""",
    ),
    Case(
        "own-schema",
        main="""\
import base.pkg.models.frontend

schema Team:
    name: str
    size: int = 3

    check:
        size > 0

team = Team {name = "ops"}
app: frontend.Server {
    name = "own-schema"
    image = "x:1"
    labels = {"team" = team.name}
}
""",
    ),
    Case(
        "reads-files",
        main="""\
import base.pkg.models.frontend
import file
import json
import yaml

_conf = json.decode(file.read("conf.json"))
_d = yaml.encode(yaml.decode(file.read("data/d.yaml")))
app: frontend.Server {
    name = "reads"
    image = "x:${_conf.tag}"
    namespace = "reads-ns"
    configMaps = [{name = "data", data = {"d.yaml" = _d}}]
}
""",
        extra=(("reads/conf.json", '{"tag": "7"}\n'), ("reads/data/d.yaml", "k: v\n")),
    ),
    Case(
        "raw-manifests",
        main="""\
import base.pkg.models.frontend

extras: frontend.Manifests {
    manifests = [{
        apiVersion = "v1", kind = "ConfigMap"
        metadata = {name = "raw", namespace = "raw-ns"}, data = {k = "v"}
    }]
}
""",
    ),
    # what the batch cannot express: alone, and still the same Spec
    Case(
        "unpacked-entries",
        base=BASE,
        main=(
            "import base.pkg.models.frontend\n\n_more = {replicas = 2}\n"
            'app: frontend.Server {\n    namespace = "u-ns"\n    **_more\n}\n'
        ),
        alone="unpacked",
    ),
    Case(
        "schema-value-twice",
        base=(
            "import base.pkg.models.frontend\n\napp: frontend.Server {\n"
            '    name = "sv"\n    image = "x:1"\n'
            "    autoscaling = frontend.Autoscaling {minReplicas = 1, maxReplicas = 2}\n}\n"
        ),
        main=(
            "import base.pkg.models.frontend\n\n"
            "app: frontend.Server {\n    autoscaling: {maxReplicas = 5}\n}\n"
        ),
        alone="schema value",
    ),
    Case(
        "counts-instances",
        main=SERVER.format(name="counts") + "n = len(frontend.Server.instances())\n",
        alone="instances()",
    ),
    Case("typeof", main=SERVER.format(name="typeof") + "t = typeof(app)\n", alone="typeof"),
    Case(
        "runtime-module",
        main="import runtime\n" + SERVER.format(name="rt"),
        alone="`runtime` module",
    ),
    Case(
        "workdir",
        main="import file\n" + SERVER.format(name="wd") + "w = file.workdir()\n",
        alone="file.workdir",
    ),
    Case(
        "base-reads-files",
        base='import file\n_x = file.read("x.txt")\n',
        extra=(("base/x.txt", "x\n"),),
        main=SERVER.format(name="brf"),
        alone="not in the stack directory",
    ),
    Case(
        "alias-clash",
        base="import base.pkg.lib0 as lib\n_a = lib.labels\n",
        main="import base.pkg.lib1 as lib\n" + SERVER.format(name="clash"),
        alone="two different imports",
        fails=True,
    ),
    Case(
        "library-makes-servers",
        main="import base.pkg.maker\n" + SERVER.format(name="maker") + 'made = maker.mk("made")\n',
        alone="which a stack renders",
    ),
    Case(
        "type-as-value",
        main=SERVER.format(name="tav") + "kind = frontend.Server\n",
        alone="as a value",
    ),
    Case(
        "render-name",
        main=SERVER.format(name="rn") + "_servers = [1]\n",
        alone="render entry assigns",
        fails=True,
    ),
    # broken stacks: the same error both ways, and the others of the batch still compile
    Case(
        "type-error",
        main=SERVER.format(name="te").replace('namespace = "te-ns"', 'replicas = "three"'),
        fails=True,
    ),
    Case(
        "runtime-error",
        main=SERVER.format(name="re") + "_l = [1]\nx = _l[5]\n",
        fails=True,
    ),
    Case("syntax-error", main="a = {\n  b = \n", fails=True, alone="does not parse"),
    Case(
        "failed-check",
        main=SERVER.format(name="fc").replace('namespace = "fc-ns"', "replicas = -1"),
        fails=True,
    ),
]

MAKER = """\
import base.pkg.models.frontend

mk = lambda n: str {
    frontend.Server {name = n, image = "x:1", namespace = "made"}
}
"""


def _build(builder: RepoBuilder) -> None:
    for k in range(2):
        builder.write(
            f"base/pkg/lib{k}/lib.k",
            f'labels: {{str:str}} = {{"lib{k}" = "yes"}}\n'
            'replicas_for = lambda env: str -> int {\n    3 if env == "prod" else 1\n}\n',
        )
    builder.write("base/pkg/maker/maker.k", MAKER)
    for case in CASES:
        stack_dir = builder.stack(case.name, "dev", main=case.main)
        if case.base is not None:
            builder.write(f"appops/{case.name}/base/base.k", case.base)
        for rel, text in case.extra:
            target = f"appops/{case.name}/{rel}"
            if rel.startswith("reads/"):
                target = str((stack_dir / rel.removeprefix("reads/")).relative_to(builder.root))
            builder.write(target, text)


@dataclass(frozen=True)
class Compiled:
    batched: dict[str, CompileResult]
    alone: dict[str, CompileResult]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Compiled]:
    builder = copy_template(tmp_path_factory.mktemp("corpus") / "repo")
    _build(builder)
    repo = discover(builder.root)
    inputs = [compile_input(repo, s) for s in repo.stacks]
    many = compile_many(inputs, jobs=2)
    yield Compiled(
        {r.stack_path: r for r in many},
        {i.stack_path: compile_one(i) for i in inputs},
    )


def _same(a: CompileResult, b: CompileResult) -> None:
    assert (a.error, a.ok) == (b.error, b.ok)
    if a.ok:
        assert a.yaml() == b.yaml()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_batch_equals_a_run_per_stack(corpus: Compiled, case: Case) -> None:
    path = f"appops/{case.name}/dev"
    batched, alone = corpus.batched[path], corpus.alone[path]
    _same(batched, alone)
    assert batched.ok is not case.fails
    if case.alone is None and not case.fails:
        assert batched.batch > 1, f"expected a batch, compiled alone: {batched.alone}"
    if case.alone is not None:
        assert batched.batch == 1
        assert batched.alone is not None and case.alone in batched.alone


def test_error_in_a_batch_names_the_stacks_file_and_line(corpus: Compiled) -> None:
    result = corpus.batched["appops/type-error/dev"]
    assert result.error is not None
    assert (result.error.file, result.error.line) == ("appops/type-error/dev/main.k", 6)
    runtime = corpus.batched["appops/runtime-error/dev"]
    assert runtime.error is not None and runtime.error.file == "appops/runtime-error/dev/main.k"
    assert runtime.error.line == 10


def test_every_batchable_stack_shared_a_run(corpus: Compiled) -> None:
    sizes = {r.batch for r in corpus.batched.values() if r.ok and r.alone is None}
    assert max(sizes) >= 5


def test_example_stacks_batch_and_equal_their_own_runs() -> None:
    repo = discover(TEMPLATE_ROOT)
    inputs = [compile_input(repo, s) for s in repo.stacks]
    many = compile_many(inputs, jobs=1)
    # stacks batch with the others of the same options (http-echo/edge: env=edge alone)
    same_options = Counter(item.options for item in inputs)
    assert sum(n for n in same_options.values() if n > 1) >= 6
    for item, result in zip(inputs, many, strict=True):
        if same_options[item.options] > 1:
            assert result.batch > 1, (item.stack_path, result.alone)
        else:
            assert result.batch == 1, item.stack_path
        _same(result, compile_one(item))
        golden = TEMPLATE_ROOT / item.stack_path / "ci-test" / "stdout.golden.yaml"
        assert result.yaml() == golden.read_text(encoding="utf-8")


def test_generated_repository_batches_and_equals_its_own_runs(tmp_path: Path) -> None:
    root = tmp_path / "gen"
    load_generator().generate(root, projects=12, stacks_per_project=2.5, seed=11, libs=4, git=False)
    repo = discover(root)
    inputs = [compile_input(repo, s) for s in repo.stacks]
    many = compile_many(inputs, jobs=2)
    assert all(r.batch > 1 for r in many), [(r.stack_path, r.alone) for r in many if r.batch == 1]
    for item, result in zip(inputs, many, strict=True):
        _same(result, compile_one(item))


def test_render_entry_with_an_unknown_instances_call_is_not_batched() -> None:
    with pytest.raises(kclsource.Unbatchable, match="instances"):
        kclsource.plan_last(
            "import base.pkg.models.frontend\nx = frontend.Server.instances(True)\n"
        )
