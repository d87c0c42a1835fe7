"""``konfig preview``: what apply would change, computed against the live cluster.

Compiles the stacks, reads each stack's inventory, dry-runs every planned object
(server-side apply, ``dryRun=All``) and reports creates, updates, replaces, deletes
and unchanged objects. Never writes to the cluster.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click

from konfig.build.specfiles import read_specs
from konfig.commands._common import (
    cache_state,
    compile_settings,
    connections,
    load_repository,
    report_problems,
    repository_root,
    runtime_contexts,
)
from konfig.commands._console import compile_progress, error, info, use_color
from konfig.commands._keys import drop_keyring_from_env, take_keyring_from_env
from konfig.commands._options import timeout_options
from konfig.engine.guards import DangerPolicy
from konfig.engine.ignore import ProposedRule, proposed_rules, with_base_rules
from konfig.engine.kube import MAX_WORKERS
from konfig.engine.planner import DEFAULT_WORKERS
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.pipeline.compiling import compile_stacks
from konfig.pipeline.previewing import Preview, commits_of, preview_stacks
from konfig.pipeline.reusing import read_previous
from konfig.pipeline.runtime import uses_opentofu
from konfig.pipeline.selection import gone_stack, select_stacks, stacks_affected_since
from konfig.pipeline.sharding import ShardPolicy, Slot, parse_slot
from konfig.repo.files import WriteScope, atomic_write_text
from konfig.repo.layout import ROOT_MARKER, discover
from konfig.repo.settings import RepoConfig, load_repo_config
from konfig.report.previews import render_json, render_markdown, render_text
from konfig.secrets.refs import Resolver
from konfig.words import about

EXIT_CHANGES = 2


@click.command("preview")
@click.argument("stacks", nargs=-1)
@click.option("--all", "all_stacks", is_flag=True, help="Preview every stack.")
@click.option(
    "--changed-from",
    metavar="REF",
    default=None,
    help="Preview the stacks affected by the changes from the merge base of REF to the "
    "work tree (see `konfig changed`), including stacks deleted since.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Compile every stack even when .cache/konfig/compile holds its Spec.",
)
@click.option(
    "--rules-from",
    "rules_from",
    default=None,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    metavar="DIR",
    help="A checkout of the base branch (in CI the default branch's): the stacks are "
    "previewed with ITS ignore rules (konfig.yaml, project.yaml, stack.yaml) and ITS "
    "danger policy (konfig.yaml dangers); the ignore rules this checkout adds, changes "
    "or drops are listed (ignoreRulesProposed), not applied, so a pull request can "
    "neither hide its own change nor relax its own policy (docs/danger.md).",
)
@click.option(
    "--specs",
    "specs",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Preview the Specs in DIR (as `konfig compile --out DIR` writes them) instead of "
    "compiling: no KCL runs. Every file is checked against the spec contract and the "
    "whole folder refused when one breaks it (in CI: the compile job's artifact, "
    "docs/security.md).",
)
@click.option(
    "--reuse",
    "reuse",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PREVIOUS.json",
    help="A previous live preview of the same stacks (its --format json, in parts when "
    "it was sharded; repeatable): a stack whose Spec, encrypted files, settings and live "
    "objects are unchanged since (the reuse key recomputed now, one metadata-only list "
    "per kind and namespace, equals the one it recorded) takes that result instead of "
    "being previewed again. The file is checked against the preview contract.",
)
@click.option(
    "--offline",
    is_flag=True,
    help="No cluster, no credential: compile the stacks the merge of --head into --base "
    "affects at both (from git objects, the work tree untouched) and show what changes "
    "between the two Specs; Secrets' encrypted values are compared by their ciphertext, "
    "never decrypted, Terraform resources by their configuration (docs/preview-json.md).",
)
@click.option(
    "--base",
    "base",
    metavar="REF",
    default=None,
    help="--offline: the base commit (a pull request's base branch tip).",
)
@click.option(
    "--head",
    "head",
    metavar="REF",
    default=None,
    help="--offline: the head commit (a pull request's branch tip; default HEAD). Its "
    "merge into --base is previewed, never the tip itself.",
)
@click.option(
    "--shard",
    "shard",
    metavar="I/N",
    default=None,
    help="--offline: only shard I of N (0-based, e.g. 0/8) of the affected stacks, the "
    "one `konfig matrix --shards N` gives that job (konfig.yaml `sharding`); the deleted "
    "stacks are in shard 0. `konfig report` takes every shard's file.",
)
@click.option(
    "--base-specs",
    "base_specs",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="--offline: a folder of the --base commit's Specs (`konfig compile --all --out "
    "DIR` there; in CI the cache a trusted run on the default branch wrote, docs/speed.md): "
    "the stacks it holds are not compiled at the base. Each file read is checked against "
    "the spec contract, and one bad file refuses the folder.",
)
@click.option(
    "--base-cache",
    "base_cache",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="--offline: the base side compiles with the compile cache in DIR (made when "
    "missing), never with .cache/konfig, which in CI holds entries the pull request's "
    "own runs wrote (docs/security.md). DIR must lie outside the repository: in CI an "
    "empty folder, or the cache of a trusted run of the default branch.",
)
@click.option(
    "--deleted",
    "deleted",
    multiple=True,
    metavar="STACK_PATH",
    help="A stack whose directory is gone (appops/<project>/<stack>): preview its "
    "deletion from its inventory. Repeatable.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="Report format (json: the contract in docs/preview-json.md).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report to FILE instead of stdout.",
)
@click.option(
    "--diff", "show_diff", is_flag=True, help="Text format: include each object's unified diff."
)
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 0 when nothing changes, 2 when something does, 1 on an error or a "
    "conflict (an object another stack, or nobody in Konfig, owns).",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="Kubeconfig file (default: the stack's kubernetes.kubeconfig, then KUBECONFIG, "
    "then ~/.kube/config).",
)
@click.option(
    "--context",
    "context",
    default=None,
    help="Kubeconfig context for every stack (default: the stack's kubernetes.context).",
)
@timeout_options
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Compile worker processes (default: number of CPUs).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_WORKERS),
    default=DEFAULT_WORKERS,
    show_default=True,
    help="Concurrent API requests per stack.",
)
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    all_stacks: bool,
    rules_from: Path | None,
    changed_from: str | None,
    no_cache: bool,
    specs: Path | None,
    reuse: tuple[Path, ...],
    base_specs: Path | None,
    base_cache: Path | None,
    offline: bool,
    base: str | None,
    head: str | None,
    shard: str | None,
    deleted: tuple[str, ...],
    fmt: str,
    out: Path | None,
    show_diff: bool,
    detailed_exitcode: bool,
    kubeconfig: str | None,
    context: str | None,
    jobs: int | None,
    workers: int,
) -> int:
    """Preview what applying STACKs would change in their clusters (no writes).

    STACK is appops/<project>/<stack> or <project>/<stack>. Each planned object is
    dry-run with server-side apply and compared with the live object; objects the
    stack's inventory owns but the stack no longer declares are shown as deletes.
    Secret values are masked in every format. Secrets from encrypted files are
    decrypted in memory with the key in SOPS_AGE_KEY_FILE / SOPS_AGE_KEY and compared
    key by key; without a key the preview says which it could not compare.

    \b
    Examples:
      konfig preview guestbook/dev
      konfig preview --changed-from origin/main --format markdown --out preview.md
      konfig preview guestbook/dev guestbook/prod --format json --detailed-exitcode
      konfig preview --offline --base origin/main --format json --out preview.json
      konfig preview --specs specs/ --reuse previous.json --format json -- guestbook/dev
    """
    offline_only = (base, head, shard, base_specs, base_cache)
    if offline or any(o is not None for o in offline_only):
        _refuse_with_offline(
            offline=offline,
            base=base,
            given={
                "STACK": bool(stacks),
                "--all": all_stacks,
                "--changed-from": changed_from is not None,
                "--specs": specs is not None,
                "--reuse": bool(reuse),
                "--deleted": bool(deleted),
                "--rules-from": rules_from is not None,
                "--kubeconfig": kubeconfig is not None,
                "--context": context is not None,
            },
        )
        drop_keyring_from_env()  # nothing is decrypted: no key is even read
        from konfig.pipeline.offline import offline_preview

        # what is previewed are two commits, not the work tree: no discovery of it (every
        # stack.yaml of the repository, in each shard); the layout problems of the stacks
        # the merge changes are reported (the change set finds them)
        root = repository_root(ctx)
        state = cache_state(root, enabled=not no_cache, git_required=True)
        assert base is not None
        separate = base_cache is not None
        base_state = _base_cache(root, base_cache) if base_cache and not no_cache else None
        slot = None if shard is None else _slot(shard, load_repo_config(root))
        done = offline_preview(
            root,
            base,
            head or "HEAD",
            state=state,
            jobs=jobs,
            settings=compile_settings(),
            meter=compile_progress(enabled=fmt == "text" and out is None),
            shard=slot,
            base_specs=base_specs,
            base_state=base_state,
            separate_base=separate,
        )
        report_problems(ctx, done.changes.problems)
        return _emit(done.preview, fmt, out, show_diff, detailed_exitcode)
    keyring = take_keyring_from_env()  # before anything compiles: see commands/_keys.py
    repo = load_repository(ctx)
    state = cache_state(repo.root, enabled=not no_cache, git_required=changed_from is not None)
    deleted_paths = list(deleted)
    if changed_from is not None:
        if stacks or all_stacks:
            raise UsageError("give stacks, --all or --changed-from, not several")
        selected, gone_since = stacks_affected_since(repo, changed_from, cache=state)
        deleted_paths += [p for p in gone_since if p not in deleted_paths]
        if not selected and not deleted_paths:
            info(f"no stacks affected since {changed_from}")
    elif stacks or all_stacks:
        selected = select_stacks(repo, stacks, all_stacks=all_stacks)
    elif deleted_paths:
        selected = []
    else:
        raise UsageError(
            "no stacks given",
            hint="name stacks (e.g. guestbook/dev), or pass --all, --changed-from or --deleted",
        )
    gone = [
        gone_stack(
            repo,
            path,
            what=f"--deleted {path}",
            must_be_gone="preview it as a normal stack, or delete its directory first",
        )
        for path in deleted_paths
    ]

    proposed: list[tuple[str, ProposedRule]] = []
    policy: DangerPolicy | None = None
    if rules_from is not None:
        if not (rules_from / ROOT_MARKER).is_file():
            raise UsageError(
                f"--rules-from {rules_from}: not a checkout of a Konfig repository (no "
                f"{ROOT_MARKER} there)",
                hint="pass the base branch's checkout (in CI: the default branch's)",
            )
        base_repo = discover(rules_from.resolve())
        policy = DangerPolicy.of(base_repo.config.dangers)
        as_base = [with_base_rules(s, base_repo) for s in selected]
        proposed = [
            (s.path, p)
            for s, b in zip(selected, as_base, strict=True)
            for p in proposed_rules(s, b)
        ]
        selected = as_base
        for path, p in proposed:
            info(f"{path}: ignore rule {p.rule.source} {p.change}: listed, not applied")
    quiet = fmt != "text" or out is not None
    # Compiled elsewhere (the unprivileged job of a pull request): read as hostile data,
    # all of it checked before any cluster is contacted; no KCL runs.
    read = read_specs(specs, [s.path for s in selected]) if specs is not None else None
    previous = read_previous(list(reuse)) if reuse else None
    with connections(ctx, repo, kubeconfig, context) as conns:
        if read is not None:
            by_path = read
        else:
            compiled = compile_stacks(
                repo,
                selected,
                jobs=jobs,
                state=state,
                meter=compile_progress(enabled=not quiet),
                settings=compile_settings(),
            )
            by_path = {r.stack_path: r for r in compiled}
        terraform = any(uses_opentofu(s, by_path[s.path].spec) for s in selected)
        results = preview_stacks(
            conns,
            selected,
            by_path,
            gone,
            workers=workers,
            note=info,
            resolver=Resolver(repo.root, keyring),
            contexts=runtime_contexts(repo.root, opentofu=terraform),
            # a preview of compiled Specs (a pull request's) records what it was made from,
            # so that the next push's preview can re-use it
            keyed=specs is not None,
            previous=previous,
            policy=policy,
        )

    preview = replace(
        Preview.of(results, commits_of(repo.root, changed_from)), proposed_rules=tuple(proposed)
    )
    for sha, paths in preview.reused().items():
        info(f"{len(paths)} of {len(results)} stacks re-used from {sha[:12]}: {', '.join(paths)}")
    return _emit(preview, fmt, out, show_diff, detailed_exitcode)


def _slot(text: str, config: RepoConfig) -> Slot:
    try:
        return parse_slot(text, ShardPolicy(config.stacks_per_shard, config.max_shards))
    except ValueError as exc:
        raise UsageError(f"--shard {exc}") from None


def _base_cache(root: Path, folder: Path) -> Path:
    """``--base-cache``'s folder, made when missing; one inside the repository is refused
    (a pull request can commit files there: they would stand for base Specs)."""
    real = folder.resolve()
    if real == root.resolve() or root.resolve() in real.parents:
        raise UsageError(
            f"--base-cache {folder} lies inside the repository {root}: a commit can put "
            "files there, which would stand for the base side's Specs",
            hint='use a folder outside it, e.g. --base-cache "$RUNNER_TEMP/konfig-base-cache"',
        )
    try:
        real.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"--base-cache {folder}: cannot make the folder ({exc.strerror or exc})",
            hint="give a writable folder",
        ) from exc
    return real


def _refuse_with_offline(*, offline: bool, base: str | None, given: dict[str, bool]) -> None:
    if not offline:
        raise UsageError(
            "--base, --head, --shard, --base-specs and --base-cache are options of --offline",
            hint="add --offline",
        )
    if base is None:
        raise UsageError(
            "--offline needs --base REF (the pull request's base commit)",
            hint="e.g. konfig preview --offline --base origin/main",
        )
    clash = [flag for flag, present in given.items() if present]
    if clash:
        raise UsageError(
            f"--offline previews the stacks the merge affects, with no cluster: "
            f"{', '.join(clash)} cannot go with it",
            hint="drop them, or preview live without --offline",
        )


def _emit(
    preview: Preview, fmt: str, out: Path | None, show_diff: bool, detailed_exitcode: bool
) -> int:
    if fmt == "json":
        text = render_json(preview)
    elif fmt == "markdown":
        text = render_markdown(preview)
    else:
        color = out is None and use_color(sys.stdout)
        text = render_text(preview, color=color, diff=show_diff)
    if out is not None:
        atomic_write_text(out, text, scope=WriteScope.named(out, "--out"))
        info(f"wrote the preview to {out}")
    else:
        click.echo(text, nl=False)
    if fmt != "text" or out is not None:
        for s in preview.stacks:
            if s.error:
                error(about(s.path, s.error.message))

    if preview.has_errors or preview.has_conflicts:
        return EXIT_FINDINGS  # a conflict is an error: apply would refuse the stack
    if detailed_exitcode and preview.has_changes:
        return EXIT_CHANGES
    return EXIT_OK
