"""Provider installation modes and the lock file (konfig.tofu.installation); the
end-to-end runs through OpenTofu are in commands/test_terraform_install.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from konfig.contracts import violations
from konfig.tofu.installation import (
    FILESYSTEM_MIRROR,
    NETWORK_MIRROR,
    REGISTRY,
    Installation,
    LockFileError,
    cli_config,
    installation_from_data,
    lock_for,
    parse_lock,
    provider_address,
)
from konfig.tofu.policy import policy_from_data

PG = """\
provider "registry.opentofu.org/cyrilgdn/postgresql" {
  version     = "1.26.0"
  constraints = "1.26.0"
  hashes = [
    "h1:vmGc/BE4B1Z/Pg5mE/quHNZG4qgfZVvX7KAJdl+bdUk=",
  ]
}
"""
RANDOM = """\
provider "registry.opentofu.org/hashicorp/random" {
  version = "3.6.0"
  hashes = [
    "zh:0123",
  ]
}
"""
LOCK = '# This file is maintained automatically by "tofu init".\n\n' + PG + "\n" + RANDOM


def test_installation_from_konfig_yaml() -> None:
    assert installation_from_data(None) == Installation(REGISTRY, "")
    assert installation_from_data({}) == Installation(REGISTRY, "")
    assert installation_from_data({"networkMirror": "https://m.example/p/"}) == Installation(
        NETWORK_MIRROR, "https://m.example/p/"
    )
    assert installation_from_data({"filesystemMirror": "/opt/p"}) == Installation(
        FILESYSTEM_MIRROR, "/opt/p"
    )
    policy = policy_from_data({"installation": {"filesystemMirror": "mirror"}})
    assert policy.installation == Installation(FILESYSTEM_MIRROR, "mirror")


def test_cli_config_uses_one_source_only() -> None:
    registry = cli_config(Installation())
    assert "direct {}" in registry and "mirror" not in registry.split("\n", 1)[1]
    network = cli_config(Installation(NETWORK_MIRROR, "https://m.example/p/"))
    assert 'network_mirror {\n    url = "https://m.example/p/"\n  }' in network
    assert "direct" not in network
    files = cli_config(Installation(FILESYSTEM_MIRROR, '/opt/a "b"'))
    assert 'filesystem_mirror {\n    path = "/opt/a \\"b\\""\n  }' in files
    assert "direct" not in files


@pytest.mark.parametrize(
    ("installation", "problem"),
    [
        ({"networkMirror": "http://m.example/p/"}, "must match ^https://"),
        (
            {"networkMirror": "https://m.example/p/", "filesystemMirror": "/x"},
            "too many properties",
        ),
        ({"registry": True}, "registry"),
    ],
)
def test_the_contract_refuses_a_wrong_installation(
    installation: dict[str, object], problem: str
) -> None:
    found = violations("konfig", {"terraform": {"installation": installation}})
    assert found and problem in " ".join(str(v) for v in found), found


def test_provider_address_names_the_default_registry() -> None:
    assert provider_address("cyrilgdn/postgresql") == "registry.opentofu.org/cyrilgdn/postgresql"
    assert provider_address("Example.com/A/b") == "example.com/a/b"


def test_lock_for_gives_a_workdir_the_entries_it_requires() -> None:
    assert set(parse_lock(LOCK, "x")) == {
        "registry.opentofu.org/cyrilgdn/postgresql",
        "registry.opentofu.org/hashicorp/random",
    }
    # a state-only provider is named without its host: the same entry
    assert lock_for(LOCK, ".terraform.lock.hcl", ["cyrilgdn/postgresql"]) == PG
    both = lock_for(LOCK, "f", ["hashicorp/random", "registry.opentofu.org/cyrilgdn/postgresql"])
    assert both == PG + "\n" + RANDOM


def test_lock_for_refuses_a_missing_file_or_entry() -> None:
    with pytest.raises(LockFileError) as missing:
        lock_for(None, "/repo/.terraform.lock.hcl", ["registry.opentofu.org/cyrilgdn/postgresql"])
    assert "/repo/.terraform.lock.hcl does not exist" in missing.value.message
    assert "tofu providers lock -platform=linux_amd64" in (missing.value.hint or "")
    with pytest.raises(LockFileError) as absent:
        lock_for(PG, "/repo/.terraform.lock.hcl", ["example.com/acme/thing"])
    assert "holds no entry for provider example.com/acme/thing" in absent.value.message
    assert "example.com/acme/thing" in (absent.value.hint or "")


def test_parse_lock_refuses_what_opentofu_does_not_write() -> None:
    with pytest.raises(LockFileError, match=r"f:2: not a dependency lock file"):
        parse_lock("# ok\nterraform {\n}\n", "f")
    with pytest.raises(LockFileError, match="is not closed"):
        parse_lock(PG.rsplit("}", 1)[0], "f")


def test_the_lock_file_a_run_verifies_against(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The root's; a pull request's preview (the policy from the default branch's
    konfig.yaml) the one beside that file, so the pull request's own lock file cannot
    admit a package; a runner's own mirror its lock file."""
    from konfig.commands._common import _lock_file
    from konfig.repo.files import WriteScope

    for name in ("KONFIG_TOFU_LOCK_FILE", "KONFIG_TERRAFORM_POLICY_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("KONFIG_TERRAFORM_POLICY_REF", raising=False)
    root, work = tmp_path / "repo", tmp_path / "work"
    scope = WriteScope.named(work, "w", folder=True)
    assert _lock_file(root, work, scope) == str(root / ".terraform.lock.hcl")
    monkeypatch.setenv("KONFIG_TERRAFORM_POLICY_FILE", str(tmp_path / "tools" / "konfig.yaml"))
    assert _lock_file(root, work, scope) == str(tmp_path / "tools" / ".terraform.lock.hcl")
    monkeypatch.setenv("KONFIG_TOFU_LOCK_FILE", "/kit/terraform.lock.hcl")
    assert _lock_file(root, work, scope) == "/kit/terraform.lock.hcl"
