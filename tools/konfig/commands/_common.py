"""Helpers shared by subcommands: locating the repository, reporting its problems, the
compile settings from the environment."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from konfig.commands._console import error, warn
from konfig.commands._options import TIMEOUTS_KEY
from konfig.errors import UsageError
from konfig.repo.files import usable_cache
from konfig.repo.layout import Problem, Repository, cache_dir, discover, find_root

if TYPE_CHECKING:
    from konfig.build.compiler import CompileSettings
    from konfig.engine.kube import Timeouts
    from konfig.pipeline.connections import Connections
    from konfig.pipeline.runtime import Contexts
    from konfig.repo.files import WriteScope
    from konfig.tofu.context import TofuContext
    from konfig.tofu.policy import TerraformPolicy

COMPILE_TIMEOUT_ENV = "KONFIG_COMPILE_TIMEOUT"
COMPILE_MEMORY_ENV = "KONFIG_COMPILE_MEMORY"
COMPILE_BATCH_ENV = "KONFIG_COMPILE_BATCH"
KUBE_CLIENT_ENV = "KONFIG_KUBE_CLIENT"

# ctx.obj key: a layout error was reported, so the command cannot exit 0 (cli.py)
LAYOUT_ERRORS = "layout_errors"


def repository_root(ctx: click.Context) -> Path:
    """The repository root (``--root``, else walking up to kcl.mod), without discovery;
    refused when git tracks a file in konfig's cache folder (:func:`refuse_tracked_cache`)."""
    root = (ctx.obj or {}).get("root") if ctx.obj else None
    found = find_root(Path(root) if root else None)
    refuse_tracked_cache(found)
    return found


@functools.cache  # once a process: a command asks for the root several times
def refuse_tracked_cache(root: Path) -> None:
    """konfig trusts what its cache folder (``.cache/konfig``) holds: compiled Specs by
    key, the import graph, documents found valid. A checkout writes every file git
    tracks, ignored or not (``git add -f``), so a pull request that commits one there
    would plant a Spec, hide an import or skip a contract check in every run on its
    checkout: refuse to run on such a repository (docs/security.md, "konfig's cache
    folder is never part of the repository")."""
    from konfig.errors import KonfigError
    from konfig.repo.settings import CACHE_DIR

    tracked = _tracked_under(root, CACHE_DIR)
    if tracked:
        raise KonfigError(
            f"{tracked[0]}: refused (repo/tracked-cache): git tracks {_listed(tracked)} in "
            f"konfig's cache folder {CACHE_DIR}/; konfig would trust them (a compiled "
            "Spec, the import graph, a document found valid), so nothing is run",
            hint=f"remove them from the repository (`git rm -r --cached {CACHE_DIR}`) and keep "
            "the folder ignored (.gitignore: /.cache/); konfig writes it itself",
        )


def _tracked_under(root: Path, rel: str) -> list[str]:
    """The files git tracks below ``rel`` in the repository at ``root``: none when it
    is no git repository or git refuses it (then no checkout wrote them either)."""
    from konfig.detect import gitcmd, gitrepo

    if not (root / ".git").exists() and not gitrepo.is_repo(root):
        return []
    try:
        return gitrepo.tracked_under(root, rel)
    except gitcmd.GitError:
        return []


def _listed(tracked: list[str], shown: int = 3) -> str:
    """ "N file(s) (a, b, c and 2 more)"."""
    more = f" and {len(tracked) - shown} more" if len(tracked) > shown else ""
    return f"{len(tracked)} file(s) ({', '.join(tracked[:shown])}{more})"


def load_repository(
    ctx: click.Context, *, report: bool = True, state: Path | None = None
) -> Repository:
    """The repository, its layout errors already reported (see :func:`report_problems`);
    ``report=False`` for `konfig check`, which reports them as findings. ``state``, the
    cache folder (:func:`cache_state`), remembers the stacks' settings between runs."""
    memo = None
    if state is not None:
        from konfig.fingerprint import settings_memo

        memo = settings_memo(state)
    repo = discover(repository_root(ctx), memo)
    if report:
        report_problems(ctx, repo.problems)
    return repo


