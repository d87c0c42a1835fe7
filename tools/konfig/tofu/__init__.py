"""The Terraform runtime: ``type: Terraform`` resources through OpenTofu.

Beside :mod:`konfig.engine` (the Kubernetes runtime). A stack's Terraform resources
become one OpenTofu working directory, generated as JSON configuration
(:mod:`~konfig.tofu.config`); :mod:`~konfig.tofu.runner` is the one module that runs
the ``tofu`` process; :mod:`~konfig.tofu.plans` turns OpenTofu's JSON plan into the
changes of the common preview model; :mod:`~konfig.tofu.schema` checks resources against
the provider's schema; :mod:`~konfig.tofu.model` reads the Spec's Terraform resources and
the stack's ``terraform`` settings, :mod:`~konfig.tofu.policy` holds them to the
platform's policy in konfig.yaml (which provider configurations, settings and variables
a stack may use) and :mod:`~konfig.tofu.guards` refuses what a stack may never bring
into the configuration (``terraform/forbidden``: provisioners, other providers' types,
meta-arguments, files Konfig did not write); :mod:`~konfig.tofu.plan_apply` plans and applies one
stack; :mod:`~konfig.tofu.refresh` reads its drift (``plan -refresh-only``) for status
and drift.

A stack with Terraform resources runs in both runtimes (the hybrid):
:mod:`~konfig.tofu.context` (how this run drives OpenTofu, per stack),
:mod:`~konfig.tofu.records` (the state and the intent record in the stack's cluster),
:mod:`~konfig.tofu.values` (generated Secret values, write-only values, SCRAM),
:mod:`~konfig.tofu.references` (references to Terraform attributes resolved in
Kubernetes objects), :mod:`~konfig.tofu.preflight` (the providers' credentials, before
any write), :mod:`~konfig.tofu.hybrid` (one plan of both runtimes, the preview),
:mod:`~konfig.tofu.hybrid_apply` (apply and destroy), :mod:`~konfig.tofu.observe`
(the state's resources for status and drift) and :mod:`~konfig.tofu.reuse` (what a
preview's plan reads: its part of the reuse key). The design and the reasons are in
docs/terraform.md.
"""
