"""``konfig test``: golden tests of stacks and KCL unit tests, with JUnit XML."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from konfig.build import golden, junit
from konfig.build.compiler import CompileResult, default_jobs
from konfig.build.kcltests import UnitTestResult, discover_packages, run_packages
from konfig.check.findings import Finding
from konfig.check.formats import as_github
from konfig.commands._common import cache_state, compile_settings, load_repository
from konfig.commands._console import compile_progress, echo_json, info
from konfig.commands._options import selection_options
from konfig.errors import EXIT_FINDINGS, EXIT_OK
from konfig.pipeline.compiling import compile_stacks
from konfig.pipeline.selection import select_for_command
from konfig.repo.files import WriteScope, atomic_write_text
from konfig.repo.names import display


@click.command("test")
@selection_options("test")
@click.option("--update", is_flag=True, help="Rewrite the goldens from the compiled output.")
@click.option(
    "--junit",
    "junit_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the results as JUnit XML to FILE.",
)
@click.option(
    "--unit/--no-unit",
    default=True,
    show_default=True,
    help="Run the KCL unit tests (*_test.k).",
)
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), default=None, help="Compile worker processes."
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option(
    "--no-cache",
    is_flag=True,
    help="Compile and compare every stack even when .cache/konfig holds its Spec or result.",
)
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    all_stacks: bool,
    from_files: bool,
    changed_from: str | None,
    update: bool,
    junit_file: Path | None,
    unit: bool,
    jobs: int | None,
    as_json: bool,
    no_cache: bool,
) -> int:
    """Golden-test STACKs and run the KCL unit tests.

    Each stack is compiled with its ci-test/settings.yaml and compared with
    ci-test/stdout.golden.yaml (resources by id; key and list order do not matter).
    Without STACKs: every stack and every *_test.k under base/ and appops/. With
    STACKs: those stacks and the unit tests inside them and their project's base/.

    \b
    Examples:
      konfig test                                     # every golden and KCL unit test
      konfig test guestbook/prod --update             # rewrite that stack's golden
      konfig test --junit out/junit.xml
    """
    repo = load_repository(ctx)
    state = cache_state(repo.root, enabled=not no_cache, git_required=changed_from is not None)
    selection = select_for_command(
        repo,
        stacks,
        all_stacks=all_stacks,
        from_files=from_files,
        changed_from=changed_from,
        cache=state if (changed_from or from_files) else None,
    )

    # Specs from the compile cache, and each stack's result from the result cache
    # while its Spec and golden are the same (konfig.build.results)
    compiled = compile_stacks(
        repo,
        selection.stacks,
        jobs=jobs,
        state=state,
        meter=compile_progress(enabled=not (as_json)),
        settings=compile_settings(),
    )
    goldens: list[golden.GoldenResult] = []
    updates: list[golden.UpdateResult] = []
    if update:
        for result in compiled:
            if result.spec is not None:
                updates.append(golden.update(repo.root, result.stack_path, result.spec))
    else:
        goldens = golden.check_compiled(repo.root, compiled, state)

    unit_results: list[UnitTestResult] = []
    if unit:
        packages = discover_packages(repo.root, selection.test_scope)
        unit_results = run_packages(
            repo.root,
            packages,
            jobs=jobs or default_jobs(),
            limits=compile_settings().limits,
        )

    compile_failures = [r for r in compiled if r.error is not None]
    failed = (
        bool(compile_failures)
        or any(not g.passed for g in goldens)
        or any(not u.passed for u in unit_results)
    )
    if junit_file is not None:
        atomic_write_text(
            junit_file,
            _junit(compiled, goldens, updates, unit_results),
            scope=WriteScope.named(junit_file, "--junit"),
        )
    if as_json:
        echo_json(_json(compiled, goldens, updates, unit_results, failed))
    else:
        _print(compiled, goldens, updates, unit_results)
        if os.environ.get("GITHUB_ACTIONS") == "true":
            # annotations on the files in the PR, as `konfig check --format github` gives
            click.echo(as_github(failures(compiled, goldens, unit_results)), nl=False)
    return EXIT_FINDINGS if failed else EXIT_OK


def failures(
    compiled: Sequence[CompileResult],
    goldens: Sequence[golden.GoldenResult],
    units: Sequence[UnitTestResult],
) -> list[Finding]:
    """Every failure as a finding: ``compile/error``, ``golden/<status>``, ``kcl-test/failed``."""
    found: list[Finding] = []
    for r in compiled:
        if r.error is not None:
            e = r.error
            found.append(
                Finding(
                    "compile/error", f"{r.stack_path} does not compile: {e.message}", e.file, e.line
                )
            )
    for g in goldens:
        if not g.passed:
            hint = f"; see the diff in the log, or run `konfig test --update {g.stack_path}`"
            found.append(Finding(f"golden/{g.status.value}", g.summary() + hint, g.file, g.line))
    for u in units:
        if not u.passed:
            found.append(Finding("kcl-test/failed", f"{u.id}: {u.message}", u.file, u.line))
    return found


def _echo(text: str, *, nl: bool = True) -> None:
    """Stdout for a terminal: control characters from KCL strings, file names or goldens
    are shown as escapes, never sent (a title change, a cleared screen, hidden text)."""
    click.echo(display(text, keep_newlines=True), nl=nl)


def _print(
    compiled: Sequence[CompileResult],
    goldens: Sequence[golden.GoldenResult],
    updates: Sequence[golden.UpdateResult],
    units: Sequence[UnitTestResult],
) -> None:
    for result in compiled:
        if result.error is not None:
            _echo(f"FAIL {result.stack_path}: compile failed")
            _echo(f"  {result.error}".replace("\n", "\n  "))
    for g in goldens:
        if g.passed:
            _echo(f"ok   {g.stack_path}")
            continue
        _echo(f"FAIL {g.stack_path}: {g.summary()}")
        if g.status is golden.Status.MISMATCH:
            for d in g.diffs:
                _echo(d.diff, nl=False)
        elif g.status is golden.Status.MISSING:
            _echo(f"  hint: run `konfig test --update {g.stack_path}` and review the file")
        else:
            _echo(f"  hint: fix the file, or run `konfig test --update {g.stack_path}`")
    for u in updates:
        if u.created:
            _echo(f"created {u.file}")
        elif u.changed:
            ids = f" ({', '.join(u.ids)})" if u.ids else " (formatting only)"
            _echo(f"updated {u.file}{ids}")
        else:
            _echo(f"unchanged {u.file}")
    for unit in units:
        if unit.passed:
            continue
        where = unit.file if unit.line is None else f"{unit.file}:{unit.line}"
        _echo(f"FAIL {unit.id}: {where}: {unit.message}".replace("\n", "\n  "))
    passed_units = sum(1 for u in units if u.passed)
    stacks_ok = sum(1 for g in goldens if g.passed)
    parts = []
    if updates:
        changed = sum(1 for u in updates if u.changed)
        parts.append(f"goldens: {changed} of {len(updates)} rewritten")
    else:
        parts.append(f"goldens: {stacks_ok}/{len(compiled)} passed")
    parts.append(f"KCL unit tests: {passed_units}/{len(units)} passed")
    info("; ".join(parts))


def _json(
    compiled: Sequence[CompileResult],
    goldens: Sequence[golden.GoldenResult],
    updates: Sequence[golden.UpdateResult],
    units: Sequence[UnitTestResult],
    failed: bool,
) -> dict[str, Any]:
    by_stack = {g.stack_path: g for g in goldens}
    updated = {u.stack_path: u for u in updates}
    stacks: list[dict[str, Any]] = []
    for result in compiled:
        entry: dict[str, Any] = {"path": result.stack_path}
        if result.error is not None:
            e = result.error
            entry |= {
                "status": "compile-error",
                "error": {"message": e.message, "file": e.file, "line": e.line},
            }
        elif result.stack_path in updated:
            u = updated[result.stack_path]
            entry |= {
                "status": "created" if u.created else "updated" if u.changed else "unchanged",
                "golden": u.file,
                "changedIds": list(u.ids),
            }
        else:
            g = by_stack[result.stack_path]
            entry |= {
                "status": g.status.value,
                "golden": g.file,
                "line": g.line,
                "message": g.summary() if not g.passed else "",
                "diffs": [{"id": d.id, "change": d.change, "diff": d.diff} for d in g.diffs],
            }
        stacks.append(entry)
    return {
        "ok": not failed,
        "stacks": stacks,
        "unitTests": [
            {
                "package": u.package,
                "name": u.name,
                "passed": u.passed,
                "seconds": round(u.seconds, 6),
                "file": u.file,
                "line": u.line,
                "message": u.message,
            }
            for u in units
        ],
    }


def _junit(
    compiled: Sequence[CompileResult],
    goldens: Sequence[golden.GoldenResult],
    updates: Sequence[golden.UpdateResult],
    units: Sequence[UnitTestResult],
) -> str:
    by_stack = {g.stack_path: g for g in goldens}
    updated = {u.stack_path for u in updates}
    golden_cases: list[junit.Case] = []
    for result in compiled:
        name = result.stack_path
        if result.error is not None:
            e = result.error
            golden_cases.append(
                junit.Case(
                    "golden",
                    name,
                    result.seconds,
                    failure=f"compile failed: {e.message}",
                    details=str(e),
                    file=e.file,
                    line=e.line,
                )
            )
        elif name in updated:
            golden_cases.append(junit.Case("golden", name, result.seconds))
        else:
            g = by_stack[name]
            golden_cases.append(
                junit.Case(
                    "golden",
                    name,
                    result.seconds,
                    failure=None if g.passed else g.summary(),
                    details="".join(d.diff for d in g.diffs),
                    file=g.file,
                    line=g.line,
                )
            )
    suites = [junit.Suite("golden", tuple(golden_cases))]
    packages: dict[str, list[junit.Case]] = {}
    for u in units:
        packages.setdefault(u.package, []).append(
            junit.Case(
                u.package,
                u.name,
                u.seconds,
                failure=None if u.passed else u.message,
                file=u.file,
                line=u.line,
            )
        )
    suites.extend(junit.Suite(f"kcl:{p}", tuple(c)) for p, c in sorted(packages.items()))
    return junit.to_xml(suites)
