"""``konfig gen``: KCL schemas from the Kubernetes OpenAPI and CRDs, the models reference,
and the contracts' reference and editor settings."""

from __future__ import annotations

from pathlib import Path

import click

from konfig.commands._console import info
from konfig.commands._help import Group
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.gen import compare, generate
from konfig.gen.contracts import CONTRACT_DOCS, EDITOR_SETTINGS, render_all
from konfig.gen.docs import parse_models, render_markdown, undocumented
from konfig.gen.openapi import kubernetes_definitions_path, load_definitions
from konfig.repo.files import WriteScope, atomic_write_text, remove
from konfig.repo.layout import discover, find_root
from konfig.repo.owners import CODEOWNERS_FILES, repository_owners, stale_codeowners
from konfig.repo.settings import load_repo_config
from konfig.repo.yamlio import load_yaml_file

DEFAULT_OUT = "base/pkg/k8s"
MODELS_DIR = "base/pkg/models/frontend"
DOCS_FILE = "docs/models/frontend.md"


@click.group("gen", cls=Group)
def command() -> None:
    """Generate KCL schemas, the models reference and the contracts' docs.

    \b
    Examples:
      konfig gen schemas --check
      konfig gen docs --check
      konfig gen contracts
      konfig gen codeowners
    """


@command.command("schemas")
@click.option(
    "--k8s-version",
    default=None,
    help="Kubernetes version of the schemas (default: konfig.yaml kubernetesVersion).",
)
@click.option(
    "--crd",
    "crds",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="A CustomResourceDefinition YAML file to generate schemas for (repeatable), besides "
    "konfig.yaml's schemaCrds.",
)
@click.option(
    "--out",
    default=DEFAULT_OUT,
    show_default=True,
    help="Output directory, inside the repository (its path is the KCL import path).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 when the files in --out are not what the generator produces.",
)
@click.pass_context
def schemas(
    ctx: click.Context, k8s_version: str | None, crds: tuple[Path, ...], out: str, check: bool
) -> int:
    """Generate KCL schemas from the Kubernetes OpenAPI definitions and CRDs.

    One KCL schema per Kubernetes kind (core/v1, apps/v1, batch/v1,
    networking.k8s.io/v1, autoscaling/v2, policy/v1, rbac.authorization.k8s.io/v1, plus
    every definition they reference) and per CRD version, with field types, required
    fields, enums, declared defaults and docstrings from the API descriptions.

    Re-running gives byte-identical files; generated files the generator no longer
    produces are removed (hand-written .k files in --out are left alone).

    \b
    Examples:
      konfig gen schemas
      konfig gen schemas --k8s-version 1.32 --check
    """
    root_opt = (ctx.obj or {}).get("root")
    root = find_root(Path(root_opt) if root_opt else None)
    config = load_repo_config(root)
    version = k8s_version or config.kubernetes_version
    out_dir = (root / out).resolve() if not Path(out).is_absolute() else Path(out).resolve()
    try:
        rel = out_dir.relative_to(root.resolve())
    except ValueError:
        raise UsageError(
            f"--out {out} is outside the repository {root}",
            hint="schemas must live under the kcl.mod root so stacks can import them",
        ) from None
    if not rel.parts or not all(p.isidentifier() for p in rel.parts):
        raise UsageError(
            f"--out {rel.as_posix()} is not a KCL package path",
            hint="use directory names made of letters, digits and '_' (e.g. base/pkg/k8s)",
        )
    definitions_path = kubernetes_definitions_path(version)
    parsed_crds = []
    listed = [root / p for p in config.schema_crds]  # konfig.yaml schemaCrds, then --crd
    for path in dict.fromkeys(p.resolve() for p in (*listed, *crds)):
        if not path.is_relative_to(root.resolve()):
            raise UsageError(
                f"CRD file {path} is outside the repository {root}",
                hint="vendor the CRD into the repository (with its licence and origin)",
            )
        if not path.is_file():
            raise UsageError(
                f"CRD file {_display(path, root)} does not exist",
                hint="konfig.yaml `schemaCrds` and --crd name CRD YAML files in the repository",
            )
        data = load_yaml_file(path, root=root)
        parsed_crds.append((_display(path, root), data))
    files = generate(
        load_definitions(definitions_path),
        crds=parsed_crds,
        import_prefix=".".join(rel.parts),
        source=f"kubernetes-validate {definitions_path.parent.name}",
    )
    state = compare(files, out_dir)
    if check:
        if not state.stale:
            info(f"{rel.as_posix()}: {len(files)} generated files are up to date")
            return EXIT_OK
        for label, paths in (
            ("missing", state.missing),
            ("out of date", state.changed),
            ("no longer generated", state.extra),
        ):
            for p in paths:
                click.echo(f"{rel.as_posix()}/{p}: {label}")
        click.echo(
            f"{len(state.missing) + len(state.changed) + len(state.extra)} generated files "
            "are stale; run `konfig gen schemas` (with the same --crd files) and commit them",
            err=True,
        )
        return EXIT_FINDINGS
    scope = WriteScope.repository(root)
    for p in (*state.missing, *state.changed):
        atomic_write_text(out_dir / p, files[p], scope=scope)
    remove([out_dir / p for p in state.extra], scope=scope)
    info(
        f"{rel.as_posix()}: {len(files)} files, {len(state.missing)} new, "
        f"{len(state.changed)} updated, {len(state.extra)} removed"
    )
    return EXIT_OK


