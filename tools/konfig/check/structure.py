"""Structure rules: the repository layout and its YAML files.

- ``structure/<rule>`` for every problem repository discovery found (broken YAML,
  ``name`` not matching the directory, stack outside a project, nested project, ...);
- ``structure/unknown-key`` and ``structure/invalid-value``: keys of konfig.yaml,
  project.yaml, stack.yaml, ci-test/settings.yaml and kcl.yaml that Konfig does not
  know, or values of the wrong type, each with the keys allowed there (their contracts,
  ``konfig/contracts/*.schema.json``, are the one place that says which keys exist);
- ``structure/stack-main`` and ``structure/stack-ci-test``: every stack has ``main.k``
  (or a ``kcl.yaml`` listing its files) and a ``ci-test/`` directory;
- ``structure/project-duplicate``: two projects declare the same name (compared
  case-insensitively: they would clash on case-insensitive file systems);
- ``structure/appops-unexpected``: only project directories and a few well-known files
  sit at the top of ``appops/``;
- ``structure/kcl-mod``: the repository's ``kcl.mod`` is not TOML, has no ``[package]``
  with a ``name``, or has tables KCL does not know (KCL ignores a kcl.mod it cannot read,
  so a typo there silently drops the package settings and dependencies);
- ``structure/unsafe-name``: a project or stack name with glob or shell metacharacters,
  whitespace, control or invisible (bidi override) characters, or equal to a sibling's
  after Unicode normalisation (see :mod:`konfig.repo.names`);
- ``structure/link-outside``: a symbolic link under appops/ or base/ that leads out of
  the repository (KCL would compile a file no review of the repository shows);
- ``structure/unsafe-file-name``: a file or directory under appops/ or base/ whose name
  holds a control character (a newline splits it in every list of files);
- ``policy/disable-without-reason``: a policy switched off in stack.yaml without a reason.

A stack switches a policy off in its stack.yaml, for all its resources or for some::

    policies:
      disable:
        - rule: prod-replicas
          reason: redis-leader is a single writer by design
          resources: ["apps/v1:Deployment:guestbook-prod:redis-leader"]  # optional
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from konfig import contracts
from konfig.check.findings import Finding
from konfig.contracts.yamlpos import KeyPath, key_lines, line_of
from konfig.repo.kclmod import KCL_MOD_RULE, kcl_mod_problems
from konfig.repo.layout import (
    APPOPS,
    KCL_YAML,
    MAIN,
    PROJECT_FILE,
    STACK_FILE,
    Repository,
    Stack,
    is_within,
)
from konfig.repo.names import display, name_problems, normalisation_clashes
from konfig.repo.settings import CONFIG_FILE
from konfig.repo.yamlio import load_yaml_text

APPOPS_ALLOWED_FILES = frozenset({"README.md", ".gitkeep", ".gitignore", "OWNERS", "CODEOWNERS"})
CI_TEST = "ci-test"


def layout_findings(repo: Repository) -> list[Finding]:
    """Discovery's problems: each makes a stack or project unusable, so `konfig check`
    reports them whatever stacks it was asked about, as every other command does."""
    return [
        Finding(
            f"structure/{p.rule}", f"{p.message}: {p.hint}" if p.hint else p.message, p.file, p.line
        )
        for p in repo.problems
    ]


def check_structure(repo: Repository) -> list[Finding]:
    findings = layout_findings(repo)
    findings.extend(_config_files(repo))
    findings.extend(_appops_top(repo))
    findings.extend(_projects(repo))
    findings.extend(_unsafe_names(repo))
    findings.extend(_links_outside(repo))
    findings.extend(check_kcl_mod(repo.root))
    for stack in repo.stacks:
        findings.extend(check_stack(repo, stack))
    return findings


def _read(repo: Repository, rel: str) -> tuple[Any, dict[KeyPath, int]]:
    try:
        text = (repo.root / rel).read_text(encoding="utf-8")
        return load_yaml_text(text, file=rel), key_lines(text)
    except Exception:  # unreadable or broken: discovery already reported it
        return None, {}


def _contract_findings(
    repo: Repository, rel: str, *, stack: str | None = None, skip_name: bool = False
) -> list[Finding]:
    """``structure/unknown-key`` and ``structure/invalid-value``: ``rel`` against the
    contract its path names (:mod:`konfig.contracts`); nothing for other files.
    ``skip_name``: discovery already reported the file's ``name``."""
    name = contracts.for_file(rel)
    if name is None:
        return []
    try:
        text = (repo.root / rel).read_text(encoding="utf-8")
        data = load_yaml_text(text, file=rel)
    except Exception:  # unreadable or broken YAML: discovery or compiling reports it
        return []
    return [
        Finding(f"structure/{v.problem}", v.message, rel, v.line, stack=stack)
        for v in contracts.violations(name, data, file=rel, text=text)
        if not (skip_name and v.path[:1] == ("name",))
    ]


