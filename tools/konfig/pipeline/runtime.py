"""The one place that picks a stack's runtime: the Kubernetes engine, or the hybrid
OpenTofu runtime for a stack OpenTofu takes part in.

A runtime previews, plans, applies, destroys and surveys one stack behind one small
interface (:class:`Runtime`); the flows (:mod:`konfig.pipeline.previewing`,
:mod:`~konfig.pipeline.applying`, :mod:`~konfig.pipeline.destroying`,
:mod:`~konfig.pipeline.status`) ask :func:`runtime_of` and never which runtime they hold.
The Kubernetes engine (:mod:`konfig.engine`) is the default; :data:`RUNTIMES` lists the
others, each as the question that claims a stack and the loader of its runtime: a
runtime's modules are imported only when a stack it claims is run (a preview or apply
of a stack without Terraform never loads OpenTofu's part of Konfig).

Adding a third runtime is one new folder (its modules and a class with
:class:`Runtime`'s methods) and one line in :data:`RUNTIMES`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from konfig.repo.layout import Stack
from konfig.spec import Spec
from konfig.tofu.model import has_terraform

if TYPE_CHECKING:  # the seam itself stays light: `konfig list --terraform` asks it
    from konfig.engine.inventory import Inventory
    from konfig.engine.kube import Kube, KubeTarget
    from konfig.engine.plan import StackPlan
    from konfig.engine.stackrun import ApplyOptions, EventSink, StackResult
    from konfig.engine.survey import ObjectStatus
    from konfig.secrets.refs import SecretData
    from konfig.tofu.context import TofuContext  # the OpenTofu runtime: only when used

# How status and drift read what a runtime keeps beside the Kubernetes objects:
# ``refresh`` (asking the providers), ``state`` (the runtime's records only) or ``skip``.
SurveyMode = Literal["refresh", "state", "skip"]


class SavedPlan(Protocol):
    """A plan a runtime keeps between the plan apply shows and its apply under the lock
    (OpenTofu's plan file); removed when it is not applied."""

    @property
    def plan(self) -> StackPlan: ...

    def discard(self) -> None: ...


# The plan apply shows for a stack (checked as apply will check it), and what the runtime
# keeps of it to apply it as it is (None: nothing kept).
ApplyPlan: TypeAlias = "tuple[StackPlan, SavedPlan | None]"


class Runtime(Protocol):
    """What a runtime does for one stack; apply and destroy run under the stack's lock
    (the caller holds it)."""

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
        """The plan, nothing written, nothing locked."""
        ...

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
    ) -> ApplyPlan:
        """The plan apply shows, checked as apply will check it (raises
        :class:`~konfig.engine.applier.ApplyError` for what apply refuses); ``keep``:
        keep what can be applied as it is (the caller discards it when not applied)."""
        ...

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
        saved: SavedPlan | None,
    ) -> StackResult:
        """Plan again, compare with ``shown`` (the plan shown, as a saved preview's stack
        entry: :func:`shown_entry`; nothing is applied when they differ), apply."""
        ...

    def plan_destroy(
        self, kube: Kube, stack: Stack, prior: Inventory | None, target: KubeTarget
    ) -> StackPlan:
        """The destroy plan (raises when the runtime refuses to destroy something)."""
        ...

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
        """Destroy everything the stack owns in this runtime."""
        ...

    def survey(
        self, kube: Kube, stack: Stack, target: KubeTarget, mode: SurveyMode
    ) -> tuple[ObjectStatus, ...]:
        """What the stack owns beyond the Kubernetes objects its cluster's survey reads
        (``konfig status`` and ``konfig drift``), as ``mode`` says."""
        ...

    def kept(self, kube: Kube, stack: Stack) -> str | None:
        """For a stack whose directory is gone: what this runtime keeps of it that
        destroying it will not remove (said to the reader), or None."""
        ...

    def check_credentials(
        self,
        stacks: Sequence[Stack],
        specs: Mapping[str, Spec],
        kube_of: Callable[[Stack], Kube] | None,
        *,
        verb: str,
    ) -> None:
        """Before anything is written: raise when ``stacks`` lack what this runtime needs
        from the environment (``kube_of``: also what their records in the cluster use)."""
        ...

    def reuse_inputs(self, kube: Kube, stack: Stack, spec: Spec, target: KubeTarget) -> str:
        """What this runtime's preview of ``stack`` is computed from beyond what every
        stack's reuse key covers (its Spec and files, the Kubernetes objects' live
        fingerprint: :mod:`konfig.pipeline.reusing`), as one digest; "" when nothing.
        Read before the plan, cheaply (no plan, nothing written)."""
        ...


