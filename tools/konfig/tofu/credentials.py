"""Which provider credentials a run needs and lacks, checked before anything is written.

A stack's provider configurations (stack.yaml ``terraform.providers``) take their
credentials from environment variables (or ``$KONFIG_TERRAFORM_ENV``, the CI secret
that holds them together). A run needs the credentials of every configuration that
OpenTofu will start a provider for:

- the configurations the Spec's Terraform resources use (apply creates or updates them);
- the configurations the resources only the state records use (a resource removed from
  the stack, which apply prunes, or every resource, which destroy destroys): such a
  configuration may be in no resource of the Spec any more.

:func:`missing` lists what ``environment`` lacks, per stack, names only (never a value);
:func:`credentials_error` is the one message for all of them, naming the stack, the
provider configuration, its argument and the variable to set. Pure: the caller reads
the Spec, the state and the environment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from konfig.errors import KonfigError
from konfig.tofu.model import StackTerraform


@dataclass(frozen=True, order=True)
class MissingCredential:
    """One variable a provider configuration needs and the environment does not set;
    ``variable`` empty: the configuration itself is not in stack.yaml."""

    config: str
    argument: str
    variable: str
    state_only: tuple[str, ...] = ()  # the state's resources that alone need it (ids)

    def describe(self) -> str:
        """``T_PGHOST (provider postgresql, argument host)``, and why when only the
        state's resources need it."""
        if self.variable:
            text = f"{self.variable} (provider {self.config}, argument {self.argument}"
        else:
            text = (
                f"provider configuration {self.config} (stack.yaml `terraform.providers` "
                "no longer defines it"
            )
        if self.state_only:
            shown = ", ".join(self.state_only[:3])
            more = f" and {len(self.state_only) - 3} more" if len(self.state_only) > 3 else ""
            text += f"; to delete what only the Terraform state records: {shown}{more}"
        return text + ")"


def missing(
    terraform: StackTerraform,
    spec_configs: Iterable[str],
    state_configs: Mapping[str, Sequence[str]],
    environment: Mapping[str, str],
) -> tuple[MissingCredential, ...]:
    """What ``environment`` lacks for the provider configurations the Spec uses
    (``spec_configs``) and those the state's resources use (``state_configs``: config
    name -> the ids of the state's resources that use it), sorted. A configuration only
    the state uses is marked with those resources (:attr:`MissingCredential.state_only`)."""
    in_spec = set(spec_configs)
    out: list[MissingCredential] = []
    for name in sorted(in_spec | set(state_configs)):
        only = () if name in in_spec else tuple(sorted(state_configs.get(name, ())))
        config = terraform.providers.get(name)
        if config is None:
            if only:  # a Spec's unknown configuration is compile's and check's error
                out.append(MissingCredential(name, "", "", only))
            continue
        out.extend(
            MissingCredential(name, argument, variable, only)
            for argument, variable in sorted(config.environment.items())
            if not environment.get(variable)
        )
    return tuple(out)


def credentials_error(
    problems: Mapping[str, Sequence[MissingCredential]], *, verb: str
) -> KonfigError:
    """The refusal of a run (``verb``: apply, destroy) that lacks provider credentials:
    every stack (``problems``: stack path -> what it lacks) and variable named, never a
    value; nothing was changed."""
    listed = "; ".join(
        f"{path}: {', '.join(m.describe() for m in found)}"
        for path, found in sorted(problems.items())
        if found
    )
    return KonfigError(
        "the provider credentials come from the environment and these variables are "
        f"not set: {listed}; nothing was changed",
        hint=f"set them in the {verb} environment (the workflow's secrets, or the JSON "
        "object in $KONFIG_TERRAFORM_ENV); stack.yaml "
        "`terraform.providers.<config>.environment` names them",
    )
