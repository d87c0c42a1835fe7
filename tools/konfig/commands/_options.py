"""Click options more than one command shares (the declarations only; no logic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

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