def report_problems(ctx: click.Context, problems: Iterable[Problem]) -> None:
    """Every layout problem is an error, in every command, printed before anything else
    runs; the command goes on with the usable stacks and exits 1 at the end."""
    found = False
    for problem in problems:
        error(str(problem))
        found = True
    if found and isinstance(ctx.find_root().obj, dict):
        ctx.find_root().obj[LAYOUT_ERRORS] = True


def timeouts_of(ctx: click.Context) -> Timeouts:
    """The cluster timeouts ``_options.timeout_options`` read (flags or environment)."""
    from konfig.engine.kube import Timeouts  # the Kubernetes client: only when used

    given = ctx.meta.get(TIMEOUTS_KEY, {})
    return Timeouts(
        request=float(given.get("request_timeout", Timeouts.request)),
        credential=float(given.get("credential_timeout", Timeouts.credential)),
    )


def connections(
    ctx: click.Context, repo: Repository, kubeconfig: str | None, context: str | None
) -> Connections:
    """The command's cluster connections: ``--kubeconfig``/``--context`` (or each
    stack's), ``$KUBECONFIG``, the timeouts and ``KONFIG_KUBE_CLIENT``."""
    from konfig.pipeline.connections import Connections  # the Kubernetes client: when used

    return Connections(
        repo,
        kubeconfig,
        context,
        env_kubeconfig=os.environ.get("KUBECONFIG"),
        timeouts=timeouts_of(ctx),
        client=kube_client(),
    )


def kube_client() -> str:
    """Who reads kubeconfigs: ``KONFIG_KUBE_CLIENT`` (``auto``, the default: konfig when
    it understands the context, else the kubernetes client; ``kubernetes``: always the
    kubernetes client)."""
    from konfig.engine.kube import CLIENT_AUTO, CLIENTS

    value = os.environ.get(KUBE_CLIENT_ENV, "").strip().lower() or CLIENT_AUTO
    if value not in CLIENTS:
        raise UsageError(
            f"{KUBE_CLIENT_ENV}={value!r} is not a Kubernetes client konfig knows",
            hint=f"use one of: {', '.join(CLIENTS)} (or leave it unset)",
        )
    return value


def compile_settings() -> CompileSettings:
    """Compile bounds from the environment: ``KONFIG_COMPILE_TIMEOUT`` (CPU seconds per
    KCL run), ``KONFIG_COMPILE_MEMORY`` (MiB per worker process) and
    ``KONFIG_COMPILE_BATCH=0`` (a KCL run per stack instead of batches)."""
    from konfig.build.compiler import CompileSettings
    from konfig.build.limits import Limits

    defaults = Limits()
    cpu = _number(COMPILE_TIMEOUT_ENV, defaults.cpu_seconds, minimum=1)
    memory = _number(COMPILE_MEMORY_ENV, defaults.memory_mib, minimum=128)
    batch = os.environ.get(COMPILE_BATCH_ENV, "1").strip().lower() not in ("0", "false", "no")
    return CompileSettings(Limits(cpu_seconds=cpu, memory_mib=int(memory)), batch=batch)


