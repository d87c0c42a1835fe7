"""The hybrid runtime (OpenTofu, then the Kubernetes engine) behind the runtime seam.

:mod:`konfig.pipeline.runtime` picks it for a stack OpenTofu takes part in (its Spec has
Terraform resources, or its stack.yaml a ``terraform`` section) and loads this module
only then. Each method is one step of a flow, done by :mod:`~konfig.tofu.hybrid`
(plans, the preview), :mod:`~konfig.tofu.hybrid_apply` (apply, destroy),
:mod:`~konfig.tofu.observe` (status, drift) and :mod:`~konfig.tofu.preflight` (the
providers' credentials).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from konfig.engine.inventory import Inventory
from konfig.engine.kube import Kube, KubeTarget
from konfig.engine.plan import StackPlan
from konfig.engine.stackrun import ApplyOptions, EventSink, StackResult
from konfig.engine.survey import ObjectStatus
from konfig.errors import KonfigError
from konfig.repo.layout import Stack
from konfig.secrets.refs import SecretData
from konfig.spec import Spec
from konfig.tofu.context import TofuContext
from konfig.tofu.hybrid import (
    HybridPlan,
    discard,
    kept_terraform,
    plan_destroy_hybrid,
    plan_hybrid,
    preview_hybrid,
)
from konfig.tofu.hybrid_apply import apply_hybrid, destroy_hybrid
from konfig.tofu.observe import state_objects, terraform_objects
from konfig.tofu.preflight import read_states, require_credentials
from konfig.tofu.reuse import plan_inputs


class HybridRuntime:
    """A stack's Terraform resources through OpenTofu and its Kubernetes objects through
    the engine, as one plan (``tofu``: how this run drives OpenTofu; None when the
    command did not set it up, which only reading the state does without)."""

    def __init__(self, tofu: TofuContext | None) -> None:
        self.tofu = tofu

    def _context(self, stack: Stack) -> TofuContext:
        if self.tofu is None:
            raise KonfigError(f"{stack.path}: has Terraform resources and OpenTofu is not set up")
        return self.tofu

    def preview(
        self,
        kube: Kube,
        stack: Stack,
        spec: Spec,
        prior: Inventory | None,
        target: KubeTarget,
        *,
        workers: int,
        secret_data: SecretData | None,
    ) -> StackPlan:
        tofu = self._context(stack)
        return preview_hybrid(
            kube, stack, spec, prior, tofu, target, workers=workers, secret_data=secret_data
        )

    def plan(
        self,
        kube: Kube,
        stack: Stack,
        spec: Spec,
        prior: Inventory | None,
        target: KubeTarget,
        options: ApplyOptions,
        *,
        secret_data: SecretData | None,
        keep: bool,
    ) -> tuple[StackPlan, HybridPlan | None]:
        """Both runtimes planned without the locks; the Kubernetes part checked as the
        engine checks it, and the Terraform destroys the stack does not allow refused.
        ``keep``: the OpenTofu plan file is kept (applied as it is when nothing changed)."""
        from konfig.engine.applier import ApplyError, check_plan  # networkx: when applying

        tofu = self._context(stack)
        hybrid = plan_hybrid(
            kube, stack, spec, prior, tofu, target, lock=False, secret_data=secret_data
        )
        try:
            kube_only = replace(
                hybrid.plan,
                changes=tuple(c for c in hybrid.plan.changes if c.runtime != "Terraform"),
            )
            check_plan(kube_only, hybrid.kube_spec, options, kube)
            refused = hybrid.plan.refusals()
            if refused:
                raise ApplyError(
                    f"{stack.path}: nothing was applied: " + "; ".join(c.refused for c in refused)
                )
        except BaseException:
            discard(hybrid)
            raise
        if not keep:
            discard(hybrid)
            return hybrid.plan, None
        return hybrid.plan, hybrid

    def apply(
        self,
        kube: Kube,
        stack: Stack,
        spec: Spec,
        prior: Inventory | None,
        target: KubeTarget,
        options: ApplyOptions,
        emit: EventSink,
        *,
        shown: Mapping[str, Any] | None,
        secret_data: SecretData | None,
        lost: threading.Event | None,
        show_plan: Callable[[StackPlan], None] | None,
        stop: threading.Event | None,
        saved: object | None,
    ) -> StackResult:
        assert saved is None or isinstance(saved, HybridPlan)
        return apply_hybrid(
            kube,
            stack,
            spec,
            prior,
            self._context(stack),
            target,
            options,
            emit,
            shown_entry=shown,
            secret_data=secret_data,
            lost=lost,
            show_plan=show_plan,
            stop=stop,
            saved=saved,
        )

    def plan_destroy(
        self, kube: Kube, stack: Stack, prior: Inventory | None, target: KubeTarget
    ) -> StackPlan:
        """Every object and every resource the state records deleted; raises when the
        stack does not allow destroying one of its Terraform resources."""
        hybrid = plan_destroy_hybrid(kube, stack, prior, self._context(stack), target, lock=False)
        discard(hybrid)
        refused = hybrid.plan.refusals()
        if refused:
            raise KonfigError(
                f"{stack.path}: nothing was destroyed: " + "; ".join(c.refused for c in refused)
            )
        return hybrid.plan

    def destroy(
        self,
        kube: Kube,
        stack: Stack,
        prior: Inventory | None,
        target: KubeTarget,
        options: ApplyOptions,
        emit: EventSink,
        *,
        lost: threading.Event | None,
        stop: threading.Event | None,
    ) -> StackResult:
        tofu = self._context(stack)
        return destroy_hybrid(kube, stack, prior, tofu, target, options, emit, lost=lost, stop=stop)

    def survey(
        self,
        kube: Kube,
        stack: Stack,
        target: KubeTarget,
        mode: Literal["refresh", "state", "skip"],
    ) -> tuple[ObjectStatus, ...]:
        """The resources the state records: refreshed by OpenTofu (``refresh``), or as
        the state records them (``state``: no OpenTofu, no credentials)."""
        if mode == "skip":
            return ()
        if mode == "state":
            return state_objects(kube, stack)
        return terraform_objects(kube, stack, self._context(stack), target)

    def kept(self, kube: Kube, stack: Stack) -> str | None:
        """For a stack whose directory is gone: what its OpenTofu state still records."""
        return kept_terraform(kube, stack)

    def check_credentials(
        self,
        stacks: Sequence[Stack],
        specs: Mapping[str, Spec],
        kube_of: Callable[[Stack], Kube] | None,
        *,
        verb: str,
    ) -> None:
        """The stacks' provider configurations keep to konfig.yaml's policy, and the
        providers' credentials the stacks' Specs (and, read through ``kube_of``, their
        states) use are all set: else one error naming every violation or variable."""
        if not stacks:
            return
        tofu = self._context(stacks[0])
        states = read_states(stacks, kube_of) if kube_of is not None else None
        require_credentials(stacks, specs, tofu, states=states, verb=verb)

    def reuse_inputs(self, kube: Kube, stack: Stack, spec: Spec, target: KubeTarget) -> str:
        """The configuration Konfig renders, the providers' installation and lock, the
        state's lineage and serial, the providers' environment
        (:func:`konfig.tofu.reuse.plan_inputs`)."""
        return plan_inputs(kube, stack, spec, self._context(stack), target)
