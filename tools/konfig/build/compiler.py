"""Compile stacks into Specs.

A stack's entry files come from its ``kcl.yaml`` (``kcl_cli_configs.file``, where
``${KCL_MOD}`` is the repository root) when present; otherwise: the project's shared
``base/*.k`` files, the stack's ``main.k``, then the repository's render entry
(``konfig.yaml`` ``renderEntry``). Options come from ``kcl.yaml`` ``kcl_options`` and
then ``ci-test/settings.yaml`` ``kcl_options`` (later wins).

Compiling many stacks runs in worker processes; a broken stack never stops the others.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from konfig import contracts
from konfig.build import duplicates, kcl
from konfig.build.limits import Limits

if TYPE_CHECKING:
    from konfig.build.sourcerules import SourceFinding, SourceRules
    from konfig.build.workers import Died
    from konfig.detect.snapshot import Snapshot
    from konfig.secrets.errors import SecretsError
from konfig.errors import ConfigError
from konfig.repo.layout import KCL_MOD_VAR, KCL_YAML, MAIN, Repository, Stack
from konfig.repo.settings import contracts_memo
from konfig.repo.statmemo import StatMemo
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
    # the named rule that refused the stack (``kcl/side-effect``...), None: KCL's own error
    rule: str | None = None
    resource: str | None = None  # the resource id the refusal is about, when one

    def location(self) -> str:
        if self.file is None:
            return ""
        parts = [self.file] + [str(p) for p in (self.line, self.column) if p is not None]
        return ":".join(parts)

    def __str__(self) -> str:
        head = f"{self.location()}: {self.message}" if self.file else self.message
        if self.rule:
            head += f" [{self.rule}]"
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
    # how many stacks shared the KCL run that made this Spec (1: a run of its own)
    batch: int = field(default=1, compare=False)
    # why the stack was compiled alone although others compiled with it in a batch
    alone: str | None = field(default=None, compare=False, repr=False)
    cache_key: str | None = field(default=None, compare=False)  # its compile cache key

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


def _read_contract(
    path: Path, root: Path, contract: str, memo: StatMemo | None = None
) -> dict[str, Any]:
    """A stack's YAML file, checked against its contract (file and line on errors);
    ``memo`` remembers it found right, by the file's stat."""
    rel = path.relative_to(root).as_posix()
    st = None
    if memo is not None:
        try:
            st = path.stat()
        except OSError:
            st = None  # read below, which reports it
        else:
            known = memo.get(rel, st)
            if isinstance(known, dict):
                return known
    data = _check_contract(path, rel, root, contract)
    if memo is not None and st is not None:
        memo.put(rel, st, data)
    return data


def _check_contract(path: Path, rel: str, root: Path, contract: str) -> dict[str, Any]:
    from konfig.repo.yamlio import load_yaml_text, read_text  # PyYAML: only when read

    text = read_text(path, root=root)
    data = load_yaml_text(text, file=rel)
    if data is None:
        return {}
    # an unknown key does not stop compiling: `konfig check` reports it
    hint = f"see docs/contracts/{contract}.md"
    contracts.validate(
        contract,
        data,
        file=rel,
        text=text,
        ignore_unknown=True,
        hint=hint,
        memo=contracts_memo(root),
    )
    return dict(data)


def _options_from(data: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(str(item["key"]), item.get("value")) for item in data.get("kcl_options") or []]


