"""Specs read back from `konfig compile --out DIR` (what `konfig preview --specs` reads):
real compiled Specs, then the ways an artifact a pull request controls can be bent."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.repos import KonfigRunner, RepoBuilder

from konfig.build.specfiles import read_specs
from konfig.contracts import ContractError


@pytest.fixture
def compiled(repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path) -> Path:
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod")
    out = tmp_path / "specs"
    res = konfig("--root", str(repo_builder.root), "compile", "--all", "--out", str(out))
    assert res.code == 0, res.err
    return out


def test_specs_read_back_equal_the_compiled_ones(
    compiled: Path, repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    read = read_specs(compiled, ["appops/shop/dev", "appops/shop/prod"])
    for path, result in read.items():
        assert result.error is None and result.spec is not None
        direct = konfig("--root", str(repo_builder.root), "compile", path)
        assert result.spec.to_yaml() == direct.out


def test_a_stack_without_a_file_is_a_compile_error_not_a_silence(compiled: Path) -> None:
    read = read_specs(compiled, ["appops/shop/dev", "appops/shop/staging"])
    missing = read["appops/shop/staging"]
    assert missing.spec is None and missing.error is not None
    assert "not compiled: no appops/shop/staging/spec.yaml" in missing.error.message


def _refused(folder: Path) -> ContractError:
    with pytest.raises(ContractError) as caught:
        read_specs(folder, ["appops/shop/dev", "appops/shop/prod"])
    return caught.value


def test_a_file_that_breaks_the_contract_refuses_the_whole_folder_with_file_and_line(
    compiled: Path,
) -> None:
    dev = compiled / "appops/shop/dev/spec.yaml"
    lines = dev.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("    type: Kubernetes"))
    lines[at] = "    type: Shell"
    lines.insert(at, "    provisioner: local-exec")
    dev.write_text("\n".join(lines) + "\n")
    error = _refused(compiled)
    text = str(error)
    assert f"{compiled.as_posix()}/appops/shop/dev/spec.yaml:{at + 1}:" in text, text
    assert "provisioner" in text and "Shell" in text, text
    # prod's file was fine: the whole folder is refused all the same
    assert "appops/shop/prod" not in text


def test_yaml_errors_links_and_stray_files_are_refused(compiled: Path, tmp_path: Path) -> None:
    secret = tmp_path / "age.key"
    secret.write_text("AGE-SECRET-KEY-1CANARYCANARYCANARY\n")
    prod = compiled / "appops/shop/prod/spec.yaml"
    prod.unlink()
    prod.symlink_to(secret)  # a link: never followed, so never echoed in an error
    (compiled / "appops/shop/dev/spec.yaml").write_text("resources: [\n")
    (compiled / "appops/shop/dev/notes.txt").write_text("hello\n")
    (compiled / "appops/other").symlink_to(tmp_path, target_is_directory=True)
    text = str(_refused(compiled))
    assert "CANARY" not in text
    assert f"{compiled.as_posix()}/appops/shop/prod/spec.yaml: is a link, not a file" in text
    assert f"{compiled.as_posix()}/appops/shop/dev/spec.yaml:2: invalid YAML" in text, text
    assert f"{compiled.as_posix()}/appops/shop/dev/notes.txt: unexpected file" in text
    assert f"{compiled.as_posix()}/appops/other: is a link, not a folder" in text


def test_a_spec_that_is_no_spec_is_refused(compiled: Path) -> None:
    (compiled / "appops/shop/dev/spec.yaml").write_text(
        "resources:\n  - id: a/b:X:y\n    type: Terraform\n    attributes: {}\n"
        "    dependsOn: []\n    extensions: {}\n"
    )
    text = str(_refused(compiled))
    assert "appops/shop/dev/spec.yaml: invalid spec: resources[0]" in text, text


def test_the_folder_itself_must_be_a_folder(tmp_path: Path) -> None:
    link = tmp_path / "specs"
    link.symlink_to(tmp_path)
    with pytest.raises(Exception, match="is not a folder of Specs"):
        read_specs(link, [])
