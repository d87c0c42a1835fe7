"""A new repository's files, from the template (``konfig init``).

:func:`check_target` refuses a directory that is not empty; :func:`copy_template` copies
the template's files (:mod:`konfig.repo.template`) with their modes (the README and the
Makefile without their project-only parts: :func:`~konfig.repo.template.render`); then
the team's answers are written where the template keeps them:

- the name: ``kcl.mod``'s package name (``[package] name``; KCL resolves imports from
  the folder holding ``kcl.mod``, not by this name);
- the Kubernetes version: ``konfig.yaml``'s ``kubernetesVersion`` (the schemas in
  ``base/pkg/k8s`` are regenerated for it by the caller, see
  :mod:`konfig.pipeline.initializing`);
- the cluster contexts: the example stacks name two clusters, the kubeconfig contexts
  ``admin`` and ``edge`` (those of ``hack/cluster``'s ``local`` and ``edge``); the
  contexts given replace them in that order (one context: both). Without the examples
  there is no stack to name a cluster yet: each stack names its own in its
  ``stack.yaml``;
- the age recipients (without the examples only: the example secrets are encrypted for
  the template's recipients): ``.sops.yaml`` names the first for the files of
  production stacks (a stack folder named ``prod``) and the second (or the first
  again) for every other stack's (:data:`SOPS_RULES`).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from konfig.errors import UsageError
from konfig.repo.template import TemplateSource, content, template_paths

# The kubeconfig contexts the example stacks name, main cluster first.
EXAMPLE_CONTEXTS = ("admin", "edge")
# A name kcl.mod accepts as a package name, and a git branch or folder too.
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_VERSION = re.compile(r"^[0-9]+\.[0-9]+$")
# A kubeconfig context name as stack.yaml takes it (no spaces, no quotes to escape).
_CONTEXT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,252}$")
_KCL_MOD_NAME = re.compile(r'^(name\s*=\s*)"[^"]*"', re.MULTILINE)
_K8S_VERSION = re.compile(r'^(kubernetesVersion:\s*)"[^"]*"', re.MULTILINE)


@dataclass(frozen=True)
class Answers:
    """What a team tells ``konfig init``."""

    name: str
    kubernetes_version: str
    contexts: tuple[str, ...]  # the examples' clusters, in EXAMPLE_CONTEXTS' order
    examples: bool
    recipients: tuple[str, ...] = ()  # age recipients: production's, then the others'


def usable_name(name: str) -> bool:
    return bool(_NAME.match(name))


def check_answers(answers: Answers) -> None:
    """UsageError naming the flag when an answer cannot be used."""
    if not usable_name(answers.name):
        raise UsageError(
            f"--name {answers.name!r} is not a usable repository name",
            hint="lower-case letters, digits, '-' and '_', starting with a letter "
            "(it becomes kcl.mod's package name)",
        )
    if not _VERSION.match(answers.kubernetes_version):
        raise UsageError(
            f"--kubernetes-version {answers.kubernetes_version!r} is not a version like 1.32",
        )
    for context in answers.contexts:
        if not _CONTEXT.match(context):
            raise UsageError(
                f"--context {context!r} is not a kubeconfig context name a stack.yaml can hold",
                hint="letters, digits and _ . : @ / -",
            )
    if len(answers.contexts) > len(EXAMPLE_CONTEXTS):
        raise UsageError(
            f"{len(answers.contexts)} --context given: the example stacks use "
            f"{len(EXAMPLE_CONTEXTS)} clusters ({', '.join(EXAMPLE_CONTEXTS)})",
        )
    if len(answers.recipients) > 2:
        raise UsageError(
            f"{len(answers.recipients)} --age-recipient given: one for production stacks' "
            "secrets and one for the others at most",
            hint="several people per environment: add them to .sops.yaml afterwards "
            "(docs/secrets.md)",
        )
    if answers.recipients and answers.examples:
        raise UsageError(
            "--age-recipient needs --no-examples: the example stacks' secrets are "
            "encrypted for the template's recipients, and .sops.yaml must name those",
            hint="make the repository with --no-examples, or without --age-recipient and "
            "change .sops.yaml once the examples are gone (docs/secrets.md)",
        )
    if answers.contexts and not answers.examples:
        raise UsageError(
            "--context names the clusters of the example stacks, and --no-examples leaves them out",
            hint="drop --context: each stack you write names its cluster in its stack.yaml "
            "(kubernetes.context)",
        )


def check_target(dest: Path) -> None:
    """UsageError unless ``dest`` is missing or an empty directory."""
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest} exists and is not a directory", hint="name a new directory")
    if dest.is_dir() and any(dest.iterdir()):
        raise UsageError(
            f"{dest} is not empty: konfig init makes a new repository and overwrites nothing",
            hint="name a new or empty directory",
        )


def copy_template(source: TemplateSource, dest: Path, *, examples: bool) -> list[str]:
    """Copy the template's files into ``dest`` (content and mode); returns their paths."""
    copied = template_paths(source.files, examples=examples)
    for rel in copied:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content(source, rel))
        shutil.copymode(source.root / rel, target)
    return copied