class KubernetesRuntime:
    """The Kubernetes engine (:mod:`konfig.engine`): every stack's runtime by default."""

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
        from konfig.engine.planner import plan_stack

        return plan_stack(kube, stack, spec, prior, workers=workers, secret_data=secret_data)

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
    ) -> ApplyPlan:
        from konfig.engine.applier import check_plan  # networkx: only when applying
        from konfig.engine.planner import plan_stack

        plan = plan_stack(kube, stack, spec, prior, secret_data=secret_data)
        check_plan(plan, spec, options, kube)
        return plan, None

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
        saved: SavedPlan | None,
    ) -> StackResult:
        from konfig.engine.applier import apply_stack  # networkx: only when applying
        from konfig.engine.plan import plan_differences
        from konfig.engine.planner import plan_stack
        from konfig.engine.stackrun import StackResult

        path = stack.path
        plan = plan_stack(kube, stack, spec, prior, secret_data=secret_data)
        problems = [] if shown is None else plan_differences(shown, plan)
        if show_plan is not None:
            show_plan(plan)
        if problems:
            return StackResult(
                path,
                False,
                (),
                f"{path}: the cluster changed since the plan was shown; nothing was applied "
                "to this stack:\n  " + "\n  ".join(problems),
            )
        return apply_stack(kube, plan, spec, prior, options, emit, lost=lost, stop=stop)

    def plan_destroy(
        self, kube: Kube, stack: Stack, prior: Inventory | None, target: KubeTarget
    ) -> StackPlan:
        from konfig.engine.planner import plan_stack

        return plan_stack(kube, stack, None, prior, deleted=True, details=False)

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
        from konfig.engine.destroyer import destroy_stack
        from konfig.engine.planner import plan_stack

        plan = plan_stack(kube, stack, None, prior, deleted=True, details=False)
        return destroy_stack(kube, plan, prior, options, emit, lost=lost, stop=stop)

    def survey(
        self, kube: Kube, stack: Stack, target: KubeTarget, mode: SurveyMode
    ) -> tuple[ObjectStatus, ...]:
        return ()  # its objects are in the survey of its cluster

    def kept(self, kube: Kube, stack: Stack) -> str | None:
        return None  # destroying the stack removes everything its inventory owns

    def check_credentials(
        self,
        stacks: Sequence[Stack],
        specs: Mapping[str, Spec],
        kube_of: Callable[[Stack], Kube] | None,
        *,
        verb: str,
    ) -> None:
        return None  # the kubeconfig's credentials: each connection checks its own

    def reuse_inputs(self, kube: Kube, stack: Stack, spec: Spec, target: KubeTarget) -> str:
        return ""  # the live fingerprint covers everything its plan reads


KUBERNETES = KubernetesRuntime()


@dataclass(frozen=True)
class Contexts:
    """What this run's runtimes other than Kubernetes need (the CLI builds each only when
    a selected stack uses its runtime: :func:`uses`)."""

    tofu: TofuContext | None = None


NOTHING_SET_UP = Contexts()  # only the Kubernetes engine can run (the default)


def _opentofu(contexts: Contexts) -> Runtime:
    from konfig.tofu.hybrid_runtime import HybridRuntime  # OpenTofu: only when used

    return HybridRuntime(contexts.tofu)


Claims = Callable[[Stack, Spec | None], bool]
Load = Callable[[Contexts], Runtime]

# The runtimes beside the Kubernetes engine: (whether it takes part in a stack, given
# its Spec when compiled; how to load it). The first that claims a stack runs it.
RUNTIMES: tuple[tuple[str, Claims, Load], ...] = (("opentofu", has_terraform, _opentofu),)


def runtime_of(stack: Stack, spec: Spec | None, contexts: Contexts) -> Runtime:
    """The runtime that runs ``stack`` (``spec``: its Spec, None when not compiled or
    gone): the first of :data:`RUNTIMES` that claims it, else the Kubernetes engine."""
    for _name, claims, load in RUNTIMES:
        if claims(stack, spec):
            return load(contexts)
    return KUBERNETES


def uses(name: str, stack: Stack, spec: Spec | None = None) -> bool:
    """Whether the runtime ``name`` of :data:`RUNTIMES` takes part in ``stack`` (for a
    command deciding whether to set that runtime up, and ``konfig list --terraform``)."""
    return any(claims(stack, spec) for n, claims, _ in RUNTIMES if n == name)


def uses_opentofu(stack: Stack, spec: Spec | None = None) -> bool:
    """Whether OpenTofu takes part in ``stack``: its Spec has Terraform resources, or its
    stack.yaml a ``terraform`` section (its state may still hold removed resources)."""
    return uses("opentofu", stack, spec)


def kept_of_gone(kube: Kube, stack: Stack, contexts: Contexts) -> list[str]:
    """For a stack whose directory is gone (so no runtime can be told from it): what
    each runtime beside the Kubernetes engine still keeps of it."""
    found = (load(contexts).kept(kube, stack) for _name, _claims, load in RUNTIMES)
    return [k for k in found if k is not None]


def check_credentials(
    stacks: Sequence[Stack],
    specs: Mapping[str, Spec],
    contexts: Contexts,
    kube_of: Callable[[Stack], Kube] | None = None,
    *,
    verb: str = "apply",
) -> None:
    """Before anything is written: each runtime checks what its stacks need from the
    environment (``kube_of``: also what their records in the cluster use); raises."""
    groups: dict[int, tuple[Runtime, list[Stack]]] = {}
    for stack in stacks:
        runtime = runtime_of(stack, specs.get(stack.path), contexts)
        groups.setdefault(id(type(runtime)), (runtime, []))[1].append(stack)
    for runtime, chosen in groups.values():
        runtime.check_credentials(chosen, specs, kube_of, verb=verb)


def shown_entry(plan: StackPlan) -> dict[str, Any]:
    """A plan as a saved preview's stack entry (to compare it with the recomputed one)."""
    return {
        "status": "ok",
        "specDigest": plan.spec_digest,
        "changes": [c.to_dict() for c in plan.changes],
    }
