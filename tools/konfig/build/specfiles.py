"""Compiled Specs read back from a folder (``konfig compile --out DIR``), never compiled.

The privileged half of the pull-request pipeline (docs/security.md) does not run the
pull request's KCL: it previews the Specs that the unprivileged half compiled, which
reach it as an artifact. That artifact is data the pull request controls, so it is
read as hostile input:

- the folder holds ``<stack path>/spec.yaml`` files and nothing else: no link (to
  follow one could show another file's content in an error), no other file, nothing
  larger than a configuration file may be;
- each file is YAML within the usual bounds (:func:`konfig.repo.yamlio.load_yaml_text`),
  matches the ``spec`` contract (file and line for each violation) and makes a Spec
  (:func:`konfig.spec.spec_from_items`), as compiling it would have;
- one bad file refuses the whole folder (:class:`~konfig.contracts.ContractError`): a
  preview of part of an artifact someone tampered with would be a preview of nothing
  anyone reviewed.

A stack without a file did not compile (its error is in the compile results): its
result carries a compile error saying so, as a failed compile would.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from konfig import contracts
from konfig.build.compiler import CompileError, CompileResult
from konfig.contracts import ContractError, Violation
from konfig.errors import ConfigError
from konfig.repo.yamlio import MAX_FILE_BYTES, load_yaml_text
from konfig.spec import Spec, SpecError, spec_from_items

SPEC_FILE = "spec.yaml"
CONTRACT = "spec"
HINT = (
    "the folder must be what `konfig compile --out DIR` wrote (in CI: the compile job's "
    "artifact, unchanged)"
)


def read_specs(folder: Path, stack_paths: Sequence[str]) -> dict[str, CompileResult]:
    """The Specs of ``stack_paths`` from ``folder``, as compile results (a stack with no
    file: a result with a compile error). Every file of the folder is checked first;
    :class:`ContractError` (exit 1) lists what is wrong, file and line, when any is."""
    specs = _read_folder(folder)
    results: dict[str, CompileResult] = {}
    for path in stack_paths:
        spec = specs.get(path)
        if spec is None:
            error = CompileError(
                f"not compiled: no {path}/{SPEC_FILE} in {folder} (a stack that fails to "
                "compile has none: its error is in the compile results)"
            )
            results[path] = CompileResult(path, None, error, 0.0)
        else:
            results[path] = CompileResult(path, spec, None, 0.0)
    return results


def read_listed(folder: Path, stack_paths: Sequence[str]) -> dict[str, Spec]:
    """The Specs of those of ``stack_paths`` that ``folder`` holds, reading nothing else
    (a cache of every stack's Spec, of which a preview needs a few: the offline
    preview's base side). Each file read is checked as :func:`read_specs` checks it,
    and no folder on its way may be a link; one bad file refuses them all
    (:class:`ContractError`, file and line)."""
    _check_folder(folder)
    problems: list[Violation] = []
    specs: dict[str, Spec] = {}
    for stack in sorted(set(stack_paths)):
        if not _is_stack_path(stack):
            continue
        path = folder / stack / SPEC_FILE
        name = f"{folder.as_posix()}/{stack}/{SPEC_FILE}"
        parts = stack.split("/")
        linked = [
            folder.joinpath(*parts[:i])
            for i in range(1, len(parts) + 1)
            if folder.joinpath(*parts[:i]).is_symlink()
        ]
        if linked:
            problems.append(_problem(folder, linked[0], "is a link, not a folder"))
            continue
        if not path.exists() and not path.is_symlink():
            continue  # not in the cache: the caller compiles it
        try:
            specs[stack] = _read_one(path, name)
        except ContractError as exc:
            problems.extend(exc.violations)
        except ConfigError as exc:
            problems.append(Violation("invalid-value", (), exc.problem, exc.file, exc.line))
    if problems:
        raise ContractError(problems, hint=HINT)
    return specs


def _check_folder(folder: Path) -> None:
    try:
        info = os.lstat(folder)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the Specs' folder: {exc.strerror}", file=str(folder)
        ) from exc
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(
            "is not a folder of Specs (a link, or a file)", file=str(folder), hint=HINT
        )


def _read_folder(folder: Path) -> dict[str, Spec]:
    _check_folder(folder)
    problems: list[Violation] = []
    specs: dict[str, Spec] = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if (here / name).is_symlink():
                problems.append(_problem(folder, here / name, "is a link, not a folder"))
        dirnames[:] = sorted(d for d in dirnames if not (here / d).is_symlink())
        for name in sorted(filenames):
            path = here / name
            rel = path.relative_to(folder).as_posix()
            stack = rel.removesuffix(f"/{SPEC_FILE}")
            if name != SPEC_FILE or not _is_stack_path(stack):
                problems.append(
                    _problem(
                        folder, path, f"unexpected file: only appops/<project>/<stack>/{SPEC_FILE}"
                    )
                )
                continue
            try:
                spec = _read_one(path, f"{folder.as_posix()}/{rel}")
            except ContractError as exc:
                problems.extend(exc.violations)
                continue
            except ConfigError as exc:
                problems.append(Violation("invalid-value", (), exc.problem, exc.file, exc.line))
                continue
            specs[stack] = spec
    if problems:
        raise ContractError(problems, hint=HINT)
    return specs


def _is_stack_path(rel: str) -> bool:
    parts = rel.split("/")
    return (
        len(parts) == 3 and parts[0] == "appops" and all(p and p not in (".", "..") for p in parts)
    )


def _problem(folder: Path, path: Path, message: str) -> Violation:
    return Violation(
        "invalid-value", (), message, f"{folder.as_posix()}/{path.relative_to(folder).as_posix()}"
    )


def _read_one(path: Path, name: str) -> Spec:
    """One spec.yaml: a regular file (not followed if a link), bounded, UTF-8 YAML that
    matches the contract and makes a Spec."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        why = "is a link, not a file" if path.is_symlink() else f"cannot read: {exc.strerror}"
        raise ConfigError(why, file=name) from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ConfigError("is not a regular file", file=name)
        raw = handle.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"is larger than {MAX_FILE_BYTES >> 20} MiB", file=name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text (byte {exc.start}: {exc.reason})", file=name) from exc
    data: Any = load_yaml_text(text, file=name)
    contracts.validate(CONTRACT, data, file=name, text=text)
    try:
        return spec_from_items(data["resources"])
    except SpecError as exc:
        raise ConfigError(f"invalid spec: {exc}", file=name) from exc