@command.command("docs")
@click.option(
    "--check",
    is_flag=True,
    help=f"Write nothing; exit 1 when {DOCS_FILE} is stale or a model attribute is undocumented.",
)
@click.pass_context
def docs(ctx: click.Context, check: bool) -> int:
    """Write the frontend models reference, docs/models/frontend.md.

    Generated from the KCL source: types and defaults as declared, descriptions from
    the docstrings.

    \b
    Examples:
      konfig gen docs
      konfig gen docs --check
    """
    root_opt = (ctx.obj or {}).get("root")
    root = find_root(Path(root_opt) if root_opt else None)
    sources = {
        p.name: p.read_text(encoding="utf-8")
        for p in sorted((root / MODELS_DIR).glob("*.k"))
        if not p.name.endswith("_test.k")
    }
    models = parse_models(sources)
    text = render_markdown(models)
    problems = undocumented(models)
    for problem in problems:
        click.echo(f"{MODELS_DIR}/{problem}", err=True)
    target = root / DOCS_FILE
    current = target.read_text(encoding="utf-8") if target.is_file() else None
    if check:
        if current != text:
            click.echo(f"{DOCS_FILE}: out of date; run `konfig gen docs` and commit it", err=True)
            return EXIT_FINDINGS
        return EXIT_FINDINGS if problems else EXIT_OK
    if current != text:
        atomic_write_text(target, text, scope=WriteScope.repository(root))
        info(f"{DOCS_FILE}: written ({len(models)} models)")
    else:
        info(f"{DOCS_FILE}: up to date ({len(models)} models)")
    return EXIT_FINDINGS if problems else EXIT_OK


def _display(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name


@command.command("contracts")
@click.option(
    "--check",
    is_flag=True,
    help=f"Write nothing; exit 1 when {CONTRACT_DOCS}/ or {EDITOR_SETTINGS} is stale.",
)
@click.pass_context
def contracts_docs(ctx: click.Context, check: bool) -> int:
    """Write the file formats' reference, docs/contracts/, and the editor settings.

    Generated from the JSON Schemas in tools/konfig/contracts/: a page per format, and
    .vscode/settings.json (which schema checks which YAML file as it is edited).

    \b
    Example:
      konfig gen contracts --check    # in CI: the docs match the schemas
    """
    root_opt = (ctx.obj or {}).get("root")
    root = find_root(Path(root_opt) if root_opt else None)
    settings = root / EDITOR_SETTINGS
    files = render_all(settings.read_text(encoding="utf-8") if settings.is_file() else None)
    stale = [
        rel
        for rel, text in files.items()
        if not (root / rel).is_file() or (root / rel).read_text(encoding="utf-8") != text
    ]
    extra = sorted(
        p.relative_to(root).as_posix()
        for p in (root / CONTRACT_DOCS).glob("*.md")
        if p.relative_to(root).as_posix() not in files
    )
    if check:
        for rel in stale:
            click.echo(f"{rel}: out of date")
        for rel in extra:
            click.echo(f"{rel}: no longer generated")
        if stale or extra:
            click.echo(
                f"{len(stale) + len(extra)} files are stale; run `konfig gen contracts` and "
                "commit them",
                err=True,
            )
            return EXIT_FINDINGS
        info(f"{CONTRACT_DOCS}/ and {EDITOR_SETTINGS}: up to date ({len(files)} files)")
        return EXIT_OK
    scope = WriteScope.repository(root)
    for rel in stale:
        atomic_write_text(root / rel, files[rel], scope=scope)
    remove([root / rel for rel in extra], scope=scope)
    info(f"{len(files)} files: {len(stale)} written, {len(extra)} removed")
    return EXIT_OK


@command.command("codeowners")
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 when .github/CODEOWNERS or .gitea/CODEOWNERS is stale.",
)
@click.pass_context
def codeowners(ctx: click.Context, check: bool) -> int:
    """Write .github/CODEOWNERS and .gitea/CODEOWNERS from the owners.

    The platform team (konfig.yaml `owners.platform`) owns everything outside appops/,
    each project's `owners` (project.yaml) its directory; teams are expanded to their
    members' logins (konfig.yaml `owners.teams`). Gitea reads its own file, in its own
    syntax (regular expressions). `konfig check` reports them stale
    (owners/codeowners-stale).

    \b
    Examples:
      konfig gen codeowners
      konfig gen codeowners --check
    """
    root_opt = (ctx.obj or {}).get("root")
    root = find_root(Path(root_opt) if root_opt else None)
    repo = discover(root)
    owners, problems = repository_owners(root, repo.config, repo.projects)
    if not owners.enabled:
        raise UsageError(
            "konfig.yaml has no `owners`: nothing says who owns what",
            hint="add `owners: {platform: [...], teams: {...}}` to konfig.yaml "
            "(docs/owners.md), then run `konfig gen codeowners` again",
        )
    for p in problems:
        click.echo(f"{p.file}:{p.line or 1}: {p.message}", err=True)
    if problems:
        return EXIT_FINDINGS
    stale = stale_codeowners(root, owners)
    if check:
        for rel in stale:
            click.echo(f"{rel}: out of date")
        if stale:
            click.echo(
                f"{len(stale)} files are stale; run `konfig gen codeowners` and commit them",
                err=True,
            )
            return EXIT_FINDINGS
        info(f"{', '.join(CODEOWNERS_FILES)}: up to date")
        return EXIT_OK
    scope = WriteScope.repository(root)
    for rel, text in stale.items():
        atomic_write_text(root / rel, text, scope=scope)
    info(f"{len(CODEOWNERS_FILES)} files: {len(stale)} written")
    return EXIT_OK
