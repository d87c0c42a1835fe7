"""``konfig destroy``: delete everything a stack's inventory owns, then the inventory.

Works for stacks that still exist and, addressed by path
(``appops/<project>/<stack>``), for stacks whose directory is gone (a merge that
deleted a stack). Dependents are deleted first, each delete carries a UID
precondition, and only objects the inventory provably owns are touched.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click

from konfig.commands._common import load_repository, report_problems
from konfig.commands._console import info
from konfig.commands.apply import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_TIMEOUT,
    Connections,
    Printer,
    confirm,
    finish,
    run_concurrently,
)
from konfig.engine.applier import ApplyOptions, StackResult, destroy_stack
from konfig.engine.inventory import read_inventory
from konfig.engine.kube import Kube
from konfig.engine.lock import DEFAULT_DURATION, StackLock
from konfig.engine.plan import StackPlan, deleted_stack, plan_stack
from konfig.errors import KonfigError, UsageError
from konfig.repo.layout import Repository, Stack, is_within, resolve_stacks
from konfig.report.previews import Preview, StackPreview, render_text


@dataclass
class _Target:
    stack: Stack
    deleted: bool
    plan: StackPlan | None = None


def _resolve(repo: Repository, address: str, *, deleted: bool) -> _Target:
    if not deleted:
        try:
            return _Target(resolve_stacks(repo, [address])[0], False)
        except UsageError:
            pass
    stack = deleted_stack(address)
    if not is_within(stack.path, "appops") or ".." in Path(stack.path).parts:
        raise UsageError(f"{address}: not a stack path under appops/")
    if deleted and (repo.root / stack.path / "stack.yaml").exists():
        raise UsageError(
            f"--deleted {address}: the stack still exists in the working tree",
            hint="drop --deleted to destroy an existing stack",
        )
    return _Target(stack, True)


@click.command("destroy")
@click.argument("stacks", nargs=-1, required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--deleted",
    is_flag=True,
    help="The STACKs are paths of stacks whose directories are gone (appops/<project>/<stack>).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for each deletion wave to finish.",
)
@click.option("--concurrency", type=click.IntRange(min=1, max=64), default=5, show_default=True)
@click.option(
    "--stack-concurrency", type=click.IntRange(min=1, max=64), default=4, show_default=True
)
@click.option("--no-wait", is_flag=True, help="Do not wait until deleted objects are gone.")
@click.option(
    "--lock-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_LOCK_TIMEOUT,
    show_default=True,
)
@click.option(
    "--lease-duration", type=click.IntRange(min=2), default=DEFAULT_DURATION, show_default=True
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig.")
@click.option("--context", default=None, help="Kubeconfig context for every stack.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    yes: bool,
    deleted: bool,
    timeout: float,
    concurrency: int,
    stack_concurrency: int,
    no_wait: bool,
    lock_timeout: float,
    lease_duration: int,
    kubeconfig: str | None,
    context: str | None,
    as_json: bool,
) -> int:
    """Delete every object STACKs own (dependents first), then their inventories.

    STACK is <project>/<stack> or appops/<project>/<stack>; a stack whose directory
    no longer exists is addressed by its path (its cluster: --context, else the
    kubeconfig's current context). Exit 0 when everything is gone.
    """
    repo = load_repository(ctx)
    report_problems(repo)
    targets: list[_Target] = []
    for address in stacks:
        t = _resolve(repo, address, deleted=deleted)
        if all(t.stack.path != o.stack.path for o in targets):
            targets.append(t)
    conns = Connections(repo, kubeconfig, context)
    printer = Printer(quiet=as_json, prefix=True)
    options = ApplyOptions(concurrency=concurrency, timeout=timeout, wait=not no_wait)
    try:
        for t in targets:
            kube = conns.kube(t.stack)
            prior = read_inventory(kube, t.stack)
            if prior is None and not as_json:
                info(f"{t.stack.path}: no inventory in the cluster, nothing to destroy")
            t.plan = plan_stack(kube, t.stack, None, prior, deleted=True)
        if not as_json:
            shown = [StackPreview(t.stack.path, deleted=True, plan=t.plan) for t in targets]
            click.echo(render_text(Preview.of(shown), color=sys.stdout.isatty()), nl=False)
        confirm("destroy these stacks", yes=yes)

        def one(t: _Target) -> StackResult:
            return _destroy_locked(
                conns.kube(t.stack), t.stack, options, printer, lock_timeout, lease_duration
            )

        results = run_concurrently(targets, one, stack_concurrency)
    finally:
        conns.close()
    return finish("Destroy", results, as_json=as_json)


def _destroy_locked(
    kube: Kube,
    stack: Stack,
    options: ApplyOptions,
    printer: Printer,
    lock_timeout: float,
    lease_duration: int,
) -> StackResult:
    lock = StackLock(kube, stack, duration=lease_duration)
    try:
        lock.acquire(lock_timeout, on_wait=printer.lock_wait(stack.path))
    except KonfigError as exc:
        return StackResult(stack.path, False, (), str(exc))
    try:
        prior = read_inventory(kube, stack)
        plan = plan_stack(kube, stack, None, prior, deleted=True)
        return destroy_stack(kube, plan, prior, options, printer, lost=lock.lost)
    except KonfigError as exc:
        return StackResult(stack.path, False, (), str(exc))
    finally:
        lock.release()
