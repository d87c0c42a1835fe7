import importlib
import subprocess
import sys
from pathlib import Path

import click
import pytest

from konfig import cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_module_exposes_its_command(name: str) -> None:
    command = importlib.import_module(cli.COMMANDS[name]).command
    assert isinstance(command, click.Command)
    assert command.name == name


def test_every_command_module_is_registered() -> None:
    modules = {
        p.stem for p in (ROOT / "tools/konfig/commands").glob("*.py") if not p.stem.startswith("_")
    }
    assert modules == set(cli.COMMANDS)


@pytest.mark.parametrize("argv", [["list"], ["compile", "--help"]])
def test_light_commands_do_not_import_cluster_or_github_clients(argv: list[str]) -> None:
    code = (
        "import sys\nfrom konfig import cli\n"
        f"cli.run({argv!r})\n"
        "print(sorted(m for m in ('kubernetes', 'github') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_unknown_command_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(["frobnicate"]) == 2
    assert "No such command 'frobnicate'" in capsys.readouterr().err
