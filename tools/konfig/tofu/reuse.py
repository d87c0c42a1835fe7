"""What a stack's OpenTofu plan is computed from, for the reuse key of its preview.

A preview of a stack with Terraform resources may take the previous push's result
(:mod:`konfig.pipeline.reusing`) only when its OpenTofu part would plan the same, too.
Beside what the key covers for every stack (the Spec, its encrypted files, konfig,
konfig.yaml and stack.yaml, the cluster, the Kubernetes objects' live fingerprint),
:func:`plan_inputs` gives, as one sha256:

- the **configuration** Konfig renders for the stack (``main.tf.json``,
  :func:`konfig.tofu.config.configuration`: its resources, provider settings held to
  the platform's policy, which may come from the default branch, the backend, the
  providers the state still uses, the imports of an interrupted apply). The versions of
  write-only values are left out: they follow the live Secrets and the encrypted files,
  which the key covers already (a generated password not applied yet is new on every
  run, and masked in every plan);
- the **installation**: what ``tofu init`` installs and verifies providers with
  (:meth:`konfig.tofu.runner.Workdir.install_stamp`: the lock file's entries for the
  stack's providers, the CLI configuration naming the registry or mirror, the binary,
  the cluster of the backend); a lock file that refuses is recorded by its message;
- the **state's fingerprint**: OpenTofu's lineage and serial, read as the change digest
  reads them (:func:`konfig.tofu.records.read_state`,
  :func:`~konfig.tofu.records.state_serial`: two GETs, no OpenTofu run) and the intent
  record of an interrupted apply. Every apply that changes something bumps the serial;
- the **environment** the providers take arguments from: which credential variables are
  missing (a preview without them does not plan the resources), and the values of
  arguments that are no credential (a host, a port: a reference may copy them into a
  Kubernetes object). A credential's value is never part of it.

What it does not see: a change made outside OpenTofu to a resource (a role altered by
hand) leaves the serial as it was; such a stack's re-used result does not show that
drift until its state moves (``konfig apply`` always plans again, and ``konfig drift``
refreshes). Plain data out; nothing is written, no process is started.
"""

from __future__ import annotations

import hashlib
import json

from konfig.engine.kube import Kube, KubeTarget
from konfig.errors import KonfigError
from konfig.repo.layout import Stack
from konfig.spec import Spec
from konfig.tofu.config import configuration, state_providers
from konfig.tofu.context import TofuContext, stack_tofu
from konfig.tofu.hybrid import preview_backend
from konfig.tofu.model import terraform_resources
from konfig.tofu.plan_apply import adoptions
from konfig.tofu.policy import SECRET_ARGUMENT
from konfig.tofu.preflight import missing_credentials
from konfig.tofu.records import read_intent, read_state, state_backend, state_serial
from konfig.tofu.runner import Workdir

VERSION = "konfig-tofu-reuse-v1"


def plan_inputs(kube: Kube, stack: Stack, spec: Spec, tctx: TofuContext, target: KubeTarget) -> str:
    """The sha256 of what a preview of ``stack``'s OpenTofu part is computed from (the
    module). Raises what a preview raises before planning (a state under another
    stack's name, stack.yaml against the policy)."""
    ctx = stack_tofu(tctx, stack, target, state_backend(kube, stack.path))
    state = read_state(kube, ctx.backend, where=stack.path)
    members = read_intent(kube, ctx.backend)
    backend = preview_backend(ctx.backend, state)
    resources = terraform_resources(spec)
    try:
        document = configuration(
            resources,
            ctx.terraform,
            backend,
            imports=adoptions(resources, state, members),
            state_providers=state_providers(state),
        ).document
        block = document["terraform"]
        rendered = hashlib.sha256(
            json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
    except KonfigError as exc:  # the plan says so itself (or does not plan: no credentials)
        block, rendered = {}, f"refused: {exc.message}"
    try:
        workdir = Workdir(ctx.settings, ctx.workdir, what=stack.path, cluster=ctx.cluster)
        installation = workdir.install_stamp(block) if block else ""
    except KonfigError as exc:
        installation = f"refused: {exc.message}"
    configs = {r.provider.config for r in resources} | {p.config for p in state_providers(state)}
    plain = sorted(
        (name, argument, tctx.environment.get(variable) or "")
        for name in configs
        if name in ctx.terraform.providers
        for argument, variable in ctx.terraform.providers[name].environment.items()
        if not SECRET_ARGUMENT.search(argument)
    )
    body = [
        VERSION,
        rendered,
        installation,
        state_serial(state),
        sorted(members),
        missing_credentials(ctx.terraform, spec, state, tctx.environment),
        plain,
    ]
    text = json.dumps(body, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