def compile_input(
    repo: Repository,
    stack: Stack,
    *,
    shared: dict[str, list[str]] | None = None,
    memo: StatMemo | None = None,
) -> CompileInput:
    """Work out a stack's entry files and options. Raises ConfigError for bad settings.

    ``shared`` remembers each project's ``base/*.k`` files across the stacks of one call
    (:func:`stacks_inputs`); ``memo`` the settings files found right in earlier runs.
    """
    root = repo.root
    base = str(root)
    stack_dir = f"{base}/{stack.path}"
    options: list[tuple[str, Any]] = []
    files: list[str]
    kcl_yaml = f"{stack_dir}/{KCL_YAML}"
    # string paths: building Path objects for thousands of stacks cost more than the stats
    if os.path.isfile(kcl_yaml):  # noqa: PTH113
        data = _read_contract(Path(kcl_yaml), root, "kcl-yaml", memo)
        listed = data["kcl_cli_configs"]["file"]
        files = [str((Path(stack_dir) / _substitute(str(f), root)).resolve()) for f in listed]
        _inside_repository(Path(kcl_yaml), root, listed, files)
        options.extend(_options_from(data))
    else:
        project_base = f"{base}/{stack.project_path}/base"
        found = None if shared is None else shared.get(project_base)
        if found is None:
            found = _project_base_files(project_base)
            if shared is not None:
                shared[project_base] = found
        files = [*found, f"{stack_dir}/{MAIN}", f"{base}/{repo.config.render_entry}"]
    settings = f"{stack_dir}/{SETTINGS}"
    if os.path.isfile(settings):  # noqa: PTH113
        found_settings = _read_contract(Path(settings), root, "ci-test-settings", memo)
        options.extend(_options_from(found_settings))
    merged = dict(options)  # later wins, first position kept
    return CompileInput(
        stack_path=stack.path,
        root=base,
        files=tuple(files),
        options=tuple(merged.items()),
    )


def _inside_repository(
    kcl_yaml: Path, root: Path, listed: Sequence[Any], files: Sequence[str]
) -> None:
    """Every entry file of a stack lies inside the repository (after links): KCL would
    compile any file the machine has, and a review of the repository would not see it."""
    real_root = root.resolve()
    for index, (entry, file) in enumerate(zip(listed, files, strict=True)):
        if Path(file).is_relative_to(real_root):
            continue
        rel = kcl_yaml.relative_to(root).as_posix()
        from konfig.contracts.yamlpos import key_lines, line_of
        from konfig.repo.yamlio import read_text

        lines = key_lines(read_text(kcl_yaml, root=root))
        raise ConfigError(
            f"entry file {entry!r} is outside the repository ({file}): list files inside "
            f"the repository, relative to the stack or as {KCL_MOD_VAR}/<path>",
            file=rel,
            line=line_of(lines, ("kcl_cli_configs", "file", index)),
        )


def _project_base_files(project_base: str) -> list[str]:
    """The project's shared ``base/*.k`` files (tests aside), sorted."""
    try:
        names = os.listdir(project_base)  # noqa: PTH208
    except OSError:
        return []
    return [
        f"{project_base}/{name}"
        for name in sorted(names)
        if name.endswith(".k")
        and not name.endswith("_test.k")
        and os.path.isfile(f"{project_base}/{name}")  # noqa: PTH113
    ]


