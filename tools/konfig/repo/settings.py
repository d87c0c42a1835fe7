"""Repository-wide settings from ``konfig.yaml`` at the repository root.

This is the one documented place for toolchain settings: the Kubernetes version,
the render entry appended to every stack, the repo-wide change triggers and which
stacks are production-like (listed first in the pull-request comment). Path patterns
(triggers, production stacks) match component by component (:func:`path_matches`).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from konfig.errors import ConfigError
from konfig.repo.yamlio import load_yaml_file

CONFIG_FILE = "konfig.yaml"

DEFAULT_TRIGGERS = ("kcl.mod", "kcl.mod.lock", CONFIG_FILE, "base/render/**")
# Stacks whose stack.yaml does not say `production: true|false` are production-like
# when their path matches one of these (docs/report.md).
DEFAULT_PRODUCTION_STACKS = ("appops/*/**/prod", "appops/*/**/prod-*", "appops/*/**/production")


@dataclass(frozen=True)
class RepoConfig:
    kubernetes_version: str = "1.32"
    render_entry: str = "base/render/render.k"
    triggers: tuple[str, ...] = DEFAULT_TRIGGERS
    production_stacks: tuple[str, ...] = DEFAULT_PRODUCTION_STACKS
    extra: dict[str, Any] = field(default_factory=dict)


_KNOWN = {"kubernetesVersion", "renderEntry", "triggers", "productionStacks"}


def load_repo_config(root: Path) -> RepoConfig:
    path = root / CONFIG_FILE
    if not path.exists():
        return RepoConfig()
    return repo_config_from_data(load_yaml_file(path, root=root))


def repo_config_from_data(data: Any) -> RepoConfig:
    """Settings from already-parsed ``konfig.yaml`` data (e.g. read from a git commit)."""
    if data is None:
        return RepoConfig()
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", file=CONFIG_FILE, line=1)
    version = str(data.get("kubernetesVersion", "1.32"))
    render = data.get("renderEntry", "base/render/render.k")
    if not isinstance(render, str) or not render:
        raise ConfigError("`renderEntry` must be a non-empty path string", file=CONFIG_FILE)
    triggers = data.get("triggers", list(DEFAULT_TRIGGERS))
    if not isinstance(triggers, list) or not all(isinstance(t, str) for t in triggers):
        raise ConfigError("`triggers` must be a list of path patterns", file=CONFIG_FILE)
    production = data.get("productionStacks", list(DEFAULT_PRODUCTION_STACKS))
    if not isinstance(production, list) or not all(isinstance(p, str) for p in production):
        raise ConfigError(
            "`productionStacks` must be a list of stack path patterns (e.g. appops/*/prod)",
            file=CONFIG_FILE,
        )
    extra = {k: v for k, v in data.items() if k not in _KNOWN}
    return RepoConfig(
        kubernetes_version=version,
        render_entry=render,
        triggers=tuple(triggers),
        production_stacks=tuple(production),
        extra=extra,
    )


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
