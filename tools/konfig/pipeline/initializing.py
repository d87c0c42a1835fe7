"""``konfig init``: a new repository from the template, in one step.

1. check the answers and that the directory is new or empty (a usage error otherwise);
2. copy the template's files (:mod:`konfig.repo.template`: from the package, or the
   checkout konfig runs from), with or without the example stacks;
3. write the team's name, Kubernetes version, the examples' cluster contexts and the
   age recipients of ``.sops.yaml`` (:mod:`konfig.repo.scaffold`); for a Kubernetes
   version other than the template's, regenerate ``base/pkg/k8s`` from the schemas
   kubernetes-validate bundles for it and the CRDs its generated files came from (as
   ``konfig gen schemas --crd ...`` does);
4. record the release (``.konfig/release.json``: this konfig's version and the digests
   of the release's files, what ``konfig upgrade`` compares with,
   :mod:`konfig.repo.release`);
5. ``git init`` on ``main`` and commit everything.

A failure after the directory was created removes what this run wrote, so a second
try starts from an empty directory again.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from konfig import __version__
from konfig.detect.gitwrite import init_repository
from konfig.errors import UsageError
from konfig.gen import compare, generate
from konfig.gen.openapi import GenError, kubernetes_definitions_path, load_definitions
from konfig.gen.run import generated_on_disk
from konfig.repo.files import WriteScope, atomic_write_text, remove
from konfig.repo.layout import discover
from konfig.repo.owners import repository_owners, stale_codeowners
from konfig.repo.release import release_content, write_record
from konfig.repo.scaffold import (
    Answers,
    check_answers,
    check_target,
    context_map,
    copy_template,
    set_contexts,
    set_kubernetes_version,
    set_name,
    set_recipients,
)
from konfig.repo.settings import load_repo_config
from konfig.repo.template import TemplateSource
from konfig.repo.yamlio import load_yaml_file
from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import parse_recipient

BRANCH = "main"
SCHEMAS = "base/pkg/k8s"


@dataclass(frozen=True)
class Initialized:
    """What ``konfig init`` made."""

    root: Path
    answers: Answers
    template: TemplateSource
    files: list[str]
    contexts: dict[str, str]  # example context -> the one it became
    stacks_retargeted: list[str]  # the stack.yaml files whose context changed
    schemas_written: int  # files of base/pkg/k8s regenerated (0: the template's version)
    commit: str


def template_defaults(template: TemplateSource) -> str:
    """The template's Kubernetes version (its konfig.yaml)."""
    return load_repo_config(template.root).kubernetes_version


def _check_version(version: str) -> None:
    try:
        kubernetes_definitions_path(version)
    except GenError as exc:
        raise UsageError(f"--kubernetes-version {version}: {exc.message}", hint=exc.hint) from None


def _check_recipients(recipients: tuple[str, ...]) -> None:
    for recipient in recipients:
        try:
            parse_recipient(recipient, where="--age-recipient")
        except SecretsError as exc:
            raise UsageError(str(exc), hint="`konfig secrets keygen` prints one") from None


def _crd_sources(out: Path, root: Path) -> list[str]:
    """The CustomResourceDefinition files the generated schemas in ``out`` were made
    from (their header's ``Source:``, a path in the repository), so that regenerating
    for another Kubernetes version keeps them as they are."""
    sources: set[str] = set()
    for rel in generated_on_disk(out):
        with (out / rel).open(encoding="utf-8") as handle:
            head = handle.read(400)
        for line in head.splitlines():
            source = line.removeprefix("Source: ").strip()
            if line.startswith("Source: ") and (root / source).is_file():
                sources.add(source)
    return sorted(sources)


def _regenerate_schemas(root: Path, version: str) -> int:
    path = kubernetes_definitions_path(version)
    out = root / SCHEMAS
    crds = [(rel, load_yaml_file(root / rel, root=root)) for rel in _crd_sources(out, root)]
    files = generate(
        load_definitions(path),
        crds=crds,
        import_prefix=SCHEMAS.replace("/", "."),
        source=f"kubernetes-validate {path.parent.name}",
    )
    state = compare(files, out)
    scope = WriteScope.repository(root)
    for rel in (*state.missing, *state.changed):
        atomic_write_text(out / rel, files[rel], scope=scope)
    remove([out / rel for rel in state.extra], scope=scope)
    return len(state.missing) + len(state.changed) + len(state.extra)


def _write_codeowners(root: Path) -> None:
    """CODEOWNERS for the projects the new repository has (none without the examples)."""
    repo = discover(root)
    owners, _ = repository_owners(root, repo.config, repo.projects)
    if owners.enabled:
        scope = WriteScope.repository(root)
        for rel, text in stale_codeowners(root, owners).items():
            atomic_write_text(root / rel, text, scope=scope)


def initialize(dest: Path, answers: Answers, template: TemplateSource) -> Initialized:
    check_answers(answers)
    check_target(dest)
    _check_version(answers.kubernetes_version)
    _check_recipients(answers.recipients)
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    try:
        files = copy_template(template, root, examples=answers.examples)
        set_name(root, answers.name)
        written = 0
        if answers.kubernetes_version != template_defaults(template):
            set_kubernetes_version(root, answers.kubernetes_version)
            written = _regenerate_schemas(root, answers.kubernetes_version)
        retargeted = set_contexts(root, answers.contexts)
        set_recipients(root, answers.recipients)
        _write_codeowners(root)
        write_record(root, __version__, release_content(template))
        commit = init_repository(
            root,
            BRANCH,
            f"{answers.name}: a new Konfig repository (konfig init, konfig {__version__})",
        )
    except BaseException:
        if created:
            shutil.rmtree(root, ignore_errors=True)
        else:
            for child in root.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        raise
    return Initialized(
        root=root,
        answers=answers,
        template=template,
        files=files,
        contexts=context_map(answers.contexts),
        stacks_retargeted=retargeted,
        schemas_written=written,
        commit=commit,
    )