def _replace_one(path: Path, pattern: re.Pattern[str], value: str, what: str) -> None:
    text = path.read_text(encoding="utf-8")
    new, count = pattern.subn(lambda m: f'{m.group(1)}"{value}"', text, count=1)
    if count != 1:
        raise ValueError(f"the template's {path.name} has no {what} to set")
    path.write_text(new, encoding="utf-8")


def set_name(dest: Path, name: str) -> None:
    _replace_one(dest / "kcl.mod", _KCL_MOD_NAME, name, "package name")


def set_kubernetes_version(dest: Path, version: str) -> None:
    _replace_one(dest / "konfig.yaml", _K8S_VERSION, version, "kubernetesVersion")


def context_map(contexts: tuple[str, ...]) -> dict[str, str]:
    """Which example context becomes which: one given names both clusters."""
    if not contexts:
        return {}
    given = contexts if len(contexts) == len(EXAMPLE_CONTEXTS) else contexts * 2
    return {old: new for old, new in zip(EXAMPLE_CONTEXTS, given, strict=False) if old != new}


def set_contexts(dest: Path, contexts: tuple[str, ...]) -> list[str]:
    """Rename the example stacks' contexts; returns the stack.yaml files changed."""
    mapping = context_map(contexts)
    if not mapping:
        return []
    line = re.compile(r"^(\s*context:\s*)([A-Za-z0-9_.:@/-]+)\s*$", re.MULTILINE)
    changed: list[str] = []
    for stack_yaml in sorted((dest / "appops").glob("*/*/stack.yaml")):
        text = stack_yaml.read_text(encoding="utf-8")
        new = line.sub(lambda m: m.group(1) + mapping.get(m.group(2), m.group(2)), text)
        if new != text:
            stack_yaml.write_text(new, encoding="utf-8")
            changed.append(stack_yaml.relative_to(dest).as_posix())
    return changed


SOPS_RULES = """\
# Who may decrypt the encrypted files (*.enc.yaml) of each environment: read by sops
# and by `konfig secrets` (docs/secrets.md). The first rule whose path_regex matches a
# file's path from the repository root wins: production stacks' files (a stack folder
# named prod) for production's recipients, every other stack's for the others'.
# More recipients: comma-separated (`konfig secrets keygen` makes a key), then
# `konfig secrets rotate --all`.
creation_rules:
  - path_regex: ^appops/[^/]+/prod/[^/]*\\.enc\\.yaml$
    age: {production}
  - path_regex: ^appops/[^/]+/[^/]+/[^/]*\\.enc\\.yaml$
    age: {other}
"""


def set_recipients(dest: Path, recipients: tuple[str, ...]) -> None:
    """``.sops.yaml`` for the team's own recipients (checked by the caller)."""
    if not recipients:
        return
    text = SOPS_RULES.format(production=recipients[0], other=recipients[-1])
    (dest / ".sops.yaml").write_text(text, encoding="utf-8")