def _number(name: str, default: float, *, minimum: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= minimum:  # also catches nan
        raise UsageError(
            f"{name}={raw!r} is not a number of at least {minimum:g}",
            hint=f"unset {name} for the default ({default:g})",
        )
    return value


def cache_state(root: Path, *, enabled: bool = True, git_required: bool = False) -> Path | None:
    """konfig's cache folder for this command; None when disabled or unusable (a
    read-only file system, a folder that leads out of the repository, a repository git
    refuses: warned, and the command runs without it). With ``git_required`` (the command
    compares commits) a repository git refuses is the command's error instead."""
    if not enabled:
        return None
    state, why = usable_cache(root, cache_dir(root))
    if why is not None:
        warn(why)
        return None
    # the cache keys are git blob ids: a repository git refuses (another user's checkout)
    # costs the cache, not the command
    from konfig.detect import gitcmd, gitrepo

    # a command that compares commits asks git itself first thing, and the same error
    # (git refusing the repository) comes from there: no process spent asking twice
    if not git_required and gitrepo.is_repo(root):
        try:
            gitrepo.check_usable(root)
        except gitcmd.GitError as exc:
            if git_required:
                raise
            warn(f"{exc}\n  running without the cache: it needs git")
            return None
    return state


TOFU_ENV = "KONFIG_TOFU"
TOFU_CLI_CONFIG_ENV = "TF_CLI_CONFIG_FILE"
TOFU_DIR_ENV = "KONFIG_TOFU_WORKDIR"
# The dependency lock file instead of the repository's .terraform.lock.hcl: a runner
# whose providers were built on it (actions/setup `tofu: build`, hack/tofu env) names
# the lock file of its own mirror.
TOFU_LOCK_ENV = "KONFIG_TOFU_LOCK_FILE"
TOFU_CLI_CONFIG_FILE = ".konfig-tofurc"  # in the working directories' folder
# Provider credentials given as one JSON object (one CI secret for all stacks; the
# workflows pass KONFIG_{PREVIEW,APPLY,DRIFT}_TERRAFORM_ENV): docs/terraform.md.
TERRAFORM_ENV = "KONFIG_TERRAFORM_ENV"


def runtime_contexts(root: Path, *, opentofu: bool) -> Contexts:
    """The runtimes this run sets up beside the Kubernetes engine: OpenTofu only when
    ``opentofu`` (a selected stack uses it: :func:`konfig.pipeline.runtime.uses_opentofu`),
    so that its part of Konfig is not even imported otherwise."""
    from konfig.pipeline.runtime import Contexts

    return Contexts(tofu=tofu_context(root) if opentofu else None)


# Where the Terraform policy comes from instead of the work tree's konfig.yaml: a
# pull request's preview takes the default branch's, so the pull request cannot grant
# itself variables or settings (a konfig.yaml file, or the commit that holds one).
TERRAFORM_POLICY_FILE_ENV = "KONFIG_TERRAFORM_POLICY_FILE"
TERRAFORM_POLICY_REF_ENV = "KONFIG_TERRAFORM_POLICY_REF"


def terraform_policy(root: Path) -> TerraformPolicy:
    """konfig.yaml's Terraform policy (docs/terraform.md): the work tree's; or, with
    ``$KONFIG_TERRAFORM_POLICY_FILE``, that konfig.yaml file's (the default branch's
    checkout); or, with ``$KONFIG_TERRAFORM_POLICY_REF``, the one konfig.yaml has in that
    commit. A pull request's preview sets one of them: what the pull request changes in
    konfig.yaml takes effect once merged, not in its own preview."""
    from konfig.repo.settings import CONFIG_FILE, load_repo_config, repo_config_from_data
    from konfig.repo.yamlio import load_yaml_text, read_text
    from konfig.tofu.policy import policy_from_data

    file = os.environ.get(TERRAFORM_POLICY_FILE_ENV, "").strip()
    ref = os.environ.get(TERRAFORM_POLICY_REF_ENV, "").strip()
    if file:
        where = f"${TERRAFORM_POLICY_FILE_ENV} ({file})"
        text = read_text(Path(file))
    elif ref:
        from konfig.detect import gitrepo

        data = gitrepo.file_at(root, ref, CONFIG_FILE)
        where = f"{CONFIG_FILE} at ${TERRAFORM_POLICY_REF_ENV} ({ref})"
        text = data.decode("utf-8", errors="replace") if data else ""
    else:
        return policy_from_data(load_repo_config(root).terraform)
    config = repo_config_from_data(load_yaml_text(text, file=where), text=text) if text else None
    return policy_from_data(config.terraform if config else {})


def _refuse_tracked(root: Path, workroot: Path) -> None:
    """OpenTofu uses what its working directories hold (the providers in
    ``.terraform/``, the lock file, any override or ``.tfvars``): refuse a run when git
    tracks a file there, as a pull request that commits one into the ignored cache
    folder would (the checkout writes it)."""
    from konfig.errors import KonfigError

    try:
        rel = workroot.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return  # outside the repository: no checkout writes there
    tracked = _tracked_under(root, rel)
    if tracked:
        raise KonfigError(
            f"refused (terraform/forbidden): git tracks {_listed(tracked, 5)} in the OpenTofu "
            f"working directories {rel}/; OpenTofu would use them (a provider "
            "binary, a lock file, an override, variable values), so nothing is run",
            hint=f"remove them from the repository (`git rm -r --cached {rel}`); Konfig "
            "writes that folder itself",
        )


def _cli_config(root: Path, workroot: Path, policy: TerraformPolicy, scope: WriteScope) -> str:
    """The runner's own CLI configuration (``$TF_CLI_CONFIG_FILE``), else the one
    konfig.yaml's ``terraform.installation`` says, written beside the working
    directories."""
    from dataclasses import replace

    from konfig.repo.files import atomic_write_text
    from konfig.tofu.installation import FILESYSTEM_MIRROR, cli_config

    given = os.environ.get(TOFU_CLI_CONFIG_ENV)
    if given:
        return given
    installation = policy.installation
    if installation.mode == FILESYSTEM_MIRROR:
        installation = replace(installation, location=str((root / installation.location).resolve()))
    path = workroot / TOFU_CLI_CONFIG_FILE
    text = cli_config(installation)
    try:
        current = path.read_text(encoding="utf-8")
    except OSError:
        current = None
    if current != text:
        workroot.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text, scope=scope)
    return str(path)


