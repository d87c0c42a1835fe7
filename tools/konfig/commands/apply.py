"""``konfig apply``: apply stacks in dependency order, wait for health, prune, record.

The plan is computed and shown first (as ``konfig preview`` computes it); after
confirmation each stack is applied under its Lease: the plan is recomputed under
the lock and must equal the one shown (or the one in ``--plan FILE``), then
:func:`konfig.engine.applier.apply_stack` runs the inventory protocol.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from konfig.build.compiler import (
    CompileInput,
    CompileResult,
    compile_cached,
    default_jobs,
    stacks_inputs,
)
from konfig.commands._common import load_repository, report_problems, select_stacks
from konfig.commands._console import echo_json, error, info
from konfig.detect import gitrepo
from konfig.detect.changeset import cache_dir
from konfig.engine import ordering
from konfig.engine.applier import (
    SUMMARY,
    ApplyError,
    ApplyOptions,
    Event,
    StackResult,
    apply_stack,
    check_plan,
    plan_differences,
)
from konfig.engine.inventory import read_inventory
from konfig.engine.kube import Kube, KubeTarget, connect
from konfig.engine.lock import DEFAULT_DURATION, LeaseState, StackLock
from konfig.engine.plan import StackPlan, plan_stack
from konfig.errors import EXIT_FINDINGS, EXIT_OK, KonfigError, UsageError
from konfig.repo.layout import Repository, Stack
from konfig.report.previews import Preview, StackPreview, render_text
from konfig.spec import Spec

DEFAULT_TIMEOUT = 300.0
DEFAULT_LOCK_TIMEOUT = 300.0


# --- shared by apply and destroy ----------------------------------------------------


class Connections:
    """One connection per (kubeconfig, context); resolves a stack's target like preview."""

    def __init__(self, repo: Repository, kubeconfig: str | None, context: str | None) -> None:
        self.repo = repo
        self.kubeconfig = kubeconfig
        self.context = context
        self.env_kubeconfig = os.environ.get("KUBECONFIG") or None
        self._open: dict[KubeTarget, Kube] = {}
        self._lock = threading.Lock()

    def target(self, stack: Stack) -> KubeTarget:
        from_stack = stack.kubeconfig
        if from_stack and not Path(from_stack).expanduser().is_absolute():
            from_stack = str(self.repo.root / from_stack)
        return KubeTarget(
            kubeconfig=self.kubeconfig or from_stack or self.env_kubeconfig,
            context=self.context or stack.kube_context,
        )

    def kube(self, stack: Stack) -> Kube:
        target = self.target(stack)
        with self._lock:
            if target not in self._open:
                self._open[target] = connect(target)
            return self._open[target]

    def close(self) -> None:
        for kube in self._open.values():
            kube.close()


class Printer:
    """Thread-safe progress lines on stderr, per-object results on stdout."""

    def __init__(self, *, quiet: bool, prefix: bool) -> None:
        self.quiet = quiet
        self.prefix = prefix
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        head = f"[{event.stack}] " if self.prefix else ""
        with self._lock:
            if event.kind == "object" and event.result is not None:
                click.echo(f"{head}  {event.message}")
            else:
                info(f"{head}{event.message}")

    def plan(self, text: str) -> None:
        if not self.quiet:
            with self._lock:
                click.echo(text, nl=False)

    def lock_wait(self, path: str) -> Callable[[LeaseState], None]:
        def report(state: LeaseState) -> None:
            if not self.quiet:
                info(f"[{path}] waiting for the stack's lock, held by {state.holder!r}")

        return report


def confirm(what: str, *, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(
            f"refusing to {what} without confirmation: stdin is not a terminal",
            hint="review the plan above and pass --yes",
        )
    if not click.confirm(f"Do you want to {what}?", default=False, err=True):
        raise KonfigError(f"{what}: cancelled, nothing was changed")


def result_json(result: StackResult) -> dict[str, Any]:
    return {
        "path": result.path,
        "ok": result.ok,
        "error": result.error,
        "counts": result.counts(),
        "seconds": round(result.seconds, 3),
        "objects": [
            {"id": r.id, "phase": r.phase, "outcome": r.outcome, "message": r.message}
            for r in result.objects
        ],
        "inventory": None
        if result.inventory is None
        else {
            "name": result.inventory.name,
            "applysetId": result.inventory.applyset_id,
            "commit": result.inventory.commit,
            "specDigest": result.inventory.spec_digest,
            "members": len(result.inventory.members),
        },
    }


def finish(verb: str, results: Sequence[StackResult], *, as_json: bool) -> int:
    """Print the outcome of an apply or destroy and return its exit code."""
    ok = all(r.ok for r in results)
    if as_json:
        echo_json({"ok": ok, "stacks": [result_json(r) for r in results]})
    elif ok:
        click.echo(summary_line(verb, results))
    else:
        report_failures(verb.lower(), results)
    return EXIT_OK if ok else EXIT_FINDINGS


def summary_line(verb: str, results: Sequence[StackResult]) -> str:
    totals = dict.fromkeys(SUMMARY, 0)
    for r in results:
        for key, n in r.counts().items():
            if key in totals:
                totals[key] += n
    return f"{verb} complete: " + ", ".join(f"{n} {key}" for key, n in totals.items())


def report_failures(verb: str, results: Sequence[StackResult]) -> None:
    failed = [r for r in results if not r.ok]
    error(f"{verb} failed for {len(failed)} of {len(results)} stacks:")
    for r in failed:
        click.echo(f"  {r.error or r.path}", err=True)
        for o in r.objects:
            if o.outcome in ("failed", "skipped"):
                click.echo(f"    {o.id}: {o.message}", err=True)


def run_concurrently(
    items: Sequence[Any], fn: Callable[[Any], StackResult], workers: int
) -> list[StackResult]:
    """Run ``fn`` per item (stacks are independent), results in the items' order."""
    if workers <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))


