"""Before anything is written: the providers' credentials a stack needs.

Apply and destroy refuse when a provider configuration the stack's Terraform resources
(or only its state's) use takes a credential from an environment variable that is not
set; each variable is named, never a value. A preview degrades instead
(:func:`missing_credentials` names what it lacks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from konfig.engine.kube import Kube
from konfig.errors import KonfigError
from konfig.repo.layout import Stack
from konfig.spec import Spec
from konfig.tofu import credentials
from konfig.tofu.config import state_providers
from konfig.tofu.model import StackTerraform, terraform_resources
from konfig.tofu.policy import stack_settings
from konfig.tofu.records import read_state, state_backend
from konfig.tofu.state import state_configs

if TYPE_CHECKING:
    from konfig.tofu.context import TofuContext


def missing_credentials(
    terraform: StackTerraform,
    spec: Spec | None,
    state: Mapping[str, Any] | None,
    environment: Mapping[str, str],
) -> tuple[str, ...]:
    """The credential variables the stack's provider configurations (those its resources
    and its state use) take from the environment and ``environment`` does not set."""
    configs = {r.provider.config for r in terraform_resources(spec)} if spec else set()
    configs |= {p.config for p in state_providers(state)}
    return terraform.missing_credentials(configs, environment)


def read_states(
    stacks: Sequence[Stack], kube_of: Callable[[Stack], Kube]
) -> dict[str, dict[str, Any] | None]:
    """Each stack's Terraform state (read-only: two GETs a stack, a few stacks at once),
    for :func:`require_credentials` to see the providers only the state still uses. A
    stack whose state cannot be read (its cluster does not answer) is left out: its own
    run reports that, and the other stacks go on as they would have."""

    def one(stack: Stack) -> dict[str, Any] | KonfigError | None:
        try:
            kube = kube_of(stack)
            return read_state(kube, state_backend(kube, stack.path), where=stack.path)
        except KonfigError as exc:
            return exc

    if len(stacks) <= 1:
        states = [one(s) for s in stacks]
    else:
        with ThreadPoolExecutor(max_workers=min(8, len(stacks))) as pool:
            states = list(pool.map(one, stacks))
    found = zip([s.path for s in stacks], states, strict=True)
    return {path: state for path, state in found if not isinstance(state, KonfigError)}


def require_credentials(
    stacks: Sequence[Stack],
    specs: Mapping[str, Spec],
    tofu: TofuContext,
    *,
    states: Mapping[str, Mapping[str, Any] | None] | None = None,
    verb: str = "apply",
) -> None:
    """Refuse before anything is written when a stack's provider configurations break
    the platform's policy (konfig.yaml: :mod:`konfig.tofu.policy`, with the line) or it
    lacks provider credentials in ``tofu.environment`` (each variable named, never a
    value): those of the provider
    configurations its Spec's Terraform resources use and, given its state (``states``,
    :func:`read_states`), those only the state's resources use (apply prunes them,
    destroy destroys them). Apply and destroy never degrade as a preview does."""
    problems: dict[str, tuple[credentials.MissingCredential, ...]] = {}
    for stack in stacks:
        spec = specs.get(stack.path)
        used = {r.provider.config for r in terraform_resources(spec)} if spec else set()
        in_state = state_configs((states or {}).get(stack.path))
        if not used and not in_state:
            continue
        terraform = stack_settings(stack, tofu.policy, tofu.root)
        found = credentials.missing(terraform, used, in_state, tofu.environment)
        if found:
            problems[stack.path] = found
    if problems:
        raise credentials.credentials_error(problems, verb=verb)
