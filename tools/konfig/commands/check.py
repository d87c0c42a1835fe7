"""``konfig check``: findings from structure, Spec, Kubernetes schema and policy rules."""

from __future__ import annotations

import os

import click

from konfig.check import Severity
from konfig.check.formats import FORMATS, render
from konfig.check.policy import POLICY_ENTRY
from konfig.check.run import check
from konfig.commands._common import cache_state, compile_settings, load_repository
from konfig.commands._console import compile_progress, info
from konfig.commands._keys import take_keyring_from_env
from konfig.commands._options import selection_options
from konfig.errors import EXIT_FINDINGS, EXIT_OK
from konfig.pipeline.compiling import compile_stacks
from konfig.pipeline.declared import declared_objects
from konfig.pipeline.selection import Selection, select_for_command
from konfig.repo.kclmod import kcl_mod_problems
from konfig.repo.layout import is_within


@click.command("check")
@selection_options("check")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Output format (default: github inside GitHub Actions, else text).",
)
@click.option(
    "--policies/--no-policies", default=True, show_default=True, help="Evaluate the KCL policies."
)
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), default=None, help="Compile worker processes."
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Compile and check every stack even when .cache/konfig holds its Spec or findings.",
)
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    all_stacks: bool,
    from_files: bool,
    changed_from: str | None,
    fmt: str | None,
    policies: bool,
    jobs: int | None,
    no_cache: bool,
) -> int:
    """Check STACKs (default: every stack and the whole repository layout).

    Rules: structure/* (layout, project.yaml, stack.yaml), compile/error, spec/* (ids,
    dependsOn, cycles, namespaces), schema/* (strict Kubernetes schema of konfig.yaml
    kubernetesVersion, CRDs in the repo), policy/* (KCL policies under
    base/pkg/policies, switched off per stack in stack.yaml with a reason),
    ownership/shared-object (an object another stack on the same cluster declares too;
    the stacks not checked contribute the ids of their goldens).
    Exit code 1 when there is an error finding.

    \b
    Examples:
      konfig check                                    # every stack and the layout
      konfig check guestbook/prod --format json
      konfig check --changed-from origin/main
    """
    keyring = take_keyring_from_env()  # before anything compiles: see commands/_keys.py
    if fmt is None:
        fmt = "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"
    repo = load_repository(ctx, report=False)  # its layout problems are findings
    state = cache_state(repo.root, enabled=not no_cache, git_required=changed_from is not None)
    selection = select_for_command(
        repo,
        stacks,
        all_stacks=all_stacks,
        from_files=from_files,
        changed_from=changed_from,
        cache=state if (changed_from or from_files) else None,
    )
    if _affects_every_check(selection.changed_paths):
        selection = Selection(repo.stacks, None, everything=True)
    scope: list[str] | None = None
    if not selection.everything:
        scope = [*{s.project_path: None for s in selection.stacks}, *(selection.test_scope or ())]

    # a kcl.mod KCL would partly ignore is the structure/kcl-mod finding, and nothing
    # compiles with it (preview and apply refuse it: pipeline.compiling)
    compiled = (
        []
        if kcl_mod_problems(repo.root)
        else compile_stacks(
            repo,
            selection.stacks,
            jobs=jobs,
            state=state,
            meter=compile_progress(enabled=fmt == "text"),
            settings=compile_settings(),
        )
    )

    # Specs from the compile cache, each stack's own findings from the result cache while
    # everything they depend on is the same (konfig.check.stackcache)
    declared = declared_objects(repo, compiled, state=state, jobs=jobs) if compiled else []
    findings = check(
        repo,
        compiled,
        scope=scope,
        policies=policies,
        keyring=keyring,
        declared=declared,
        state=state,
    )
    click.echo(render(findings, fmt), nl=False)
    errors = sum(1 for f in findings if f.severity is Severity.ERROR)
    if fmt == "text":
        warnings = len(findings) - errors
        info(
            f"checked {len(compiled)} stack(s): {errors} error(s), {warnings} warning(s)"
            if findings
            else f"checked {len(compiled)} stack(s): no findings"
        )
    return EXIT_FINDINGS if errors else EXIT_OK


def _affects_every_check(paths: tuple[str, ...] | None) -> bool:
    """A change to the policies, or to a non-KCL file under base/ (e.g. a CRD), changes
    the findings of stacks that do not import it: check every stack then."""
    if not paths:
        return False
    policies = POLICY_ENTRY.rsplit("/", 2)[0]  # base/pkg/policies
    return any(
        is_within(p, policies) or (is_within(p, "base") and not p.endswith(".k")) for p in paths
    )