def _lock_file(root: Path, workroot: Path, scope: WriteScope) -> str:
    """The dependency lock file providers are verified against: the runner's own
    (``$KONFIG_TOFU_LOCK_FILE``: the hashes of the mirror it built); else, when the
    Terraform policy comes from elsewhere (a pull request's preview), the one beside
    that konfig.yaml or in that commit: a pull request cannot trust a provider package
    of its own choosing before it is merged; else ``.terraform.lock.hcl`` at the root."""
    from konfig.repo.files import atomic_write_text
    from konfig.tofu.installation import LOCK_FILE

    given = os.environ.get(TOFU_LOCK_ENV, "").strip()
    if given:
        return given
    policy_file = os.environ.get(TERRAFORM_POLICY_FILE_ENV, "").strip()
    if policy_file:
        return str(Path(policy_file).parent / LOCK_FILE)
    ref = os.environ.get(TERRAFORM_POLICY_REF_ENV, "").strip()
    if ref:
        from konfig.detect import gitrepo

        data = gitrepo.file_at(root, ref, LOCK_FILE)
        if data is None:
            return f"{LOCK_FILE} at ${TERRAFORM_POLICY_REF_ENV} ({ref})"
        path = workroot / ".konfig-policy.terraform.lock.hcl"
        workroot.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, data.decode("utf-8", errors="replace"), scope=scope)
        return str(path)
    return str(root / LOCK_FILE)


def tofu_context(root: Path) -> TofuContext:
    """How this run drives OpenTofu, for stacks with Terraform resources: the binary
    (``$KONFIG_TOFU``, else ``tofu`` on PATH), the CLI configuration (the runner's
    ``$TF_CLI_CONFIG_FILE``, as ``hack/tofu env`` sets it; else the one konfig.yaml's
    ``terraform.installation`` says), the dependency lock file every provider package
    is verified against (:func:`_lock_file`), the stacks' working directories
    (``$KONFIG_TOFU_WORKDIR``, else ``.cache/konfig/tofu``) and the environment the
    provider credentials come from
    (each stack's stack.yaml names the variables): the process environment, then the
    JSON object in ``$KONFIG_TERRAFORM_ENV`` for names the environment does not set.
    Only the names a stack declares are ever read from either; tofu and its provider
    never see the bundle."""
    from konfig.repo.files import WriteScope
    from konfig.tofu.context import TofuContext
    from konfig.tofu.model import credentials_bundle
    from konfig.tofu.runner import TofuSettings

    workroot = Path(os.environ.get(TOFU_DIR_ENV) or cache_dir(root) / "tofu")
    _refuse_tracked(root, workroot)
    environ = {k: v for k, v in os.environ.items() if k != TERRAFORM_ENV}
    bundle = os.environ.get(TERRAFORM_ENV, "")
    credentials = dict(environ)
    if bundle.strip():
        for name, value in credentials_bundle(bundle, f"${TERRAFORM_ENV}").items():
            credentials[name] = credentials.get(name) or value
    scope = WriteScope.named(workroot, "the OpenTofu working directories", folder=True)
    policy = terraform_policy(root)
    return TofuContext(
        settings=TofuSettings(
            binary=os.environ.get(TOFU_ENV) or "tofu",
            cli_config=_cli_config(root, workroot, policy, scope),
            environ=environ,
            lock_file=_lock_file(root, workroot, scope),
        ),
        workroot=workroot,
        environment=credentials,
        scope=scope,
        policy=policy,
        root=root,
    )