def compile_one(inputs: CompileInput) -> CompileResult:
    """Compile one stack. Never raises for a broken stack: the error is in the result."""
    from konfig.secrets.errors import SecretsError
    from konfig.secrets.refs import bind_spec  # compiling only: a warm run needs neither

    started = time.perf_counter()
    root = Path(inputs.root)
    missing = [f for f in inputs.files if not Path(f).is_file()]
    if missing:
        rel = duplicates.relative(missing[0], root)
        return CompileResult(
            inputs.stack_path,
            None,
            CompileError(f"entry file not found: {rel}", file=rel),
            time.perf_counter() - started,
            inputs=inputs,
        )
    refused = _refused(inputs)
    if refused is not None:
        return CompileResult(
            inputs.stack_path, None, refused, time.perf_counter() - started, inputs=inputs
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
    duplicate = duplicate_id_error(inputs, spec)
    if duplicate is not None:
        return CompileResult(
            inputs.stack_path, None, duplicate, time.perf_counter() - started, inputs=inputs
        )
    try:
        # Secrets from encrypted files: a reference and the ciphertext's digest, no value.
        spec = bind_spec(spec, root=root, stack_dir=inputs.stack_path)
    except SecretsError as exc:
        return CompileResult(
            inputs.stack_path,
            None,
            _secrets_error(exc),
            time.perf_counter() - started,
            inputs=inputs,
        )
    return CompileResult(
        inputs.stack_path, spec, None, time.perf_counter() - started, inputs=inputs
    )


_source_rules: dict[str, SourceRules] = {}


def rules_for(root: Path) -> SourceRules:
    """The source rules of one repository, remembered for the life of the process."""
    found = _source_rules.get(str(root))
    if found is None:
        from konfig.build.sourcerules import SourceRules  # only processes that compile

        found = _source_rules[str(root)] = SourceRules(root)
    return found


def _refused(inputs: CompileInput) -> CompileError | None:
    """The first source rule the stack's program breaks (:mod:`konfig.build.sourcerules`),
    as the stack's compile error; the others follow as details."""
    return _refusal(rules_for(Path(inputs.root)).findings(inputs.files))


def _refusals(items: Sequence[CompileInput]) -> list[CompileError | None]:
    """:func:`_refused` of each stack of one task (one repository): the modules they
    share are walked once."""
    if not items:
        return []
    rules = rules_for(Path(items[0].root))
    return [_refusal(found) for found in rules.findings_of(i.files for i in items)]


def _refusal(found: Sequence[SourceFinding]) -> CompileError | None:
    if not found:
        return None
    first = found[0]
    return CompileError(
        message=first.message,
        file=first.file,
        line=first.line,
        column=first.column,
        details=tuple(str(f) for f in found[1:6]),
        rule=first.rule,
    )


def _secrets_error(exc: SecretsError) -> CompileError:
    """A reference to an encrypted file that cannot be bound, at the file's place."""
    where = f"{exc.file}" if exc.line is None else f"{exc.file}:{exc.line}"
    message = exc.message
    if exc.file and message.startswith(f"{where}: "):
        message = message[len(where) + 2 :]
    return CompileError(message, file=exc.file, line=exc.line, rule=exc.rule)


def duplicate_id_error(inputs: CompileInput, spec: Spec) -> CompileError | None:
    """``spec/duplicate-id`` (:mod:`konfig.build.duplicates`) as the stack's compile error,
    at the first place that names the object, the second as a detail."""
    found = duplicates.first_duplicate(spec, inputs.files, Path(inputs.root))
    if found is None:
        return None
    file, line = found.places[0] if found.places else (None, None)
    return CompileError(
        f"{found.count} resources have the id {found.id!r}: each object may appear once; "
        "remove one, or give them different names",
        file=file,
        line=line,
        details=tuple(f"{f}:{n}: also named here" for f, n in found.places[1:]),
        rule=duplicates.RULE,
        resource=found.id,
    )


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


@dataclass(frozen=True)
class CompileSettings:
    """How stacks compile: the bounds of each KCL run, and whether stacks share runs."""

    limits: Limits = field(default_factory=Limits)
    batch: bool = True


# Stacks per KCL run. A batch holds every stack's values at once (about 2 MB each);
# past a few dozen stacks the shared base is a small part of a batch's time anyway.
BATCH_MAX = 32
# A group is split further for idle workers only into parts of at least this many
# stacks: each part parses the shared base again.
BATCH_MIN_SPLIT = 16
# CPU seconds a batch may use on top of the per-run limit, per stack in it
BATCH_CPU_PER_STACK = 1.0


def _tasks(inputs: Sequence[CompileInput], jobs: int, batch: bool) -> list[list[CompileInput]]:
    """Work for the workers: stacks with the same options and render entry together."""
    if not batch:
        return [[item] for item in inputs]
    groups: dict[tuple[Any, ...], list[CompileInput]] = {}
    for item in inputs:
        key = (item.root, item.options, item.files[-1] if item.files else None)
        groups.setdefault(key, []).append(item)
    tasks: list[list[CompileInput]] = []
    for group in groups.values():
        parts = -(-len(group) // BATCH_MAX)
        size = -(-len(group) // parts)
        tasks.extend(group[i : i + size] for i in range(0, len(group), size))
    while len(tasks) < jobs:
        largest = max(tasks, key=len, default=[])
        if len(largest) < 2 * BATCH_MIN_SPLIT:
            break
        tasks.remove(largest)
        half = len(largest) // 2
        tasks.extend([largest[:half], largest[half:]])
    return tasks


def _run_task(items: Sequence[CompileInput]) -> list[CompileResult]:
    """In a worker: compile one stack alone, or several in as few KCL runs as possible."""
    from konfig.build import batch  # only worker processes compile
    from konfig.secrets.errors import SecretsError
    from konfig.secrets.refs import bind_spec

    if len(items) == 1:
        return [_rendered(compile_one(items[0]))]
    refused = [
        item for item, error in zip(items, _refusals(items), strict=True) if error is not None
    ]
    if refused:
        # refused stacks get their error from compile_one; the others batch on
        rest = [item for item in items if item not in refused]
        done = {r.stack_path: r for r in [compile_one(i) for i in refused]}
        if rest:
            done |= {r.stack_path: r for r in _run_task(rest)}
        return [done[item.stack_path] for item in items]
    first = items[0]
    out = batch.compile_together(
        Path(first.root), [(i.stack_path, i.files) for i in items], first.options
    )
    results: list[CompileResult] = []
    for item in items:
        if item.stack_path not in out.resources:
            alone = out.alone.get(item.stack_path)
            results.append(_rendered(replace(compile_one(item), alone=alone)))
            continue
        resources = out.resources[item.stack_path]
        seconds = out.seconds.get(item.stack_path, 0.0)
        try:
            spec = spec_from_output({"resources": resources})
            duplicate = duplicate_id_error(item, spec)
            if duplicate is not None:
                results.append(
                    CompileResult(item.stack_path, None, duplicate, seconds, inputs=item)
                )
                continue
            # Secrets from encrypted files: a reference and the ciphertext's digest.
            spec = bind_spec(spec, root=Path(item.root), stack_dir=item.stack_path)
        except (SpecError, SecretsError) as exc:
            if isinstance(exc, SecretsError):
                error = _secrets_error(exc)
            else:
                error = CompileError(f"invalid spec: {exc}")
            results.append(CompileResult(item.stack_path, None, error, seconds, inputs=item))
            continue
        results.append(
            _rendered(
                CompileResult(
                    item.stack_path,
                    spec,
                    None,
                    seconds,
                    inputs=item,
                    batch=out.size[item.stack_path],
                )
            )
        )
    return results


def _rendered(result: CompileResult) -> CompileResult:
    # the worker renders the canonical YAML: that work runs in parallel too
    if result.spec is not None and result.spec_yaml is None:
        return replace(result, spec_yaml=result.spec.to_yaml())
    return result


def _stack_file(item: CompileInput) -> str:
    """The file to name when a stack as a whole fails: its own entry file."""
    root = Path(item.root)
    own = [f for f in item.files if Path(f).parent == root / item.stack_path]
    chosen = own[-1] if own else (item.files[-2] if len(item.files) > 1 else item.files[0])
    return duplicates.relative(chosen, root)


def _runaway(item: CompileInput, died: Died, limits: Limits) -> CompileResult:
    cpu = f"KONFIG_COMPILE_TIMEOUT sets the limit in CPU seconds (now {limits.cpu_seconds:g})"
    hints = {
        "memory": f"KONFIG_COMPILE_MEMORY sets the limit in MiB (now {limits.memory_mib})",
        "cpu": cpu,
        "time": cpu,
    }
    what = {
        "memory": "look for a comprehension or a recursion that builds more values than meant",
        "cpu": "look for a loop or a recursion that does not end",
        "time": "look for a loop or a recursion that does not end, or a read that waits",
        "stack": "look for a lambda that calls itself without a base case",
    }
    details = tuple(d for d in (what.get(died.limit or ""), hints.get(died.limit or "")) if d)
    return CompileResult(
        item.stack_path,
        None,
        CompileError(
            f"KCL {died.reason}; the compile of this stack was stopped",
            file=_stack_file(item),
            details=details,
        ),
        0.0,
        inputs=item,
    )


def compile_many(
    inputs: Sequence[CompileInput],
    *,
    jobs: int = 1,
    progress: ProgressFn | None = None,
    settings: CompileSettings | None = None,
    limits: Limits | None = None,
) -> list[CompileResult]:
    """Compile every input in worker processes under the settings' limits (``limits``
    overrides them). Results keep input order.

    Stacks with the same options and render entry compile together in one KCL run
    (:mod:`konfig.build.batch`) unless ``settings.batch`` is false. A
    worker that dies (a stack ran out of memory, time or stack) costs no other stack
    its result: the stacks of a lost batch are compiled again one by one, and the one
    that ran away gets an error naming its file and the limit it hit.
    """
    if not inputs:
        return []
    from konfig.build import workers  # a run with every Spec from the cache needs none

    settings = settings or CompileSettings()
    limits = limits or settings.limits
    results: dict[str, CompileResult] = {}

    def record(result: CompileResult) -> None:
        results[result.stack_path] = result
        if progress:
            progress(result)

    tasks = _tasks(inputs, jobs, settings.batch)
    # KCL never runs in this process: it holds the caller's environment (keys, tokens)
    pool: workers.Pool[list[CompileInput]] = workers.Pool(
        min(jobs, len(tasks)), limits, root=Path(inputs[0].root)
    )
    with pool:
        for task in tasks:
            pool.submit(_run_task, task, cpu_budget=_budget(limits, len(task)))
        for task, outcome in pool.outcomes():
            if isinstance(outcome, workers.Done):
                for result in outcome.value:
                    record(result)
            elif len(task) > 1:
                for item in task:  # a lost batch: every stack on its own
                    pool.submit(_run_task, [item], cpu_budget=limits.cpu_seconds)
            elif isinstance(outcome, workers.Died):
                record(_runaway(task[0], outcome, limits))
            else:
                record(
                    CompileResult(
                        task[0].stack_path,
                        None,
                        CompileError(f"internal error while compiling: {outcome.message}"),
                        0.0,
                        inputs=task[0],
                    )
                )
    return [results[i.stack_path] for i in inputs]


def _budget(limits: Limits, stacks: int) -> float:
    if stacks <= 1:
        return limits.cpu_seconds
    return limits.cpu_seconds + BATCH_CPU_PER_STACK * stacks


CACHE_GENERATIONS = 3  # kept per stack: of its Spec, test and check result entries


def compile_cached(
    repo: Repository,
    inputs: Sequence[CompileInput],
    *,
    state: Path | None,
    jobs: int = 1,
    progress: ProgressFn | None = None,
    settings: CompileSettings | None = None,
    snapshot: Snapshot | None = None,
    materialize: Callable[[], None] | None = None,
) -> list[CompileResult]:
    """Like :func:`compile_many`, but reuse Specs from the compile cache under ``state``.

    ``state`` None disables the cache. See :mod:`konfig.build.cache` for what the key
    covers. ``snapshot``: the files of ``repo`` with their blob ids when known (a
    commit's tree written out: ``konfig preview --offline``), else the work tree's.
    ``materialize``: called before the first stack compiles (the keys need only the
    snapshot's blob ids; the sources KCL reads may not be written out yet).
    """
    if state is None or not inputs:
        if materialize is not None and inputs:
            materialize()
        return compile_many(inputs, jobs=jobs, progress=progress, settings=settings)
    from konfig.build.cache import CompileCache, DependencyIndex  # keeps plain compiles lean
    from konfig.build.results import ENTRIES_PER_STACK

    index = DependencyIndex.build(repo.root, state, snapshot)
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
            cache_key=key,
        )
        results[item.stack_path] = result
        if progress:
            progress(result)
    if misses and materialize is not None:
        materialize()
    for result in compile_many(misses, jobs=jobs, progress=progress, settings=settings):
        if result.spec is not None:
            text = result.yaml()
            spec = result.spec
            result = replace(result, spec_yaml=text, cache_key=keys[result.stack_path])
            try:
                store.put(keys[result.stack_path], result.stack_path, spec, text)
            except OSError:
                pass  # a read-only or full disk only costs the next run a compile
        results[result.stack_path] = result
    if misses:
        # old entries pile up as stacks change; keep a few generations per stack
        n = max(len(repo.stacks), len(inputs)) * ENTRIES_PER_STACK
        store.prune(keys.values(), limit=CACHE_GENERATIONS * n)
    return [results[i.stack_path] for i in inputs]


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def stacks_inputs(
    repo: Repository, stacks: Iterable[Stack], *, memo: StatMemo | None = None
) -> list[CompileInput | CompileResult]:
    """Compile inputs per stack; a stack with bad settings yields a failed result instead.

    ``memo`` remembers settings files found right (by their stat) between runs."""
    out: list[CompileInput | CompileResult] = []
    shared: dict[str, list[str]] = {}
    for stack in stacks:
        try:
            out.append(compile_input(repo, stack, shared=shared, memo=memo))
        except ConfigError as exc:
            out.append(
                CompileResult(
                    stack.path,
                    None,
                    CompileError(exc.problem, file=exc.file, line=exc.line),
                    0.0,
                )
            )
    if memo is not None:
        memo.save()
    return out
