"""Compile stacks into Specs.

A stack's entry files come from its ``kcl.yaml`` (``kcl_cli_configs.file``, where
``${KCL_MOD}`` is the repository root) when present; otherwise: the project's shared
``base/*.k`` files, the stack's ``main.k``, then the repository's render entry
(``konfig.yaml`` ``renderEntry``). Options come from ``kcl.yaml`` ``kcl_options`` and
then ``ci-test/settings.yaml`` ``kcl_options`` (later wins).

Compiling many stacks runs in worker processes; a broken stack never stops the others.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from konfig.build import kcl
from konfig.errors import ConfigError
from konfig.repo.layout import KCL_MOD_VAR, KCL_YAML, MAIN, Repository, Stack
from konfig.repo.yamlio import load_yaml_file
from konfig.spec import Spec, SpecError, spec_from_output

SETTINGS = "ci-test/settings.yaml"


@dataclass(frozen=True)
class CompileInput:
    """Everything needed to compile one stack: plain data, picklable for workers."""

    stack_path: str
    root: str
    files: tuple[str, ...]  # absolute
    options: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class CompileError:
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    details: tuple[str, ...] = ()

    def location(self) -> str:
        if self.file is None:
            return ""
        parts = [self.file] + [str(p) for p in (self.line, self.column) if p is not None]
        return ":".join(parts)

    def __str__(self) -> str:
        head = f"{self.location()}: {self.message}" if self.file else self.message
        return "\n".join([head, *(f"  {d}" for d in self.details)])


@dataclass(frozen=True)
class CompileResult:
    stack_path: str
    spec: Spec | None
    error: CompileError | None
    seconds: float
    cached: bool = False
    inputs: CompileInput | None = field(default=None, compare=False)
    # the Spec's canonical YAML when already rendered (the compile cache keeps it)
    spec_yaml: str | None = field(default=None, compare=False, repr=False)

    def yaml(self) -> str:
        """The Spec as canonical YAML (rendered once)."""
        if self.spec_yaml is not None:
            return self.spec_yaml
        if self.spec is None:
            raise ValueError(f"{self.stack_path} has no Spec")
        return self.spec.to_yaml()

    @property
    def ok(self) -> bool:
        return self.error is None


def _substitute(value: str, root: Path) -> str:
    return value.replace(KCL_MOD_VAR, str(root))


def _options_from(data: Any, file: str) -> list[tuple[str, Any]]:
    if not isinstance(data, dict):
        return []
    raw = data.get("kcl_options") or []
    if not isinstance(raw, list):
        raise ConfigError("`kcl_options` must be a list of {key, value}", file=file)
    options: list[tuple[str, Any]] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or "key" not in item:
            raise ConfigError(
                f"`kcl_options[{index}]` must be a mapping with `key` and `value`", file=file
            )
        options.append((str(item["key"]), item.get("value")))
    return options


def compile_input(repo: Repository, stack: Stack) -> CompileInput:
    """Work out a stack's entry files and options. Raises ConfigError for bad settings."""
    root = repo.root
    stack_dir = root / stack.path
    options: list[tuple[str, Any]] = []
    files: list[str]
    kcl_yaml = stack_dir / KCL_YAML
    if kcl_yaml.is_file():
        data = load_yaml_file(kcl_yaml, root=root) or {}
        rel = f"{stack.path}/{KCL_YAML}"
        cli = data.get("kcl_cli_configs") if isinstance(data, dict) else None
        listed = cli.get("file") if isinstance(cli, dict) else None
        if not isinstance(listed, list) or not listed:
            raise ConfigError("`kcl_cli_configs.file` must list the entry files", file=rel)
        files = [str((stack_dir / _substitute(str(f), root)).resolve()) for f in listed]
        options.extend(_options_from(data, rel))
    else:
        project_base = root / stack.project_path / "base"
        shared = (
            sorted(p for p in project_base.glob("*.k") if not p.name.endswith("_test.k"))
            if project_base.is_dir()
            else []
        )
        files = [str(p) for p in shared]
        files.append(str(stack_dir / MAIN))
        files.append(str(root / repo.config.render_entry))
    settings = stack_dir / SETTINGS
    if settings.is_file():
        options.extend(
            _options_from(load_yaml_file(settings, root=root), f"{stack.path}/{SETTINGS}")
        )
    merged = dict(options)  # later wins, first position kept
    return CompileInput(
        stack_path=stack.path,
        root=str(root),
        files=tuple(files),
        options=tuple(merged.items()),
    )


def compile_one(inputs: CompileInput) -> CompileResult:
    """Compile one stack. Never raises for a broken stack: the error is in the result."""
    started = time.perf_counter()
    root = Path(inputs.root)
    missing = [f for f in inputs.files if not Path(f).is_file()]
    if missing:
        rel = _rel(missing[0], root)
        return CompileResult(
            inputs.stack_path,
            None,
            CompileError(f"entry file not found: {rel}", file=rel),
            time.perf_counter() - started,
            inputs=inputs,
        )
    try:
        output = kcl.run(
            inputs.files, work_dir=root / inputs.stack_path, options=inputs.options, root=root
        )
        spec = spec_from_output(output)
    except kcl.KclError as exc:
        error = _error_from_kcl(exc)
        return CompileResult(
            inputs.stack_path, None, error, time.perf_counter() - started, inputs=inputs
        )
    except SpecError as exc:
        return CompileResult(
            inputs.stack_path,
            None,
            CompileError(f"invalid spec: {exc}"),
            time.perf_counter() - started,
            inputs=inputs,
        )
    return CompileResult(
        inputs.stack_path, spec, None, time.perf_counter() - started, inputs=inputs
    )


