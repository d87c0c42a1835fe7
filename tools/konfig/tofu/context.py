"""How this run drives OpenTofu, and one stack's OpenTofu settings from it.

The CLI builds the :class:`TofuContext` (flags, the environment, the cache folder);
:func:`stack_tofu` turns it into the :class:`~konfig.tofu.plan_apply.StackTofu` of one
stack: its ``terraform`` settings, its working directory and its state backend in the
stack's cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from konfig.engine.kube import KubeTarget
from konfig.repo.files import WriteScope
from konfig.repo.layout import Stack
from konfig.tofu.config import Backend
from konfig.tofu.plan_apply import StackTofu
from konfig.tofu.policy import TerraformPolicy, stack_settings
from konfig.tofu.records import state_suffix
from konfig.tofu.runner import Cluster, TofuSettings


@dataclass(frozen=True)
class TofuContext:
    """How this run drives OpenTofu (the CLI builds it from flags and the environment)."""

    settings: TofuSettings
    workroot: Path  # one working directory per stack below it (a cache folder)
    environment: Mapping[str, str] = field(default_factory=dict, repr=False)
    scope: WriteScope | None = None
    # konfig.yaml's Terraform policy (what a stack may say of its providers) and the
    # repository it is read from (stack.yaml's lines in a refusal)
    policy: TerraformPolicy = field(default_factory=TerraformPolicy)
    root: Path | None = None


def stack_tofu(
    tctx: TofuContext, stack: Stack, target: KubeTarget, backend: Backend | None = None
) -> StackTofu:
    """The Terraform settings of one stack: stack.yaml's ``terraform`` held to the
    platform's policy (:mod:`konfig.tofu.policy`; a ConfigError with the line when it
    is not), its working directory, its state backend in the stack's cluster
    (``backend``: where :func:`~konfig.tofu.records.state_backend` found it; else the
    stack's name)."""
    suffix = state_suffix(stack.path)
    kubeconfig = target.kubeconfig or str(Path("~/.kube/config").expanduser())
    return StackTofu(
        stack_path=stack.path,
        workdir=tctx.workroot / suffix,
        backend=backend or Backend(suffix=suffix),
        settings=tctx.settings,
        cluster=Cluster(kubeconfig=kubeconfig, context=target.context),
        terraform=stack_settings(stack, tctx.policy, tctx.root),
        environment=tctx.environment,
        scope=tctx.scope,
    )
