"""``konfig secrets``: encrypted files in the repository (SOPS format, age keys).

See docs/secrets.md. Keys come from ``SOPS_AGE_KEY`` / ``SOPS_AGE_KEY_FILE``;
recipients from the repository's ``.sops.yaml``. No value is ever printed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import click

from konfig.commands._common import load_repository
from konfig.commands._console import echo_json, error, info, warn
from konfig.commands._help import Group
from konfig.commands._keys import KEY_ENV, KEY_FILE_ENV, take_keyring_from_env
from konfig.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from konfig.secrets import edit, plainyaml, sopsfile
from konfig.secrets.audit import audit_files, encrypted_files
from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import Keyring
from konfig.secrets.rules import RULES_FILE, Rules, load_rules


@click.group("secrets", cls=Group)
def command() -> None:
    """Encrypted files: encrypt, edit, rotate, check (SOPS format, age keys).

    \b
    Examples:
      konfig secrets keygen -o ~/.config/konfig/age.key
      konfig secrets edit appops/webshop/prod/secrets.enc.yaml
      konfig secrets check
    """


def _root(ctx: click.Context) -> Path:
    return load_repository(ctx).root


def _rel(root: Path, file: str) -> str:
    path = Path(file)
    given = path if path.is_absolute() else Path.cwd() / path
    # the folder resolved, not the file: a link is refused where it is (secrets/link),
    # never silently replaced by what it points to
    full = given.parent.resolve() / given.name
    try:
        return full.relative_to(root.resolve()).as_posix()
    except ValueError:
        raise UsageError(f"{file} is outside the repository ({root})") from None


def _rules(root: Path) -> Rules:
    rules = load_rules(root)
    if rules is None:
        raise UsageError(
            f"the repository has no {RULES_FILE}",
            hint="create it with a creation rule naming the age recipients (docs/secrets.md)",
        )
    return rules


@command.command("keygen")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Key file to create (0600); it must not exist.",
)
def keygen(output: Path) -> int:
    """Create a new age key file and print its recipient (public key).

    Give the recipient to .sops.yaml; keep the file secret (SOPS_AGE_KEY_FILE).

    \b
    Example:
      konfig secrets keygen -o ~/.config/konfig/age.key
    """
    if output.exists():
        raise UsageError(f"{output} exists; refusing to overwrite a key")
    output.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # e.g. ~/.config/konfig
    keyring, text = Keyring.generate(source=str(output))
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    click.echo(keyring.recipients[0])
    return EXIT_OK


@command.command("encrypt")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    default=None,
    help="Write here instead of replacing FILE ('-' for stdout).",
)
@click.pass_context
def encrypt(ctx: click.Context, file: str, output: str | None) -> int:
    """Encrypt a plaintext YAML FILE for the recipients .sops.yaml names for it.

    By default FILE is replaced by its encrypted form (name it *.enc.yaml), so no
    plaintext copy is left to commit.

    \b
    Example:
      konfig secrets encrypt appops/webshop/dev/secrets.enc.yaml
    """
    root = _root(ctx)
    target = output if output not in (None, "-") else file
    rel = _rel(root, target)  # the rule is chosen by where the encrypted file lives
    try:
        plaintext = Path(file).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{file}: cannot read: {exc.strerror}") from exc
    text = edit.encrypt_text(plaintext, rel, _rules(root))
    if output == "-":
        click.echo(text, nl=False)
    else:
        edit.write_encrypted(root / rel, text)
        info(f"encrypted {rel} for {len(sopsfile.parse(text, name=rel).recipients)} recipient(s)")
    return EXIT_OK


def _run_editor(path: Path) -> None:
    editor = os.environ.get("SOPS_EDITOR") or os.environ.get("EDITOR") or "vi"
    try:
        result = subprocess.run([*shlex.split(editor), str(path)], check=False)
    except OSError as exc:
        raise UsageError(
            f"cannot start the editor {editor!r}: {exc.strerror}", hint="set EDITOR"
        ) from exc
    if result.returncode != 0:
        raise UsageError(f"the editor {editor!r} exited with {result.returncode}; nothing saved")


@command.command("edit")
@click.argument("file", type=click.Path(dir_okay=False))
@click.pass_context
def edit_cmd(ctx: click.Context, file: str) -> int:
    """Edit an encrypted FILE in $EDITOR (creating it when missing).

    The plaintext goes to a private 0600 temporary file that is overwritten and removed
    afterwards; values left unchanged keep their exact ciphertext.

    \b
    Example:
      konfig secrets edit appops/webshop/prod/secrets.enc.yaml
    """
    root = _root(ctx)
    rel = _rel(root, file)
    rules = _rules(root)
    rules.for_file(rel)  # fail before decrypting when no rule covers the file
    previous = edit.decrypt_for_edit(root, rel, take_keyring_from_env())
    start = plainyaml.dump_plaintext(previous.data) if previous else "{}\n"
    with edit.private_plaintext(start) as path:
        while True:
            _run_editor(path)
            try:
                text = edit.reencrypt_edited(path.read_text(encoding="utf-8"), rel, rules, previous)
            except SecretsError as exc:
                error(str(exc))
                if sys.stdin.isatty() and click.confirm("edit again?", default=True, err=True):
                    continue
                raise UsageError(f"{rel} was not changed") from exc
            break
    if text is None:
        info(f"{rel}: no change")
        return EXIT_OK
    edit.write_encrypted(root / rel, text)
    info(f"saved {rel}")
    return EXIT_OK


@command.command("rotate")
@click.argument("files", nargs=-1)
@click.option("--all", "all_files", is_flag=True, help="Every *.enc.yaml file.")
@click.pass_context
def rotate(ctx: click.Context, files: tuple[str, ...], all_files: bool) -> int:
    """Re-encrypt FILES with a new data key for the recipients .sops.yaml names now.

    Run it after adding or removing a recipient; a removed recipient cannot decrypt
    what is written from now on (rotate the values themselves too if they saw them).

    \b
    Examples:
      konfig secrets rotate appops/webshop/prod/secrets.enc.yaml
      konfig secrets rotate --all
    """
    root = _root(ctx)
    if all_files == bool(files):
        raise UsageError("give files or --all")
    rels = encrypted_files(root) if all_files else [_rel(root, f) for f in files]
    keyring = take_keyring_from_env()
    if keyring is None:
        raise UsageError(f"rotating needs a key: set {KEY_FILE_ENV} or {KEY_ENV}")
    rules = _rules(root)
    for rel in rels:
        edit.write_encrypted(root / rel, edit.rotate(root, rel, rules=rules, keyring=keyring))
        info(f"rotated {rel}")
    return EXIT_OK


@command.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> int:
    """Check every *.enc.yaml file: encrypted, for the right recipients, decryptable.

    Each file must be encrypted with no plain-text values, for the recipients
    .sops.yaml names, and (with a key) decrypt with a matching MAC. Exit 1 when a file
    has a problem. Plain-text Secret data in compiled stacks is checked by `konfig check`.

    \b
    Examples:
      konfig secrets check
      konfig secrets check --json
    """
    root = _root(ctx)
    report = audit_files(
        root, encrypted_files(root), rules=load_rules(root), keyring=take_keyring_from_env()
    )
    if as_json:
        echo_json(
            {
                "files": list(report.files),
                "verified": list(report.verified),
                "not_verified": list(report.not_verified),
                "problems": [
                    {"rule": p.rule, "file": p.file, "line": p.line, "message": p.message}
                    for p in report.problems
                ],
            }
        )
    else:
        for p in report.problems:
            where = p.file if p.line is None else f"{p.file}:{p.line}"
            click.echo(f"{where}: error: {p.message} [{p.rule}]")
        if report.not_verified:
            warn(
                f"not decrypted (no key for them in {KEY_FILE_ENV}/{KEY_ENV}): "
                + ", ".join(report.not_verified)
            )
        info(
            f"{len(report.files)} encrypted file(s), {len(report.verified)} decrypted and "
            f"verified, {len(report.problems)} problem(s)"
        )
    return EXIT_FINDINGS if report.problems else EXIT_OK
