"""Runaway KCL is bounded: a stack that recurses without end, builds a huge list, loops
for ever or waits for ever gets an error naming its file and the limit it hit; every
other stack (also in the same batch) keeps its result; nothing prints a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder

from konfig.build import workers
from konfig.build.compiler import CompileResult, compile_input, compile_many
from konfig.build.limits import Limits
from konfig.repo.layout import discover

RECURSION = "f = lambda n: int -> int {\n    f(n + 1)\n}\nx = f(0)\n"
HUGE = "x = [i * 2 for i in range(1000000000)]\n"
# 2**60 calls, 60 deep: time without memory
ENDLESS = "f = lambda n: int -> int {\n    1 if n < 1 else f(n - 1) + f(n - 1)\n}\nx = f(60)\n"
WAITS = 'import file\n\nx = file.read("pipe")\n'


def _compile(builder: RepoBuilder, limits: Limits, jobs: int = 2) -> dict[str, CompileResult]:
    repo = discover(builder.root)
    inputs = [compile_input(repo, s) for s in repo.stacks]
    return {r.stack_path: r for r in compile_many(inputs, jobs=jobs, limits=limits)}


def _good(builder: RepoBuilder, *names: str) -> None:
    for name in names:
        builder.stack(name, "dev", main=SIMPLE_MAIN.format(name=name, namespace=f"{name}-dev"))


def test_endless_recursion_is_reported_not_a_crash(repo_builder: RepoBuilder) -> None:
    _good(repo_builder, "a", "b")
    repo_builder.stack("rec", "dev", main=RECURSION)
    results = _compile(repo_builder, Limits(cpu_seconds=60, memory_mib=1024))
    error = results["appops/rec/dev"].error
    assert error is not None
    assert error.file == "appops/rec/dev/main.k"
    assert "stack overflow" in error.message
    assert results["appops/a/dev"].ok and results["appops/b/dev"].ok


def test_huge_comprehension_hits_the_memory_limit(repo_builder: RepoBuilder) -> None:
    _good(repo_builder, "a")
    repo_builder.stack("huge", "dev", main=HUGE)
    results = _compile(repo_builder, Limits(cpu_seconds=60, memory_mib=400), jobs=1)
    error = results["appops/huge/dev"].error
    assert error is not None and error.file == "appops/huge/dev/main.k"
    assert "more than 400 MiB of memory" in error.message
    assert any("KONFIG_COMPILE_MEMORY" in d for d in error.details)
    assert results["appops/a/dev"].ok


def test_endless_loop_hits_the_cpu_limit(repo_builder: RepoBuilder) -> None:
    _good(repo_builder, "a")
    repo_builder.stack("loop", "dev", main=ENDLESS)
    results = _compile(repo_builder, Limits(cpu_seconds=2, memory_mib=1024))
    error = results["appops/loop/dev"].error
    assert error is not None and error.file == "appops/loop/dev/main.k"
    assert "s of CPU time" in error.message
    assert results["appops/a/dev"].ok


def test_a_read_that_never_returns_hits_the_wall_clock_limit(repo_builder: RepoBuilder) -> None:
    stack = repo_builder.stack("waits", "dev", main=WAITS)
    os.mkfifo(stack / "pipe")  # opening it for reading waits for a writer that never comes
    results = _compile(repo_builder, Limits(cpu_seconds=1, wall_extra=3), jobs=1)
    error = results["appops/waits/dev"].error
    assert error is not None and error.file == "appops/waits/dev/main.k"
    assert "did not finish within" in error.message


def test_pool_replaces_a_dead_worker_and_keeps_going() -> None:
    with workers.Pool[int](1, Limits()) as pool:
        pool.submit(os._exit, 3)
        pool.submit(abs, -4)
        outcomes = list(pool.outcomes())
    assert isinstance(outcomes[0][1], workers.Died) and "exit code 3" in outcomes[0][1].reason
    assert outcomes[1][1] == workers.Done(4)


def test_task_exception_is_a_message_not_a_traceback() -> None:
    with workers.Pool[str](1, Limits()) as pool:
        pool.submit(int, "x")
        ((_, outcome),) = list(pool.outcomes())
    assert isinstance(outcome, workers.Failed)
    assert outcome.message.startswith("ValueError: invalid literal")


def test_compile_all_with_a_runaway_stack_exits_1_without_traceback(
    repo_builder: RepoBuilder, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _good(repo_builder, "a", "b")
    repo_builder.stack("rec", "dev", main=RECURSION)
    monkeypatch.setenv("KONFIG_COMPILE_MEMORY", "1024")
    result = konfig(
        "compile", "--all", "--no-cache", "-o", str(tmp_path / "out"), cwd=repo_builder.root
    )
    assert result.code == 1
    assert "Traceback" not in result.err
    assert "appops/rec/dev/main.k" in result.err and "stack overflow" in result.err
    assert (tmp_path / "out/appops/a/dev/spec.yaml").is_file()
    assert (tmp_path / "out/appops/b/dev/spec.yaml").is_file()


def _environment(_: object) -> dict[str, str]:
    return dict(os.environ)


def test_a_worker_has_an_empty_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOPS_AGE_KEY", "AGE-SECRET-KEY-CANARY")
    monkeypatch.setenv("KONFIG_TERRAFORM_ENV", '{"PGPASSWORD": "canary"}')
    with workers.Pool[str](1, Limits()) as pool:
        pool.submit(_environment, "task")
        outcomes = [outcome for _, outcome in pool.outcomes()]
    assert outcomes == [workers.Done({})]


def test_konfig_is_not_dumpable() -> None:
    """Another process of the same user cannot read konfig's /proc/<pid>/environ."""
    import subprocess
    import sys

    probe = (
        "import ctypes\nfrom konfig.__main__ import _not_dumpable\n"
        "libc = ctypes.CDLL(None)\nbefore = libc.prctl(3, 0, 0, 0, 0)\n_not_dumpable()\n"
        "print(before, libc.prctl(3, 0, 0, 0, 0))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "0"]