# --- apply -------------------------------------------------------------------------


@dataclass
class _Planned:
    stack: Stack
    spec: Spec
    plan: StackPlan | None  # the plan shown (None: planned only under the lock)


_T = TypeVar("_T")
_R = TypeVar("_R")


def _map(items: Sequence[_T], fn: Callable[[_T], _R], workers: int) -> list[_R]:
    if workers <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))


def _check_order(path: str, spec: Spec) -> None:
    items = [ordering.item_from_manifest(r.id, r.attributes, r.depends_on) for r in spec.resources]
    try:
        ordering.build_graph(items)
    except ordering.OrderError as exc:
        raise ApplyError(f"{path}: {exc.message}; nothing was applied", hint=exc.hint) from None


def _compare_saved(
    saved: dict[str, dict[str, Any]], plans: list[StackPlan], plan_file: Path | None
) -> None:
    for plan in plans:
        entry = saved.get(plan.path)
        problems = (
            [f"{plan.path} is not in the saved preview"]
            if entry is None
            else plan_differences(entry, plan)
        )
        if problems:
            raise KonfigError(
                f"{plan.path}: the plan differs from the previewed one ({plan_file}); "
                "nothing was applied:\n  " + "\n  ".join(problems),
                hint="preview again, review, and apply the new preview",
            )


def _compile(
    repo: Repository, stacks: list[Stack], jobs: int | None, *, cache: bool
) -> dict[str, Spec]:
    prepared = stacks_inputs(repo, stacks)
    inputs = [p for p in prepared if isinstance(p, CompileInput)]
    results: list[CompileResult] = [p for p in prepared if isinstance(p, CompileResult)]
    results += compile_cached(
        repo, inputs, state=cache_dir(repo.root) if cache else None, jobs=jobs or default_jobs()
    )
    failed = [r for r in results if r.error is not None]
    if failed:
        lines = "\n".join(f"  {r.stack_path}: {r.error}" for r in failed)
        raise KonfigError(f"compile failed, nothing was applied:\n{lines}")
    return {r.stack_path: r.spec for r in results if r.spec is not None}


def _check_shared(stacks: list[Stack], specs: dict[str, Spec], conns: Connections) -> None:
    """Stacks are independent unless they declare the same object: then refuse."""
    seen: dict[tuple[KubeTarget, str], str] = {}
    clashes: list[str] = []
    for stack in stacks:
        target = conns.target(stack)
        for res in specs[stack.path].resources:
            key = (target, res.id)
            if key in seen and seen[key] != stack.path:
                clashes.append(f"{res.id} is declared by {seen[key]} and {stack.path}")
            seen.setdefault(key, stack.path)
    if clashes:
        raise UsageError(
            "stacks share objects, so they cannot be applied independently: "
            + "; ".join(clashes[:10]),
            hint="an object must belong to exactly one stack",
        )


