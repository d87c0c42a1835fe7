"""Repository-wide settings from ``konfig.yaml`` at the repository root.

This is the one documented place for toolchain settings: the Kubernetes version,
the render entry appended to every stack, the repo-wide change triggers and which
stacks are production-like (listed first in the pull-request comment). Path patterns
(triggers, production stacks) match component by component (:func:`path_matches`).
"""

from __future__ import annotations

import contextlib
import fnmatch
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from konfig import contracts
from konfig.repo.files import WriteError, WriteScope, atomic_write_text
from konfig.repo.statmemo import StatMemo

CONFIG_FILE = "konfig.yaml"
CACHE_DIR = ".cache/konfig"  # konfig's caches, in the repository root (gitignored)

DEFAULT_TRIGGERS = ("kcl.mod", "kcl.mod.lock", CONFIG_FILE, "base/render/**")
# Stacks whose stack.yaml does not say `production: true|false` are production-like
# when their path matches one of these (docs/report.md).
DEFAULT_PRODUCTION_STACKS = ("appops/*/**/prod", "appops/*/**/prod-*", "appops/*/**/production")
# How a pull request's stacks spread over CI shards (konfig.pipeline.sharding).
DEFAULT_STACKS_PER_SHARD = 10
DEFAULT_MAX_SHARDS = 8


@dataclass(frozen=True)
class RepoConfig:
    kubernetes_version: str = "1.32"
    render_entry: str = "base/render/render.k"
    triggers: tuple[str, ...] = DEFAULT_TRIGGERS
    production_stacks: tuple[str, ...] = DEFAULT_PRODUCTION_STACKS
    # system namespaces (default, kube-*) stacks may write to: none unless listed
    allow_system_namespaces: tuple[str, ...] = ()
    # CRD files `konfig gen schemas` generates KCL schemas from (besides Kubernetes')
    schema_crds: tuple[str, ...] = ()
    # CI shards: about this many stacks each, at most max_shards (`sharding`)
    stacks_per_shard: int = DEFAULT_STACKS_PER_SHARD
    max_shards: int = DEFAULT_MAX_SHARDS
    # the platform's Terraform policy (provider configurations, granted variables), as
    # written: konfig.tofu.policy reads it
    terraform: dict[str, Any] = field(default_factory=dict)
    # what needs a confirmation before apply (danger classes, the count guard), as
    # written: konfig.engine.guards.DangerPolicy reads it
    dangers: dict[str, Any] = field(default_factory=dict)
    ignore: tuple[dict[str, Any], ...] = ()  # ignore rules, as written (engine.ignore)
    # who owns what (konfig.repo.owners reads it); None: ownership is off
    owners: dict[str, Any] | None = None
    # the ServiceAccount ("namespace/name") each project or stack applies as
    identities: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def load_repo_config(root: Path, memo: StatMemo | None = None) -> RepoConfig:
    """``konfig.yaml`` of the repository at ``root`` (defaults without one); ``memo``
    remembers the settings of a file found right, by its stat."""
    path = root / CONFIG_FILE
    try:
        st = path.stat()
    except OSError:
        return RepoConfig()  # no konfig.yaml (an unreadable one fails below)
    if memo is not None:
        known = memo.get(CONFIG_FILE, st)
        if isinstance(known, dict):
            try:
                return config_from_fields(known)
            except (TypeError, ValueError):
                pass  # not what this code remembers: read again
    from konfig.repo.yamlio import load_yaml_text, read_text  # PyYAML: only when read

    text = read_text(path, root=root)
    data = load_yaml_text(text, file=CONFIG_FILE)
    config = repo_config_from_data(data, text=text, memo=contracts_memo(root))
    if memo is not None:
        memo.put(CONFIG_FILE, st, config_fields(config))
    return config


def config_fields(config: RepoConfig) -> dict[str, Any]:
    """The settings as plain JSON data (:func:`config_from_fields` reads them back)."""
    out: dict[str, Any] = {}
    for f in fields(config):
        value = getattr(config, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def config_from_fields(known: dict[str, Any]) -> RepoConfig:
    """Settings from :func:`config_fields`' data; TypeError when they are not such."""
    return RepoConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in known.items()}  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class ValidMemo:
    """A :class:`konfig.contracts.Memo` in a cache folder: an empty file per document
    found valid, written through the write guard (``scope``: the repository)."""

    folder: Path
    scope: WriteScope

    def known(self, key: str) -> bool:
        return (self.folder / key).is_file()

    def remember(self, key: str) -> None:
        with contextlib.suppress(WriteError):  # read-only, or outside: validate next time
            atomic_write_text(self.folder / key, "", scope=self.scope)