def _config_files(repo: Repository) -> list[Finding]:
    """konfig.yaml against its contract (when present)."""
    if not (repo.root / CONFIG_FILE).is_file():
        return []
    return _contract_findings(repo, CONFIG_FILE)


def _stack_files(repo: Repository, stack: Stack) -> list[Finding]:
    """Every file of the stack directory and its ci-test/ that has a contract."""
    findings: list[Finding] = []
    for folder in (repo.root / stack.path, repo.root / stack.path / CI_TEST):
        if not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir()):
            if entry.is_file():
                rel = entry.relative_to(repo.root).as_posix()
                findings.extend(_contract_findings(repo, rel, stack=stack.path))
    return findings


def _appops_top(repo: Repository) -> list[Finding]:
    appops = repo.root / APPOPS
    if not appops.is_dir():
        return []
    findings: list[Finding] = []
    for entry in sorted(appops.iterdir()):
        rel = f"{APPOPS}/{entry.name}"
        if entry.is_dir():
            if entry.name.startswith("."):
                continue
            if not (entry / PROJECT_FILE).is_file():
                findings.append(
                    Finding(
                        "structure/appops-unexpected",
                        f"directory {entry.name!r} at the top of {APPOPS}/ is not a project "
                        f"(no {PROJECT_FILE}): add {rel}/{PROJECT_FILE} with `name: {entry.name}`",
                        rel,
                    )
                )
        elif entry.name not in APPOPS_ALLOWED_FILES:
            allowed = ", ".join(sorted(APPOPS_ALLOWED_FILES))
            findings.append(
                Finding(
                    "structure/appops-unexpected",
                    f"unexpected file at the top of {APPOPS}/: only project directories and "
                    f"{allowed} belong here",
                    rel,
                )
            )
    return findings


def _projects(repo: Repository) -> list[Finding]:
    """Keys of every project.yaml directly under appops/, and duplicate names."""
    findings: list[Finding] = []
    seen: dict[str, str] = {}
    appops = repo.root / APPOPS
    if not appops.is_dir():
        return findings
    named = {p.file for p in repo.problems if p.rule == "project-name"}
    for path in sorted(appops.glob(f"*/{PROJECT_FILE}")):
        rel = path.relative_to(repo.root).as_posix()
        data, lines = _read(repo, rel)
        if not isinstance(data, dict):
            continue
        findings.extend(_contract_findings(repo, rel, skip_name=rel in named))
        name = data.get("name")
        if not isinstance(name, str):
            continue
        first = seen.get(name.lower())
        if first is not None:
            findings.append(
                Finding(
                    "structure/project-duplicate",
                    f"project name {name!r} is already used by {first}: project names must "
                    "be unique (ignoring case)",
                    rel,
                    lines.get(("name",)),
                )
            )
        else:
            seen[name.lower()] = rel
    return findings


def check_kcl_mod(root: Path) -> list[Finding]:
    """``structure/kcl-mod``: the repository's kcl.mod (:mod:`konfig.repo.kclmod`; compile,
    and so preview and apply, refuse the same problems)."""
    return [Finding(KCL_MOD_RULE, p.message, p.file, p.line) for p in kcl_mod_problems(root)]


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _links_outside(repo: Repository) -> list[Finding]:
    """Symbolic links under appops/ and base/ that lead out of the repository (KCL and
    konfig would read a file that a review of the repository never shows), and names
    with control characters."""
    root = repo.root.resolve()
    findings: list[Finding] = []
    for top in (APPOPS, "base"):
        for folder, dirs, files in os.walk(repo.root / top):
            for name in sorted([*dirs, *files]):
                path = Path(folder, name)
                if _CONTROL.search(name):
                    rel = path.relative_to(repo.root).as_posix()
                    findings.append(
                        Finding(
                            "structure/unsafe-file-name",
                            f"{display(rel)}: a file name with a control character (a "
                            "newline, a tab, an escape): every list of files (git, CI outputs, "
                            "the PR comment) reads it as two names or not at all; rename it",
                            display(rel),
                            None,
                        )
                    )
                if not path.is_symlink():
                    continue
                target = path.resolve()
                if target.is_relative_to(root):
                    continue
                rel = path.relative_to(repo.root).as_posix()
                findings.append(
                    Finding(
                        "structure/link-outside",
                        f"{display(rel)} is a symbolic link to {display(str(target))}, outside "
                        "the repository: what compiles is not what the repository shows; "
                        "replace the link with the file itself (or link inside the repository)",
                        rel,
                        None,
                    )
                )
    return findings