def _load_saved(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--plan {path}: cannot read a preview JSON file: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != "KonfigPreview":
        raise UsageError(
            f"--plan {path}: not a `konfig preview --format json` output "
            "(kind is not KonfigPreview)"
        )
    if data.get("schemaVersion") != 1:
        raise UsageError(f"--plan {path}: unsupported schemaVersion {data.get('schemaVersion')!r}")
    return {str(s.get("path")): s for s in data.get("stacks") or [] if isinstance(s, dict)}


def _shown(plan: StackPlan) -> dict[str, Any]:
    return {
        "status": "ok",
        "specDigest": plan.spec_digest,
        "changes": [c.to_dict() for c in plan.changes],
    }


@click.command("apply")
@click.argument("stacks", nargs=-1)
@click.option("--all", "all_stacks", is_flag=True, help="Apply every stack.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for each level to become healthy (and for each deletion wave).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=64),
    default=5,
    show_default=True,
    help="Objects applied at once within a level.",
)
@click.option(
    "--stack-concurrency",
    type=click.IntRange(min=1, max=64),
    default=4,
    show_default=True,
    help="Stacks applied at once.",
)
@click.option("--no-wait", is_flag=True, help="Do not wait for objects to become healthy.")
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A saved `konfig preview --format json`: refuse if the recomputed plan differs.",
)
@click.option("--commit", default=None, help="Commit to record (default: git HEAD).")
@click.option(
    "--lock-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_LOCK_TIMEOUT,
    show_default=True,
    help="Seconds to wait for another apply of the same stack to finish.",
)
@click.option(
    "--lease-duration",
    type=click.IntRange(min=2),
    default=DEFAULT_DURATION,
    show_default=True,
    help="Seconds after which a lock whose holder stopped renewing it is stale.",
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig.")
@click.option("--context", default=None, help="Kubeconfig context for every stack.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Compile workers.")
@click.option("--no-cache", is_flag=True, help="Compile every stack (ignore the compile cache).")
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    all_stacks: bool,
    yes: bool,
    timeout: float,
    concurrency: int,
    stack_concurrency: int,
    no_wait: bool,
    plan_file: Path | None,
    commit: str | None,
    lock_timeout: float,
    lease_duration: int,
    kubeconfig: str | None,
    context: str | None,
    as_json: bool,
    jobs: int | None,
    no_cache: bool,
) -> int:
    """Apply STACKs to their clusters: order, wait for health, prune, record.

    Shows the plan and asks first (unless --yes). Objects are applied level by
    level in dependency order with server-side apply; objects the stack no longer
    declares are pruned; the stack's inventory records what it owns, the commit and
    the spec digest. Exit 0 when every stack applied, 1 otherwise.
    """
    repo = load_repository(ctx)
    report_problems(repo)
    selected = select_stacks(repo, stacks, all_stacks=all_stacks)
    if not selected:
        raise UsageError("the repository has no stacks", hint="add appops/<project>/<stack>/")
    saved = _load_saved(plan_file) if plan_file else None
    if commit is None:
        commit = gitrepo.rev_parse(repo.root, "HEAD") if gitrepo.is_repo(repo.root) else ""
    specs = _compile(repo, selected, jobs, cache=not no_cache)
    for stack in selected:
        _check_order(stack.path, specs[stack.path])  # cycles, unknown ids: before any write
    conns = Connections(repo, kubeconfig, context)
    printer = Printer(quiet=as_json, prefix=True)
    _check_shared(selected, specs, conns)

    def options_of(stack: Stack) -> ApplyOptions:
        return _options(stack, commit or "", timeout, concurrency, no_wait)

    try:
        shown: dict[str, StackPlan] = {}
        if not yes or saved is not None:
            # Plan every stack first: to show it and ask, or to compare it with the saved
            # preview so that a difference anywhere applies nothing anywhere.
            def plan_one(stack: Stack) -> StackPlan:
                kube = conns.kube(stack)
                plan = plan_stack(kube, stack, specs[stack.path], read_inventory(kube, stack))
                check_plan(plan, specs[stack.path], options_of(stack))
                return plan

            plans = _map(selected, plan_one, stack_concurrency)
            shown = {p.path: p for p in plans}
            if saved is not None:
                _compare_saved(saved, plans, plan_file)
            if not as_json:
                preview = Preview.of([StackPreview(p.path, plan=p) for p in plans])
                click.echo(render_text(preview, color=sys.stdout.isatty()), nl=False)
            confirm("apply these changes", yes=yes)

        def one(stack: Stack) -> StackResult:
            return _apply_locked(
                conns.kube(stack),
                _Planned(stack, specs[stack.path], shown.get(stack.path)),
                options_of(stack),
                printer,
                lock_timeout=lock_timeout,
                lease_duration=lease_duration,
                show=yes and saved is None and not as_json,
            )

        results = run_concurrently(selected, one, stack_concurrency)
    finally:
        conns.close()

    return finish("Apply", results, as_json=as_json)


def _options(
    stack: Stack, commit: str, timeout: float, concurrency: int, no_wait: bool
) -> ApplyOptions:
    settings = stack.raw.get("apply")
    replace = isinstance(settings, dict) and settings.get("replaceOnImmutable") is True
    return ApplyOptions(
        concurrency=concurrency,
        timeout=timeout,
        wait=not no_wait,
        replace_on_immutable=replace,
        commit=commit,
    )


def _apply_locked(
    kube: Kube,
    planned: _Planned,
    options: ApplyOptions,
    printer: Printer,
    *,
    lock_timeout: float,
    lease_duration: int,
    show: bool = False,
) -> StackResult:
    path = planned.stack.path
    lock = StackLock(kube, planned.stack, duration=lease_duration)
    try:
        lock.acquire(lock_timeout, on_wait=printer.lock_wait(path))
    except KonfigError as exc:
        return StackResult(path, False, (), str(exc))
    try:
        prior = read_inventory(kube, planned.stack)
        plan = plan_stack(kube, planned.stack, planned.spec, prior)
        problems = [] if planned.plan is None else plan_differences(_shown(planned.plan), plan)
        if show:
            printer.plan(render_text(Preview.of([StackPreview(path, plan=plan)])))
        if problems:
            return StackResult(
                path,
                False,
                (),
                f"{path}: the cluster changed since the plan was shown; nothing was applied "
                "to this stack:\n  " + "\n  ".join(problems),
            )
        return apply_stack(kube, plan, planned.spec, prior, options, printer, lost=lock.lost)
    except KonfigError as exc:
        return StackResult(path, False, (), str(exc))
    finally:
        lock.release()