@lru_cache(maxsize=8)  # once per repository: compiling asks for every stack
def contracts_memo(root: Path) -> ValidMemo:
    """Where the repository's documents found valid are remembered (in its cache)."""
    return ValidMemo(root / CACHE_DIR / "contracts", WriteScope.repository(root))


def repo_config_from_data(
    data: Any, *, text: str | None = None, memo: contracts.Memo | None = None
) -> RepoConfig:
    """Settings from already-parsed ``konfig.yaml`` data (e.g. read from a git commit);
    ``text``, its source, gives errors their line (and ``memo``, a cache directory,
    spares validating it again: :func:`konfig.contracts.validate`).

    The data must match the contract (``konfig/contracts/konfig.schema.json``), keys it
    does not know aside: those are kept in ``extra`` (a newer Konfig's settings) and
    ``konfig check`` reports them (``structure/unknown-key``).
    """
    if data is None:
        return RepoConfig()
    contracts.validate(
        "konfig",
        data,
        file=CONFIG_FILE,
        text=text,
        ignore_unknown=True,
        hint="see docs/contracts/konfig.md",
        memo=memo,
    )
    known = contracts.schema("konfig")["properties"]
    defaults = RepoConfig()
    sharding = data.get("sharding") or {}
    return RepoConfig(
        kubernetes_version=data.get("kubernetesVersion", defaults.kubernetes_version),
        render_entry=data.get("renderEntry", defaults.render_entry),
        triggers=tuple(data.get("triggers", defaults.triggers)),
        production_stacks=tuple(data.get("productionStacks", defaults.production_stacks)),
        allow_system_namespaces=tuple(data.get("allowSystemNamespaces", ())),
        schema_crds=tuple(data.get("schemaCrds", ())),
        stacks_per_shard=int(sharding.get("stacksPerShard", defaults.stacks_per_shard)),
        max_shards=int(sharding.get("maxShards", defaults.max_shards)),
        terraform=dict(data.get("terraform") or {}),
        dangers=dict(data.get("dangers") or {}),
        ignore=tuple(data.get("ignore") or ()),
        owners=dict(data["owners"] or {}) if "owners" in data else None,
        identities=dict(data.get("identities") or {}),
        extra={k: v for k, v in data.items() if k not in known},
    )


def identity_of(identities: dict[str, str], stack_path: str) -> str | None:
    """The ServiceAccount (``namespace/name``) the stack applies as: konfig.yaml
    ``identities`` by stack path, else by project name; None: the kubeconfig's user."""
    if stack_path in identities:
        return identities[stack_path]
    parts = stack_path.split("/")
    return identities.get(parts[1]) if len(parts) > 2 else None


def impersonated_user(identity: str) -> str:
    """The user name of ServiceAccount ``namespace/name`` (what the API server names)."""
    namespace, _, name = identity.partition("/")
    return f"system:serviceaccount:{namespace}:{name}"


def path_matches(path: str, pattern: str) -> bool:
    """Component-wise glob match; ``**`` spans any number of directories.

    A pattern without glob characters also matches everything inside that directory.
    """
    pattern = pattern.strip("/")
    if not any(ch in pattern for ch in "*?["):
        return path == pattern or path.startswith(pattern + "/")
    return _match(_parts(path), _pattern_parts(pattern))


def _parts(path: str) -> tuple[str, ...]:
    # PurePosixPath(path).parts without building a path object (this runs per stack)
    return tuple(p for p in path.split("/") if p and p != ".")


@lru_cache(maxsize=256)
def _pattern_parts(pattern: str) -> tuple[str, ...]:
    return _parts(pattern)


def _match(parts: tuple[str, ...], pat: tuple[str, ...]) -> bool:
    if not pat:
        return not parts
    if pat[0] == "**":
        return any(_match(parts[i:], pat[1:]) for i in range(len(parts) + 1))
    if not parts or not fnmatch.fnmatchcase(parts[0], pat[0]):
        return False
    return _match(parts[1:], pat[1:])


def is_production(path: str, declared: Any, patterns: tuple[str, ...]) -> bool:
    """Whether the stack at ``path`` is production-like: its stack.yaml's ``production``
    (``declared``, when a boolean) decides, else the ``productionStacks`` patterns."""
    if isinstance(declared, bool):
        return declared
    return any(path_matches(path, p) for p in patterns)
