"""Repository-wide settings from ``konfig.yaml`` at the repository root.

This is the one documented place for toolchain settings: the Kubernetes version,
the render entry appended to every stack and the repo-wide change triggers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from konfig.errors import ConfigError
from konfig.repo.yamlio import load_yaml_file

CONFIG_FILE = "konfig.yaml"

DEFAULT_TRIGGERS = ("kcl.mod", "kcl.mod.lock", CONFIG_FILE, "base/render/**")


@dataclass(frozen=True)
class RepoConfig:
    kubernetes_version: str = "1.32"
    render_entry: str = "base/render/render.k"
    triggers: tuple[str, ...] = DEFAULT_TRIGGERS
    extra: dict[str, Any] = field(default_factory=dict)


_KNOWN = {"kubernetesVersion", "renderEntry", "triggers"}


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
    extra = {k: v for k, v in data.items() if k not in _KNOWN}
    return RepoConfig(
        kubernetes_version=version,
        render_entry=render,
        triggers=tuple(triggers),
        extra=extra,
    )
