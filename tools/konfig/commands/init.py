"""``konfig init DIR``: a new configuration repository from the template, in one step.

The steps are those of :mod:`konfig.pipeline.initializing`; what is copied from where:
:mod:`konfig.repo.template`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from konfig.commands._console import echo_json, info
from konfig.errors import EXIT_OK, UsageError
from konfig.pipeline.initializing import BRANCH, Initialized, initialize, template_defaults
from konfig.repo.scaffold import EXAMPLE_CONTEXTS, Answers, usable_name
from konfig.repo.template import NoTemplate, TemplateSource, find_template


def _interactive() -> bool:
    """Ask only a person at a terminal, never a CI job (``CI`` set, as every CI sets it)."""
    return sys.stdin.isatty() and sys.stderr.isatty() and not os.environ.get("CI")


def _default_name(dest: Path) -> str:
    return dest.resolve().name.lower()


def _ask(
    dest: Path,
    name: str | None,
    version: str | None,
    contexts: tuple[str, ...],
    examples: bool | None,
    recipients: tuple[str, ...],
    template: TemplateSource,
) -> Answers:
    ask = _interactive()
    if name is None:
        name = _default_name(dest)
        if ask:
            name = click.prompt("Repository (team) name", default=name, err=True)
        elif not usable_name(name):
            raise UsageError(
                f"the directory's name {name!r} is not a usable repository name",
                hint="pass --name NAME (lower-case letters, digits, '-' and '_')",
            )
    if version is None:
        version = template_defaults(template)
        if ask:
            version = click.prompt("Kubernetes version", default=version, err=True)
    if examples is None:
        examples = True
        if ask:
            examples = click.confirm("Include the example stacks?", default=True, err=True)
    if not contexts and examples and ask:
        given = click.prompt(
            "Kubeconfig contexts of the examples' two clusters (main, second; one for both)",
            default=",".join(EXAMPLE_CONTEXTS),
            err=True,
        )
        contexts = tuple(c.strip() for c in given.split(",") if c.strip())
        if contexts == EXAMPLE_CONTEXTS:
            contexts = ()
    return Answers(str(name), str(version), contexts, bool(examples), recipients)


def _json(done: Initialized) -> dict[str, object]:
    return {
        "path": str(done.root),
        "name": done.answers.name,
        "kubernetesVersion": done.answers.kubernetes_version,
        "examples": done.answers.examples,
        "contexts": done.contexts,
        "recipients": list(done.answers.recipients),
        "template": {"source": done.template.kind, "path": str(done.template.root)},
        "files": done.files,
        "schemasWritten": done.schemas_written,
        "branch": BRANCH,
        "commit": done.commit,
    }


def _report(done: Initialized, dest: Path) -> None:
    a = done.answers
    examples = "with the example stacks" if a.examples else "without example stacks"
    info(
        f"created {done.root}: {len(done.files)} files from the template "
        f"({done.template.kind} {done.template.root}), {examples}"
    )
    info(f"  name {a.name} (kcl.mod); Kubernetes {a.kubernetes_version} (konfig.yaml)")
    if done.schemas_written:
        info(
            f"  base/pkg/k8s: {done.schemas_written} schema files for Kubernetes "
            f"{a.kubernetes_version}"
        )
    for old, new in done.contexts.items():
        info(f"  context {old} -> {new} in the example stacks")
    if a.recipients:
        info(
            f"  .sops.yaml: production stacks' secrets for {a.recipients[0]}, the others' "
            f"for {a.recipients[-1]}"
        )
    info(f"  first commit {done.commit[:12]} on {BRANCH}")
    info(f"next: push it (git remote add origin URL && git push -u origin {BRANCH}), then make the")
    info("repository settings of docs/security.md (secrets, environments, branch protection);")
    info(f'then write a first stack: README.md, "Write your first stack" (cd {dest})')


@click.command("init")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--name", help="The repository's (team's) name; default: DIRECTORY's name.")
@click.option(
    "--kubernetes-version",
    "kubernetes_version",
    help="The clusters' Kubernetes version (major.minor); default: the template's.",
)
@click.option(
    "--context",
    "contexts",
    multiple=True,
    help="Kubeconfig context of the example stacks' clusters: the first replaces `admin`, "
    "the second `edge` (one: both). Default: admin and edge, those of hack/cluster.",
)
@click.option(
    "--examples/--no-examples",
    default=None,
    help="Include the example stacks (appops/). Default: yes.",
)
@click.option(
    "--age-recipient",
    "recipients",
    multiple=True,
    help="With --no-examples: the age recipient (`konfig secrets keygen` prints it) of "
    "production stacks' secrets in .sops.yaml; a second one for the other stacks' (one: "
    "both). Default: the template's example recipients, whose keys nobody holds.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was made as JSON.")
def command(
    directory: Path,
    name: str | None,
    kubernetes_version: str | None,
    contexts: tuple[str, ...],
    examples: bool | None,
    recipients: tuple[str, ...],
    as_json: bool,
) -> int:
    """Make a new configuration repository in DIRECTORY from the Konfig template.

    It copies the template (the workflows, the actions, the tools they install,
    base/, kcl.mod, konfig.yaml, .sops.yaml, the docs, hack/cluster, and the example
    stacks unless --no-examples), sets the name, the Kubernetes version, the examples'
    cluster contexts and the age recipients in .sops.yaml, runs `git init` on main and
    commits it all. DIRECTORY
    must be new or empty. On a terminal (and outside CI) it asks for what the flags do
    not say; elsewhere it takes the defaults. Exit 0, 2 for a bad flag or a directory
    that is not empty.

    \b
    Examples:
      konfig init ../acme-config
      konfig init ../config --name acme --kubernetes-version 1.31 --context prod
      konfig init ../bare-config --no-examples --json
    """
    try:
        template = find_template()
    except NoTemplate as exc:
        raise UsageError(
            str(exc),
            hint="install konfig from a built package, or run it from a clone of "
            "the Konfig template",
        ) from None
    answers = _ask(directory, name, kubernetes_version, contexts, examples, recipients, template)
    done = initialize(directory, answers, template)
    if as_json:
        echo_json(_json(done))
    else:
        _report(done, directory)
    return EXIT_OK
