"""The object ids every stack declares, for `konfig check`'s ownership rule.

The stacks the command compiled give their Specs; every other usable stack gives the
ids its golden file records (a line scan, no KCL), and only a stack without a golden
is compiled (from the compile cache when it can be). So checking one stack stays fast
in a repository of thousands.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from konfig.build.compiler import CompileResult
from konfig.build.golden import golden_ids, golden_path
from konfig.check.locate import locate
from konfig.check.ownership import Declared
from konfig.pipeline.compiling import compile_stacks
from konfig.repo.layout import Repository, Stack
from konfig.spec import Spec


def target_of(stack: Stack) -> tuple[str | None, str | None]:
    """The cluster a stack names in its stack.yaml (kubeconfig, context)."""
    return (stack.kubeconfig, stack.kube_context)


def _from_spec(root: Path, stack: Stack, spec: Spec) -> Declared:
    resources = spec.by_id()
    return Declared(
        stack.path,
        target_of(stack),
        frozenset(resources),
        lambda rid: locate(root, stack, resources.get(rid)),
    )


def _from_golden(stack: Stack, ids: dict[str, int]) -> Declared:
    file = golden_path(stack.path)
    return Declared(stack.path, target_of(stack), frozenset(ids), lambda rid: (file, ids.get(rid)))


def declared_objects(
    repo: Repository,
    compiled: Sequence[CompileResult],
    *,
    state: Path | None,
    jobs: int | None = None,
) -> list[Declared]:
    """What every usable stack declares: the compiled ones from their Specs, the others
    from their goldens, compiling only those without one."""
    by_stack = {s.path: s for s in repo.stacks}
    done = {r.stack_path for r in compiled}
    declared = [
        _from_spec(repo.root, by_stack[r.stack_path], r.spec)
        for r in compiled
        if r.spec is not None and r.stack_path in by_stack
    ]
    missing: list[Stack] = []
    for stack in repo.stacks:
        if stack.path in done:
            continue
        ids = golden_ids(repo.root, stack.path)
        if ids is None:
            missing.append(stack)
        else:
            declared.append(_from_golden(stack, ids))
    for result in compile_stacks(repo, missing, jobs=jobs, state=state) if missing else []:
        if result.spec is not None:
            declared.append(_from_spec(repo.root, by_stack[result.stack_path], result.spec))
    return declared
