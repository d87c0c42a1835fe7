"""The contracts (konfig.contracts): one JSON Schema per data format, one validator.

The example repository's configuration files validate against their contracts; every
contract is a valid schema whose examples validate; a wrong key or value is named with
file, line and what is allowed. (Every command's JSON output is checked against its
contract by the ``konfig`` test runner in ``fixtures/repos.py``.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from fixtures.repos import TEMPLATE_ROOT, KonfigRunner, RepoBuilder, check_contract
from jsonschema.validators import Draft202012Validator

from konfig import cli, contracts
from konfig.errors import ConfigError
from konfig.repo.settings import load_repo_config


def _config_contracts() -> list[str]:
    return [n for n in contracts.names() if contracts.described_files(n)]


def _properties(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Any]]:
    for key, sub in node.get("properties", {}).items():
        yield f"{path}{key}", sub
        yield from _properties(sub, f"{path}{key}.")
        items = sub.get("items")
        if isinstance(items, Mapping):
            yield from _properties(items, f"{path}{key}[].")


@pytest.mark.parametrize("name", [*contracts.names(), contracts.COMMON])
def test_each_contract_is_a_valid_schema_with_valid_examples(name: str) -> None:
    schema = contracts.schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema.get("title") and schema.get("description"), f"{name}: title, description"
    if name == contracts.COMMON:
        return
    described = schema["x-konfig"]
    assert bool(described.get("files")) != bool(described.get("producers")), (
        f"{name}: x-konfig names either the files it describes or the commands writing it"
    )
    assert schema.get("examples"), f"{name}: an example for the docs"
    for example in schema["examples"]:
        assert contracts.violations(name, example) == []


@pytest.mark.parametrize("name", _config_contracts())
def test_config_contracts_are_strict_and_documented(name: str) -> None:
    """What people write gets an error for a misspelt key and a hover text per key."""
    schema = contracts.schema(name)
    for path, sub in [("(top level)", schema), *_properties(schema)]:
        if path != "(top level)":
            assert sub.get("description") or "$ref" in sub, f"{name}: {path} has no description"
        if sub.get("type") == "object" and "properties" in sub and name != "kcl-yaml":
            # kcl.yaml is KCL's format: Konfig reads two keys and leaves KCL the rest
            assert sub.get("additionalProperties") is False, f"{name}: {path} is not strict"


def _tracked_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=TEMPLATE_ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [p for p in listed.split("\0") if p]


def test_every_config_file_of_the_example_repository_matches_its_contract() -> None:
    seen: dict[str, list[str]] = {}
    for rel in _tracked_files():
        name = contracts.for_file(rel)
        if name is None:
            continue
        text = (TEMPLATE_ROOT / rel).read_text(encoding="utf-8")
        found = contracts.violations(name, yaml.safe_load(text), file=rel, text=text)
        assert found == [], "\n".join(map(str, found))
        seen.setdefault(name, []).append(rel)
    assert {"konfig", "project", "stack", "ci-test-settings"} <= set(seen), seen
    assert len(seen["stack"]) >= 5


def test_a_wrong_key_names_file_line_and_the_allowed_keys() -> None:
    text = "name: dev\nkubernetes:\n  context: admin\n  contxt: other\n"
    (found,) = contracts.violations(
        "stack", yaml.safe_load(text), file="appops/a/dev/stack.yaml", text=text
    )
    assert found.problem == "unknown-key"
    assert str(found) == (
        "appops/a/dev/stack.yaml:4: unknown key `kubernetes.contxt` "
        "(allowed here: context, kubeconfig)"
    )


def test_wrong_values_name_the_path_the_type_and_the_value() -> None:
    text = "kcl_options:\n  - key: env\n    value: dev\n  - value: 3\n  - {key: [a]}\n"
    found = contracts.violations("ci-test-settings", yaml.safe_load(text), file="s.yaml", text=text)
    assert [str(v) for v in found] == [
        "s.yaml:5: `kcl_options[2].key` must be a string, not a list",
        "s.yaml:4: `kcl_options[1].key` is required",
    ]


def test_konfig_yaml_is_read_through_its_contract(tmp_path: Path) -> None:
    (tmp_path / "konfig.yaml").write_text(
        'kubernetesVersion: "1.31"\nsomethingNew: 1\n', encoding="utf-8"
    )
    config = load_repo_config(tmp_path)
    # a key of a newer Konfig is kept (and reported by `konfig check`), not fatal
    assert (config.kubernetes_version, config.extra) == ("1.31", {"somethingNew": 1})
    (tmp_path / "konfig.yaml").write_text(
        "# settings\nkubernetesVersion: 1.30\ntriggers: kcl.mod\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        load_repo_config(tmp_path)
    assert (caught.value.file, caught.value.line) == ("konfig.yaml", 2)
    message = str(caught.value)
    assert 'konfig.yaml:2: `kubernetesVersion` must be a version like "1.32", quoted' in message
    assert "konfig.yaml:3: `triggers` must be a list, not the string 'kcl.mod'" in message


def test_check_reports_unknown_keys_of_every_config_file(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    repo_builder.stack("shop", "dev", settings="kcl_options: []\nkcl_option: []\n")
    repo_builder.write("konfig.yaml", "kubernetesVersion: '1.32'\ntrigers: [kcl.mod]\n")
    result = konfig("check", "--format", "json", "--no-policies", cwd=repo_builder.root)
    found = {(f["rule"], f["file"], f["line"], f["message"]) for f in yaml.safe_load(result.out)}
    assert found == {
        (
            "structure/unknown-key",
            "konfig.yaml",
            2,
            "unknown key `trigers` (allowed here: allowSystemNamespaces, dangers, identities, "
            "ignore, kubernetesVersion, owners, productionStacks, renderEntry, schemaCrds, "
            "sharding, terraform, triggers)",
        ),
        (
            "structure/unknown-key",
            "appops/shop/dev/ci-test/settings.yaml",
            2,
            "unknown key `kcl_option` (allowed here: kcl_options)",
        ),
    }
    assert result.code == 1


def test_bad_settings_fail_the_stack_with_file_and_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    repo_builder.stack("shop", "dev", settings="kcl_options:\n  - env: dev\n")
    result = konfig("compile", "shop/dev", cwd=repo_builder.root)
    assert result.code == 1
    assert "appops/shop/dev/ci-test/settings.yaml:2: `kcl_options[0].key` is required" in result.err


def test_producers_name_real_commands_and_options() -> None:
    for name in contracts.names():
        for argv in contracts.producers(name):
            command: click.Command = cli.cli
            rest = list(argv)
            while isinstance(command, click.Group):  # `secrets check`: a group's command
                found = command.get_command(click.Context(command), rest[0])
                assert found is not None, f"{name}: no command {' '.join(argv)}"
                command, rest = found, rest[1:]
            flags = {o for p in command.params for o in getattr(p, "opts", ())}
            assert rest[0] in flags, f"{name}: `konfig {' '.join(argv)}`: no {rest[0]}"
            assert contracts.produced_by(["--root", ".", *argv]) == name


def test_the_runner_refuses_output_that_breaks_its_contract() -> None:
    check_contract(["compile", "--json"], '[{"path": "appops/a/b", "ok": true, "error": null}]')
    with pytest.raises(AssertionError, match=r"`\[0\]\.ok` must be a boolean"):
        check_contract(["compile", "--json"], '[{"path": "appops/a/b", "ok": 1, "error": null}]')


def test_contracts_ship_in_the_package() -> None:
    pyproject = tomllib.loads((TEMPLATE_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["konfig"]
    for name in [*contracts.names(), contracts.COMMON]:
        rel = f"contracts/{contracts.file_name(name)}"
        assert any(fnmatchcase(rel, g) for g in globs), f"{rel} is not package data"


def test_docs_and_editor_settings_are_generated_from_the_contracts(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    result = konfig("--root", str(TEMPLATE_ROOT), "gen", "contracts", "--check")
    assert result.code == 0, result.out + result.err
    # a copy whose docs went stale, whose editor settings hold the user's own
    copy = tmp_path / "repo"
    (copy / "docs").mkdir(parents=True)
    shutil.copytree(TEMPLATE_ROOT / "docs" / "contracts", copy / "docs" / "contracts")
    (copy / "kcl.mod").write_text("", encoding="utf-8")
    (copy / "docs" / "contracts" / "stack.md").write_text("old\n", encoding="utf-8")
    (copy / "docs" / "contracts" / "gone.md").write_text("old\n", encoding="utf-8")
    (copy / ".vscode").mkdir()
    (copy / ".vscode" / "settings.json").write_text(
        '{"editor.tabSize": 2, "yaml.schemas": {"./mine.json": ["x.yaml"]}}', encoding="utf-8"
    )
    stale = konfig("--root", str(copy), "gen", "contracts", "--check")
    assert stale.code == 1
    assert stale.out.splitlines() == [
        "docs/contracts/stack.md: out of date",
        ".vscode/settings.json: out of date",
        "docs/contracts/gone.md: no longer generated",
    ]
    assert konfig("--root", str(copy), "gen", "contracts").code == 0
    assert konfig("--root", str(copy), "gen", "contracts", "--check").code == 0
    settings = json.loads((copy / ".vscode" / "settings.json").read_text(encoding="utf-8"))
    assert settings["editor.tabSize"] == 2
    schemas = settings["yaml.schemas"]
    assert schemas["./mine.json"] == ["x.yaml"]
    assert schemas["./tools/konfig/contracts/stack.schema.json"] == ["appops/*/**/stack.yaml"]
    assert not (copy / "docs" / "contracts" / "gone.md").exists()


def test_editor_settings_map_every_config_file_to_its_schema() -> None:
    settings = json.loads((TEMPLATE_ROOT / ".vscode" / "settings.json").read_text("utf-8"))
    mapped = settings["yaml.schemas"]
    for name in _config_contracts():
        path = f"./tools/konfig/contracts/{contracts.file_name(name)}"
        assert (TEMPLATE_ROOT / path).is_file()
        assert mapped[path] == list(contracts.described_files(name))


LOADED = """\
import atexit, sys
atexit.register(lambda: print("jsonschema" in sys.modules, file=sys.stderr))
sys.argv = ["konfig", *sys.argv[1:]]
from konfig.__main__ import main
main()
"""


def test_a_document_found_valid_is_not_validated_again(repo_builder: RepoBuilder) -> None:
    """konfig.yaml is read by every command: once found valid, jsonschema (a tenth of a
    second to import) stays out of `konfig list` while it and the schemas are unchanged."""
    repo_builder.stack("shop", "dev")

    def list_loads_jsonschema() -> bool:
        proc = subprocess.run(
            [sys.executable, "-c", LOADED, "list"],
            cwd=repo_builder.root,
            capture_output=True,
            text=True,
            check=True,
        )
        return proc.stderr.strip().splitlines()[-1] == "True"

    assert list_loads_jsonschema()  # the first time: validated
    assert not list_loads_jsonschema()
    (repo_builder.root / "konfig.yaml").write_text("kubernetesVersion: '1.31'\n", "utf-8")
    assert list_loads_jsonschema()  # changed: validated again
    (repo_builder.root / "konfig.yaml").write_text("kubernetesVersion: 1.31\n", "utf-8")
    failed = subprocess.run(
        [sys.executable, "-m", "konfig", "list"], cwd=repo_builder.root, capture_output=True
    )
    assert failed.returncode == 1 and b"konfig.yaml:1: `kubernetesVersion`" in failed.stderr
