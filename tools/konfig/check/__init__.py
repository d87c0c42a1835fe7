"""`konfig check`: structure, Spec, Kubernetes schema and policy rules.

:func:`konfig.check.run.check` takes the repository, the selected stacks' compile
results and returns findings; it never prints or exits. Each rule module's docstring
documents its rules. This package's ``__init__`` imports nothing else: preview and apply
use one rule (``specrules.system_namespace_findings``) and should not load every rule's
libraries (jsonschema, networkx, the schema catalogue) with it.
"""

from __future__ import annotations

from konfig.check.findings import Finding, Severity

__all__ = ["Finding", "Severity"]
