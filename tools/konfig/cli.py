"""The ``konfig`` command line: composes the stages, prints, and picks exit codes.

Every subcommand lives in ``konfig/commands/<name>.py`` and is listed in ``COMMANDS``;
this module loads them on demand and maps exceptions to exit codes (0 ok, 1 findings,
2 usage, 3 unexpected, 130 interrupted by SIGINT, 143 by SIGTERM).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from konfig import __version__
from konfig.commands._common import LAYOUT_ERRORS
from konfig.commands._console import error
from konfig.commands._help import Group
from konfig.commands._signals import Terminated, exit_code, terminate_as_interrupt
from konfig.errors import EXIT_FINDINGS, EXIT_OK, EXIT_UNEXPECTED, EXIT_USAGE, KonfigError

# Subcommand name -> module exposing ``command``. Modules are imported only when their
# command runs (or for --help): the Kubernetes and GitHub clients alone take about half a
# second to import, which every `konfig list` or `konfig compile` would otherwise pay.
COMMANDS = {
    "apply": "konfig.commands.apply",
    "approved": "konfig.commands.approved",
    "changed": "konfig.commands.changed",
    "check": "konfig.commands.check",
    "comment": "konfig.commands.comment",
    "compile": "konfig.commands.compile",
    "dangers": "konfig.commands.dangers",
    "destroy": "konfig.commands.destroy",
    "drift": "konfig.commands.drift",
    "fmt": "konfig.commands.fmt",
    "gen": "konfig.commands.gen",
    "init": "konfig.commands.init",
    "issue": "konfig.commands.issue",
    "list": "konfig.commands.list",
    "matrix": "konfig.commands.matrix",
    "owners": "konfig.commands.owners",
    "package": "konfig.commands.package",
    "pending": "konfig.commands.pending",
    "pr": "konfig.commands.pr",
    "preview": "konfig.commands.preview",
    "publish": "konfig.commands.publish",
    "release": "konfig.commands.release",
    "report": "konfig.commands.report",
    "reviewed": "konfig.commands.reviewed",
    "secrets": "konfig.commands.secrets",
    "stale": "konfig.commands.stale",
    "status": "konfig.commands.status",
    "test": "konfig.commands.test",
    "upgrade": "konfig.commands.upgrade",
}


# Commands that load no library that logs (urllib3, the kubernetes client, GitPython):
# they do not even import the logging module (`konfig list` should start as fast as
# Python and click allow, issue 13).
NO_LIBRARY_LOGS = frozenset({"list"})


class LazyGroup(Group):
    """A click group that imports each subcommand's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return super().get_command(ctx, cmd_name)
        if cmd_name not in NO_LIBRARY_LOGS:
            _quiet_libraries()
        command = importlib.import_module(module).command
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="konfig")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Repository root (default: walk up from the working directory to kcl.mod).",
)
@click.pass_context
def cli(ctx: click.Context, root: Path | None) -> None:
    """Konfig: compile, test, check, preview and apply KCL stacks on Kubernetes.

    Stacks are addressed as appops/<project>/<stack> or <project>/<stack>. Exit codes:
    0 ok, 1 findings or a failed stack, 2 usage error, 3 unexpected error.
    `konfig COMMAND --help` describes a command.

    \b
    Examples:
      konfig list
      konfig test --update guestbook/dev
      konfig preview guestbook/dev
    """
    ctx.obj = {"root": root}


def _quiet_libraries() -> None:
    """Libraries log to the root logger (urllib3 retries, the kubernetes client); with no
    handler there, Python prints those records raw on stderr (``ERROR:root:...`` once
    something called ``logging.basicConfig``). konfig reports failures itself, so the
    records go nowhere. Done before a command's module is imported."""
    import logging

    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


@cli.result_callback()
@click.pass_context
def _exit_code(ctx: click.Context, /, code: object, **_params: object) -> object:
    """A layout error reported by the command makes its exit code at least 1."""
    if (ctx.obj or {}).get(LAYOUT_ERRORS) and (code is None or code == EXIT_OK):
        return EXIT_FINDINGS
    return code


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this directly)."""
    with terminate_as_interrupt():
        return _run(argv)


def _run(argv: list[str] | None) -> int:
    try:
        code = cli.main(args=argv, prog_name="konfig", standalone_mode=False)
    except click.exceptions.Abort as exc:
        # click turns KeyboardInterrupt (and so SIGTERM's Terminated) into Abort
        cause = exc.__cause__
        if isinstance(cause, KeyboardInterrupt):
            error("terminated (SIGTERM)" if isinstance(cause, Terminated) else "interrupted")
            code = exit_code(cause)
        else:
            error("aborted")
            code = 130
    except click.ClickException as exc:
        exc.show()
        code = EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
    except KonfigError as exc:
        error(str(exc))
        code = exc.exit_code
    except KeyboardInterrupt as exc:
        error("terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted")
        code = exit_code(exc)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except Exception:
        import traceback

        error("unexpected error (this is a bug in konfig; please report it):")
        traceback.print_exc(file=sys.stderr)
        code = EXIT_UNEXPECTED
    return code if isinstance(code, int) else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))
