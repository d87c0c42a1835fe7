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
    """``--kubeconfig`` and ``--context`` of apply, destroy and pending."""
    fn = click.option("--context", default=None, help="Kubeconfig context for every stack.")(fn)
    return click.option(
        "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig."
    )(fn)
