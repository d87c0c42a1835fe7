"""Compiling the selected stacks for a command: settings, the compile cache, progress."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from konfig.build.compiler import (
    CompileError,
    CompileInput,
    CompileResult,
    CompileSettings,
    compile_cached,
    default_jobs,
    stacks_inputs,
)
from konfig.errors import ConfigError
from konfig.fingerprint import settings_memo
from konfig.repo.layout import Repository, Stack

if TYPE_CHECKING:
    from konfig.detect.snapshot import Snapshot


class Meter(Protocol):
    """Told of each stack compiled (the CLI's progress bar)."""

    def advance(self, label: str = "") -> None: ...


# Given the number of stacks to compile, a context in which to count them.
MeterFactory = Callable[[int], AbstractContextManager[Meter]]


class _Silent:
    def advance(self, label: str = "") -> None:
        pass


@contextmanager
def _silent(total: int) -> Iterator[Meter]:
    yield _Silent()


def refuse_bad_kcl_mod(repo: Repository) -> None:
    """Raise ConfigError for a kcl.mod KCL would partly ignore (``structure/kcl-mod``, the
    finding of `konfig check`): nothing compiles, previews or applies with it."""
    from konfig.repo.kclmod import KCL_MOD_RULE, kcl_mod_problems

    found = kcl_mod_problems(repo.root)
    if found:
        first = found[0]
        more = "".join(f"\n  {p}" for p in found[1:])
        raise ConfigError(
            f"{first.message} [{KCL_MOD_RULE}]{more}", file=first.file, line=first.line
        )


def compile_stacks(
    repo: Repository,
    stacks: Sequence[Stack],
    *,
    jobs: int | None = None,
    state: Path | None = None,
    meter: MeterFactory | None = None,
    settings: CompileSettings | None = None,
    snapshot: Snapshot | None = None,
    materialize: Callable[[], None] | None = None,
) -> list[CompileResult]:
    """Compile ``stacks`` (in worker processes; ``jobs`` None: one per CPU), results in
    the stacks' order, failed ones included (bad settings fail before compiling).

    ``state`` is the cache directory (None: compile everything); ``meter`` counts the
    stacks that actually compile; ``settings`` bound each KCL run (defaults: see
    :class:`~konfig.build.compiler.CompileSettings`); ``snapshot``: the files of
    ``repo`` with their blob ids when known (a commit's tree written out), for the
    cache keys; ``materialize``: called before anything reads more of ``repo`` than its
    settings files (kcl.mod, the stacks' and projects' YAML, the projects' ``base/*.k``
    names): a stack to compile, a refusal to locate in its sources (a tree written in
    two parts: :func:`konfig.pipeline.offline.offline_preview`).
    """
    refuse_bad_kcl_mod(repo)
    prepared = stacks_inputs(repo, stacks, memo=settings_memo(state) if state else None)
    inputs = [p for p in prepared if isinstance(p, CompileInput)]
    early = {p.stack_path: p for p in prepared if isinstance(p, CompileResult)}
    with (meter or _silent)(len(inputs)) as bar:
        done = compile_cached(
            repo,
            inputs,
            state=state,
            jobs=jobs or default_jobs(),
            progress=lambda r: bar.advance(Path(r.stack_path).name),
            settings=settings,
            snapshot=snapshot,
            materialize=materialize,
        )
    by_path = {r.stack_path: r for r in done} | early
    if materialize is not None and any(r.spec is not None and r.spec.terraform() for r in done):
        materialize()  # terraform/forbidden locates what it refuses in the stack's files
    return [_refuse_forbidden(repo, s, by_path[s.path]) for s in stacks]


def _refuse_forbidden(repo: Repository, stack: Stack, result: CompileResult) -> CompileResult:
    """The stack's Spec refused by ``terraform/forbidden`` (:mod:`konfig.tofu.guards`):
    a provisioner, a resource type of another provider, a meta-argument. Every command
    that compiles (compile, test, check, preview, apply) fails the stack alike, before
    anything is planned, run or written."""
    if result.spec is None or not result.spec.terraform():
        return result
    from konfig.check.locate import locate
    from konfig.tofu.guards import RULE, forbidden, refusal

    found = forbidden(result.spec.terraform())
    if not found:
        return result
    first = result.spec.by_id().get(found[0].resource)
    file, line = locate(repo.root, stack, first)
    error = CompileError(
        refusal(found), file=file, line=line, rule=RULE, resource=found[0].resource
    )
    return replace(result, spec=None, spec_yaml=None, error=error)
