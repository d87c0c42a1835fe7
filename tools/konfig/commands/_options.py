"""Click options more than one command shares (the declarations only; no logic)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from konfig.errors import UsageError

_F = TypeVar("_F", bound=Callable[..., object])


def selection_options(verb: str) -> Callable[[_F], _F]:
    """The stack-selection arguments `konfig test` and `konfig check` share."""

    def decorate(fn: _F) -> _F:
        fn = click.option(
            "--changed-from",
            metavar="REF",
            default=None,
            help="Only the stacks affected by the changes from the merge base of REF to the "
            "work tree (see `konfig changed`); the pre-commit hooks pass HEAD.",
        )(fn)
        fn = click.option(
            "--files",
            "from_files",
            is_flag=True,
            help=f"Treat the arguments as changed file paths and {verb} the stacks they "
            "affect (what the pre-commit hook passes).",
        )(fn)
        fn = click.option(
            "--all",
            "all_stacks",
            is_flag=True,
            help=f"{verb.capitalize()} every stack (the default).",
        )(fn)
        return click.argument("stacks", nargs=-1)(fn)

    return decorate


def kube_options(fn: _F) -> _F:
    """``--kubeconfig`` and ``--context`` of apply, destroy and pending, and the timeouts."""
    fn = timeout_options(fn)
    fn = click.option("--context", default=None, help="Kubeconfig context for every stack.")(fn)
    return click.option(
        "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig."
    )(fn)


# Where timeout_options keeps its values for commands/_common.timeouts_of.
TIMEOUTS_KEY = "konfig.timeouts"


def _keep(ctx: click.Context, param: click.Parameter, value: float) -> float:
    ctx.meta.setdefault(TIMEOUTS_KEY, {})[param.name] = value
    return value


def timeout_options(fn: _F) -> _F:
    """``--request-timeout`` and ``--credential-timeout`` (or their environment variables)
    of every command that talks to a cluster; read them with ``_common.timeouts_of``."""
    fn = click.option(
        "--credential-timeout",
        envvar="KONFIG_CREDENTIAL_TIMEOUT",
        show_envvar=True,
        type=click.FloatRange(min=0, min_open=True),
        default=30.0,  # engine/credentials.py DEFAULT_TIMEOUT
        show_default=True,
        expose_value=False,
        callback=_keep,
        help="Seconds the kubeconfig user's exec credential plugin may take.",
    )(fn)
    return click.option(
        "--request-timeout",
        envvar="KONFIG_REQUEST_TIMEOUT",
        show_envvar=True,
        type=click.FloatRange(min=0, min_open=True),
        default=60.0,  # engine/kube/client.py DEFAULT_REQUEST_TIMEOUT, the API server's own limit
        show_default=True,
        expose_value=False,
        callback=_keep,
        help="Seconds one Kubernetes API request may take before konfig gives up on the "
        "server and says which one did not answer.",
    )(fn)


def pace_options(
    *, timeout: str, concurrency: str, stack_concurrency: str, no_wait: str
) -> Callable[[_F], _F]:
    """``--timeout``, ``--concurrency``, ``--stack-concurrency`` and ``--no-wait`` of
    apply and destroy (each command words their help for what it does)."""
    from konfig.commands._results import DEFAULT_TIMEOUT

    def decorate(fn: _F) -> _F:
        fn = click.option("--no-wait", is_flag=True, help=no_wait)(fn)
        fn = click.option(
            "--stack-concurrency",
            type=click.IntRange(min=1, max=64),
            default=4,
            show_default=True,
            help=stack_concurrency,
        )(fn)
        fn = click.option(
            "--concurrency",
            type=click.IntRange(min=1, max=64),
            default=5,
            show_default=True,
            help=concurrency,
        )(fn)
        return click.option(
            "--timeout",
            type=click.FloatRange(min=1),
            default=DEFAULT_TIMEOUT,
            show_default=True,
            help=timeout,
        )(fn)

    return decorate


def lock_options(*, lock_timeout: str) -> Callable[[_F], _F]:
    """``--lock-timeout`` and ``--lease-duration`` of apply and destroy (the stack's Lease)."""
    from konfig.commands._results import DEFAULT_LOCK_TIMEOUT
    from konfig.engine.lock import DEFAULT_DURATION

    def decorate(fn: _F) -> _F:
        fn = click.option(
            "--lease-duration",
            type=click.IntRange(min=2),
            default=DEFAULT_DURATION,
            show_default=True,
            help="Seconds after which a lock whose holder stopped renewing it is stale.",
        )(fn)
        return click.option(
            "--lock-timeout",
            type=click.FloatRange(min=0),
            default=DEFAULT_LOCK_TIMEOUT,
            show_default=True,
            help=lock_timeout,
        )(fn)

    return decorate


def terraform_option(fn: _F) -> _F:
    """``--terraform`` (how status and drift read the stacks' Terraform resources) and
    ``--terraform-concurrency``."""
    from konfig.pipeline.status import DEFAULT_REFRESHES, TERRAFORM_MODES

    fn = click.option(
        "--terraform-concurrency",
        type=click.IntRange(min=1, max=32),
        default=DEFAULT_REFRESHES,
        show_default=True,
        help="Stacks refreshed by OpenTofu at once (each a tofu process and a provider; "
        "read-only, no state lock).",
    )(fn)
    return click.option(
        "--terraform",
        "terraform_mode",
        type=click.Choice(TERRAFORM_MODES),
        default="refresh",
        show_default=True,
        help="How to read the Terraform resources of stacks with a `terraform` section: "
        "refresh (their state, and `tofu plan -refresh-only` for drift: needs the "
        "provider credentials, one OpenTofu run per stack), state (the state only: no "
        "OpenTofu, no credentials, drift not checked), skip (not read at all: their "
        "drift is unknown).",
    )(fn)


def forge_options(*, token_help: str) -> Callable[[_F], _F]:
    """``--api-url`` and ``--token-env``: where the forge's API is and which environment
    variable holds its token (the commands that talk to the forge: comment, issue, pr)."""

    from konfig.forge.client import DEFAULT_API_URL

    def apply(fn: _F) -> _F:
        fn = click.option(
            "--token-env", default="GITHUB_TOKEN", show_default=True, help=token_help
        )(fn)
        return click.option(
            "--api-url",
            default=DEFAULT_API_URL,
            show_default=True,
            help="API base URL (GitHub Enterprise: https://HOST/api/v3, "
            "Gitea: https://HOST/api/v1).",
        )(fn)

    return apply


def confirmations(given: tuple[str, ...], option: str = "--confirm") -> dict[str, str]:
    """``--confirm STACK=DIGEST`` values (or ``option``'s): stack path (``appops/``
    optional) -> digest."""
    out: dict[str, str] = {}
    for item in given:
        path, sep, digest = item.partition("=")
        path = path.strip().strip("/")
        if not sep or not path or not digest.strip():
            raise UsageError(
                f"{option} {item!r} is not STACK=DIGEST",
                hint=f"copy it from the report: `konfig apply {option} appops/shop/prod=<digest>`",
            )
        if not path.startswith("appops/"):
            path = f"appops/{path}"
        out[path] = digest.strip()
    return out


def confirmation_sets(given: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """``--confirm STACK=DIGEST`` values, repeatable per stack: stack path -> the digests
    given for it (one of them must be the change's: a pull request's confirmations of
    each of its pushes are passed together, ``konfig dangers --merged``)."""
    out: dict[str, frozenset[str]] = {}
    for item in given:
        path, digest = next(iter(confirmations((item,)).items()))
        out[path] = out.get(path, frozenset()) | {digest}
    return out


def stack_list(name: str, text: str) -> list[str]:
    """A JSON array of stack paths given to option ``name``, or ``@FILE`` holding one:
    thousands of stack paths are more than one argument may hold (128 KiB on Linux)."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{name} {text}: cannot read it: {exc.strerror}") from None
    try:
        value = json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name}: not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{name}: expected a JSON array of stack paths, got {text[:80]!r}")
    return value


def stacks_file_option(fn: _F) -> _F:
    """``--stacks-file FILE`` of apply and destroy: the stacks as a file, not arguments."""
    return click.option(
        "--stacks-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="A JSON array of stack paths (the changed-stacks action's `stacks-file`), "
        "added to the STACKs: for more stacks than an argument list holds.",
    )(fn)


def confirm_file_option(fn: _F) -> _F:
    """``--confirm-file FILE``: ``--confirm`` values as lines of a file."""
    return click.option(
        "--confirm-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="A file of STACK=DIGEST lines (`konfig dangers --confirm-out`), each as a "
        "--confirm; blank lines are skipped.",
    )(fn)


def stacks_given(stacks: tuple[str, ...], stacks_file: Path | None) -> tuple[str, ...]:
    """The STACK arguments and the paths of ``--stacks-file``, in that order, once each."""
    if stacks_file is None:
        return stacks
    listed = stack_list("--stacks-file", f"@{stacks_file}")
    return tuple(dict.fromkeys((*stacks, *listed)))


def confirms_given(confirms: tuple[str, ...], confirm_file: Path | None) -> tuple[str, ...]:
    """The ``--confirm`` values and the lines of ``--confirm-file``."""
    if confirm_file is None:
        return confirms
    try:
        lines = confirm_file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"--confirm-file {confirm_file}: cannot read it: {exc.strerror}") from None
    return (*confirms, *(line.strip() for line in lines if line.strip()))


def policy_from_option(verb: str) -> Callable[[_F], _F]:
    """``--policy-from REF``: konfig.yaml ``dangers`` at a commit (the one before the
    merge) holds too, the stricter of both: a merged change cannot relax its own policy."""
    return click.option(
        "--policy-from",
        "policy_from",
        metavar="REF",
        default=None,
        help=f"Also hold the {verb} to konfig.yaml `dangers` as it is at REF (in CI the "
        "commit before the push): the stricter of both policies, so a merged pull "
        "request cannot relax its own (docs/danger.md).",
    )