def _rel(path: str, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path


def _error_from_kcl(exc: kcl.KclError) -> CompileError:
    diags = exc.diagnostics
    first = diags[0]
    details = tuple(
        f"{d.location()}: {d.message}" if d.file else d.message
        for d in diags[1:]
        if d.message != first.message or d.location() != first.location()
    )
    return CompileError(
        message=f"{first.kind}: {first.message}",
        file=first.file,
        line=first.line,
        column=first.column,
        details=details[:5],
    )


ProgressFn = Callable[[CompileResult], None]

# Measured on the 2-core reference machine: a forkserver pool with kcl-lib imported in
# each worker takes about 0.3 s before the first result (hack/bench_compile.py).
POOL_STARTUP_SECONDS = 0.3


def _init_worker() -> None:
    # Keep worker processes from fighting over the machine's cores with nested pools.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def compile_many(
    inputs: Sequence[CompileInput],
    *,
    jobs: int = 1,
    progress: ProgressFn | None = None,
    pool_startup: float = POOL_STARTUP_SECONDS,
) -> list[CompileResult]:
    """Compile every input; with ``jobs > 1`` in worker processes. Results keep input order.

    ``pool_startup`` is the estimated cost of starting the workers: when the first stack
    shows the rest would compile faster than that serially, no pool is started.
    """
    results: dict[str, CompileResult] = {}
    serial = jobs <= 1 or len(inputs) <= 1
    if not serial:
        # Starting worker processes costs a few hundred milliseconds; tiny stacks compile
        # in milliseconds. Time the first stack and go parallel only when it pays off.
        first = compile_one(inputs[0])
        results[first.stack_path] = first
        if progress:
            progress(first)
        # parallel pays off when the time saved, t·(n-1)·(1 - 1/jobs), beats the start-up
        remaining = first.seconds * (len(inputs) - 1)
        serial = remaining * (1 - 1 / jobs) < pool_startup
        inputs_left: Sequence[CompileInput] = inputs[1:]
    else:
        inputs_left = inputs
    if serial:
        for item in inputs_left:
            result = compile_one(item)
            results[item.stack_path] = result
            if progress:
                progress(result)
    else:
        ctx = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(
            max_workers=min(jobs, len(inputs_left)), mp_context=ctx, initializer=_init_worker
        ) as pool:
            pending: set[Future[CompileResult]] = {pool.submit(compile_one, i) for i in inputs_left}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    result = future.result()
                    results[result.stack_path] = result
                    if progress:
                        progress(result)
    return [results[i.stack_path] for i in inputs]


CACHE_GENERATIONS = 3


def compile_cached(
    repo: Repository,
    inputs: Sequence[CompileInput],
    *,
    state: Path | None,
    jobs: int = 1,
    progress: ProgressFn | None = None,
) -> list[CompileResult]:
    """Like :func:`compile_many`, but reuse Specs from the compile cache under ``state``.

    ``state`` None disables the cache. See :mod:`konfig.build.cache` for what the key covers.
    """
    if state is None or not inputs:
        return compile_many(inputs, jobs=jobs, progress=progress)
    from konfig.build.cache import CompileCache, DependencyIndex  # keeps plain compiles lean

    index = DependencyIndex.build(repo.root, state)
    store = CompileCache(state)
    kcl_version = kcl.library_version()
    keys: dict[str, str] = {}
    results: dict[str, CompileResult] = {}
    misses: list[CompileInput] = []
    for item in inputs:
        started = time.perf_counter()
        project = "/".join(item.stack_path.split("/")[:2])
        key = index.deps(item.stack_path, project, item.files, item.options, kcl_version).key
        keys[item.stack_path] = key
        hit = store.get(key)
        if hit is None:
            misses.append(item)
            continue
        result = CompileResult(
            item.stack_path,
            hit[0],
            None,
            time.perf_counter() - started,
            cached=True,
            inputs=item,
            spec_yaml=hit[1],
        )
        results[item.stack_path] = result
        if progress:
            progress(result)
    for result in compile_many(misses, jobs=jobs, progress=progress):
        if result.spec is not None:
            text = result.spec.to_yaml()
            spec = result.spec
            result = replace(result, spec_yaml=text)
            try:
                store.put(keys[result.stack_path], result.stack_path, spec, text)
            except OSError:
                pass  # a read-only or full disk only costs the next run a compile
        results[result.stack_path] = result
    if misses:
        # old entries pile up as stacks change; keep a few generations per stack
        store.prune(keys.values(), limit=CACHE_GENERATIONS * max(len(repo.stacks), len(inputs)))
    return [results[i.stack_path] for i in inputs]


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def stacks_inputs(repo: Repository, stacks: Iterable[Stack]) -> list[CompileInput | CompileResult]:
    """Compile inputs per stack; a stack with bad settings yields a failed result instead."""
    out: list[CompileInput | CompileResult] = []
    for stack in stacks:
        try:
            out.append(compile_input(repo, stack))
        except ConfigError as exc:
            out.append(
                CompileResult(
                    stack.path,
                    None,
                    CompileError(exc.message, file=exc.file, line=exc.line),
                    0.0,
                )
            )
    return out