def _unsafe_names(repo: Repository) -> list[Finding]:
    """Project and stack names that a shell, a glob or a terminal reads differently."""
    # (kind, name, the file that declares it, the siblings it is compared with)
    entries: list[tuple[str, str, str, str]] = [
        ("project", Path(p.path).name, f"{p.path}/{PROJECT_FILE}", APPOPS) for p in repo.projects
    ]
    entries += [
        ("stack", Path(s.path).name, f"{s.path}/{STACK_FILE}", str(Path(s.path).parent))
        for s in repo.stacks
    ]
    siblings: dict[str, list[str]] = {}
    for _kind, name, _file, parent in entries:
        siblings.setdefault(parent, []).append(name)
    clashes = {parent: normalisation_clashes(names) for parent, names in siblings.items()}
    findings: list[Finding] = []
    for kind, name, file, parent in entries:
        reasons = name_problems(name)
        others = clashes[parent].get(name, [])
        if others:
            reasons.append(
                "equal to "
                + ", ".join(f"'{display(o)}'" for o in others)
                + " after Unicode normalisation (NFKC): two directories that look the same"
            )
        if not reasons:
            continue
        _data, lines = _read(repo, file)
        findings.append(
            Finding(
                "structure/unsafe-name",
                f"unsafe {kind} name '{display(name)}': {'; '.join(reasons)}; rename the "
                f"directory (and `name:` in {Path(file).name}) using letters, digits, "
                "'-', '_' and '.'",
                file,
                lines.get(("name",), 1),
                stack=str(Path(file).parent) if kind == "stack" else None,
            )
        )
    return findings


def check_stack(repo: Repository, stack: Stack) -> list[Finding]:
    rel = f"{stack.path}/{STACK_FILE}"
    data, lines = _read(repo, rel)
    findings: list[Finding] = []
    findings.extend(_stack_files(repo, stack))
    if isinstance(data, dict):
        findings.extend(_disable_entries(data, rel, lines, stack.path))
    stack_dir = repo.root / stack.path
    if not (stack_dir / MAIN).is_file() and not (stack_dir / KCL_YAML).is_file():
        findings.append(
            Finding(
                "structure/stack-main",
                f"stack has no {MAIN}: add {stack.path}/{MAIN} declaring the stack's apps",
                rel,
                stack=stack.path,
            )
        )
    if not (stack_dir / CI_TEST).is_dir():
        findings.append(
            Finding(
                "structure/stack-ci-test",
                f"stack has no {CI_TEST}/ directory: add {stack.path}/{CI_TEST}/settings.yaml "
                "(compile options) and run `konfig test --update` for its golden",
                rel,
                stack=stack.path,
            )
        )
    return findings


@dataclass(frozen=True)
class Exemption:
    """A policy a stack switches off: for every resource, or only for ``resources`` (ids)."""

    rule: str
    reason: str
    resources: tuple[str, ...] | None = None

    def covers(self, resource_id: str | None) -> bool:
        return self.resources is None or resource_id in self.resources


def disabled_rules(stack: Stack) -> dict[str, list[Exemption]]:
    """The policies a stack switches off, by rule id (entries without a reason skipped)."""
    return exemptions(stack.raw)


def exemptions(raw: Mapping[str, Any] | None) -> dict[str, list[Exemption]]:
    """The policies a stack.yaml's data (``raw``) switches off, by rule id (entries
    without a reason skipped)."""
    policies = raw.get("policies") if isinstance(raw, Mapping) else None
    entries = policies.get("disable") if isinstance(policies, dict) else None
    out: dict[str, list[Exemption]] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("rule"), str):
            reason = entry.get("reason")
            if isinstance(reason, str) and reason.strip():
                ids = entry.get("resources")
                scope = tuple(str(i) for i in ids) if isinstance(ids, list) else None
                exemption = Exemption(entry["rule"], reason.strip(), scope)
                out.setdefault(entry["rule"], []).append(exemption)
    return out


def _disable_entries(
    data: dict[str, Any], file: str, lines: dict[KeyPath, int], stack: str
) -> Iterable[Finding]:
    """``policy/disable-without-reason`` (the entries' shape is the contract's)."""
    policies = data.get("policies")
    entries = policies.get("disable") if isinstance(policies, dict) else None
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, dict) or not isinstance(entry.get("rule"), str):
            continue
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            yield Finding(
                "policy/disable-without-reason",
                f"policy {entry['rule']!r} is disabled without a reason: add `reason:` saying "
                "why this stack is an exception",
                file,
                line_of(lines, ("policies", "disable", index)),
                stack=stack,
            )


def within_selection(finding: Finding, dirs: Iterable[str]) -> bool:
    """Whether a finding's file lies in one of ``dirs`` (or at the top of appops/)."""
    if finding.file is None:
        return True
    if Path(finding.file).parent.as_posix() == APPOPS:
        return True
    return any(is_within(finding.file, d) for d in dirs)
