"""Where OpenTofu gets its providers, and the lock file that verifies them; pure.

konfig.yaml (the platform team's) chooses the installation::

    terraform:
      installation: {}                                   # the registry (the default)
      installation: {networkMirror: https://mirror.example.com/providers/}
      installation: {filesystemMirror: /opt/tofu/providers}   # air-gapped runners

:func:`cli_config` is the OpenTofu CLI configuration of a mode (``TF_CLI_CONFIG_FILE``,
written by the command that runs OpenTofu). Only one source ever: a mirror mode never
falls back to the registry.

The repository's dependency lock file (:data:`LOCK_FILE` at its root, checked in)
holds each provider's version and hashes. OpenTofu runs with ``-lockfile=readonly``:
a package whose hash the file does not hold is refused, and nothing updates the file
but a person (``tofu providers lock``, reviewed like any change). :func:`lock_for`
gives one stack's working directory the entries of the providers it requires (OpenTofu
refuses a read-only lock file with entries its configuration does not require).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from konfig.errors import KonfigError

LOCK_FILE = ".terraform.lock.hcl"
DEFAULT_HOST = "registry.opentofu.org"

REGISTRY = "registry"
NETWORK_MIRROR = "networkMirror"
FILESYSTEM_MIRROR = "filesystemMirror"
MODES = (REGISTRY, NETWORK_MIRROR, FILESYSTEM_MIRROR)

# the platforms `tofu providers lock` records in the documented command
LOCK_PLATFORMS = ("linux_amd64", "linux_arm64", "darwin_arm64")


@dataclass(frozen=True)
class Installation:
    """How OpenTofu installs providers: ``mode`` (one of :data:`MODES`) and, for a
    mirror, its ``url`` or ``path`` (absolute)."""

    mode: str = REGISTRY
    location: str = ""

    def describe(self) -> str:
        if self.mode == NETWORK_MIRROR:
            return f"the network mirror {self.location}"
        if self.mode == FILESYSTEM_MIRROR:
            return f"the filesystem mirror {self.location}"
        return "the registry"


def installation_from_data(data: Mapping[str, Any] | None) -> Installation:
    """konfig.yaml's ``terraform.installation`` (valid against its contract); a relative
    filesystem mirror stays relative (:func:`cli_config` resolves it)."""
    for mode in (NETWORK_MIRROR, FILESYSTEM_MIRROR):
        value = (data or {}).get(mode)
        if value:
            return Installation(mode, str(value))
    return Installation()


def cli_config(installation: Installation) -> str:
    """The OpenTofu CLI configuration that installs providers the way ``installation``
    says, and only that way."""
    header = (
        "# Written by konfig from konfig.yaml `terraform.installation`: providers come "
        f"only from {installation.describe()}.\n"
    )
    if installation.mode == NETWORK_MIRROR:
        body = f"  network_mirror {{\n    url = {json.dumps(installation.location)}\n  }}\n"
    elif installation.mode == FILESYSTEM_MIRROR:
        body = f"  filesystem_mirror {{\n    path = {json.dumps(installation.location)}\n  }}\n"
    else:
        body = "  direct {}\n"
    return header + "provider_installation {\n" + body + "}\n"


# --- the lock file -----------------------------------------------------------------------


class LockFileError(KonfigError):
    """The lock file is missing, unreadable, or lacks a provider a stack requires."""


def provider_address(source: str) -> str:
    """A source address as the lock file names it: ``host/namespace/type``, the host
    OpenTofu's default registry when the source names none, lower-case."""
    parts = source.lower().split("/")
    return "/".join([DEFAULT_HOST, *parts] if len(parts) == 2 else parts)


_BLOCK_START = re.compile(r'^provider\s+"([^"]+)"\s*\{\s*$')


def parse_lock(text: str, file: str) -> dict[str, str]:
    """The lock file's ``provider`` blocks by address (each block's text). The format
    OpenTofu writes: top-level ``provider "<address>" { ... }`` blocks, comments and
    blank lines; anything else is an error naming the line."""
    blocks: dict[str, str] = {}
    current: list[str] | None = None
    address = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if current is not None:
            current.append(line)
            if line.rstrip() == "}":
                blocks[address] = "\n".join(current) + "\n"
                current = None
            continue
        if not stripped or stripped.startswith(("#", "//")):
            continue
        match = _BLOCK_START.match(stripped)
        if not match:
            raise LockFileError(
                f"{file}:{number}: not a dependency lock file as OpenTofu writes it "
                f'(expected `provider "<address>" {{`, got {stripped[:60]!r})',
                hint=f"write it with `tofu providers lock` ({docs_hint()})",
            )
        address = provider_address(match.group(1))
        current = [line]
    if current is not None:
        raise LockFileError(
            f"{file}: the block of provider {address} is not closed",
            hint=f"write it with `tofu providers lock` ({docs_hint()})",
        )
    return blocks


def docs_hint() -> str:
    return 'docs/terraform.md, "The lock file"'


def lock_command(addresses: Iterable[str]) -> str:
    """The command that records the registry's hashes of ``addresses`` (in a working
    directory whose configuration requires them, e.g. a stack's)."""
    platforms = " ".join(f"-platform={p}" for p in LOCK_PLATFORMS)
    return f"tofu providers lock {platforms} {' '.join(sorted(addresses))}"


def lock_for(text: str | None, file: str, sources: Iterable[str]) -> str:
    """The lock file of a working directory whose configuration requires ``sources``:
    the repository lock file's (``text``, read from ``file``) entries for them, in
    order. A LockFileError when there is no lock file or it lacks one of them."""
    wanted = sorted({provider_address(s) for s in sources})
    if text is None:
        raise LockFileError(
            f"no dependency lock file: {file} does not exist, and OpenTofu installs a "
            "provider only when the lock file holds its hashes",
            hint=f"record them with `{lock_command(wanted)}` and commit {LOCK_FILE} "
            f"at the repository's root ({docs_hint()})",
        )
    blocks = parse_lock(text, file)
    missing = [a for a in wanted if a not in blocks]
    if missing:
        raise LockFileError(
            f"{file} holds no entry for provider {', '.join(missing)}: OpenTofu installs "
            "a provider only when the lock file holds its version and hashes",
            hint=f"record them with `{lock_command(missing)}`, review and commit "
            f"{LOCK_FILE} ({docs_hint()})",
        )
    return "".join(blocks[a] + ("\n" if i < len(wanted) - 1 else "") for i, a in enumerate(wanted))
