"""The ``konfig`` command line: composes the stages, prints, and picks exit codes.

Every subcommand lives in ``konfig/commands/<name>.py``; this module registers them
and maps exceptions to exit codes (0 ok, 1 findings, 2 usage, 3 unexpected, 130
interrupted).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from konfig import __version__
from konfig.commands import apply as apply_cmd
from konfig.commands import changed as changed_cmd
from konfig.commands import check as check_cmd
from konfig.commands import comment as comment_cmd
from konfig.commands import compile as compile_cmd
from konfig.commands import destroy as destroy_cmd
from konfig.commands import fmt as fmt_cmd
from konfig.commands import gen as gen_cmd
from konfig.commands import list as list_cmd
from konfig.commands import matrix as matrix_cmd
from konfig.commands import pending as pending_cmd
from konfig.commands import preview as preview_cmd
from konfig.commands import report as report_cmd
from konfig.commands import test as test_cmd
from konfig.console import error
from konfig.errors import EXIT_UNEXPECTED, EXIT_USAGE, KonfigError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="konfig")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Repository root (default: walk up from the working directory to kcl.mod).",
)
@click.pass_context
def cli(ctx: click.Context, root: Path | None) -> None:
    """Konfig: compile, test, check, preview and apply KCL stacks on Kubernetes."""
    ctx.obj = {"root": root}


cli.add_command(list_cmd.command)
cli.add_command(compile_cmd.command)
cli.add_command(gen_cmd.command)
cli.add_command(comment_cmd.command)
cli.add_command(changed_cmd.command)
cli.add_command(preview_cmd.command)
cli.add_command(report_cmd.command)
cli.add_command(matrix_cmd.command)
cli.add_command(pending_cmd.command)
cli.add_command(apply_cmd.command)
cli.add_command(destroy_cmd.command)
cli.add_command(test_cmd.command)
cli.add_command(check_cmd.command)
cli.add_command(fmt_cmd.command)


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this directly)."""
    try:
        code = cli.main(args=argv, prog_name="konfig", standalone_mode=False)
    except click.exceptions.Abort:
        error("aborted")
        code = 130
    except click.ClickException as exc:
        exc.show()
        code = EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
    except KonfigError as exc:
        error(str(exc))
        code = exc.exit_code
    except KeyboardInterrupt:
        error("interrupted")
        code = 130
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except Exception:
        error("unexpected error (this is a bug in konfig; please report it):")
        traceback.print_exc(file=sys.stderr)
        code = EXIT_UNEXPECTED
    return code if isinstance(code, int) else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))
