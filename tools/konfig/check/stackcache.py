"""`konfig check`'s findings of one stack from the result cache (:mod:`konfig.build.results`).

A compiled stack's own rules (spec, secrets in the Spec, schema, terraform, promql and
the policies) give findings that depend on:

* the stack: its compile cache key (konfig's own files with every rule, kcl-lib, the
  blob ids of everything its compile reads: its directory with ``stack.yaml`` and the
  YAML files findings point into, its project's ``base/``, what it imports), the
  digest of its Spec, its compile options, its parsed ``stack.yaml`` and inherited
  ignore rules, its ``project.yaml``;
* the repository: ``konfig.yaml`` (its bytes: kubernetesVersion, allowSystemNamespaces,
  the terraform policy, ...), the kinds it defines (every CRD under ``base/`` and
  ``appops/`` and in the compiled Specs, with its schemas), and the policies (off, or
  the key of their entry: its directory's files, what it imports, ``kcl.mod``);
* the libraries: the bundled Kubernetes schemas' package, the validator, the YAML
  parser (:func:`konfig.build.results.library_versions`).

The findings of the whole repository (structure, encrypted files, owners, promotion,
ownership) are worked out every run. A stack whose findings include
``policy/error`` (a policy that did not evaluate, a worker stopped by its limits) is
not stored: it is evaluated again next time.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from konfig.build import results as rc
from konfig.build.compiler import CompileResult
from konfig.check.findings import Finding, Severity
from konfig.check.kinds import KindCatalog
from konfig.check.policy import POLICY_ENTRY
from konfig.repo.layout import Repository, Stack
from konfig.repo.settings import CONFIG_FILE

KIND = "check"
NOT_STORED = ("policy/error",)


class StackFindings:
    """The result cache of `konfig check`, with the inputs every stack shares."""

    def __init__(
        self, repo: Repository, state: Path, kinds: KindCatalog, *, policies: bool
    ) -> None:
        from konfig.build import kcl
        from konfig.build.cache import DependencyIndex, tool_fingerprint

        self.store = rc.ResultCache(state, KIND)
        self.root = repo.root
        policy_key = None
        if policies:
            index = DependencyIndex.build(repo.root, state)
            policy_key = index.entry_key(POLICY_ENTRY, kcl.library_version())
        self.shared = {
            "tool": tool_fingerprint(state),
            "config": rc.file_digest(repo.root / CONFIG_FILE),
            "kinds": kinds_digest(kinds),
            "policies": policy_key,
            "libraries": rc.library_versions(),
        }
        self._projects: dict[str, str | None] = {}

    def key(self, stack: Stack, result: CompileResult) -> str | None:
        """The stack's key; None when its compile has none (compiled without the cache)."""
        if result.cache_key is None or result.spec is None:
            return None
        project = self._projects.get(stack.project_path, "")
        if project == "":
            project = rc.file_digest(self.root / stack.project_path / "project.yaml")
            self._projects[stack.project_path] = project
        options = list(result.inputs.options) if result.inputs else None
        return rc.result_key(
            KIND,
            {
                **self.shared,
                "stack": [stack.path, stack.project, stack.name],
                "compile": result.cache_key,
                "spec": rc.text_digest(result.yaml()),
                "options": options,
                "settings": [stack.raw, stack.inherited_ignore],
                "project": project,
            },
        )

    def get(self, key: str, stack_path: str) -> list[Finding] | None:
        return _from_json(self.store.get(key, stack_path))

    def put(self, key: str, stack_path: str, findings: list[Finding]) -> None:
        if any(f.rule in NOT_STORED for f in findings):
            return
        self.store.put(key, stack_path, [_to_json(f) for f in findings])


def kinds_digest(kinds: KindCatalog) -> str:
    """sha256 of every custom kind the catalog holds (scope, versions, schemas, source)."""
    items = [
        [list(k), c.versions, c.namespaced, c.source, c.schemas]
        for k, c in sorted(kinds.custom.items())
    ]
    text = json.dumps(items, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _to_json(f: Finding) -> list[Any]:
    return [f.rule, f.message, f.file, f.line, f.severity.value, f.stack, f.resource]


def _from_json(data: Any) -> list[Finding] | None:
    """Stored findings; None for anything but what :func:`_to_json` writes."""
    if not isinstance(data, list):
        return None
    found: list[Finding] = []
    for item in data:
        if not isinstance(item, list) or len(item) != 7:
            return None
        rule, message, file, line, severity, stack, resource = item
        if not (
            isinstance(rule, str)
            and isinstance(message, str)
            and all(v is None or isinstance(v, str) for v in (file, stack, resource))
            and (line is None or type(line) is int)
            and severity in (s.value for s in Severity)
        ):
            return None
        found.append(Finding(rule, message, file, line, Severity(severity), stack, resource))
    return found
